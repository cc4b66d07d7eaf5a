"""evolve.py end to end on a real local Ray: PBT with a SIGKILLed learner, kill-and-resume of evolve.py, NSGA-II
fronts, self-play over the population, the command line's errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from lamarckian.config import load
from lamarckian.ec import Evolution, Individual
from lamarckian.ec.records import save_weights
from lamarckian.record import Checkpoints

from .killing import evolve_killing_a_learner

REPOSITORY = Path(__file__).resolve().parents[2]
#: a small CartPole population that fits a 2-CPU Ray: 3 learners × 1 actor, a few PPO iterations per round
CARTPOLE = ["sample.actors=1", "sample.num_cpus=0.25", "ec.learner_cpus=0.25", "sample.envs=8",
            "sample.truncation=32", "train.batch=512", "sample.eval=4", "evaluator.progress=false",
            "ec.train.stopper=self.iteration >= 3", "train.lr=[1e-4,1e-2]", "ec.log=[train.lr]"]


def cartpole(root: Path, *extra: str) -> dict:
    return load(["mdp/gym.yml", "ec/ea/pbt.yml"], [*CARTPOLE, f"root={root}", *extra], ranges=True)


def run_evolve(arguments: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPOSITORY / "evolve.py"), *arguments], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


@pytest.mark.slow
def replacement_reported(evolution: Evolution) -> bool:
    """Whether learner 3 (the first replacement of a population of 3) has reported a round."""
    assert evolution.lineage is not None
    return any(row["learner"] == 3 for row in evolution.lineage.read())


def test_pbt_replaces_a_killed_learner_and_goes_on(ray_local, tmp_path):
    config = cartpole(tmp_path, "ec.population=3", "ec.stop=self.trained >= 9", "ec.checkpoint.interval=0")
    evolution = Evolution(config, tmp_path)
    evolution.start()
    stop, deadline = evolution.should_stop, time.monotonic() + 120
    # the replacement joins when Ray has started it, beside the running rounds: the run goes on until it reported
    evolution.should_stop = lambda: stop() and (replacement_reported(evolution) or time.monotonic() > deadline)
    members, victims = evolve_killing_a_learner(evolution, after_rounds=2)
    assert victims
    assert evolution.replaced == 1
    assert evolution.trained >= 9
    assert len(members) == 3
    assert all(m.state is not None for m in members)  # a fresh exploit child inherits
    rows = [json.loads(line) for line in (tmp_path / "lineage.jsonl").read_text().splitlines()]
    restarted = evolution.restarted[0]
    assert any(r["id"] == restarted for r in rows[2:])  # the killed round was trained again, from its stored state
    assert len(rows) == evolution.trained
    assert 3 in {r["learner"] for r in rows}  # the replacement (learner 3) trains
    assert all(set(r) >= {"id", "parent", "operator", "hparams", "fitness", "time"} for r in rows)
    newest = Checkpoints(tmp_path / "population").load_newest()[1]
    assert newest["trained"] == evolution.trained
    assert len(newest["algorithm"]["slots"]) == 3
    best = torch.load(tmp_path / "best.pt", weights_only=True)
    assert best["fitness"] == max(m.fitness for m in members)
    assert "model" in best
    assert (tmp_path / "tensorboard" / "population").is_dir()
    assert (tmp_path / "lineage.png").stat().st_size > 1000


@pytest.mark.slow
def test_pbt_searches_the_learning_rate_of_dqn(tmp_path):
    completed = run_evolve(["-c", "mdp/gym.yml", "rl/dqn.yml", "ec/ea/pbt.yml", "-m", *CARTPOLE[:-2],
                            "train.lr=[0.0005,0.005]", "ec.log=[train.lr]", "train.replay.start=256",
                            "ec.train.stopper=self.cost >= 1500", f"root={tmp_path}", "ec.population=2",
                            "ec.stop=self.trained >= 4"], tmp_path, 300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "lineage.jsonl").read_text().splitlines()]
    assert len(rows) >= 4
    assert all(0.0005 <= r["hparams"]["train.lr"] <= 0.005 for r in rows)
    best = torch.load(tmp_path / "best.pt", weights_only=True)
    assert "advantage_head.weight" in best["model"]             # a dueling Q-network, trained by the DQN learner


@pytest.mark.slow
def test_killed_evolve_py_resumes(tmp_path):
    arguments = ["-c", "mdp/gym.yml", "ec/ea/pbt.yml", "-m", *CARTPOLE, f"root={tmp_path}", "ec.population=2",
                 "ec.checkpoint.interval=0"]
    process = subprocess.Popen([sys.executable, str(REPOSITORY / "evolve.py"), *arguments,
                                "ec.stop=self.trained >= 100000"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    checkpoints = Checkpoints(tmp_path / "population")
    try:
        deadline = time.monotonic() + 240
        while (not checkpoints.paths() or checkpoints.load_newest()[1]["trained"] < 3) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    before = checkpoints.load_newest()[1]
    assert before["trained"] >= 3
    target = before["trained"] + 4
    completed = run_evolve([*arguments, f"ec.stop=self.trained >= {target}"], tmp_path, 300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert f"resuming from {tmp_path / 'population'}" in completed.stderr
    after = checkpoints.load_newest()[1]
    assert after["trained"] >= target
    assert after["cost"] > before["cost"]
    assert after["elapsed"] > before["elapsed"]
    ages_before = {m["id"]: m["age"] for m in before["algorithm"]["slots"]}
    ages_after = {m["id"]: m["age"] for m in after["algorithm"]["slots"]}
    continued = [i for i in ages_before if i in ages_after]
    assert all(ages_after[i] >= ages_before[i] for i in continued)
    assert after["algorithm"]["next_id"] >= before["algorithm"]["next_id"]
    assert len((tmp_path / "lineage.jsonl").read_text().splitlines()) == after["trained"]


def test_a_resumed_evolution_drops_the_lineage_rows_of_rounds_after_its_checkpoint(tmp_path):
    """A driver killed after rounds were reported but before the next population checkpoint trains those rounds
    again after the resume; their old rows must not stay in lineage.jsonl (bench/chaos.py found 6 in a soak)."""
    config = cartpole(tmp_path)
    first = Evolution(config, tmp_path)
    first.trained = 2
    first.save()
    for round_id in range(5):                     # 2 rounds in the checkpoint, 3 reported after it
        first.lineage.write({"id": round_id})
    resumed = Evolution(config, tmp_path)
    resumed.resume()
    assert [row["id"] for row in resumed.lineage.read()] == [0, 1]


@pytest.mark.slow
def test_nsga_ii_on_pong_writes_a_front(tmp_path):
    root = tmp_path / "run"
    completed = run_evolve(["-c", "mdp/pong/behavior.yml", "ec/ea/nsga_ii.yml", "-m", f"root={root}",
                            "ec.population=4", "ec.learners=2", "sample.envs=4", "sample.truncation=32",
                            "train.batch=256", "sample.eval=4", "ec.train.stopper=self.iteration >= 2",
                            "ec.stop=self.trained >= 8", "sample.num_cpus=0.25", "ec.learner_cpus=0.25",
                            "evaluator.progress=false", "-D"], tmp_path, 400)
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = [json.loads(line) for line in (root / "lineage.jsonl").read_text().splitlines()]
    assert len(rows) >= 8
    assert any(r["operator"] in ("mutation", "sbx+mutation") for r in rows)
    assert all(0.0 <= r["hparams"]["mdp.idle_reward"] <= 0.05 and len(r["objectives"]) == 2 for r in rows)
    front = (root / "front.csv").read_text().splitlines()
    assert front[0] == "id,fitness,lazy,mdp.idle_reward"
    assert len(front) >= 2     # fitness once
    assert (root / "front.png").stat().st_size > 1000
    assert len(list((root / "front").glob("checkpoint-*.pt"))) == len(front) - 1
    # the front may be a single member in so short a run: rate it together with every member of the population
    population = Checkpoints(root / "population").load_newest()[1]["algorithm"]["population"]
    for member in population:
        save_weights(root / "members" / f"checkpoint-{member['id']:012d}.pt", Individual.from_dict(member), {})
    rated = subprocess.run([sys.executable, str(REPOSITORY / "evaluate.py"), "--checkpoints", str(root / "front"),
                            "--opponents", str(root / "members"), "-m", "sample.envs=2", "--games", "2", "--debug"],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert rated.returncode == 0, rated.stderr[-3000:]
    assert "front/" in rated.stdout + rated.stderr
    assert "members/" in rated.stdout + rated.stderr  # both rated


@pytest.mark.slow
def test_population_self_play_on_pong(ray_local, tmp_path):
    # one learner: rounds one after another, so a member's round starts after another's weights exist (with two
    # learners, one slow to start let the other train three rounds, and the run end, before it had any)
    config = load(["ec/ea/tournament.yml", "ec/selfplay.yml"],
                  ["ec.population=2", "ec.learners=1", "sample.actors=1", "sample.num_cpus=0.25",
                   "ec.learner_cpus=0.25", "sample.envs=4", "sample.truncation=32", "train.batch=256", "sample.eval=4",
                   "ec.train.stopper=self.iteration >= 2", "ec.stop=self.trained >= 4", "rl.opponent.rule=0.0",
                   "evaluator.progress=false", f"root={tmp_path}"], ranges=True)
    evolution = Evolution(config, tmp_path)
    tasks = []
    original = evolution._task
    evolution._task = lambda individual: tasks.append(original(individual)) or tasks[-1]
    try:
        members = evolution.run()
    finally:
        evolution.close()
    assert evolution.trained >= 4
    assert len(members) == 2
    later = [t for t in tasks if t.get("opponents")]
    assert later, "once a member has weights, the others train against it"
    assert all(t["id"] not in t["opponents"] for t in later)  # never against itself
    assert all(m.state["pool"] is None for m in members)  # the population was the pool


@pytest.mark.parametrize("modifications, message", [
    (["ec.population=[2,8]"], "only keys under"),
    (["ec.log=[train.lr]"], "not searched"),
    (["ec.algorithm=cma"], "ec.algorithm"),
    (["ec.learners=9"], "ec.learners"),
    (["ec.stop=self.time >= "], "bad expression"),
    (["train.lr=[0.1,0.01]"], "empty"),
])
def test_command_line_errors_are_one_line_exit_2(tmp_path, capsys, modifications, message):
    from lamarckian.evolve import main

    assert main(["-m", f"root={tmp_path / 'run'}", *modifications]) == 2
    error = capsys.readouterr().err
    assert message in error
    assert len(error.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
