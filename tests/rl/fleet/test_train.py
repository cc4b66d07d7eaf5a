"""End to end on a real local Ray: learning, a SIGKILLed actor replaced, train.py killed and resumed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lamarckian.config import load
from lamarckian.record import Checkpoints
from lamarckian.rl.fleet.learner import Learner
from lamarckian.rl.loop import TrainingLoop

REPOSITORY = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_sigkilled_actor_is_replaced_and_training_goes_on(ray_local, tmp_path):
    config = load(["mdp/gym.yml"], ["sample.envs=4", "sample.truncation=16", "train.batch=256",
                                    "evaluator.progress=false", f"root={tmp_path}"])
    learner = Learner(config)
    learner.start_actors()
    try:
        with learner.fleet.gather.gathering("sample"):
            learner.step()
            victim = learner.fleet.actors[0]
            pid = ray_local.get(victim.__ray_call__.remote(lambda actor: os.getpid()))
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 120
            for _ in range(6):
                learner.step()
            while len(learner.fleet.actors) < 2 and time.monotonic() < deadline:   # joins once Ray started it
                learner.step()
            assert learner.fleet.replaced == 1
            assert victim not in learner.fleet.actors
            assert len(learner.fleet.actors) == 2
            summary = learner.evaluator.evaluate(learner.fleet.everyone)  # the replacement answers calls too
            assert summary["episodes"] == config["evaluator"]["episodes"]
        assert learner.iteration >= 7
        assert learner.cost >= learner.iteration * 256
    finally:
        learner.close()


def run_train(arguments: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPOSITORY / "train.py"), *arguments], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


@pytest.mark.slow
def test_cartpole_learns(tmp_path):
    root = tmp_path / "run"
    completed = run_train(["-c", "mdp/gym.yml", "mdp/gym/cartpole.yml", "rl/ppo.yml", "-m", f"root={root}",
                           "evaluator.interval=3", "evaluator.terminate=self.fitness >= 475 or self.cost > 600000",
                           "-D"], tmp_path, 600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    evaluations = [float(m) for m in re.findall(r"fitness ([-\d.e+]+) over", completed.stderr)]
    assert evaluations, completed.stderr[-3000:]
    assert max(evaluations) >= 475, completed.stderr[-3000:]
    assert (root / "config.yml").is_file()
    assert Checkpoints(root / "checkpoints").paths()
    assert list((root / "tensorboard").glob("events.out.tfevents.*"))


@pytest.mark.slow
def test_killed_train_py_resumes(tmp_path):
    arguments = ["-m", f"root={tmp_path}", "sample.envs=4", "sample.truncation=16", "train.batch=512",
                 "evaluator.checkpoint.interval=0.5", "evaluator.interval=1000"]
    process = subprocess.Popen([sys.executable, str(REPOSITORY / "train.py"), *arguments,
                                "evaluator.terminate=self.iteration >= 100000"], cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    checkpoints = Checkpoints(tmp_path / "checkpoints")
    try:
        deadline = time.monotonic() + 240
        while len(checkpoints.paths()) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert checkpoints.paths(), "no checkpoint was written"
    before = checkpoints.load_newest()[1]
    assert before["iteration"] >= 1
    target = before["iteration"] + 3
    completed = run_train([*arguments, f"evaluator.terminate=self.iteration >= {target}"], tmp_path, 300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert f"resuming from {tmp_path / 'checkpoints'}" in completed.stderr
    after = checkpoints.load_newest()[1]
    assert after["iteration"] == target
    assert after["cost"] > before["cost"]
    assert after["elapsed"] > before["elapsed"]
    kept = {s["id"]: s for s in before["pool"]["snapshots"]}
    resumed = {s["id"]: s for s in after["pool"]["snapshots"]}
    assert set(kept) <= set(resumed)
    assert after["pool"]["next_id"] >= before["pool"]["next_id"]
    assert all(resumed[i]["games"] >= kept[i]["games"] for i in kept)  # statistics continue, not restart
    assert sum(s["games"] for s in resumed.values()) > sum(s["games"] for s in kept.values())


def test_pool_starts_from_a_given_checkpoint(tmp_path):
    from lamarckian.model import to_blob

    first = Learner(load([], [f"root={tmp_path / 'a'}"]))
    path = TrainingLoop(first, tmp_path / "a").save()
    second = Learner(load([], [f"root={tmp_path / 'b'}", "seed=5", f"rl.opponent.pool.initial={path}"]))
    assert np.array_equal(second.pools[""].snapshots[0].blob, to_blob(first.model))
    assert not np.array_equal(to_blob(second.model), to_blob(first.model))


def test_debug_runs_in_one_process_without_ray(tmp_path):
    root = tmp_path / "run"
    completed = run_train(["-c", "mdp/gym.yml", "--debug", "-m", f"root={root}", "sample.envs=2", "train.batch=128",
                           "evaluator.terminate=self.iteration >= 3"], tmp_path, 300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "after 3 iterations" in completed.stderr
    assert "Ray" not in completed.stderr
    assert "Task was destroyed" not in completed.stderr


def test_the_learner_device_is_a_setting_refused_where_it_does_not_exist():
    import torch

    from lamarckian.rl.fleet.update_ranks import learner_device

    assert learner_device(load([], [])) == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="train.device='gpu'"):
        load([], ["train.device=gpu"])
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="train.device=cuda: no CUDA device here"):
            learner_device(load([], ["train.device=cuda"]))


@pytest.mark.gpu
def test_the_learner_trains_on_the_gpu_while_the_actors_act_on_cpus(tmp_path):
    root = tmp_path / "run"
    completed = run_train(["-c", "mdp/gym.yml", "--debug", "-m", f"root={root}", "sample.envs=2", "train.batch=128",
                           "train.device=cuda", "evaluator.terminate=self.iteration >= 3"], tmp_path, 300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "after 3 iterations" in completed.stderr, completed.stderr[-3000:]
    assert "the learner on cuda" in completed.stderr
    assert Checkpoints(root / "checkpoints").load_newest()[1]["iteration"] == 3     # loads on any machine
