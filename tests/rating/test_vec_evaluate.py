"""evaluate.py on vectorized tasks: checkpoints and pool snapshots of a OnDeviceLearner run rated by games played on the
task itself (Ant Sumo: Bradley-Terry Elo; Ant Battle: also multi-player Elo from elimination ranks)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from lamarckian import evaluate
from lamarckian.config import load
from lamarckian.mdp.vec import AntBattle, BattleSettings
from lamarckian.model import ModelSettings, to_blob
from lamarckian.model.stacked import StackedPolicies
from lamarckian.rating.vec_games import play_vec_matches
from lamarckian.rl.loop import TrainingLoop
from lamarckian.rl.ondevice.learner import OnDeviceLearner, vec_model

REPOSITORY = Path(__file__).resolve().parents[2]


def short_run(tmp_path: Path, config_file: str, *changes: str) -> Path:
    config = load([config_file, "rl/ppo_gpu.yml"], ["mdp.vec.horizon=8", "evaluator.progress=false",
                                                    "evaluator.checkpoint.interval=0", f"root={tmp_path}",
                                                    "rl.opponent.pool.add=True", "rl.opponent.pool.games_to_check=0",
                                                    *changes])
    learner = OnDeviceLearner(config)
    TrainingLoop(learner, tmp_path).run(stop=lambda trainer: trainer.iteration >= 3)
    learner.close()
    return tmp_path / "checkpoints"


@pytest.mark.slow
def test_battle_checkpoints_and_pool_get_multiplayer_elo(tmp_path, capsys):
    changes = ["mdp.vec.ants=3", "mdp.vec.num_envs.cpu=12"]
    folder = short_run(tmp_path, "mdp/vec/ant_battle.yml", *changes)
    out = tmp_path / "evaluation"
    code = evaluate.main(["-c", "mdp/vec/ant_battle.yml", "rl/ppo_gpu.yml", "-m", *changes, "--checkpoints",
                          str(folder), "--pool", "--games", "1", "--out", str(out)])
    assert code == 0
    rows = list(csv.DictReader(open(out / "ratings.csv")))
    names = [row["name"] for row in rows]
    assert sum("pool-" in name for name in names) >= 3
    assert sum("pool-" not in name for name in names) == 3
    assert all(float(row["elo"]) > 0 for row in rows)
    assert (out / "winrate.png").is_file()
    assert "multi-player Elo" in capsys.readouterr().err


@pytest.mark.slow
def test_sumo_checkpoints_are_rated(tmp_path):
    folder = short_run(tmp_path, "mdp/vec/ant_sumo.yml", "mdp.vec.num_envs.cpu=6")
    out = tmp_path / "evaluation"
    assert evaluate.main(["-c", "mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml", "-m", "mdp.vec.num_envs.cpu=6",
                          "--checkpoints", str(folder), "--games", "2", "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out / "ratings.csv")))
    assert len(rows) == 3
    assert abs(sum(float(r["elo"]) for r in rows) / 3 - 1200) < 1


def test_every_match_gets_ranks_for_every_seat():
    """More matches than environments: two chunks; each game's ranks are a valid elimination order."""
    task = AntBattle(2, BattleSettings(ants=3, play_to_end=True), seed=1)
    config = load(["mdp/vec/ant_battle.yml"], [])
    template = vec_model(task, ModelSettings.from_config(config))
    stacked = StackedPolicies(template, [to_blob(template)] * 3, task.device)
    results = play_vec_matches(task, stacked, [[0, 1, 2], [1, 2, 0], [2, 0, 1]])
    assert len(results) == 3
    assert all(len(game) == 3 for game in results)
    for game in results:
        ranks = sorted(r.rank for r in game)
        assert ranks[0] == 1
        assert all(1 <= r <= 3 for r in ranks)
    task.close()


def test_too_few_checkpoints_is_a_clear_error(tmp_path, capsys):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    code = evaluate.main(["-c", "mdp/vec/ant_sumo.yml", "--checkpoints", str(folder)])
    assert code == 2
    assert "no checkpoint" in capsys.readouterr().err
