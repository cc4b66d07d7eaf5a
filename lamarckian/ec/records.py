"""What evolve.py leaves in its run directory besides the population checkpoints:

- ``lineage.jsonl``: one JSON line per training round (id, parent(s), operator, hyper-parameters, fitness,
  objectives, age, env steps, times, learner, node) — enough to draw the family tree (:func:`plot_lineage`);
- ``tensorboard/population`` (best and median fitness, hyper-parameter histograms, throughput) and
  ``tensorboard/individual-<id>`` (each individual's fitness, objectives and hyper-parameters over env steps);
- ``best.pt`` and, for NSGA-II, ``front/checkpoint-<id>.pt`` + ``front.csv`` + ``front.png``: weights that
  ``evaluate.py`` and ``train.py`` (``rl.opponent.pool.initial``) load.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ..record import Scalars, atomic_write
from ..record.checkpoint import CHECKPOINT_FORMAT
from ..record.table import append_text
from .individual import Individual


class Lineage:
    """Appends rows to ``lineage.jsonl`` (whole rows, each written at once: a killed run loses nothing written)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, row: Mapping[str, Any]) -> None:
        append_text(self.path, json.dumps(row, sort_keys=True) + "\n")

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def keep_first(self, rounds: int) -> int:
        """Keep the rows of the first ``rounds`` rounds (a row per reported round, in order): a run resumed from
        a population checkpoint of ``rounds`` rounds trains the later ones again, and their old rows would
        describe results the population no longer holds. Rewritten atomically; how many rows were dropped."""
        lines = self.path.read_text(encoding="utf-8").splitlines(keepends=True) if self.path.exists() else []
        lines = [line for line in lines if line.strip()]
        if len(lines) <= rounds:
            return 0
        atomic_write(self.path, lambda stream: stream.write("".join(lines[:rounds]).encode("utf-8")))
        return len(lines) - rounds


class Boards:
    """TensorBoard for the population and for each individual (``None`` folder: nothing written)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.population = Scalars(folder / "population" if folder is not None else None)

    def individual(self, individual: Individual, names: Sequence[str], extra: Mapping[str, float]) -> None:
        if self.folder is None:
            return
        board = Scalars(self.folder / f"individual-{individual.id}")
        scalars = {"fitness": individual.fitness, **dict(zip((f"objective/{n}" for n in names), individual.objectives)),
                   **{f"hparam/{k}": v for k, v in individual.hparams.items()}, **extra}
        board.write(individual.cost, {k: v for k, v in scalars.items() if v is not None and math.isfinite(v)})
        board.close()

    def population_step(self, step: int, members: Sequence[Individual], scalars: Mapping[str, float]) -> None:
        fitness = [m.fitness for m in members if m.scored and math.isfinite(m.fitness)]
        summary = dict(scalars)
        if fitness:
            summary.update({"fitness/best": max(fitness), "fitness/median": float(np.median(fitness))})
        self.population.write(step, summary)
        for key in (members[0].hparams if members else {}):
            self.population.histogram(step, f"hparam/{key}", [m.hparams[key] for m in members])
        self.population.flush()

    def close(self) -> None:
        self.population.close()


def save_weights(path: Path, individual: Individual, config: Mapping[str, Any]) -> None:
    """An individual's weights as a snapshot in the one checkpoint format (``format``, ``model``, counters,
    ``config``: what ``evaluate.py`` and ``rl.opponent.pool.initial`` read) plus its scores."""
    state = individual.state or {}
    payload = {"format": CHECKPOINT_FORMAT, "model": state.get("model"), "iteration": int(state.get("iteration", 0)),
               "cost": int(state.get("cost", 0)), "elapsed": float(state.get("elapsed", 0.0)),
               "hparams": dict(individual.hparams), "fitness": individual.fitness,
               "objectives": list(individual.objectives), "id": individual.id, "config": config}
    atomic_write(path, lambda stream: torch.save(payload, stream))


def write_front(root: Path, front: Sequence[Individual], members: Sequence[Individual], names: Sequence[str],
                config: Mapping[str, Any]) -> None:
    """``front.csv``, ``front.png`` and ``front/checkpoint-<id>.pt`` for the non-dominated members."""
    folder = root / "front"
    if folder.exists():
        shutil.rmtree(folder)
    for member in front:
        if member.state is not None:
            save_weights(folder / f"checkpoint-{member.id:012d}.pt", member, config)
    keys = sorted({k for m in front for k in m.hparams})
    text = io.StringIO()
    writer = csv.writer(text)
    extra = ["fitness"] if "fitness" not in names else []          # a column once, even when it is an objective
    writer.writerow(["id", *extra, *names, *keys])
    for member in front:
        writer.writerow([member.id, *([member.fitness] if extra else []), *member.objectives,
                         *(member.hparams[k] for k in keys)])
    atomic_write(root / "front.csv", lambda stream: stream.write(text.getvalue().encode()))
    if len(names) >= 2:
        plot_front(root / "front.png", front, members, names)


def save_figure(figure: Any, path: Path) -> None:
    """Write a matplotlib figure as PNG atomically (a reader never sees half an image) and close it."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, dpi=110)
    plt.close(figure)
    atomic_write(path, lambda stream: stream.write(buffer.getvalue()))


def plot_front(path: Path, front: Sequence[Individual], members: Sequence[Individual], names: Sequence[str]) -> None:
    """Scatter of the first two objectives: every member, the front joined by a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5.5, 4.5))
    others = [m for m in members if m not in front and all(math.isfinite(v) for v in m.objectives[:2])]
    axes.scatter([m.objectives[0] for m in others], [m.objectives[1] for m in others], c="0.6", label="population")
    ordered = sorted((m for m in front if all(math.isfinite(v) for v in m.objectives[:2])),
                     key=lambda m: m.objectives[0])
    axes.plot([m.objectives[0] for m in ordered], [m.objectives[1] for m in ordered], "o-", c="C3",
              label=f"Pareto front ({len(ordered)})")
    for member in ordered:
        axes.annotate(str(member.id), (member.objectives[0], member.objectives[1]), fontsize=8,
                      xytext=(3, 3), textcoords="offset points")
    axes.set_xlabel(names[0])
    axes.set_ylabel(names[1])
    axes.legend()
    axes.grid(alpha=0.3)
    save_figure(figure, path)


def plot_lineage(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """The family tree from ``lineage.jsonl`` rows: each round's fitness over time (colour: individual id), a
    line from the individual's previous round, or from its parent's last round, to this one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    last: dict[int, tuple[float, float]] = {}
    for row in rows:
        if row.get("fitness") is None:
            continue
        point = (row["time"], row["fitness"])
        start = last.get(row["id"])
        if start is None and row.get("parent") is not None:
            start = last.get(row["parent"])
        if start is not None:
            axes.plot([start[0], point[0]], [start[1], point[1]], c="0.7", lw=0.8, zorder=1)
        last[row["id"]] = point
    axes.scatter([r["time"] for r in rows if r.get("fitness") is not None],
                 [r["fitness"] for r in rows if r.get("fitness") is not None],
                 c=[r["id"] for r in rows if r.get("fitness") is not None], cmap="viridis", s=14, zorder=2)
    axes.set_xlabel("time (s)")
    axes.set_ylabel("fitness")
    axes.grid(alpha=0.3)
    save_figure(figure, path)
