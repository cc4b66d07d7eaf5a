#!/usr/bin/env bash
# The one prepared device check of the GPU paths, for a lent H100/H200 (no Ray, no network).
#   PART=all (default): every GPU figure in one call of at most BUDGET (540) seconds, in this order of priority:
#     1. the environment: GPU, driver, torch/JAX/MuJoCo versions, CUDA seen by torch and by JAX;
#     2. Ant Sumo physics at PHYSICS_ENVS (16,384) envs beside a bare vmapped mjx.step (bench/vec_physics.py);
#     3. the gpu-marked tests (the MJX hand-over, the vectorized learner, train.device=cuda for the actor fleet);
#     4. self-play training of one learner for TRAIN (150) s, then its final policy against the initial one in GAMES
#        (256) deterministic games and Elo over SNAPSHOTS of its snapshots (bench/sumo_learning.py);
#     5. a vectorized population of MEMBERS (8) beside one learner, ENVS (4,096) envs (bench/vec_population.py);
#     6. 2 data-parallel ranks sharing the GPU beside 1 rank, ENVS envs in all (bench/multigpu.py);
#     7. a GIF of step 4's final policy against the initial one.
#     A step starts only when its estimate (EST_*, seconds on an H100/H200 with compiles) fits in what is left of
#     the budget, else it is skipped with the arithmetic printed; step 4 trains less than TRAIN (not under
#     MIN_TRAIN) to leave the later steps their estimates. After step 2 the batch sizes of steps 4-7 are compiled in
#     the background into JAX's persistent cache (bench/device/precompile.py), each compile's seconds in the log.
#   PART=atari: PPO from pixels on Pong (mdp/gym/atari.yml; the learner on the GPU, ATARI_ACTORS actor processes
#     forked by train.py, no Ray) until an evaluation score of ATARI_THRESHOLD (18) or the budget
#     (bench/atari.py); the wheels: PART=atari bash bench/device/fetch_wheels.sh.
#   PART=versus (issue 14's longer comparison): a vectorized PBT population of MEMBERS (a league) and one learner
#     trained MINUTES (4) each, rated together with the initial policy in deterministic games
#     (bench/population_vs_single.py), then a GIF of the single learner against the initial policy.
# $OUT receives at most 6 files (a device call brings back 8): run.log (everything printed), figures.json (every
# figure, merged by bench/device/summarize.py after each step), summary.md (the rows for docs/benchmarks.md),
# match.gif, elo.png, final_checkpoint.pt. The bulk (runs, checkpoints, caches) stays in $WORK.
#   device run:  bash bench/device/run.sh        (carry: [".whl"] from bench/device/fetch_wheels.sh, timeout_s: 600)
#   CPU dry run (tests/bench/test_device_run.py runs it in the slow set):
#     SKIP_INSTALL=1 BUDGET=240 PHYSICS_ENVS=16 ENVS=16 TRAIN_ENVS=16 GAMES=16 TRAIN=20 MIN_TRAIN=10 SNAPSHOTS=3 \
#       PAIR_GAMES=2 EST_PHYSICS=20 EST_TESTS=30 EST_RATING=60 EST_POPULATION=30 EST_MULTIGPU=40 EST_VIDEO=20 \
#       bash bench/device/run.sh
set -uo pipefail
OUT=${OUT:-/tmp/lamarckian-device}
WORK=${WORK:-/tmp/lamarckian-device-work}
PART=${PART:-all}
BUDGET=${BUDGET:-540}            # seconds for everything, the wheels' install included
PHYSICS_ENVS=${PHYSICS_ENVS:-16384}
ENVS=${ENVS:-4096}               # steps 5 and 6: environments in all
TRAIN_ENVS=${TRAIN_ENVS:-4096}   # steps 4 and 7: the training's environments (the config's 4,096 on cuda)
TRAIN=${TRAIN:-150}              # step 4: seconds of training when the budget allows
MIN_TRAIN=${MIN_TRAIN:-90}       # step 4: a shorter training is not worth rating
GAMES=${GAMES:-256}              # step 4: deterministic games of the final policy against the initial one
SNAPSHOTS=${SNAPSHOTS:-6}        # step 4: snapshots rated together (Elo)
PAIR_GAMES=${PAIR_GAMES:-16}     # step 4: games per pair of snapshots
MEMBERS=${MEMBERS:-8}            # steps 5 and PART=versus: population size
MINUTES=${MINUTES:-4}            # PART=versus: training time of each side (less if the budget is short)
ATARI_GAME=${ATARI_GAME:-Pong}; ATARI_THRESHOLD=${ATARI_THRESHOLD:-18}
ATARI_ACTORS=${ATARI_ACTORS:-12}; ATARI_DEVICE=${ATARI_DEVICE:-cuda}
ATARI_CHANGES="train.device=$ATARI_DEVICE sample.actors=$ATARI_ACTORS evaluator.interval=30 ${ATARI_CHANGES:-}"
# estimates in seconds (start-ups and compiles included; no GPU run has timed these steps yet: the summary's step
# table of the first one gives the figures to put here)
EST_ENV=${EST_ENV:-15}; EST_PHYSICS=${EST_PHYSICS:-80}; EST_TESTS=${EST_TESTS:-80}
EST_RATING=${EST_RATING:-90}     # step 4 beyond its training: start-up, the final games, the snapshots' tournament
EST_POPULATION=${EST_POPULATION:-60}; EST_MULTIGPU=${EST_MULTIGPU:-80}; EST_VIDEO=${EST_VIDEO:-40}
GRACE=${GRACE:-40}               # a step overrunning its share by more than what is left plus this is stopped
# the batch sizes steps 4-7 build, each once, in the order needed (precompiled after step 2)
# (the training's own evaluations: 32 games against each of 2 opponents)
SIZES=$(printf '%s\n' "$TRAIN_ENVS" 64 "$GAMES" "$ENVS" "$((ENVS / 2))" 1 | awk '!seen[$0]++' | xargs)
TRAIN_CHANGES="mdp.vec.num_envs.cuda=$TRAIN_ENVS mdp.vec.num_envs.cpu=$TRAIN_ENVS evaluator.progress=false \
${TRAIN_CHANGES:-}"
mkdir -p "$OUT"
rm -rf "$WORK" && mkdir -p "$WORK"
exec > >(tee -a "$OUT/run.log") 2>&1
if [ -z "${SKIP_INSTALL:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false MUJOCO_GL=${MUJOCO_GL:-egl}
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/jax-cache} JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
export JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
printf 'step\tname\testimate_s\ttook_s\tstatus\tnote\tcommand\n' > "$WORK/steps.tsv"
echo "# $(date -u '+%Y-%m-%d %H:%M') UTC, PART=$PART, budget ${BUDGET} s (${SECONDS} s spent on the install)"

