"""Predator-prey with a policy per role: ``train.py -c mdp/pettingzoo/tag.yml`` (MPE simple_tag: three adversaries
chase one faster agent; rl.policies trains an adversary policy and an agent policy) for a fixed time, then every
pairing of {learned, random} predators with {learned, random} prey in deterministic evaluation games.

    python bench/predator_prey.py [--minutes 10] [--games 200] [--seed 0] [--pools]

``--pools``: each environment trains one role against snapshots from the other role's opponent pool
(``rl.shared_seats=false``) instead of every seat learning.

Prints contacts per game with their standard errors (a contact: an adversary touches the agent in a step; the
adversaries' shared reward / 10)
for the four pairings, and the two figures of the acceptance: the learned predators' contacts against each kind of
prey over the random predators' (above 1: the predators learned to catch), and the random prey's contacts over the
learned prey's against each kind of predators (above 1: the prey learned to escape).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from lamarckian.config import load  # noqa: E402
from lamarckian.mdp import create_mdp  # noqa: E402
from lamarckian.record import Checkpoints  # noqa: E402
from lamarckian.rl.acting import acting_policy  # noqa: E402
from lamarckian.rl.algorithms import build_model  # noqa: E402
from lamarckian.rl.policies import roles_of  # noqa: E402

CONTACT_REWARD = 10.0     # simple_tag's reward to every adversary for each contact


def train(minutes: float, seed: int, root: Path, changes: list[str]) -> None:
    completed = subprocess.run(
        [sys.executable, str(REPOSITORY / "train.py"), "-c", "mdp/pettingzoo/tag.yml", "-D", "-m", f"root={root}",
         f"seed={seed}", "evaluator.progress=false", f"evaluator.terminate=self.time >= {minutes * 60}", *changes],
        cwd=REPOSITORY)
    if completed.returncode != 0:
        raise SystemExit(f"train.py failed with exit code {completed.returncode}")


def contacts(mdp, players: list, games: int) -> list[float]:
    """Contacts per game over ``games`` games; ``players[seat]`` acts for the seat: ``(model, server)`` of a learned
    policy (deterministic), or None for uniformly random actions."""
    random = np.random.default_rng(0)

    def act(seat: int, observation) -> object:
        if players[seat] is None:
            return int(random.integers(mdp.describe()[seat].action.n))
        model, server = players[seat]
        action = server.serve([(model.batcher.convert(observation), seat)])[0][0]
        return model.env_action(action)

    async def game() -> float:
        episode = mdp.reset(*range(len(mdp)))

        async def play(seat: int, controller) -> None:
            while await controller.ready():
                await controller(act(seat, controller.get_state()))

        await asyncio.gather(*(play(seat, c) for seat, c in enumerate(episode.controllers)), *episode.ticks)
        return episode.controllers[0].get_result()["fitness"] / CONTACT_REWARD

    return [asyncio.run(game()) for _ in range(games)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--root", type=Path, default=None, help="the run directory (default: a temporary one)")
    parser.add_argument("--skip-training", action="store_true", help="rate the run already in --root")
    parser.add_argument("--pools", action="store_true", help="one role learns per environment, against pools")
    arguments = parser.parse_args()
    root = arguments.root or Path(tempfile.mkdtemp(prefix="tag-"))
    changes = ["rl.shared_seats=false"] if arguments.pools else []
    if not arguments.skip_training:
        train(arguments.minutes, arguments.seed, root, changes)
    config = load(["mdp/pettingzoo/tag.yml"], [f"seed={arguments.seed}", *changes])
    mdp = create_mdp(config["mdp"], seed=10_000 + arguments.seed, evaluation=True)
    model = build_model(mdp, config)
    _, state = Checkpoints(root / "checkpoints").load_newest()
    model.load_state_dict(state["model"])
    roles = roles_of(mdp, config)
    learned = {name: (member, acting_policy(member, deterministic=True)) for name, member in model.members()}
    table, errors = {}, {}
    with torch.no_grad():
        for predators in ("learned", "random"):
            for prey in ("learned", "random"):
                kinds = {"adversary": predators, "agent": prey}
                players = [learned[name] if kinds[name] == "learned" else None for name in roles.of_seat]
                counts = contacts(mdp, players, arguments.games)
                table[predators, prey] = statistics.mean(counts)
                errors[predators, prey] = statistics.stdev(counts) / len(counts) ** 0.5
    print(f"after {state['cost']:.0f} env steps ({state['elapsed']:.0f} s of training), {arguments.games} games each:")
    print("contacts per game (± standard error)   prey learned   prey random")
    for predators in ("learned", "random"):
        cells = [f"{table[predators, prey]:.2f} ± {errors[predators, prey]:.2f}" for prey in ("learned", "random")]
        print(f"predators {predators:8s}                    {cells[0]:>12s}   {cells[1]:>11s}")
    for prey in ("learned", "random"):
        ratio = table["learned", prey] / max(1e-9, table["random", prey])
        print(f"learned predators / random predators against {prey} prey: {ratio:.2f}")
    for predators in ("learned", "random"):
        ratio = table[predators, "random"] / max(1e-9, table[predators, "learned"])
        print(f"random prey / learned prey caught by {predators} predators: {ratio:.2f}")


if __name__ == "__main__":
    main()
