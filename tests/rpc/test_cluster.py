"""A 3-node Ray cluster on this machine (ray.cluster_utils.Cluster): All, Any, Gather across nodes,
and a broadcast that crosses to each remote node once through its relay."""

from __future__ import annotations

import time

import numpy as np
import pytest

from lamarckian.rpc import ActorDiedError, All, Any, Gather, RpcSettings
from lamarckian.rpc.wire import Trust

from .peers import Echo

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    yield ray, [node.node_id for node in workers]
    ray.shutdown()
    cluster.shutdown()


def place(ray, node_id: str, tag: int):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
    return ray.remote(num_cpus=0)(Echo).options(scheduling_strategy=strategy).remote(tag)


def test_all_any_gather_across_three_nodes_with_relays(cluster):
    ray, worker_nodes = cluster
    head = ray.get_runtime_context().get_node_id()
    nodes = [head, worker_nodes[0], worker_nodes[0], worker_nodes[1], worker_nodes[1]]
    actors = [place(ray, node, tag) for tag, node in enumerate(nodes)]
    assert ray.get([actor.node.remote() for actor in actors]) == nodes

    everyone = All(actors, settings=RpcSettings.defaults(relay="auto"))
    # the head's actor trusts its authenticated connection; links to other nodes tag every message
    assert [c.trust for c in everyone.link.connections] == [Trust.CHANNEL] + [Trust.SEALED] * 4
    blob = np.random.default_rng(0).random(2**20)  # 8 MB
    sent_before = everyone.link.bytes_sent
    assert everyone("checksum", blob) == pytest.approx([blob.sum()] * 5)
    sent = everyone.link.bytes_sent - sent_before
    assert everyone.link._relays.relayed == 2  # one relay per remote node, each got one copy
    assert 3 * blob.nbytes <= sent < 3.1 * blob.nbytes  # head actor + 2 relays, not 5 copies
    assert everyone("add", 1, 0) == [1, 2, 3, 4, 5]
    stats = relay_stats(ray, everyone)
    assert [each["relayed"] for each in stats] == [2, 2]
    assert [each["local_targets"] for each in stats] == [2, 2]     # the fan-out is node-local, not TCP
    assert [each["streamed"] for each in stats] == [2, 2]          # both calls came on the bulk stream

    with Any(actors) as someone:
        assert sorted(someone.map([("add", 0, 0)] * 10)) == sorted(someone.map([("add", 0, 0)] * 10))
        assert set(someone.map([("sleep", 0.2)] * 10, ordered=False)) == {0, 1, 2, 3, 4}

    gather = Gather(everyone)
    with gather.gathering("count"):
        assert tags_gathered(gather, {0, 1, 2, 3, 4}) == {0, 1, 2, 3, 4}
    gather.close()


def test_curve_links_between_nodes_trust_the_encrypted_connection(cluster):
    ray, worker_nodes = cluster
    actors = [place(ray, node, tag) for tag, node in enumerate(worker_nodes * 2)]
    with All(actors, settings=RpcSettings.defaults(curve=True)) as everyone:
        assert [c.trust for c in everyone.link.connections] == [Trust.CHANNEL] * 4
        blob = np.arange(1 << 18, dtype=np.float32)
        assert everyone("checksum", blob) == pytest.approx([float(blob.sum(dtype=np.float64))] * 4)
        assert everyone.link._relays.relayed == 2
        assert [stats.get("streams", 0) for stats in relay_stats(ray, everyone)] == [0, 0]    # not on encrypted links
        with Gather(everyone) as gather, gather.gathering("count"):
            assert tags_gathered(gather, {0, 1, 2, 3}) == {0, 1, 2, 3}


def tags_gathered(gather: Gather, expected: set[int], most: int = 20_000) -> set[int]:
    """The actors' tags among gathered items, drawn until every expected one came or ``most`` were drawn (an actor
    that a loaded machine starts late still has to take part, but may miss the first dozens of items)."""
    seen: set[int] = set()
    for _ in range(most):
        seen.add(gather()[0])
        if seen >= expected:
            break
    return seen


def relay_stats(ray, everyone: All) -> list[dict]:
    return [ray.get(handle.stats.remote()) for handle, _ in everyone.link._relays._by_node.values()]


def test_with_node_local_channels_off_the_relay_fans_out_over_tcp(cluster):
    ray, worker_nodes = cluster
    actors = [place(ray, worker_nodes[0], tag) for tag in range(2)]
    with All(actors, settings=RpcSettings.defaults(relay="always", local="off")) as everyone:
        blob = np.arange(1 << 18, dtype=np.float32)
        assert everyone("checksum", blob) == pytest.approx([float(blob.sum(dtype=np.float64))] * 2)
        assert [stats["tcp_targets"] for stats in relay_stats(ray, everyone)] == [2]


def test_a_target_killed_behind_a_relay_is_named_dead(cluster):
    ray, worker_nodes = cluster
    actors = [place(ray, worker_nodes[1], tag) for tag in range(2)]
    with All(actors, settings=RpcSettings.defaults(relay="always")) as everyone:
        blob = np.arange(1 << 18, dtype=np.float32)          # large enough to travel in shared memory
        assert len(everyone("checksum", blob)) == 2
        ray.kill(actors[1])
        deadline, died = time.monotonic() + 60, None
        while died is None and time.monotonic() < deadline:
            try:
                everyone("checksum", blob)
            except ActorDiedError as error:
                died = error
        assert died is not None
        assert died.index == 1
