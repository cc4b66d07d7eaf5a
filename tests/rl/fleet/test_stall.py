"""The learner's view of a stalled iteration (:class:`StallWatch`): nothing said before ``sample.stall``, then one
line naming every actor's progress; NoProgress, with the reason, when not one env step finished."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lamarckian.config import load
from lamarckian.errors import NoProgress
from lamarckian.rl.fleet import stall
from lamarckian.rl.fleet.actor import Actor

from ...games.helpers import ROOT, ServerProcess


class Clock:
    """Seconds the test sets (the watch's only notion of time)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def watch_of(limit: float = 60.0) -> tuple[stall.StallWatch, Clock, list[str]]:
    clock, said = Clock(), []
    watch = stall.StallWatch(said.append, clock)
    watch.begin(4096, limit)
    return watch, clock, said


def progress_report(steps: float, lost: float = 0.0, slowest: float = 0.01) -> dict:
    return stall.report({"steps": steps, "episodes": 2.0, "lanes_ready": 1.0, "lanes": 8.0, "slowest_step": slowest},
                        {"lost": lost, "lost_garbage": lost} if lost else {})


def test_nothing_is_said_before_the_limit():
    watch, clock, said = watch_of()
    clock.now = 59.0
    watch.check(0, [2, 2])
    assert said == []


def test_a_fleet_whose_actors_all_wait_for_ray_says_so_and_is_no_stall():
    watch, clock, said = watch_of()
    clock.now = 200.0                           # past the limit, not one env step: NoProgress without the waiting
    watch.check(0, [], placing=2)
    assert len(said) == 1
    assert "2 replacements wait for Ray to place them" in said[0]


def test_lost_episodes_with_steps_between_them_are_progress():
    watch, clock, _ = watch_of()
    watch.report(0, progress_report(50, lost=10))
    clock.now = 31.0
    watch.check(0, [2])                         # some episodes make steps: a slow run, not a stuck one
    assert watch.moved


def test_a_slow_iteration_names_every_actor_once_per_limit():
    watch, clock, said = watch_of()
    clock.now = 10.0
    watch.report(0, progress_report(300, slowest=1.5))
    watch.segment(0, 512, 3, {"lost_timeout": 4.0})
    clock.now = 61.0
    watch.check(512, [2, 2])
    watch.check(512, [2, 2])             # the same window: said once
    assert len(said) == 1
    assert "actor 0: 512 env steps" in said[0]
    assert "4 lost (timeout 4)" in said[0]
    assert "slowest env step 1.50 s" in said[0]
    assert "actor 1 has sent nothing for 61 s" in said[0]


def test_an_actor_without_a_segment_asked_of_it_waits_for_the_learner():
    watch, clock, said = watch_of()
    watch.segment(0, 512, 0, {})
    clock.now = 61.0
    watch.check(512, [2, 0])
    assert "actor 1 waits for the learner" in said[0]


def test_every_episode_lost_is_no_progress_in_half_the_limit():
    watch, clock, _ = watch_of()
    clock.now = 5.0
    watch.report(0, progress_report(0, lost=1000))
    clock.now = 30.0
    with pytest.raises(NoProgress, match=r"every episode was lost, 1\.00k lost \(garbage 1\.00k\)"):
        watch.check(0, [2])


def test_silent_actors_are_no_progress():
    watch, clock, _ = watch_of()
    clock.now = 60.0
    with pytest.raises(NoProgress, match="no actor has sent anything"):
        watch.check(0, [2, 2])


def test_only_the_iterations_own_losses_are_its_reason():
    watch, clock, _ = watch_of()
    watch.segment(0, 512, 1, {"lost_timeout": 4.0})       # an earlier iteration's
    clock.now = 70.0
    watch.begin(4096, 60.0)
    clock.now = 130.0
    with pytest.raises(NoProgress, match="no actor has sent anything"):
        watch.check(0, [2])


def test_steps_in_the_making_are_progress():
    watch, clock, said = watch_of()
    watch.report(0, progress_report(100))
    clock.now = 30.0
    watch.begin(4096, 60.0)
    watch.report(0, progress_report(200))                  # 100 more since the iteration began
    clock.now = 91.0
    watch.check(0, [2])
    assert "actor 0: 200 env steps" in said[0]


def test_a_replaced_actor_is_forgotten_and_the_others_move_down():
    watch, clock, said = watch_of()
    watch.segment(0, 100, 0, {})
    watch.segment(1, 700, 0, {})
    watch.forget(0)
    clock.now = 61.0
    watch.check(700, [2])
    assert "actor 0: 700 env steps" in said[0]


# ---- with real actors, servers and environments ------------------------------------------------------------------

def train(tmp_path: Path, *edits: str, files: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "train.py"), *(["-c", *files] if files else []), "-m",
               f"root={tmp_path / 'run'}", "evaluator.progress=false", *edits]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_an_actor_reports_how_far_a_slow_segment_got(tmp_path):
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1", "--latency", "100ms"])
    config = load(["mdp/game/cartpole.yml"], [f"mdp.game.address={server.address}", f"mdp.game.secret={server.secret}",
                                              "sample.envs=2", "sample.truncation=64", "sample.stall=4"])
    actor = Actor(config, 0, own_process=False)
    try:
        message = actor.sample()            # 64 steps of 100 ms: not done within the report interval (1 s)
    finally:
        actor.close()
        server.stop()
    assert message[stall.REPORT]["steps"] >= 2


