#!/usr/bin/env bash
# The one prepared device check of the GPU self-play path (issue 6), for a lent H100/H200 (no Ray, no network).
# Order = priority: physics and self-play figures first, then the 10-minute-budget training run, then the GPU tests.
# Writes logs and JSON to $OUT. Needs .whl/ from bench/device/fetch_wheels.sh (carry it).
#   device run:  bash bench/device/run.sh        (carry: [".whl"], timeout_s: 600; kind nvidia-h200: the 900k
#                env-steps/s figure of DEVELOPERS.md was measured on an H200, an H100 has less memory bandwidth)
# Compiled MJX steps are cached on disk (JAX_COMPILATION_CACHE_DIR): each batch shape compiles once per machine.
set -uo pipefail
OUT=${OUT:-/tmp/lamarckian-device}
mkdir -p "$OUT"
TRAIN_SECONDS=${TRAIN_SECONDS:-300}   # a dry run on a CPU: ENVS=16 TRAIN_SECONDS=20 SKIP_INSTALL=1 bash bench/device/run.sh
ENVS=${ENVS:-16384}
if [ -z "${SKIP_INSTALL:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export JAX_COMPILATION_CACHE_DIR=/tmp/jax-cache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
export JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import jax, torch, mujoco; print('jax', jax.__version__, jax.devices(), 'torch', torch.__version__, 'mujoco', mujoco.__version__)" \
  2>&1 | grep -v warp | tee -a "$OUT/gpu.txt"

echo "== physics (bench/vec_physics.py)"; started=$SECONDS
timeout 150 python3 bench/vec_physics.py --envs $ENVS --steps 20 --repeats 3 --json "$OUT/physics.json" 2>&1 \
  | grep -v warp | tee "$OUT/physics.log"
echo "physics took $((SECONDS - started)) s"

echo "== self-play throughput (bench/vec_selfplay.py)"; started=$SECONDS
timeout 120 python3 bench/vec_selfplay.py --envs $ENVS --iterations 5 --json "$OUT/selfplay.json" 2>&1 \
  | grep -v warp | tee "$OUT/selfplay.log"
echo "self-play took $((SECONDS - started)) s"

# the training gets what is left of BUDGET seconds after the benchmarks, keeping 100 s for its start and the GPU tests
BUDGET=${BUDGET:-540}
left=$((BUDGET - SECONDS - 100))
if [ "$left" -lt "$TRAIN_SECONDS" ]; then TRAIN_SECONDS=$left; fi
if [ "$TRAIN_SECONDS" -lt 30 ]; then TRAIN_SECONDS=30; echo "the benchmarks overran: a 30 s training run only"; fi
echo "== training (train.py -c mdp/vec/ant_sumo.yml rl/ppo_gpu.yml), ${TRAIN_SECONDS} s"; started=$SECONDS
timeout $((TRAIN_SECONDS + 60)) python3 train.py -c mdp/vec/ant_sumo.yml rl/ppo_gpu.yml -m \
  "evaluator.terminate=self.time >= ${TRAIN_SECONDS}" evaluator.interval=10 evaluator.progress=false \
  evaluator.tensorboard=false "root=$OUT/run" -D 2>&1 | grep -v warp | tee "$OUT/train.log"
echo "training took $((SECONDS - started)) s"
rm -rf "$OUT/run"

echo "== GPU tests"
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/mdp/test_vec_mjx.py tests/rl/test_vec_learner.py \
  2>&1 | tail -15 | tee "$OUT/gpu_tests.log"
