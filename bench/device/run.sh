#!/usr/bin/env bash
# The one prepared device check of the GPU paths, for a lent H100/H200 (no Ray, no network). One call, one PART:
#   PART=population (default; issue 14), in order of priority:
#     1. a vectorized population of 8 beside one learner on the same envs (bench/vec_population.py);
#     2. a vectorized PBT population of 8 (a league) and one learner trained the same time each (4 minutes where the
#        budget allows) on this GPU, rated together with the initial policy in deterministic games
#        (bench/population_vs_single.py): does the population's best member beat the single learner? The single
#        learner's rating against the initial policy is a learning check of issue 12 too;
#     3. what time is left: a video of the single learner against the initial policy, the gpu-marked tests.
#   PART=selfplay (issue 12): the physics rate at ${ENVS} envs beside a bare vmapped mjx.step (bench/vec_physics.py),
#     then one learner trained for what the budget leaves and rated by bench/sumo_learning.py (256 deterministic games
#     against the initial policy, every earlier snapshot, Elo over 10 snapshots), its video, the gpu-marked tests.
#   PART=multigpu (issue 15): data-parallel training on 2 ranks sharing the GPU (gloo) beside 1 rank, ${ENVS} envs in
#     all (bench/multigpu.py; on a machine with several GPUs: RANKS=<GPUs>, one rank a GPU over NCCL).
# Writes logs, JSON, tables, plots and the video to $OUT. Needs .whl/ from bench/device/fetch_wheels.sh (carry it).
#   device run:  bash bench/device/run.sh        (carry: [".whl"], timeout_s: 600)
#   dry runs on a CPU:
#     ENVS=64 BUDGET=300 MINUTES=1 MEMBERS=4 TRAIN_CHANGES="mdp.vec.num_envs.cpu=64" SKIP_INSTALL=1 bash bench/device/run.sh
#     PART=multigpu ENVS=64 SKIP_INSTALL=1 bash bench/device/run.sh
#     PART=selfplay ENVS=16 BUDGET=200 MIN_TRAIN=30 TRAIN_CHANGES="mdp.vec.num_envs.cpu=16" SKIP_INSTALL=1 \
#       bash bench/device/run.sh
# Compiled MJX steps are cached on disk (JAX_COMPILATION_CACHE_DIR): each batch shape compiles once per machine.
set -uo pipefail
OUT=${OUT:-/tmp/lamarckian-device}
mkdir -p "$OUT"
PART=${PART:-population}
ENVS=${ENVS:-4096}           # the throughput figures' environment count (the training's: the config's 4,096 on cuda)
MEMBERS=${MEMBERS:-8}        # population size
MINUTES=${MINUTES:-4}        # PART=population: training time of each side (less if the budget is short)
MIN_TRAIN=${MIN_TRAIN:-120}  # PART=selfplay: a shorter training run than this is not worth rating
TRAIN_CHANGES=${TRAIN_CHANGES:-evaluator.progress=false}   # more -m edits for the training runs
BUDGET=${BUDGET:-540}        # seconds for everything
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

video() {   # video CHECKPOINT_FOLDER: the newest checkpoint there against the initial policy, as a GIF
  timeout 60 python3 evaluate.py -c mdp/vec/ant_sumo.yml rl/ppo_gpu.yml --checkpoints "$1" \
    --video "$OUT/match.gif" --video-size 480x360 2>&1 | tail -2 | tee -a "$OUT/video.log"
}