def test_a_server_whose_every_answer_is_malformed_stops_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("LAMARCKIAN_TEST_FLAW", "long_observation")
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1"], module="tests.games.broken_server")
    completed = train(tmp_path, f"mdp.game.address={server.address}", f"mdp.game.secret={server.secret}",
                      "sample.stall=10", files=("mdp/game/cartpole.yml",))
    server.stop()
    assert completed.returncode == 1, completed.stderr[-2000:]
    assert "every episode was lost" in completed.stderr and "garbage" in completed.stderr, completed.stderr[-2000:]


def test_environments_that_never_return_stop_the_run(tmp_path):
    completed = train(tmp_path, "mdp.create=tests.plugins.tasks:Stuck", "mdp.kwargs={after: 3}", "sample.stall=8")
    assert completed.returncode == 1, completed.stderr[-2000:]
    assert "no actor has sent anything" in completed.stderr, completed.stderr[-2000:]


def test_updates_that_stop_while_env_steps_go_on_are_said_with_the_steps_dropped_as_stale():
    watch, clock, said = watch_of()
    watch.segment(0, 2048, 3, {}, dropped=2048)
    clock.now = 61.0
    watch.check(0, [2])
    assert "no update for 61 s (sample.stall=60)" in said[0]
    assert "2.05k env steps came from weights too old for the learner" in said[0]


def test_the_line_names_where_late_episodes_wait_and_for_how_long():
    watch, clock, said = watch_of()
    report = progress_report(300)
    report[stall.REPORT]["late"] = [["game server 127.0.0.1:4242", 3.0, 12.5]]
    watch.report(0, report)
    clock.now = 61.0
    watch.check(300, [2])
    assert "3 episodes wait on game server 127.0.0.1:4242 (the longest 12.5 s)" in said[0]


def test_an_actor_reports_its_late_lanes_and_where_they_wait():
    """A sampler whose one episode has not stepped for longer than mdp.hitch names it in its progress report."""
    actor = Actor(load(["mdp/gym.yml"], ["sample.envs=2", "sample.truncation=8", "sample.sync=false",
                                         "mdp.hitch=0.01"]), 0)
    try:
        actor.sample()
        sampler = actor.sampler
        sampler.clock.stepped[0] -= 5.0                   # lane 0 last stepped 5 s ago (of sampling time)
        late = sampler.progress()["late"]
    finally:
        actor.close()
    assert late[0][:2] == ["CartPole-v1", 1]
