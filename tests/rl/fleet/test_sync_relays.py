"""``sample.sync`` across Ray nodes: the weights reach the actors of another node through its relay while the
credits go to each actor directly, so the learner waits for the weights to arrive before it hands out the credits;
otherwise a credit overtakes the weights and the actor samples the next batch's segment with the old ones."""

from __future__ import annotations

import pytest

from lamarckian.config import load
from lamarckian.rl.fleet.learner import Learner

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_nodes():
    """A Ray cluster on this machine: the head (no CPU for actors: the learner's node) and one more node with 2
    CPUs, where both actors go (a remote node holding two targets gets a relay under rpc.relay auto)."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    cluster.add_node(num_cpus=2)
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    yield cluster.address
    ray.shutdown()
    cluster.shutdown()


def test_every_segment_comes_from_its_batchs_weights_through_a_relay(two_nodes):
    config = load(["mdp/gym.yml", "mdp/gym/cartpole.yml"],
                  [f"ray.address={two_nodes}", "ray.launch=ray", "sample.actors=2", "sample.num_cpus=1",
                   "sample.envs=4", "sample.truncation=16", "train.batch=256", "sample.sync=true",
                   "model.hidden=[16]", "evaluator.episodes=0"])
    learner = Learner(config)
    try:
        with learner.running():
            stats = [learner.step() for _ in range(8)]
        relayed = learner.fleet.everyone.link._relays.relayed
    finally:
        learner.close()
    assert relayed > 0                                        # the weights did cross through a relay
    assert max(s["staleness_max"] for s in stats) == 0