population() {
  echo "== a vectorized population of ${MEMBERS} beside one learner (bench/vec_population.py), ${ENVS} envs"
  local started=$SECONDS
  timeout 150 python3 bench/vec_population.py --envs $ENVS --members $MEMBERS --iterations 3 --warmup 1 \
    --json "$OUT/population.json" 2>&1 | grep -v warp | tee "$OUT/population.log"
  echo "population took $((SECONDS - started)) s"
  # each side trains MINUTES or what the budget leaves after keeping 100 s for start-ups and the rating
  MINUTES=$(python3 -c "print(round(min(${MINUTES}, max(0.5, ($BUDGET - $SECONDS - 100) / 120)), 2))")
  echo "== ${MEMBERS} members (PBT, a league) beside one learner, ${MINUTES} min each, rated together"
  started=$SECONDS
  timeout $((BUDGET + 60 - SECONDS)) python3 bench/population_vs_single.py --minutes "$MINUTES" \
    --members $MEMBERS --games 64 --root "$OUT/versus" -m $TRAIN_CHANGES 2>&1 | grep -v warp | tee "$OUT/versus.log"
  echo "population against single took $((SECONDS - started)) s"
  if [ $((BUDGET - SECONDS)) -gt 60 ]; then video "$OUT/versus/single/checkpoints"; fi
  # keep the tables, plots and summaries; drop the runs' bulk (checkpoints, snapshots, population checkpoints)
  rm -rf "$OUT"/versus/*/checkpoints "$OUT"/versus/*/snapshots "$OUT"/versus/*/population
}

selfplay() {
  echo "== physics (bench/vec_physics.py), ${ENVS} envs"; local started=$SECONDS
  timeout 150 python3 bench/vec_physics.py --envs $ENVS --steps 20 --repeats 3 --json "$OUT/physics.json" 2>&1 \
    | grep -v warp | tee "$OUT/physics.log"
  echo "physics took $((SECONDS - started)) s"
  # what is left after the physics, keeping 150 s for rating, the video and the tests
  local seconds=$((BUDGET - SECONDS - 150))
  if [ "$seconds" -lt "$MIN_TRAIN" ]; then seconds=$MIN_TRAIN; echo "the physics overran: ${MIN_TRAIN} s of training"; fi
  local every=$(( seconds / 12 > 5 ? seconds / 12 : 5 ))   # about 12 snapshots for the Elo curve
  echo "== training and rating (bench/sumo_learning.py), ${seconds} s"; started=$SECONDS
  timeout $((seconds + 240)) python3 bench/sumo_learning.py --minutes "$(python3 -c "print($seconds / 60)")" \
    --games 256 --snapshots 10 --pair-games 16 --root "$OUT/run" -m evaluator.tensorboard=false \
    "evaluator.checkpoint.interval=$every" $TRAIN_CHANGES 2>&1 | grep -v warp | tee "$OUT/train.log"
  echo "training and rating took $((SECONDS - started)) s"
  newest=$(ls "$OUT"/run/checkpoints/checkpoint-*.pt 2>/dev/null | tail -1)
  if [ -n "$newest" ]; then cp "$newest" "$OUT/final_checkpoint.pt"; video "$OUT/run/checkpoints"; fi
  rm -rf "$OUT/run/checkpoints" "$OUT/run/snapshots" "$OUT/run/rated"
}

multigpu() {
  echo "== data-parallel training: ${RANKS:-2} ranks beside 1 (bench/multigpu.py), ${ENVS} envs in all"
  local started=$SECONDS
  timeout $((BUDGET - SECONDS - 60)) python3 bench/multigpu.py --ranks "${RANKS:-2}" --envs $ENVS --iterations 5 \
    --json "$OUT/multigpu.json" 2>&1 | grep -v warp | tee "$OUT/multigpu.log"
  echo "multigpu took $((SECONDS - started)) s"
}

case "$PART" in
  population) population ;;
  selfplay) selfplay ;;
  multigpu) multigpu ;;
  *) echo "PART=$PART: expected population, selfplay or multigpu" >&2; exit 2 ;;
esac

if [ $((BUDGET - SECONDS)) -gt 40 ]; then
  echo "== GPU tests"
  timeout $((BUDGET - SECONDS)) python3 -m pytest -q -p no:cacheprovider -m gpu tests/mdp/test_vec_mjx.py \
    tests/rl/test_vec_learner.py tests/rl/test_train.py 2>&1 | tail -15 | tee "$OUT/gpu_tests.log"
fi
echo "all took $SECONDS s"
