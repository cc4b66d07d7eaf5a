"""Vectorized evaluation: one batched forward over P stacked policies beside a Python loop over P modules.

The policy is the built-in Pong's network (8 inputs, 64×64 MLP, 3 actions); each policy acts on a batch of
``--batch`` observations per step. Prints ms per step for P = 1, 8, 32, 128 and the speed-up, all measured
in this run (median of ``--repeats`` blocks).

    python bench/vectorized.py [--batch 16] [--repeats 7]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import seconds_per_call  # noqa: E402

from lamarckian.config import load  # noqa: E402
from lamarckian.mdp import create_mdp  # noqa: E402
from lamarckian.model import to_blob  # noqa: E402
from lamarckian.model.stacked import StackedPolicies  # noqa: E402
from lamarckian.rl import build_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = load()
    mdp = create_mdp(config["mdp"])
    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()}, torch {torch.__version__}, {args.threads} thread(s); "
          f"Pong policy, {args.batch} observations per policy per step")
    print(f"{'P':>4} {'loop ms':>9} {'stacked ms':>11} {'speed-up':>9}")
    for count in (1, 8, 32, 128):
        models = []
        for seed in range(count):
            torch.manual_seed(seed)
            models.append(build_model(mdp, config))
        stacked = StackedPolicies(models[0], [to_blob(m) for m in models])
        observations = torch.randn(count, args.batch, 8)

        def loop() -> None:
            with torch.no_grad():
                for index, model in enumerate(models):
                    model.outputs(observations[index])

        steps = max(5, 2000 // count)
        loop_time = seconds_per_call(loop, steps, args.repeats)
        stacked_time = seconds_per_call(lambda: stacked.outputs(observations), steps, args.repeats)
        print(f"{count:>4} {loop_time * 1e3:>9.3f} {stacked_time * 1e3:>11.3f} {loop_time / stacked_time:>8.1f}x",
              flush=True)


if __name__ == "__main__":
    main()
