"""All / Any / Gather on plain local objects: semantics, errors, and a clean close."""

from __future__ import annotations

import gc
import os
import threading
import time

import numpy as np
import pytest

from lamarckian.rpc import All, Any, Gather, RemoteError
from lamarckian.util.rpc import All as SeedAll
from lamarckian.util.rpc.wrap import gather as seed_gather

from .peers import Echo, Holder, OnlyAll


def test_all_calls_every_actor_in_order_with_args_and_kwargs():
    with All([Echo(1), Echo(2), Echo(3)]) as everyone:
        assert everyone("add", 10, y=5) == [16, 17, 18]
        results = everyone("echo", np.arange(3), key={"nested": (np.ones(2),)})
        assert [r["tag"] for r in results] == [1, 2, 3]
        assert isinstance(results[0]["args"], tuple)
        np.testing.assert_array_equal(results[2]["kwargs"]["key"]["nested"][0], np.ones(2))


def test_remote_exception_carries_type_message_traceback_and_actor():
    with All([Echo(1)]) as everyone:
        with pytest.raises(RemoteError) as info:
            everyone("fail", "bad input")
        error = info.value
        assert error.type_name == "builtins.ValueError"
        assert error.remote_message == "bad input"
        assert "raise ValueError(message)" in error.remote_traceback
        assert error.actor.startswith("Echo(pid=")
        assert everyone("add", 1) == [3]  # still serving


def test_unsendable_results_private_and_missing_methods_are_remote_errors():
    with Any([Echo()]) as someone:
        with pytest.raises(RemoteError, match="cannot send builtins.set"):
            someone("unsendable")
        with pytest.raises(RemoteError, match="private method"):
            someone("_private")
        with pytest.raises(RemoteError, match="AttributeError"):
            someone("no_such_method")


def test_broadcast_is_fire_and_check():
    with All([Echo(), Echo()]) as everyone:
        assert everyone.broadcast("add", 1) is None
        everyone.wait()
        everyone.broadcast("fail", "late")
        with pytest.raises(RemoteError, match="late"):
            everyone.wait()
        everyone.broadcast("sleep", 2.0)
        started = time.monotonic()
        everyone.check()  # does not block (it would take the 2 s of the sleeps)
        assert time.monotonic() - started < 1.0
        everyone.wait()


def test_scatter_sends_each_actor_its_own_arguments_only():
    arrays = [np.full(1 << 18, tag, np.float32) for tag in (1, 2)]       # 1 MiB each
    with All([Holder(), Holder()], settings={"local": "off"}) as everyone:
        sent = everyone.link.bytes_sent
        assert everyone.scatter("hold", [(array,) for array in arrays]) is None
        everyone.wait()
        sent = everyone.link.bytes_sent - sent
        assert everyone("held") == [float(1 << 18), float(2 << 18)]
        assert sent < 1.5 * sum(array.nbytes for array in arrays)          # a broadcast of both: twice that


def test_scatter_wants_one_argument_list_per_actor():
    with All([Echo(), Echo()]) as everyone:
        with pytest.raises(ValueError, match="1 argument lists for 2 actors"):
            everyone.scatter("add", [(1,)])


def test_any_map_keeps_actors_busy_in_both_orders():
    with Any([Echo(0), Echo(100)]) as someone:
        assert sorted(someone("add", 1) for _ in range(4)) in ([2, 2, 102, 102], [2, 102, 102, 102], [2, 2, 2, 102])
        ordered = list(someone.map(("sleep", 0.05 * (i % 3)) for i in range(8)))
        assert len(ordered) == 8
        values = list(someone.map([("add", i, 0) for i in range(10)]))
        assert [v % 100 for v in values] == list(range(10))
        unordered = list(someone.map([("sleep", 0.3), ("sleep", 0.0), ("sleep", 0.0)], ordered=False))
        assert sorted(unordered) == sorted(unordered)
        assert len(unordered) == 3
        started = time.monotonic()
        list(someone.map([("sleep", 1.0)] * 4))
        assert time.monotonic() - started < 3.0  # two actors in parallel: 2 s, not 4 s


