"""Actors in child processes without Ray (lamarckian.rpc.processes): served like Ray actors, errors named, deaths
reported, nothing left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from lamarckian.rpc import ActorDiedError, All, Any, Gather
from lamarckian.rpc.processes import spawn, warm_up

from .peers import ClosesToFile, Echo


def broken(tag: int) -> Echo:
    raise ValueError(f"no Echo for tag {tag}")


def gone(pid: int, seconds: float = 10.0) -> bool:
    """Whether process ``pid`` has exited (and been reaped, or is a zombie of another parent) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module", autouse=True)
def fork_server():
    warm_up(["numpy", "lamarckian.rpc"])


def test_children_serve_all_any_and_gather_from_their_own_processes():
    children = [spawn(Echo, tag) for tag in (1, 2)]
    try:
        with All(children) as everyone:
            assert everyone("add", 10) == [12, 13]
            pids = everyone("pid")
            assert os.getpid() not in pids
            assert sorted(pids) == sorted(child.pid for child in children)
            assert everyone("checksum", np.arange(1000, dtype=np.float32)) == [499500.0, 499500.0]
            with Any(everyone.actors) as someone:
                assert someone("add", 0) in (2, 3)
            with Gather(All(children)) as gather, gather.gathering("count"):
                tags: set[int] = set()
                deadline = time.monotonic() + 30.0     # one child may answer many before the other's first, under load
                while tags != {1, 2} and time.monotonic() < deadline:
                    tags.add(gather()[0])
            assert tags == {1, 2}
    finally:
        for child in children:
            child.close()


def test_the_callers_say_where_each_actor_serves():
    children = [spawn(Echo, tag) for tag in (1, 2)]
    try:
        with All(children) as everyone:
            assert everyone.hosts() == ["127.0.0.1", "127.0.0.1"]       # one machine: loopback
    finally:
        for child in children:
            child.close()


def test_a_failing_constructor_is_named_with_its_error():
    child = spawn(broken, 7, name="Broken")
    with pytest.raises(ActorDiedError, match="no Echo for tag 7"):
        All([child])
    child.kill()


def test_a_killed_child_is_an_actor_died_error_naming_its_index():
    children = [spawn(Echo, tag) for tag in (1, 2)]
    everyone = All(children)
    try:
        os.kill(children[1].pid, signal.SIGKILL)
        with pytest.raises(ActorDiedError) as info:
            for _ in range(100):
                everyone("sleep", 0.05)
        assert info.value.index == 1
    finally:
        everyone.close()
        for child in children:
            child.kill()


def test_close_ends_the_child():
    child = spawn(Echo, 3)
    with All([child]) as everyone:
        pid = everyone("pid")[0]
    child.close()
    assert gone(pid)


def test_children_get_one_thread_per_pool_unless_the_user_chose():
    child = spawn(Echo, 5)
    with All([child]) as everyone:
        threads = everyone("environment", "OMP_NUM_THREADS")[0]
    child.close()
    assert threads == os.environ.get("OMP_NUM_THREADS", "1")


def test_children_ignore_ctrl_c():
    child = spawn(Echo, 4)
    with All([child]) as everyone:
        os.kill(child.pid, signal.SIGINT)
        time.sleep(0.2)
        assert everyone("add", 0) == [5]
    child.close()


def test_children_of_a_parent_killed_by_sigkill_exit_without_closing(tmp_path):
    """A crashed parent's calls may still run in its children: they exit at once, without ``close()`` (which
    raced with a running call and raised)."""
    closed = [tmp_path / f"closed-{tag}" for tag in (1, 2)]
    script = textwrap.dedent(f"""
        import sys
        from lamarckian.rpc import All
        from lamarckian.rpc.processes import spawn, warm_up
        from tests.rpc.peers import ClosesToFile

        warm_up(["lamarckian.rpc"])
        children = [spawn(ClosesToFile, path, tag) for tag, path in enumerate({[str(p) for p in closed]!r})]
        everyone = All(children)
        print(*everyone("pid"), flush=True)
        sys.stdin.read()
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    pids = [int(pid) for pid in parent.stdout.readline().split()]
    parent.kill()
    _, said = parent.communicate(timeout=60)
    assert len(pids) == 2, said[-3000:]
    assert [pid for pid in pids if not gone(pid, 60.0)] == [], said[-3000:]
    assert not any(path.exists() for path in closed)


def test_a_child_asked_to_close_runs_close(tmp_path):
    closed = tmp_path / "closed"
    child = spawn(ClosesToFile, str(closed), 1)
    with All([child]) as everyone:
        assert everyone("add", 0) == [2]
    child.close()
    assert closed.read_text() == "closed"


def test_an_exception_leaving_a_gathering_block_is_not_replaced_by_a_death_found_while_stopping():
    """A Ctrl-C (here a ValueError) leaves the ``with gather.gathering(...)`` block while an actor is dead: closing
    the loops finds the death, and the caller still sees its own exception."""
    actors = [spawn(Echo, tag) for tag in range(2)]
    gather = Gather(All(actors))
    try:
        with pytest.raises(ValueError, match="the block's own"):
            with gather.gathering("count"):
                gather()
                os.kill(actors[1].pid, signal.SIGKILL)
                assert gone(actors[1].pid)
                raise ValueError("the block's own")
    finally:
        gather.close()
        for actor in actors:
            actor.close()
