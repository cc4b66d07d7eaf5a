"""``ray.launch``: a run on one machine starts its actors as child processes without Ray; what needs Ray gets it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lamarckian.config import load
from lamarckian.config.sections import RaySettings
from lamarckian.rl.fleet.learner import Learner
from lamarckian.rpc.processes import ProcessActor
from lamarckian.train import main as train_main

REPOSITORY = Path(__file__).resolve().parents[3]
SMALL = ["sample.envs=4", "sample.truncation=16", "train.batch=256", "evaluator.progress=false"]


def test_a_run_on_one_machine_never_imports_ray(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from lamarckian.train import main
        code = main(["-c", "mdp/gym.yml", "-m", "root={tmp_path / 'run'}", "sample.envs=2", "train.batch=128",
                     "evaluator.episodes=2", "evaluator.tensorboard=false", "evaluator.terminate=self.iteration >= 2"])
        print("exit", code, "ray imported:", "ray" in sys.modules)
    """)
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                               cwd=REPOSITORY)
    assert "exit 0 ray imported: False" in completed.stdout, completed.stderr[-3000:]


def test_without_ray_the_actors_are_child_processes_and_a_killed_one_is_replaced(tmp_path):
    config = load(["mdp/gym.yml"], [*SMALL, f"root={tmp_path}", "ray.launch=processes"])
    learner = Learner(config)
    learner.start_actors()
    try:
        assert all(isinstance(actor, ProcessActor) for actor in learner.fleet.actors)
        with learner.fleet.gather.gathering("sample"):
            learner.step()
            victim = learner.fleet.actors[0]
            os.kill(victim.pid, signal.SIGKILL)
            for _ in range(5):
                learner.step()
            assert learner.fleet.replaced == 1
            assert victim not in learner.fleet.actors
            summary = learner.evaluator.evaluate(learner.fleet.everyone)    # the replacement answers calls too
        assert summary["episodes"] == config["evaluator"]["episodes"]
    finally:
        learner.close()
    assert not victim.alive()


def test_closing_the_learner_ends_its_actor_processes(tmp_path):
    learner = Learner(load(["mdp/gym.yml"], [*SMALL, f"root={tmp_path}", "ray.launch=processes"]))
    learner.start_actors()
    actors = list(learner.fleet.actors)
    learner.close()
    assert not any(actor.alive() for actor in actors)


@pytest.mark.parametrize("changes, needs", [(["ray.address=auto"], True), (["train.gpus=2"], True),
                                            (["ray.launch=ray"], True), ([], False),
                                            (["ray.local_mode=true", "ray.launch=ray"], False)])
def test_ray_is_used_where_it_is_needed(changes, needs):
    config = load([], changes)
    assert RaySettings.from_config(config).uses_ray(config["train"]["gpus"]) is needs


def test_processes_with_a_cluster_address_is_refused_naming_both_keys(tmp_path, capsys):
    code = train_main(["-m", f"root={tmp_path}", "ray.launch=processes", "ray.address=auto"])
    error = capsys.readouterr().err
    assert code == 2
    assert "ray.launch=processes" in error and "ray.address='auto'" in error


def test_an_unknown_launch_is_refused_naming_the_key(tmp_path, capsys):
    code = train_main(["-m", f"root={tmp_path}", "ray.launch=threads"])
    assert code == 2
    assert "ray.launch='threads': one of auto, processes, ray" in capsys.readouterr().err
