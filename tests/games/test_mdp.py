"""mdp.create: game against a real server process: many episodes over a few connections, and every injected fault
(a crash mid-episode and a restart, late answers, dropped requests, garbage) costing only the episodes it hits,
counted, with nothing hanging."""

from __future__ import annotations

import logging
import time

import pytest

from lamarckian.games import client
from lamarckian.games.mdp import GameMDP

from .helpers import ServerProcess, free_port, play


def counted(mdps: list[GameMDP], name: str) -> float:
    return sum(mdp.counters()[name] for mdp in mdps)


def test_many_episodes_share_a_few_connections(tmp_path):
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--latency", "5ms"])
    mdps = [GameMDP(server.settings(connections=2), seed=i) for i in range(64)]
    counts = play(mdps, 3.0)
    stats = server.stop()
    assert stats["connections"] == 3            # the hello fetched once, then the 2 connections of the loop
    assert counts["finished"] >= 64
    assert counts["lost"] == 0


def test_workers_share_the_listening_socket(tmp_path):
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--workers", "2"])
    mdps = [GameMDP(server.settings(connections=4), seed=i) for i in range(8)]
    counts = play(mdps, 2.0)
    server.stop()
    workers = [line for line in server.errors.splitlines() if line.startswith("{")]
    assert len(workers) == 2
    assert counts["finished"] >= 8
    assert counts["lost"] == 0


def test_pong_seats_left_out_are_played_by_the_server(tmp_path):
    server = ServerProcess(tmp_path, ["--mdp", "pong", "-m", "mdp.pong.score=1"])
    mdps = [GameMDP(server.settings(), seed=i) for i in range(4)]
    counts = play(mdps, 3.0, seats=(1,))
    server.stop()
    assert len(mdps[0].describe()) == 2
    assert counts["finished"] >= 4
    assert counts["lost"] == 0


def test_a_server_crash_mid_episode_loses_those_episodes_and_play_resumes_after_a_restart(tmp_path):
    port = free_port()
    first = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--latency", "2ms", "--crash-after", "300"], port=port)
    mdps = [GameMDP(first.settings(timeout=1.0), seed=i) for i in range(16)]
    before = play(mdps, 2.0)                     # the server dies after 300 steps, mid-episode
    crashed = first.process.wait(10)
    lost = counted(mdps, "lost_disconnected")
    second = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--latency", "2ms"], port=port, secret=first.secret)
    after = play(mdps, 2.0)
    second.stop()
    assert crashed == 3
    assert lost >= 1
    assert before["steps"] >= 300
    assert after["finished"] >= 16


def test_late_answers_are_given_up_after_the_timeout(tmp_path):
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--latency", "1s"])
    mdps = [GameMDP(server.settings(timeout=0.2), seed=i) for i in range(8)]
    started = time.monotonic()
    counts = play(mdps, 1.5)
    elapsed = time.monotonic() - started
    server.stop()
    assert counts["finished"] == 0
    assert counted(mdps, "lost_timeout") >= 8
    assert elapsed < 5


@pytest.mark.parametrize("fault,counter", [("--drop-rate", "lost_timeout"), ("--garbage-rate", "lost_garbage")])
def test_dropped_and_garbled_answers_cost_only_their_episodes(tmp_path, fault, counter):
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1", fault, "0.002"])
    mdps = [GameMDP(server.settings(timeout=0.3), seed=i) for i in range(16)]
    counts = play(mdps, 4.0)
    stats = server.stop()
    assert counted(mdps, counter) >= 1
    assert counts["finished"] >= 32
    assert stats.get("dropped" if fault == "--drop-rate" else "garbage", 0) >= 1


@pytest.fixture
def faults_logged(monkeypatch, caplog):
    """The game client's warnings of this test (the once-per-process memory emptied first)."""
    monkeypatch.setattr(client, "_reported", set())
    caplog.set_level(logging.WARNING, logger="lamarckian.games")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "lamarckian.games"]


def test_the_first_timeout_is_logged_once_naming_the_request_and_the_server(tmp_path, faults_logged):
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--latency", "1s"])
    mdps = [GameMDP(server.settings(timeout=0.2), seed=i) for i in range(8)]
    play(mdps, 1.5)
    server.stop()
    lines = [line for line in faults_logged() if "within mdp.game.timeout" in line]
    assert len(lines) == 1
    assert "no answer to 'reset' of episode" in lines[0]
    assert server.address.removeprefix("tcp://") in lines[0]


def test_an_answer_for_an_episode_nobody_asked_about_is_logged_once(tmp_path, monkeypatch, faults_logged):
    monkeypatch.setenv("LAMARCKIAN_TEST_FLAW", "swap_ids")
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1"], module="tests.games.broken_server")
    mdps = [GameMDP(server.settings(timeout=0.3), seed=i) for i in range(1)]
    play(mdps, 1.0)
    server.stop()
    lines = [line for line in faults_logged() if "waits for no answer" in line]
    assert len(lines) == 1



def crossing(tmp_path) -> list[GameMDP]:
    """Play against a server answering in 0.6 s with a 0.2 s timeout: every answer crosses the trainer's ``close``."""
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--latency", "0.6s"])
    mdps = [GameMDP(server.settings(timeout=0.2), seed=i) for i in range(4)]
    play(mdps, 1.5)
    server.stop()
    return mdps


def test_an_answer_that_crosses_the_trainers_close_is_no_fault(tmp_path, faults_logged):
    """The server answered a request the trainer had just given up: it could not know, so nothing calls it a fault
    (before: logged as an answer for an episode that waits for none)."""
    crossing(tmp_path)
    assert [line for line in faults_logged() if "waits for no answer" in line] == []


def test_the_crossing_answers_do_arrive(tmp_path, caplog):
    """The test above is not vacuous: the given-up episodes' answers reach the trainer within its window."""
    caplog.set_level(logging.DEBUG, logger="lamarckian.games")
    crossing(tmp_path)
    assert any("after the trainer gave it up" in record.getMessage() for record in caplog.records)


def test_more_environments_than_the_server_allows_wait_for_a_free_episode(tmp_path):
    """hello's max_episodes (4 per connection, 2 connections) against 16 environments: the other 8 wait for a free
    episode instead of asking for one the server must refuse (before: refused, lost as errors)."""
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--max-episodes", "4"])
    mdps = [GameMDP(server.settings(connections=2), seed=i) for i in range(16)]
    counts = play(mdps, 2.0)
    stats = server.stop()
    assert (counts["lost"], stats.get("errors", 0)) == (0, 0)
