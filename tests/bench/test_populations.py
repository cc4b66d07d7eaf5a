"""bench/populations.py's reading of each side's records: seconds to the threshold, exploit steps and the gaps
between a member's rounds, and the evolve.py arguments the Tune side around our learner loads too."""

from __future__ import annotations

import math
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY / "bench"))

import populations  # noqa: E402

from lamarckian.config import load  # noqa: E402
from lamarckian.ec import SearchSpace  # noqa: E402


def lineage_row(member: int, learner: int, time: float, seconds: float, fitness: float, operator: str = "sample"):
    return {"id": member, "learner": learner, "time": time, "round_seconds": seconds, "fitness": fitness,
            "cost": 8192, "operator": operator}


def test_evolve_rows_time_the_gap_on_the_learner_that_trained_the_round():
    rows = populations.evolve_rows([(20.5, lineage_row(0, 1, 20.0, 10.0, 100.0)),
                                    (21.5, lineage_row(1, 0, 21.0, 11.0, 300.0)),
                                    (26.5, lineage_row(2, 1, 26.0, 5.5, 320.0, "exploit+perturb"))])
    assert math.isnan(rows[0].gap)
    assert rows[2].gap == 0.5                   # learner 1 reported at 20.0 and began the child's round at 20.5
    assert rows[2].exploited
    assert not rows[1].exploited


def test_tune_rows_call_a_trial_exploited_when_its_values_changed():
    events = [(0.0, {"t": 40.0, "member": "a", "fitness": 10.0, "env_steps": 8192, "round_seconds": 9.0,
                     "hparams": {"train.lr": 0.001}}),
              (0.0, {"t": 52.0, "member": "a", "fitness": 30.0, "env_steps": 16384, "round_seconds": 8.0,
                     "hparams": {"train.lr": 0.0012}})]
    rows = populations.tune_rows(events)
    assert rows[1].exploited
    assert rows[1].gap == 4.0                   # 52 − 8 − 40: the restart from the donor's checkpoint


def test_the_summary_takes_the_first_evaluation_at_the_threshold_and_the_best_within_each_budget():
    rows = [populations.Evaluation(t, "m", fitness, steps, math.nan, False)
            for t, fitness, steps in [(30.0, 200.0, 8192), (50.0, 480.0, 16384), (70.0, 500.0, 24576)]]
    summary = populations.summary(populations.TASKS["cartpole"], {"evaluations": rows, "peak": 0}, [60.0, 180.0])
    assert summary["reached"] == 50.0
    assert summary["steps"] == 16384
    assert summary["best"] == {60.0: 480.0, 180.0: 500.0}


def test_the_evolve_arguments_search_the_three_keys_of_every_side():
    files, modify = populations.evolve_arguments(populations.TASKS["pendulum"], 4, 0)
    space = SearchSpace.from_config(load(files, modify, ranges=True))
    assert {dimension.key for dimension in space} == set(populations.SEARCHED)