quiet() { grep --line-buffered -v -e 'import warp' -e 'import mujoco_warp' || true; }   # MJX's notes about warp
collect() { python3 bench/device/summarize.py "$OUT" --collect "$WORK" > /dev/null; }

CMD=""       # the step's main command, as the summary shows it
STATUS=""    # the last step's: ran, skipped or failed (rc N)
PRECOMPILE=""
FAILED=""    # the numbers of the steps that failed (the run's exit status is 1 if any did)
run_step() {   # run_step NUMBER NAME ESTIMATE FUNCTION: FUNCTION when ESTIMATE seconds fit in what is left
  local number=$1 name=$2 estimate=$3 function=$4 left=$((BUDGET - SECONDS)) started=$SECONDS status
  CMD=""
  if [ "$estimate" -gt "$left" ]; then
    skip_step "$number" "$name" "$estimate" "it needs ~${estimate} s, ${left} s of ${BUDGET} are left"
    return
  fi
  echo "== step $number ($name): ~${estimate} s estimated, ${left} s of ${BUDGET} left (at ${SECONDS} s)"
  "$function" "$estimate"
  status=$?
  if [ "$status" -eq 0 ]; then status=ran; else status="failed (rc $status)"; FAILED="$FAILED $number"; fi
  STATUS=$status
  echo "-- step $number ($name) ${status}: took $((SECONDS - started)) s (estimated ${estimate}), $((BUDGET - SECONDS))" \
    "s left"
  printf '%s\t%s\t%s\t%s\t%s\t\t%s\n' "$number" "$name" "$estimate" "$((SECONDS - started))" "$status" "$CMD" \
    >> "$WORK/steps.tsv"
  collect
}
skip_step() {   # skip_step NUMBER NAME ESTIMATE REASON
  echo "== step $1 ($2) skipped: $4"
  printf '%s\t%s\t%s\t0\tskipped\t%s\t\n' "$1" "$2" "$3" "$4" >> "$WORK/steps.tsv"
  STATUS=skipped
}
limit() { echo $((BUDGET - SECONDS + GRACE)); }   # a safety net against a hang, not a step's planned length

