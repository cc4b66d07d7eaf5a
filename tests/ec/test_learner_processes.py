"""evolve.py on one machine without Ray: its learners (and their actors) are child processes forked from a warm
server, which start the first round seconds sooner than Ray actors (issue 46: bench/populations.py)."""

from __future__ import annotations

import json
import socket

import pytest

from lamarckian.ec import Evolution
from lamarckian.ec.learners import fitting
from lamarckian.ec.settings import learners_use_ray
from lamarckian.rpc.processes import ProcessActor

from .killing import evolve_killing_a_learner
from .test_evolve import cartpole, run_evolve


@pytest.mark.slow
def test_evolve_py_on_one_machine_trains_in_child_processes_without_ray(tmp_path):
    completed = run_evolve(["-c", "mdp/gym.yml", "ec/ea/pbt.yml", "-m", "sample.actors=1", "sample.envs=8",
                            "sample.truncation=32", "train.batch=512", "sample.eval=4", "evaluator.progress=false",
                            "ec.train.stopper=self.iteration >= 2", "train.lr=[1e-4,1e-2]", "ec.population=2",
                            "ec.stop=self.trained >= 4", f"root={tmp_path}"], tmp_path, 180)
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "lineage.jsonl").read_text().splitlines()]
    assert {row["node"] for row in rows} == {socket.gethostname()}      # a Ray learner reports its node id


@pytest.mark.slow
def test_a_killed_learner_process_is_replaced_and_the_evolution_goes_on(tmp_path):
    config = cartpole(tmp_path, "ec.population=2", "ec.stop=self.trained >= 6", "ec.checkpoint.interval=0",
                      "ray.launch=processes")
    evolution = Evolution(config, tmp_path)
    evolution.start()
    first = evolution.processes.learners[0]
    members, victims = evolve_killing_a_learner(evolution, after_rounds=2)
    assert isinstance(first, ProcessActor)
    assert victims == [first.pid]
    assert evolution.replaced == 1
    assert evolution.trained >= 6
    assert all(member.state is not None for member in members)


@pytest.mark.parametrize(("edits", "expected"), [
    ([], False),
    (["ray.launch=ray"], True),
    (["ray.address=auto"], True),
    (["ec.learner_gpus=1"], True),
    (["ec.learner_gpus=1", "ray.launch=processes"], False),
    (["train.gpus=2"], True),
])
def test_learners_need_ray_only_for_what_only_ray_gives(tmp_path, edits, expected):
    config = Evolution(cartpole(tmp_path, *edits), None).config
    assert learners_use_ray(config, vectorized=False) is expected


@pytest.mark.parametrize("resources, need, expected", [
    ({"CPU": 5.0}, {"CPU": 1.5, "GPU": 0.0}, 3),             # issue 53's cluster: 3 learners with their actors
    ({"CPU": 3.0}, {"CPU": 1.5, "GPU": 0.0}, 2),             # a worker host of 2 CPUs lost
    ({"CPU": 8.0, "GPU": 1.0}, {"CPU": 1.0, "GPU": 0.5}, 2),  # the GPUs bound it
    ({"CPU": 8.0}, {"CPU": 1.0, "GPU": 0.5}, 0),             # no GPU in the cluster: none fits
    ({"CPU": 3.0}, {"CPU": 0.1 * 3}, 10),                     # fractions that add up exactly
])
def test_learners_that_fit_a_cluster(resources, need, expected):
    assert fitting(resources, need) == expected
