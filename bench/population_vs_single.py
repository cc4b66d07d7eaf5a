"""A vectorized PBT population against one learner on the same machine and budget: does the population's best member
beat the single learner? Both train Ant Sumo for ``--minutes`` each (one after the other, the same device):

- one learner: ``train.py -c mdp/vec/ant_sumo.yml rl/ppo_gpu.yml``;
- a population of ``--members``: ``evolve.py ... ec/ea/pbt.yml`` (``ec.selfplay`` on: a league, fitness the members'
  Elo among themselves), searching ``train.lr`` over [1e-4, 3e-3];

then every final member, the single learner's final checkpoint and the initial policy play a round-robin of
deterministic games (``--games`` per pair, seats alternating) and are rated together (Bradley-Terry Elo). The
reference is in the same run: the single learner, trained as long on the same device.

    python bench/population_vs_single.py --minutes 4 --root /tmp/pvs    # the device check:
                                                                       # PART=versus bench/device/run.sh
    python bench/population_vs_single.py --minutes 1 --members 4 -m mdp.vec.num_envs.cpu=64   # a CPU dry run

Prints the table and the verdict; writes summary.json, ratings.csv, winrate.csv and winrate.png under --root.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from lamarckian.config import load  # noqa: E402
from lamarckian.mdp.vec import create_vec_task  # noqa: E402
from lamarckian.model import ModelSettings, to_blob  # noqa: E402
from lamarckian.model.network import seeded  # noqa: E402
from lamarckian.rating.tournament import Entrant  # noqa: E402
from lamarckian.rating.vec_runner import run_vec_tournament  # noqa: E402
from lamarckian.record import Checkpoints  # noqa: E402
from lamarckian.rl.ondevice.learner import vec_model  # noqa: E402

FILES = ["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"]


def run(script: str, arguments: list[str]) -> None:
    command = [sys.executable, script, *arguments]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, cwd=REPOSITORY, check=True)


def entrant(name: str, template: torch.nn.Module, weights: dict, iteration: int, cost: int, seconds: float
            ) -> Entrant:
    template.load_state_dict(weights)
    return Entrant(name, to_blob(template), iteration, cost, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=4.0, help="training time of each side")
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--games", type=int, default=64, help="deterministic games per pair")
    parser.add_argument("--root", type=Path, default=Path("/tmp/population_vs_single"))
    parser.add_argument("--no-league", action="store_true", help="PBT on the score against the initial policy")
    parser.add_argument("--round-seconds", type=float, default=20.0, help="training time of a PBT round")
    parser.add_argument("-m", "--modify", nargs="*", default=[], help="more KEY=VALUE edits for both sides")
    args = parser.parse_args()
    shutil.rmtree(args.root, ignore_errors=True)
    args.root.mkdir(parents=True)
    seconds = args.minutes * 60
    common = ["evaluator.progress=false", "evaluator.tensorboard=false", *args.modify]
    started = time.monotonic()
    run("train.py", ["-c", *FILES, "-m", f"root={args.root / 'single'}", f"evaluator.terminate=self.time >= {seconds}",
                     *common, "-D"])
    single_seconds = time.monotonic() - started
    run("evolve.py", ["-c", *FILES, "ec/ea/pbt.yml", "-m", f"root={args.root / 'population'}",
                      f"ec.population={args.members}", "train.lr=[0.0001,0.003]", f"ec.stop=self.time >= {seconds}",
                      f"ec.train.stopper=self.time >= {args.round_seconds}",
                      f"ec.selfplay={'false' if args.no_league else 'true'}", *common, "-D"])
    population_seconds = time.monotonic() - started - single_seconds

    config = load(FILES, args.modify)
    task = create_vec_task({**config["mdp"]["vec"], "play_to_end": True}, seed=config["seed"])
    with seeded(config["seed"]):
        template = vec_model(task, ModelSettings.from_config(config))
    entrants = [Entrant("initial", to_blob(template))]
    _, single = Checkpoints(args.root / "single" / "checkpoints").load_newest()
    entrants.append(entrant("single", template, single["model"], single["iteration"], single["cost"],
                            single["elapsed"]))
    _, population = Checkpoints(args.root / "population" / "population").load_newest()
    members = [m for m in population["algorithm"]["slots"] if m["state"] is not None]
    for member in members:
        entrants.append(entrant(f"member {member['id']}", template, member["state"]["model"], member["age"],
                                member["cost"], population["elapsed"]))
    try:
        run_vec_tournament(task, template, entrants, args.games, args.root / "rating", seed=config["seed"])
    finally:
        task.close()
    with open(args.root / "rating" / "ratings.csv") as stream:
        ratings = {row["name"]: float(row["elo"]) for row in csv.DictReader(stream)}
    best = max((name for name in ratings if name.startswith("member")), key=ratings.get)
    card = torch.cuda.get_device_name() if torch.cuda.is_available() else platform.processor() or "CPU"
    summary = {"date": time.strftime("%Y-%m-%d"), "card": card, "minutes": args.minutes, "members": args.members,
               "league": not args.no_league, "games_per_pair": args.games, "single_seconds": single_seconds,
               "population_seconds": population_seconds, "single_cost": int(single["cost"]),
               "population_cost": int(population["cost"]), "ratings": ratings, "best_member": best,
               "best_minus_single": ratings[best] - ratings["single"]}
    (args.root / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"# {summary['date']} {platform.node()} ({card}): {args.minutes:g} min each; single learner "
          f"{single['cost']:,} env steps, population of {args.members} {population['cost']:,} env steps")
    print(f"Elo: initial {ratings['initial']:.0f}, single {ratings['single']:.0f}, best member ({best}) "
          f"{ratings[best]:.0f}: the population's best member is {ratings[best] - ratings['single']:+.0f} Elo "
          f"against the single learner ({'higher' if ratings[best] > ratings['single'] else 'NOT higher'})")


if __name__ == "__main__":
    main()