def test_unordered_map_yields_fast_results_first():
    with Any([Echo(0), Echo(100)]) as someone:
        results = list(someone.map([("sleep", 0.4), ("add", 1, 0)], ordered=False))
        assert results[0] in (1, 101)


def test_gather_streams_with_back_pressure_and_stops():
    actors = [Echo(1), Echo(2)]
    with Gather(All(actors), credits=2) as gather:
        with gather.gathering("count"):
            items = [gather() for _ in range(20)]
            assert {tag for tag, _ in items} == {1, 2}
            time.sleep(0.2)
            for actor in actors:  # consumed + credits at most: the loop waits for the caller
                consumed = sum(1 for tag, _ in items if tag == actor.tag)
                assert actor.produced <= consumed + 2
        produced = [actor.produced for actor in actors]
        time.sleep(0.1)
        assert [actor.produced for actor in actors] == produced  # stopped
        with gather.gathering("fail", "in loop"):
            with pytest.raises(RemoteError, match="in loop"):
                gather()


def held_gather(release: bool) -> int:
    """How many items one actor with one credit made after its first was taken while holding (and, with
    ``release``, its credit returned)."""
    actor = Echo(1)
    with Gather(All([actor]), credits=1) as gather, gather.gathering("count"):
        gather.holding = True
        gather()
        if release:
            gather.release()
        time.sleep(0.2)
        return actor.produced


def test_a_held_credit_stops_the_actor_after_its_item_in_flight():
    assert held_gather(release=False) == 1           # the one taken: its credit is not back


def test_a_released_credit_lets_the_actor_go_on():
    assert held_gather(release=True) == 2


def test_in_flight_counts_the_credits_the_actors_hold():
    with Gather(All([Echo(1), Echo(2)]), credits=2) as gather, gather.gathering("count"):
        gather.holding = True
        gather()
        assert gather.in_flight() == 3


def test_in_flight_counts_one_actors_credits():
    with Gather(All([Echo(1), Echo(2)]), credits=2) as gather, gather.gathering("count"):
        gather.holding = True
        index, _ = gather.receive()
        assert (gather.in_flight(index), gather.in_flight(1 - index)) == (1, 2)


def test_releasing_one_held_credit_keeps_the_others_held():
    actor = Echo(1)
    with Gather(All([actor]), credits=2) as gather, gather.gathering("count"):
        gather.holding = True
        gather()
        gather()
        gather.release(0, 1)
        assert gather.in_flight(0) == 1


def test_decorator_checks_and_seed_import_paths():
    with pytest.raises(TypeError, match="not decorated with @any"):
        Any([OnlyAll()])
    with pytest.raises(TypeError, match="not decorated"):
        All([object()])
    with SeedAll([OnlyAll()]) as everyone:
        assert everyone("ping") == ["pong"]
    assert seed_gather(type("Local", (), {})).__lamarckian_rpc_patterns__ == frozenset({"gather"})


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_close_returns_threads_and_file_descriptors_to_baseline():
    """Nothing the calls started is left: no thread, no descriptor beyond those there before (one of those may end
    meanwhile: a thread of an earlier test winding down)."""
    gc.collect()
    threads, fds = set(threading.enumerate()), _fds()
    for _ in range(3):
        actors = [Echo(1), Echo(2)]
        gather = Gather(All(actors))
        with gather.gathering("count"):
            gather()
        with Any(actors) as someone:
            someone("add", 1)
        gather.close()
    gc.collect()
    assert set(threading.enumerate()) - threads == set()
    assert _fds() - fds == set()


def test_stopping_a_gather_waits_for_a_step_longer_than_the_timeout():
    with Gather(All([Echo(4)], settings={"timeout": 0.3, "heartbeat": 0.1})) as gather:
        gather.gathering("sleep", 0.8)
        assert gather() == 4
        gather.gathering(None)  # the second 0.8 s step is running: stop waits for it, no error
        with pytest.raises(RuntimeError, match="not gathering"):
            gather()
