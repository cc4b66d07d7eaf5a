"""evolve.py's engine on a 3-node ray.cluster_utils.Cluster: learners spread over the nodes, the run completes."""

from __future__ import annotations

import json

import pytest

from lamarckian.config import load
from lamarckian.ec import Evolution

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def three_nodes():
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_pbt_across_three_nodes(three_nodes, tmp_path):
    # one learner (0.5 CPU) + its actor (0.5 CPU) fill a 1-CPU node: Ray must spread the 3 learners over the nodes
    config = load(["mdp/gym.yml", "ec/ea/pbt.yml"],
                  ["ec.population=3", "ec.learner_cpus=0.5", "sample.actors=1", "sample.num_cpus=0.5",
                   "sample.envs=8", "sample.truncation=32", "train.batch=512", "sample.eval=4",
                   "ec.train.stopper=self.iteration >= 2", "ec.stop=self.trained >= 6", "train.lr=[1e-4,1e-2]",
                   "evaluator.progress=false", f"ray.address={three_nodes.address}", f"root={tmp_path}"],
                  ranges=True)
    evolution = Evolution(config, tmp_path)
    try:
        members = evolution.run()
    finally:
        evolution.close()
    assert evolution.trained >= 6
    assert len(members) == 3
    rows = [json.loads(line) for line in (tmp_path / "lineage.jsonl").read_text().splitlines()]
    assert len({row["node"] for row in rows}) == 3  # every node trained individuals
