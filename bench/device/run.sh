#!/usr/bin/env bash
# The one prepared device check of the GPU self-play path (issue 12), for a lent H100/H200 (no Ray, no network).
# Order = priority:
#   1. physics at 16,384 envs beside the bare vmapped mjx.step of the same model (bench/vec_physics.py), and a
#      vectorized population of 8 beside one learner on the same envs (bench/vec_population.py, issue 14);
#   2. a training run of the shipped Ant Sumo config for what the budget leaves (about 6 minutes), then, rated on
#      the GPU by bench/sumo_learning.py: the final checkpoint against the initial policy in 256 deterministic
#      games, against every earlier snapshot, and Elo over 10 snapshots;
#   3. the final checkpoint and a video of it against the initial policy (GIF; mp4 where PyAV is installed);
#   4. the gpu-marked tests.
# Writes logs, JSON, the checkpoint and the video to $OUT. Needs .whl/ from bench/device/fetch_wheels.sh (carry it).
#   device run:  bash bench/device/run.sh        (carry: [".whl"], timeout_s: 600; kind nvidia-h200: the 900k
#                env-steps/s target was measured on an H200, an H100 has less memory bandwidth)
#   dry run on a CPU:  ENVS=16 BUDGET=200 MIN_TRAIN=30 TRAIN_CHANGES="mdp.vec.num_envs.cpu=16" SKIP_INSTALL=1 \
#                      bash bench/device/run.sh
# Compiled MJX steps are cached on disk (JAX_COMPILATION_CACHE_DIR): each batch shape compiles once per machine.
set -uo pipefail
OUT=${OUT:-/tmp/lamarckian-device}
mkdir -p "$OUT"
ENVS=${ENVS:-16384}          # the physics figure's environment count; the training takes the config's (4,096 on cuda)
TRAIN_CHANGES=${TRAIN_CHANGES:-}   # more -m edits for the training run
BUDGET=${BUDGET:-540}        # seconds for everything; the training gets what the other steps leave
MIN_TRAIN=${MIN_TRAIN:-120}  # a shorter training run than this is not worth rating
if [ -z "${SKIP_INSTALL:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false MUJOCO_GL=${MUJOCO_GL:-egl}
export JAX_COMPILATION_CACHE_DIR=/tmp/jax-cache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
export JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"; } \
  | tee "$OUT/gpu.txt"
python3 -c "import jax, torch, mujoco; print('jax', jax.__version__, jax.devices(), 'torch', torch.__version__, 'mujoco', mujoco.__version__)" \
  2>&1 | grep -v warp | tee -a "$OUT/gpu.txt"

echo "== physics (bench/vec_physics.py), ${ENVS} envs"; started=$SECONDS
timeout 150 python3 bench/vec_physics.py --envs $ENVS --steps 20 --repeats 3 --json "$OUT/physics.json" 2>&1 \
  | grep -v warp | tee "$OUT/physics.log"
echo "physics took $((SECONDS - started)) s"

echo "== a vectorized population of 8 beside one learner (bench/vec_population.py), ${ENVS} envs"; started=$SECONDS
timeout 150 python3 bench/vec_population.py --envs $ENVS --iterations 5 --json "$OUT/population.json" 2>&1 \
  | grep -v warp | tee "$OUT/population.log"
echo "population took $((SECONDS - started)) s"

# what is left after the physics, keeping 150 s for rating, the video and the tests
TRAIN_SECONDS=$((BUDGET - SECONDS - 150))
if [ "$TRAIN_SECONDS" -lt "$MIN_TRAIN" ]; then TRAIN_SECONDS=$MIN_TRAIN; echo "the physics overran: ${MIN_TRAIN} s of training"; fi
minutes=$(python3 -c "print($TRAIN_SECONDS / 60)")
SNAPSHOT_EVERY=$(( TRAIN_SECONDS / 12 > 5 ? TRAIN_SECONDS / 12 : 5 ))   # about 12 snapshots for the Elo curve
echo "== training and rating (bench/sumo_learning.py), ${TRAIN_SECONDS} s"; started=$SECONDS
timeout $((TRAIN_SECONDS + 240)) python3 bench/sumo_learning.py --minutes "$minutes" --games 256 --snapshots 10 \
  --pair-games 16 --root "$OUT/run" -m evaluator.tensorboard=false "evaluator.checkpoint.interval=$SNAPSHOT_EVERY" \
  $TRAIN_CHANGES 2>&1 | grep -v warp \
  | tee "$OUT/train.log"
echo "training and rating took $((SECONDS - started)) s"

echo "== the final checkpoint and a video"
newest=$(ls "$OUT"/run/checkpoints/checkpoint-*.pt 2>/dev/null | tail -1)
if [ -n "$newest" ]; then
  cp "$newest" "$OUT/final_checkpoint.pt"
  for video in match.gif match.mp4; do
    timeout 60 python3 evaluate.py -c mdp/vec/ant_sumo.yml rl/ppo_gpu.yml --checkpoints "$OUT/run/checkpoints" \
      --video "$OUT/$video" --video-size 480x360 2>&1 | tail -2 | tee -a "$OUT/video.log"
  done
fi
# keep the tables, plots and summaries; drop the run's bulk (checkpoints, snapshots)
rm -rf "$OUT/run/checkpoints" "$OUT/run/snapshots" "$OUT/run/rated"

echo "== GPU tests"
timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/mdp/test_vec_mjx.py tests/rl/test_vec_learner.py \
  2>&1 | tail -15 | tee "$OUT/gpu_tests.log"
echo "all took $SECONDS s"
