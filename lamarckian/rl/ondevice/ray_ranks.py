"""One vectorized learner over several GPUs or nodes through Ray (``train.ranks: N`` where Ray is installed): N
Ray actors, ``train.rank_gpus`` GPUs and ``train.rank_cpus`` CPUs each, anywhere in the cluster, join one
``torch.distributed`` group (rank 0's node address, a free port there) and train exactly as torchrun's ranks do
(:mod:`.learner`, :mod:`..distributed`): rank 0 evaluates and writes the run directory, which every rank reads to
resume.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any, Mapping

from ...cli import configure_process
from ..distributed import Ranks
from ..loop import TrainingLoop


class RankWorker:
    """Rank ``rank`` of ``size`` (a Ray actor; its methods run on threads so that :meth:`stop` reaches a training
    one)."""

    def __init__(self, config: Mapping[str, Any], rank: int, size: int, own_gpu: bool) -> None:
        configure_process(config)
        self.config, self.rank, self.size, self.own_gpu = config, rank, size, own_gpu
        self.stopping = threading.Event()

    def endpoint(self) -> str:
        """``tcp://<this node's address>:<a free port>`` for the group's rendezvous (asked of rank 0)."""
        import ray

        host = ray.util.get_node_ip_address()
        with socket.socket() as probe:
            probe.bind((host, 0))
            return f"tcp://{host}:{probe.getsockname()[1]}"

    def train(self, root: str, address: str) -> dict[str, float]:
        """Join the group, resume from ``root`` if it holds a checkpoint, train to ``evaluator.terminate`` (or
        :meth:`stop`); the last evaluation's summary (rank 0's)."""
        from .learner import OnDeviceLearner

        ranks = Ranks(self.rank, self.size, address=address, own_gpu=self.own_gpu)
        trainer = OnDeviceLearner(self.config, ranks)
        try:
            loop = TrainingLoop(trainer, Path(root))
            loop.resume()
            evaluator = trainer.evaluator
            return loop.run(stop=lambda t: self.stopping.is_set() or
                            evaluator.should_stop(t.cost, t.iteration, t.elapsed, t.training))
        finally:
            trainer.close()

    def stop(self) -> None:
        """End the training at the next iteration (rank 0's flag decides; the loop then saves)."""
        self.stopping.set()


def train_on_ranks(config: Mapping[str, Any], root: Path, size: int, gpus: float, cpus: float) -> dict[str, float]:
    """Train on ``size`` Ray actors (Ray started); Ctrl-C stops every rank at its next iteration (rank 0 saves), then
    KeyboardInterrupt goes on."""
    import ray

    options: dict[str, Any] = {"num_cpus": cpus, "num_gpus": gpus, "max_restarts": 0, "max_concurrency": 2}
    remote: Any = ray.remote(**options)(RankWorker)
    workers = [remote.remote(dict(config), rank, size, gpus >= 1) for rank in range(size)]
    try:
        address = ray.get(workers[0].endpoint.remote())
        runs = [worker.train.remote(str(root), address) for worker in workers]
        try:
            return ray.get(runs)[0]
        except KeyboardInterrupt:
            ray.get([worker.stop.remote() for worker in workers])
            ray.get(runs)
            raise
    finally:
        for worker in workers:
            ray.kill(worker)
