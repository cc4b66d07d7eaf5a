#!/usr/bin/env bash
# Download the wheels the lent GPU machine lacks (it has Python 3.12, torch, JAX with CUDA, numpy, scipy, msgpack,
# PyYAML, rich, tensorboard, matplotlib, pytest; no network) into .whl/, which run.sh installs from.
# Run here, in the repository root, before the device call; .whl/ is ignored by git (.git/info/exclude) and
# travels with `carry: [".whl"]`.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
# PART=atari needs the ALE and OpenCV instead of MuJoCo (4.10's wheel keeps .whl under the 64 MiB a call carries)
if [ "${PART:-all}" = atari ]; then
  wanted=(ale-py opencv-python-headless==4.10.0.84 gymnasium farama-notifications cloudpickle pyzmq cryptography)
else
  wanted=(mujoco==3.17.0 mujoco-mjx==3.17.0 trimesh glfw pyopengl gymnasium farama-notifications pyzmq cryptography)
fi
rm -f .whl/*.whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d .whl "${wanted[@]}"
ls -la .whl && du -sh .whl
