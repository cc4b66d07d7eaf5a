"""Dead actors removed from a Gather or an Any are let go: nothing keeps their handles (and, for child processes,
their pipes) alive. bench/chaos.py found the learner's open files growing by 2 with every replaced actor."""

from __future__ import annotations

import gc
import os
import signal
import time
import weakref

import pytest

from lamarckian.rpc import ActorDiedError, All, Any, Gather
from lamarckian.rpc.processes import spawn, warm_up

from .peers import Echo


@pytest.fixture(scope="module", autouse=True)
def fork_server():
    warm_up(["numpy", "lamarckian.rpc"])


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def replace_first(gather: Gather, children: list) -> weakref.ref:
    """SIGKILL the first child while it streams, remove it when its death arrives, add a new one; a weak
    reference to the dead one's handle."""
    os.kill(children[0].pid, signal.SIGKILL)
    while True:
        try:
            gather()
        except ActorDiedError as error:
            dead = children.pop(error.index)
            break
    gather.remove(dead)
    dead.kill()
    children.append(spawn(Echo, len(children) + 10))
    gather.add(children[-1])
    return weakref.ref(dead)


def test_replacing_dead_actors_of_a_gather_keeps_no_handle_and_no_file():
    children = [spawn(Echo, tag) for tag in (1, 2)]
    gather = Gather(All(children), credits=2)
    try:
        with gather.gathering("slow_count"):
            replace_first(gather, children)
            gc.collect()
            before = open_files()
            dead = [replace_first(gather, children) for _ in range(3)]
            gc.collect()
            deadline = time.monotonic() + 10.0     # libzmq closes a socket's descriptor on its own thread
            while open_files() != before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert open_files() == before
            assert not any(ref() for ref in dead)
    finally:
        gather.close()
        for child in children:
            child.kill()


def test_a_dead_actor_removed_from_an_any_is_not_kept():
    children = [spawn(Echo, tag) for tag in (1, 2)]
    someone = Any(children)
    try:
        outcomes = someone.as_completed([("sleep", 0.5), ("sleep", 0.5)])
        os.kill(children[0].pid, signal.SIGKILL)
        died = [outcome for _, outcome in outcomes if isinstance(outcome, ActorDiedError)]
        dead = children.pop(died[0].index)
        someone.remove(dead)
        dead.kill()
        reference = weakref.ref(dead)
        del dead, died, outcomes
        gc.collect()
        assert reference() is None
    finally:
        someone.close()
        for child in children:
            child.kill()
