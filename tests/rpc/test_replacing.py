"""Actors that die while they start are replaced and the start tried again (lamarckian.rpc.replacing): real child
processes, one of which dies inside its constructor."""

from __future__ import annotations

import time

import pytest

from lamarckian.rpc import ActorDiedError, All, Any, Replacements, connect_replacing
from lamarckian.rpc.processes import spawn, warm_up

from .peers import Echo, Flaky


@pytest.fixture(scope="module", autouse=True)
def fork_server():
    warm_up(["numpy", "lamarckian.rpc"])


@pytest.fixture
def owned():
    """Callers and child processes a test made, closed and killed after it."""
    made: dict[str, list] = {"callers": [], "children": []}
    yield made
    for caller in made["callers"]:
        caller.close()
    for child in made["children"]:
        child.kill()


def test_a_new_actor_that_dies_while_starting_is_replaced_in_place(tmp_path, owned):
    flag = str(tmp_path / "built-once")
    handles, discarded = [spawn(Echo, 1), spawn(Flaky, flag, 2)], owned["children"]
    everyone = connect_replacing(handles, All, lambda: spawn(Flaky, flag, 2), discarded.append)
    owned["callers"].append(everyone)
    discarded_count = len(discarded)
    discarded.extend(handles)
    assert everyone("add", 0) == [2, 3]
    assert discarded_count == 1
    assert everyone.actors == handles


def test_a_replacement_that_dies_while_starting_is_replaced_by_another_after_a_backoff(tmp_path, owned):
    flag = str(tmp_path / "built-once")
    first, discarded = spawn(Echo, 1), []
    someone = Any([first])
    owned["callers"].append(someone)
    replacements = Replacements(lambda: spawn(Flaky, flag, 5), someone.add, discarded.append, backoff=(0.2, 1.0))
    replacements.request()
    first_poll = replacements.poll()                 # the first dies while starting: another is due in 0.2 s
    owned["children"] += [first, *discarded]
    deadline = time.monotonic() + 30
    joined: list = []
    while not joined and time.monotonic() < deadline:
        joined = replacements.poll()
    owned["children"] += joined
    assert first_poll == []
    assert len(discarded) == 1
    assert someone.actors == [first, *joined]


def test_the_replacements_of_an_actor_that_always_dies_end_with_its_error(tmp_path, owned):
    discarded = owned["children"]
    replacements = Replacements(lambda: spawn(Flaky, str(tmp_path / "never" / "flag"), 0), lambda h: All([h]),
                                discarded.append, attempts=2, backoff=(0.0, 0.0))
    replacements.request()
    replacements.poll()
    with pytest.raises(ActorDiedError):
        replacements.poll()
    assert len(discarded) == 2


def test_calls_wait_for_a_replacement_while_no_actor_lives_and_the_caller_hears_every_idle_second(owned):
    first = spawn(Echo, 1)
    someone = Any([first])
    owned["callers"].append(someone)
    owned["children"].append(first)
    outcomes = someone.as_completed([("sleep", 30.0), ("sleep", 0.0)], idle=0.2)
    first.kill()
    seen: list = []
    for finished in outcomes:
        seen.append(finished if finished is None else type(finished[1]).__name__)
        if finished is not None and isinstance(finished[1], ActorDiedError):
            someone.remove(first)
        if seen.count(None) >= 3 and len(someone) == 0:          # idle with nobody: a replacement comes
            second = spawn(Echo, 2)
            owned["children"].append(second)
            someone.add(second)
    outcomes_seen = [name for name in seen if name is not None]
    assert outcomes_seen == ["ActorDiedError", "int"]
    assert seen.count(None) >= 3