environment() {
  CMD="nvidia-smi; python3 -c 'torch.cuda, jax.devices()'"
  { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"; } \
    > "$WORK/nvidia-smi.txt"
  timeout "$(limit)" python3 - "$WORK/nvidia-smi.txt" "$WORK/env.json" <<'EOF' 2>&1 | quiet
import json, sys, time
import jax, mujoco, torch
from mujoco import mjx  # noqa: F401  (MJX importable)
smi = open(sys.argv[1]).read().strip()
gpu, memory, driver = ([part.strip() for part in smi.split(",")] + ["", ""])[:3] if "," in smi else (smi, "", "")
env = {"date": time.strftime("%Y-%m-%d"), "gpu": gpu, "memory": memory, "driver": driver,
       "torch": torch.__version__, "torch_cuda": torch.cuda.is_available(), "jax": jax.__version__,
       "jax_devices": [str(device) for device in jax.devices()], "mujoco": mujoco.__version__}
env["jax_cuda"] = jax.default_backend() == "gpu"
open(sys.argv[2], "w").write(json.dumps(env, indent=1))
print(f"GPU {gpu} ({memory}, driver {driver}); torch {env['torch']} (CUDA {env['torch_cuda']}), JAX {env['jax']} "
      f"({', '.join(env['jax_devices'])}), MuJoCo {env['mujoco']}")
if smi != "no nvidia-smi" and not (env["torch_cuda"] and env["jax_cuda"]):
    sys.exit(f"a GPU is here but CUDA is not visible to {'torch' if not env['torch_cuda'] else 'JAX'}: "
             "every later figure would be a CPU figure; stopping")
EOF
}

physics() {
  CMD="python3 bench/vec_physics.py --envs $PHYSICS_ENVS --steps 20 --repeats 3 --targets-only"
  timeout "$(limit)" $CMD --json "$WORK/physics.json" 2>&1 | quiet
}

precompile() {   # in the background while the tests run: steps 4-7's batch sizes into the persistent cache
  echo "   (background) precompiling ${SIZES// /, } envs for steps 4-7"
  ( timeout "$(limit)" python3 bench/device/precompile.py --envs $SIZES --json "$WORK/compile.json" \
      -m $TRAIN_CHANGES 2>&1 | quiet | sed -u 's/^/   [precompile] /' ) &
  PRECOMPILE=$!
}

gpu_tests() {
  CMD="python3 -m pytest -q -m gpu tests/mdp/test_vec_mjx.py tests/rl/ondevice/test_learner.py tests/rl/fleet/test_train.py"
  timeout "$(limit)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/mdp/test_vec_mjx.py \
    tests/rl/ondevice/test_learner.py tests/rl/fleet/test_train.py 2>&1 | quiet | tail -15 | tee "$WORK/gpu_tests.log"
}

selfplay() {   # selfplay ESTIMATE: trains ESTIMATE - EST_RATING seconds
  local seconds=$(($1 - EST_RATING))
  local every=$(( seconds / 12 > 5 ? seconds / 12 : 5 ))   # about 12 snapshots to pick the rated ones from
  CMD="python3 bench/sumo_learning.py --minutes $(python3 -c "print(round($seconds / 60, 3))") --games $GAMES \
--snapshots $SNAPSHOTS --pair-games $PAIR_GAMES -m evaluator.tensorboard=false evaluator.checkpoint.interval=$every \
$TRAIN_CHANGES"
  timeout "$(limit)" $CMD --root "$WORK/run" 2>&1 | quiet
  local status=${PIPESTATUS[0]}
  cp "$WORK/run/summary.json" "$WORK/selfplay.json" 2>/dev/null
  cp "$WORK/run/rating/elo.png" "$OUT/elo.png" 2>/dev/null
  newest=$(ls "$WORK"/run/checkpoints/checkpoint-*.pt 2>/dev/null | tail -1)
  if [ -n "$newest" ]; then cp "$newest" "$OUT/final_checkpoint.pt"; fi
  return "$status"
}

population() {
  CMD="python3 bench/vec_population.py --envs $ENVS --members $MEMBERS --iterations 3 --warmup 1"
  timeout "$(limit)" $CMD --json "$WORK/population.json" 2>&1 | quiet
}

multigpu() {
  CMD="python3 bench/multigpu.py --ranks ${RANKS:-2} --envs $ENVS --iterations 3 --warmup 1"
  timeout "$(limit)" $CMD --json "$WORK/multigpu.json" 2>&1 | quiet
}

video() {   # the newest checkpoint of $CHECKPOINTS against the initial policy, as a GIF
  CMD="python3 evaluate.py -c mdp/vec/ant_sumo.yml rl/ppo_gpu.yml -m $TRAIN_CHANGES --checkpoints $CHECKPOINTS \
--video $OUT/match.gif --video-size 480x360"
  timeout "$(limit)" $CMD 2>&1 | quiet | tail -2
}

versus() {   # PART=versus: each side trains MINUTES or what the budget leaves after 100 s for start-ups and rating
  MINUTES=$(python3 -c "print(round(min(${MINUTES}, max(0.5, ($BUDGET - $SECONDS - 100) / 120)), 2))")
  CMD="python3 bench/population_vs_single.py --minutes $MINUTES --members $MEMBERS --games 64 -m $TRAIN_CHANGES"
  timeout "$(limit)" $CMD --root "$WORK/versus" 2>&1 | quiet
  local status=${PIPESTATUS[0]}
  cp "$WORK/versus/summary.json" "$WORK/versus.json" 2>/dev/null
  return "$status"
}

atari() {   # PART=atari: trains what the budget leaves after 60 s for start-up, the random games and the plot
  local minutes
  minutes=$(python3 -c "print(round(max(0.25, ($BUDGET - $SECONDS - 60) / 60), 2))")
  CMD="python3 bench/atari.py --game $ATARI_GAME --threshold $ATARI_THRESHOLD --minutes $minutes \
--plot $OUT/atari.png --summary $WORK/atari.json --changes $ATARI_CHANGES"
  timeout "$(limit)" $CMD --root "$WORK/atari" 2>&1 | quiet | tail -40
  return "${PIPESTATUS[0]}"
}

case "$PART" in
  atari)
    run_step 1 environment "$EST_ENV" environment
    if [ "$STATUS" != ran ]; then echo "no usable environment: stopping"; exit 1; fi
    run_step 2 atari $((BUDGET - SECONDS)) atari
    ;;
  all)
    run_step 1 environment "$EST_ENV" environment
    if [ "$STATUS" != ran ]; then echo "no usable environment: stopping"; exit 1; fi
    run_step 2 physics "$EST_PHYSICS" physics
    precompile
    run_step 3 "gpu tests" "$EST_TESTS" gpu_tests
    # step 4 trains TRAIN seconds, less to leave steps 5-7 their estimates, never under MIN_TRAIN
    later=$((EST_POPULATION + EST_MULTIGPU + EST_VIDEO))
    train=$((BUDGET - SECONDS - EST_RATING - later))
    train=$(( train > TRAIN ? TRAIN : (train < MIN_TRAIN ? MIN_TRAIN : train) ))
    echo "   step 4 plan: ${BUDGET} - ${SECONDS} spent - ${EST_RATING} rating - ${later} for steps 5-7 =" \
      "$((BUDGET - SECONDS - EST_RATING - later)) s, so ${train} s of training (at most ${TRAIN}, at least ${MIN_TRAIN})"
    run_step 4 "self-play training and rating" $((train + EST_RATING)) selfplay
    run_step 5 "population throughput" "$EST_POPULATION" population
    run_step 6 "data-parallel ranks" "$EST_MULTIGPU" multigpu
    CHECKPOINTS="$WORK/run/checkpoints"
    if ls "$CHECKPOINTS"/checkpoint-*.pt > /dev/null 2>&1; then run_step 7 video "$EST_VIDEO" video
    else skip_step 7 video "$EST_VIDEO" "step 4 left no checkpoint"; fi
    ;;
  versus)
    run_step 1 environment "$EST_ENV" environment
    if [ "$STATUS" != ran ]; then echo "no usable environment: stopping"; exit 1; fi
    run_step 2 "population against one learner" $((BUDGET - SECONDS - EST_VIDEO)) versus
    CHECKPOINTS="$WORK/versus/single/checkpoints"
    if ls "$CHECKPOINTS"/checkpoint-*.pt > /dev/null 2>&1; then run_step 3 video "$EST_VIDEO" video
    else skip_step 3 video "$EST_VIDEO" "step 2 left no checkpoint"; fi
    ;;
  *) echo "PART=$PART: expected all, atari or versus" >&2; exit 2 ;;
esac
if [ -n "$PRECOMPILE" ]; then wait "$PRECOMPILE"; fi   # the background precompile (bounded by the budget)
collect
python3 bench/device/summarize.py "$OUT" > "$OUT/summary.md"
cat "$OUT/summary.md"
echo "all took $SECONDS s of ${BUDGET}${FAILED:+; failed steps:$FAILED}"
[ -z "$FAILED" ]
