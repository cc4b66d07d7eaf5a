"""evaluate.py: a round-robin of checkpoints with outputs; bad inputs give one line and exit 2."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lamarckian.config import load
from lamarckian.rl.fleet.learner import Learner
from lamarckian.rl.loop import TrainingLoop

REPOSITORY = Path(__file__).resolve().parents[2]


def make_checkpoints(folder: Path, edits: list[str], count: int, files: tuple[str, ...] = ()) -> None:
    config = load(list(files), [f"root={folder}", *edits])
    learner = Learner(config)
    loop = TrainingLoop(learner, folder)
    noise = torch.Generator().manual_seed(len(edits) + count)
    for iteration in range(1, count + 1):
        with torch.no_grad():
            for parameter in learner.model.parameters():
                parameter.add_(torch.randn(parameter.shape, generator=noise) * 0.5)
        learner.iteration, learner.cost, learner.elapsed = iteration, iteration * 1000, iteration * 60.0
        loop.save()


def evaluate(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPOSITORY / "evaluate.py"), *arguments], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def test_round_robin_writes_ratings_and_plots(tmp_path):
    make_checkpoints(tmp_path / "run", ["evaluator.checkpoint.keep=10"], 3)
    make_checkpoints(tmp_path / "league", ["seed=9"], 1)
    out = tmp_path / "out"
    completed = evaluate("--checkpoints", str(tmp_path / "run" / "checkpoints"), "--games", "4", "--debug",
                         "--opponents", str(tmp_path / "league" / "checkpoints"),
                         "--out", str(out), "-m", "sample.envs=4", "mdp.pong.score=1", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "ratings (Bradley-Terry Elo" in completed.stderr
    assert "Spearman" in completed.stderr
    with open(out / "ratings.csv") as stream:
        rows = list(csv.DictReader(stream))
    assert [row["iteration"] for row in rows] == ["1", "2", "3", "1"]
    assert [row["name"] for row in rows] == ["run/1", "run/2", "run/3", "league/1"]
    assert abs(sum(float(row["elo"]) for row in rows) / 4 - 1200) < 1e-6
    assert sum(float(row["score"]) for row in rows) == pytest.approx(2.0, abs=1e-3)  # zero-sum: one point a game
    for name in ("winrate.csv", "winrate.png", "elo.png"):
        assert (out / name).stat().st_size > 0


def test_bad_inputs_exit_2_with_one_line(tmp_path, capsys):
    from lamarckian.evaluate import main

    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["--checkpoints", str(empty)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "no checkpoint-*.pt" in error
    make_checkpoints(tmp_path / "cartpole", [], 1, files=("mdp/gym.yml",))
    assert main(["--checkpoints", str(tmp_path / "cartpole")]) == 2      # a run directory works as its folder
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "not a checkpoint of this architecture" in error
    with pytest.raises(SystemExit) as exit_:
        main(["--checkpoints", str(empty), "--games", "0"])
    assert exit_.value.code == 2
    assert "--games" in capsys.readouterr().err


def test_n_player_tournament_uses_ranks(tmp_path):
    make_checkpoints(tmp_path / "run", ["evaluator.checkpoint.keep=10", "mdp.create=coins"], 4)
    out = tmp_path / "out"
    completed = evaluate("--checkpoints", str(tmp_path / "run" / "checkpoints"), "--games", "3", "--debug",
                         "--out", str(out), "-m", "mdp.create=coins", "sample.envs=4", "mdp.coins.max_steps=30",
                         cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "multi-player Elo" in completed.stderr
    with open(out / "ratings.csv") as stream:
        assert len(list(csv.DictReader(stream))) == 4
