"""Training through a game server process: the actor batches every waiting episode, lost episodes reach the
learner's statistics (never its results), and PPO learns CartPole behind a server with latency."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import numpy as np
import pytest

from lamarckian.config import load
from lamarckian.rl.fleet.actor import Actor
from lamarckian.rl.fleet.learner import Learner

from .helpers import ROOT, ServerProcess, free_port


def game_config(server: ServerProcess, *edits: str) -> dict:
    return load(["mdp/game/cartpole.yml"], [f"mdp.game.address={server.address}", f"mdp.game.secret={server.secret}",
                                             *edits])


def segments_and_reports(actor: Actor, count: int) -> list[dict]:
    """The actor's next ``count`` segments and every progress report that came before them (on a loaded machine
    ``sample`` may report progress first and go on; the reports carry the counters that grew meanwhile)."""
    deadline, messages = time.monotonic() + 300, []
    while sum("observations" in message for message in messages) < count:
        assert time.monotonic() < deadline, f"{count} segments not in 300 s: {messages[-1:]}"
        messages.append(actor.sample())
    return messages


def test_an_actor_answers_every_waiting_episode_in_one_forward(tmp_path):
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--latency", "5ms"])
    actor = Actor(game_config(server, "sample.envs=64", "sample.truncation=16"), 0, own_process=False)
    messages = segments_and_reports(actor, 3)
    batch = actor.statistics()["batch"]
    actor.close()
    server.stop()
    assert messages[-1]["observations"].shape == (16, 64, 4)
    assert batch >= 4                       # requests per forward: answers arriving together share one
    assert sum(m.get("counters", {}).get("episodes", 0) for m in messages) >= 64


def test_evaluations_reuse_their_connections(tmp_path):
    server = ServerProcess(tmp_path, ["--mdp", "pong", "-m", "mdp.pong.score=1"])
    config = load(["mdp/game/pong.yml"], [f"mdp.game.address={server.address}", f"mdp.game.secret={server.secret}",
                                           "sample.envs=4"])
    actor = Actor(config, 0, own_process=False)
    evaluations = [actor.evaluate(4) for _ in range(3)]
    actor.close()
    counters = server.stop()
    assert [len(results) for results in evaluations] == [4, 4, 4]
    assert all(result["opponent"] == "rule" and not result["capped"] for results in evaluations for result in results)
    assert counters["connections"] == 3         # the hello, then the evaluation loop's 2 connections, kept


def test_lost_episodes_are_counted_by_the_learner_and_left_out_of_its_results(tmp_path):
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--drop-rate", "0.01"])
    config = game_config(server, "ray.local_mode=true", "sample.envs=16", "sample.truncation=16", "train.batch=512",
                         "mdp.game.timeout=0.2", f"root={tmp_path / 'run'}", "evaluator.progress=false")
    learner = Learner(config)
    learner.start_actors()
    try:
        with learner.fleet.gather.gathering("sample"):
            stats = [learner.step() for _ in range(4)]
    finally:
        learner.close()
        server.stop()
    assert stats[-1]["env/lost_timeout"] >= 1
    assert learner.training["episodes"] >= 1
    assert np.isfinite(learner.training["fitness"])


@pytest.mark.slow
def test_ppo_learns_cartpole_behind_a_server_with_latency(tmp_path):
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--latency", "2ms", "--jitter", "1ms"])
    completed = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "-c", "mdp/game/cartpole.yml", "rl/ppo.yml", "-m",
         f"mdp.game.address={server.address}", f"mdp.game.secret={server.secret}", f"root={tmp_path / 'run'}",
         "sample.envs=64", "evaluator.interval=5", "evaluator.terminate=self.fitness >= 475 or self.cost > 1000000"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    server.stop()
    evaluations = [float(m) for m in re.findall(r"fitness ([-\d.e+]+) over", completed.stderr)]
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert max(evaluations) >= 475, completed.stderr[-3000:]


def test_a_tuple_observation_travels_from_a_game_server_to_the_actor(tmp_path):
    """Blackjack-v1's observation is a Tuple (player sum, dealer card, usable ace): served, described, conformed and
    flattened as the gymnasium adapter does it."""
    server = ServerProcess(tmp_path, ["--env", "Blackjack-v1"])
    actor = Actor(game_config(server, "sample.envs=4", "sample.truncation=8"), 0, own_process=False)
    segment = actor.sample()
    actor.close()
    server.stop()
    assert segment["observations"].shape == (8, 4, 32 + 11 + 2)      # one-hot parts side by side


@pytest.mark.slow
def test_a_server_that_dies_and_comes_back_shows_in_the_console_with_the_cause(tmp_path):
    port = free_port()
    first = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--latency", "2ms"], port=port)
    training = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), "-c", "mdp/game/cartpole.yml", "-m",
         f"mdp.game.address={first.address}", f"mdp.game.secret={first.secret}", f"root={tmp_path / 'run'}",
         "evaluator.interval=2", "evaluator.terminate=self.time > 20"], stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not (tmp_path / "run" / "evaluations.csv").exists() and time.monotonic() < deadline:
        time.sleep(0.2)                                     # training runs: episodes are in flight on the server
    first.process.kill()                                    # SIGKILL mid-episode
    first.process.wait(10)
    second = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--latency", "2ms"], port=port, secret=first.secret)
    _, console = training.communicate(timeout=120)
    second.stop()
    assert training.returncode == 0, console[-3000:]
    assert re.search(r"game server: 127\.0\.0\.1:\d+ closed the connection", console), console[-3000:]
    assert re.search(r"\| lost \d+: disconnected \d+", console), console[-3000:]


def test_a_game_whose_bot_is_built_in_says_its_win_rate_without_naming_an_opponent(tmp_path):
    """The server plays seat 1 itself (the trainer sees one seat): the trainer chose no opponent, so the evaluation
    line does not say "vs rule"."""
    server = ServerProcess(tmp_path, ["--mdp", "pong", "--bot", "1"])
    learner = Learner(load(["mdp/game/pong.yml"], [f"mdp.game.address={server.address}",
                                                    f"mdp.game.secret={server.secret}", "ray.local_mode=true"]))
    line = learner.evaluation_line({"fitness": 1.0, "episodes": 4.0, "win": 0.5})
    learner.close()
    server.stop()
    assert line.endswith("win rate 50%")
