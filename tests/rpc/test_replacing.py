"""Actors that die while they start are replaced and the start tried again (lamarckian.rpc.replacing): real child
processes, one of which dies inside its constructor."""

from __future__ import annotations

import pytest

from lamarckian.rpc import ActorDiedError, All, Any, connect_replacing, join_new
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


def test_a_replacement_that_dies_while_starting_is_replaced_by_another(tmp_path, owned):
    flag = str(tmp_path / "built-once")
    first, discarded = spawn(Echo, 1), []
    someone = Any([first])
    owned["callers"].append(someone)
    joined = join_new(lambda: spawn(Flaky, flag, 5), someone.add, discarded.append)
    owned["children"] += [first, joined, *discarded]
    assert len(discarded) == 1
    assert someone.actors == [first, joined]


def test_an_actor_that_always_dies_ends_the_attempts_with_its_error(tmp_path, owned):
    discarded = owned["children"]
    with pytest.raises(ActorDiedError):
        join_new(lambda: spawn(Flaky, str(tmp_path / "never" / "flag"), 0), lambda h: All([h]), discarded.append,
                 attempts=2)
    assert len(discarded) == 2
