"""End-to-end self-play training throughput on Ant Sumo (rollout with the learner and a stacked opponent pool, PPO
update) beside the physics-only rate of the same backend, same environment count, measured in the same run.

Prints agent-steps/s of training (2 agents per env step) and two ratios:
- against the physics batch at one physics step per env step (the vec_physics.py headline figure, env-steps/s);
- like for like: against the physics batch at the task's 60 Hz control setting, counted in agent-steps/s.

    python bench/vec_selfplay.py                                       # auto: mjx on cuda where possible
    python bench/vec_selfplay.py --envs 16384 --iterations 10 --json $OUT/selfplay.json

The opponent pool is filled to ``--pool`` snapshots first (its capacity) so that the batched opponent forward has its
full width throughout.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vec_physics import physics_rate, wait  # noqa: E402

from lamarckian.config import load  # noqa: E402
from lamarckian.mdp.vec import placement  # noqa: E402
from lamarckian.model import to_blob  # noqa: E402
from lamarckian.rl.ondevice.learner import OnDeviceLearner  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--envs", type=int, help="default: 16384 on a GPU, 16 on the CPU")
    parser.add_argument("--horizon", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=5, help="timed iterations (after 2 warm-up iterations)")
    parser.add_argument("--pool", type=int, default=8, help="opponent snapshots stacked during the timing")
    parser.add_argument("--steps", type=int, default=20, help="physics-only: steps per timed block")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    backend, device, _ = placement({"backend": args.backend, "device": args.device, "num_envs": 1})
    envs = args.envs or (16384 if device.startswith("cuda") else 16)
    card = torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "CPU"
    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} ({card}), backend {backend} on {device}, {envs} envs, "
          f"horizon {args.horizon}, {args.pool} stacked opponents, torch {torch.__version__}")
    physics_single = physics_rate(backend, device, envs, 1, args.steps, 3)
    physics_control = physics_rate(backend, device, envs, 2, args.steps, 3)
    print(f"physics only: {physics_single:,.0f} env-steps/s (1 physics step each), {physics_control:,.0f} control "
          f"steps/s at 60 Hz = {2 * physics_control:,.0f} agent-steps/s", flush=True)

    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"],
                  [f"mdp.vec.backend={backend}", f"mdp.vec.device={device}", f"mdp.vec.num_envs.cpu={envs}",
                   f"mdp.vec.num_envs.cuda={envs}", f"mdp.vec.horizon={args.horizon}", "evaluator.progress=false",
                   f"rl.opponent.pool.capacity={args.pool}"])   # snapshots added while timing replace old ones
    learner = OnDeviceLearner(config)
    for _ in range(args.pool - 1):
        learner.pool.add(to_blob(learner.model), 0)
    learner.opponents.stack()
    for _ in range(2):                                   # compile, warm caches
        learner.step()
    wait(learner.task.physics.state)
    rollout_seconds = update_seconds = 0.0
    started = time.perf_counter()
    for _ in range(args.iterations):
        stats = learner.step()                           # the training loop's step, as train.py runs it
        rollout_seconds += stats["time/rollout"]
        update_seconds += stats["time/update"]
    seconds = time.perf_counter() - started
    agent_steps = args.iterations * args.horizon * envs * learner.task.num_agents
    training = agent_steps / seconds
    sampling = agent_steps / rollout_seconds
    print(f"self-play training: {training:,.0f} agent-steps/s ({args.iterations} iterations of {args.horizon} × "
          f"{envs}; rollout {rollout_seconds:.1f} s = {sampling:,.0f} agent-steps/s, update {update_seconds:.1f} s)")
    print(f"ratio to physics only (env-steps/s, 1 physics step): {training / physics_single:.2f}")
    print(f"ratio to physics only at 60 Hz in agent-steps/s (like for like): {training / (2 * physics_control):.2f}")
    if args.json:
        args.json.write_text(json.dumps({
            "date": time.strftime("%Y-%m-%d"), "card": card, "backend": backend, "device": device, "envs": envs,
            "horizon": args.horizon, "pool": args.pool, "physics_env_steps_per_s": physics_single,
            "physics_control_steps_per_s": physics_control, "training_agent_steps_per_s": training,
            "rollout_agent_steps_per_s": sampling, "rollout_seconds": rollout_seconds,
            "update_seconds": update_seconds}, indent=1))
    learner.close()


if __name__ == "__main__":
    main()
