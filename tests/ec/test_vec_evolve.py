"""evolve.py on Ant Sumo (CPU MuJoCo): the population trains as one vectorized learner in this process, PBT works
as on the actor fleet (lineage, population checkpoints, best.pt, resume), a league rates its members, groups of
members train as Ray learners (one replaced when killed), bad searches are one line."""

from __future__ import annotations

import json

import pytest

from lamarckian.config import load
from lamarckian.ec import Evolution
from lamarckian.evolve import main

from .killing import evolve_killing_a_learner

FILES = ["-c", "mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml", "ec/ea/pbt.yml"]
SMALL = ["ec.population=2", "mdp.vec.num_envs.cpu=8", "mdp.vec.horizon=8", "sample.eval=2", "model.hidden=[32]",
         "ec.train.stopper=self.iteration >= 2", "evaluator.progress=false", "ec.pbt.ready=1", "ec.pbt.quantile=0.5"]


@pytest.mark.slow
def test_a_vectorized_pbt_population_evolves_and_resumes(tmp_path, capsys):
    root = tmp_path / "run"
    arguments = [*FILES, "-m", f"root={root}", *SMALL, "train.lr=[0.0001,0.003]"]
    assert main([*arguments, "ec.stop=self.trained >= 6", "-D"]) == 0
    rows = [json.loads(line) for line in (root / "lineage.jsonl").read_text().splitlines()]
    assert len(rows) >= 6
    assert {row["id"] for row in rows[:2]} == {0, 1}
    assert any(row["operator"] != "fresh" for row in rows), [row["operator"] for row in rows]   # exploit/explore
    assert (root / "lineage.png").is_file()
    assert (root / "best.pt").is_file()
    assert all(0.0001 <= row["hparams"]["train.lr"] <= 0.003 for row in rows)
    assert main([*arguments, "ec.stop=self.trained >= 8"]) == 0
    assert "resuming from" in capsys.readouterr().err
    assert len((root / "lineage.jsonl").read_text().splitlines()) >= 8


@pytest.mark.slow
def test_a_league_rates_its_members_and_writes_the_tables(tmp_path):
    root = tmp_path / "run"
    arguments = [*FILES, "-m", f"root={root}", *SMALL, "ec.selfplay=true", "rl.ppo.clip=[0.1,0.3]",
                 "mdp.vec.reward.push=[100.0,300.0]", "ec.stop=self.trained >= 4"]
    assert main(arguments) == 0
    rows = [json.loads(line) for line in (root / "lineage.jsonl").read_text().splitlines()]
    assert len(rows) >= 4
    assert all(0.1 <= row["hparams"]["rl.ppo.clip"] <= 0.3 for row in rows)
    table = (root / "league" / "ratings.csv").read_text().splitlines()
    assert table[0].startswith("name,")
    assert len(table) == 1 + 2 + 1
    assert table[-1].startswith("initial,")
    ratings = {line.split(",")[0]: float(line.split(",")[4]) for line in table[1:]}
    last = rows[-2:]
    assert {f"individual {row['id']}" for row in last} <= set(ratings)
    assert all(row["fitness"] == pytest.approx(ratings[f"individual {row['id']}"] - ratings["initial"]) for row in last)
    assert (root / "league" / "winrate.csv").is_file()
    assert (root / "league" / "winrate.png").is_file()


@pytest.mark.parametrize("change, message", [
    ("mdp.vec.horizon=[4,8]", "mdp.vec.horizon cannot be searched in a vectorized population: the members share "
                              "one task, and changing it for some would recompile the physics"),
    ("model.log_std=[-2.0,-1.0]", "share one architecture"),
    ("rl.ppo.epochs=[2,4]", "rl.ppo.epochs cannot be searched in a vectorized population"),
    ("ec.population=3", "ec.population=3 must divide mdp.vec.num_envs=8"),
    ("ec.vectorized=false", "separate vectorized learners are not available"),
])
def test_bad_vectorized_populations_are_one_line(tmp_path, capsys, change, message):
    assert main([*FILES, "-m", f"root={tmp_path}/run", *SMALL, change]) == 2
    error = capsys.readouterr().err
    assert message in error
    assert len(error.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_vectorized_groups_on_ray_replace_a_killed_learner(ray_local, tmp_path):
    """ec.learners=2: two Ray learners of 2 members each; one is SIGKILLed mid-run, replaced, and its members are
    trained again from the population's stored state."""
    changes = [change for change in SMALL if not change.startswith("ec.population")]
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml", "ec/ea/pbt.yml"],
                  [*changes, "ec.population=4", "ec.learners=2", "ec.learner_cpus=0.5", "mdp.vec.workers=1",
                   "ec.selfplay=true", "train.lr=[0.0001,0.003]", "ec.stop=self.trained >= 12",
                   "ec.checkpoint.interval=0", f"root={tmp_path}"], ranges=True)
    evolution = Evolution(config, tmp_path)
    assert not evolution.in_process
    assert evolution.group_size == 2
    evolution.start()
    members, victims = evolve_killing_a_learner(evolution, after_rounds=4)
    assert victims
    assert evolution.replaced == 1
    assert len(evolution.restarted) == 2
    assert evolution.trained >= 12
    rows = [json.loads(line) for line in (tmp_path / "lineage.jsonl").read_text().splitlines()]
    # learner 2 replaced the killed one (evolution.replaced); it reports a round unless the survivor trained all the
    # rounds left while Ray placed it (seen once on CI: the 12 rounds were done before it had reported)
    assert {row["learner"] for row in rows} - {2} == {0, 1}
    assert all(any(row["id"] == restarted and row["learner"] != 0 for row in rows)
               for restarted in evolution.restarted)     # its members trained again by a living learner (the survivor
    #                                                      while Ray places the replacement, or the replacement)
    assert len(members) == 4
    assert all(m.state is not None and "pool" in m.state for m in members)
    assert (tmp_path / "league" / "learner-0" / "ratings.csv").is_file()   # (killed: maybe after a first round)
    for learner in sorted({row["learner"] for row in rows} - {0}):   # those that reported a round (above): a later
        # round's league holds its 2 members, the other learner's 2, the initial
        table = (tmp_path / "league" / f"learner-{learner}" / "ratings.csv").read_text().splitlines()
        assert len(table) == 1 + 2 + 2 + 1
        assert sum("(another learner)" in line for line in table) == 2
