"""The actor-fleet learner's update on several GPUs (``train.gpus: N``): ranks 1 … N−1 are Ray actors, one GPU each
(CPU processes where ``train.device`` is cpu), holding replicas of the network and of PPO. Every update the learner
(rank 0) sends each its share of the batch's lanes (only its own) and all take the data-parallel step of
:mod:`.distributed` (the step one process would take on the whole batch), so the replicas stay equal to the learner's
network. The actors that sample are unchanged: they act on CPUs anywhere in the cluster.
"""

from __future__ import annotations

import copy
import socket
from typing import Any, Mapping, Protocol, Sequence

import numpy as np
import torch

from ... import rpc
from ...config.sections import RunSettings, TrainSettings
from ...mdp import create_mdp
from ...model import to_blob
from ...model.network import seeded
from ..algorithms.base import UpdateRule
from ..algorithms.build import build_model
from ..algorithms.ppo import PPO
from ..algorithms.ppo_settings import PPOSettings
from ..distributed import Ranks
from ..policies import Roles, roles_of
from ..segment import ARRAYS, Segment


def split_lanes(segments: Sequence[Segment], parts: int) -> list[Segment]:
    """The segments (``[T, L_i]`` each, one ``T``) joined along the lanes and cut into ``parts`` equal shares, rank
    ``r`` the ``r``-th (lanes beyond a multiple of ``parts`` are left out); each share's version is the oldest."""
    joined: dict[str, Any] = {name: np.concatenate([getattr(segment, name) for segment in segments], axis=1)
                              for name in ARRAYS}
    lanes = joined["rewards"].shape[1] // parts
    if lanes < 1:
        raise ValueError(f"a batch of {joined['rewards'].shape[1]} lanes cannot be shared by {parts} ranks")
    version = min(segment.version for segment in segments)
    return [Segment(**{name: array[:, part * lanes:(part + 1) * lanes] for name, array in joined.items()},
                    version=version, steps=0) for part in range(parts)]


def learner_device(config: Mapping[str, Any]) -> torch.device:
    """Where the learner's network and update live (``train.device``; auto: the GPU where there is one). The actors
    always act on CPUs."""
    device = TrainSettings.from_config(config).device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"train.device={device}: no CUDA device here (use auto or cpu)")
    return torch.device(device)


def learner_network(config: Mapping[str, Any]) -> tuple[torch.nn.Module, int, Roles | None]:
    """The learner's network, initialized from ``config.seed``, on ``train.device``; the MDP's seat count; which
    policy plays which seat (``rl.policies``; None: one for all)."""
    seed = RunSettings.from_config(config).seed
    probe = create_mdp(config["mdp"], seed=seed)
    try:
        with seeded(seed):
            return build_model(probe, config).to(learner_device(config)), len(probe), roles_of(probe, config)
    finally:
        probe.close()


@rpc.all
class UpdateRank:
    """Rank ``rank`` of the learner's update (a Ray actor). It builds no environment and reads no configuration: the
    learner hands down its network and its update's settings.

    Args:
        model: a copy of the learner's network on the CPU (moved here to ``device``): the replica.
        settings: the learner's PPO settings (PPO's or IMPALA's); ``seed`` seeds PPO's minibatch stream (the
            learner's state replaces it at :meth:`load`).
        device: ``cpu`` or ``cuda`` (this rank's own GPU).
        threads: torch's CPU threads in this process.
        rank, size: this rank and the number of ranks (the learner is rank 0).
        address: the learner's ``tcp://host:port`` for the group's rendezvous; ``timeout``: seconds to wait for the
            others there (``train.rank_timeout``).
    """

    def __init__(self, model: torch.nn.Module, settings: PPOSettings, seed: int, device: str, threads: int,
                 rank: int, size: int, address: str, timeout: float) -> None:
        torch.set_num_threads(threads)
        torch.manual_seed(seed)
        self.model = model.to(device)
        ranks = Ranks(rank, size, address=address, own_gpu=True)
        ranks.join(ranks.backend(torch.device(device).type), timeout)
        self.ppo = PPO(self.model, settings, seed=seed, ranks=ranks)

    def update(self, share: Mapping[str, Any], version: int, cost: int, lr: float) -> None:
        """This rank's share of the step the learner takes now (its lanes of the batch, wire form; at the learner's
        learning rate)."""
        self.ppo.set_lr(lr)
        self.ppo.update([Segment.from_wire(share)], version, cost)

    def load(self, state: Mapping[str, Any]) -> None:
        """The learner's weights and optimizer state (after a resume or a new individual)."""
        self.model.load_state_dict(state["model"])
        self.ppo.load_state_dict(state)

    def weights(self) -> np.ndarray:
        """The replica's weights as a blob."""
        return to_blob(self.model)


class RankedUpdate(UpdateRule, Protocol):
    """A data-parallel update rule (:attr:`Algorithm.data_parallel`: PPO, IMPALA): its network, its settings, and
    the ranks its gradients are averaged over (None: alone)."""

    model: torch.nn.Module
    settings: PPOSettings
    ranks: Ranks | None


class UpdateGroup:
    """The learner's side: it joins the group as rank 0 and drives the other ranks.

    Args:
        train: the ``train`` section (``gpus`` ranks in all, ``rank_timeout``).
        rpc_settings: how the learner talks to the other ranks.
        ppo: the learner's update rule (PPO's or IMPALA's; its network is rank 0's replica, and each other rank
            starts from a copy of it; it becomes data-parallel).
        seed: the run's seed; ``threads``: torch's CPU threads in each other rank.
        local: the other ranks are objects of this process (``--debug``): refused, a rank is a process.
    """

    def __init__(self, train: TrainSettings, rpc_settings: rpc.RpcSettings, ppo: RankedUpdate, seed: int,
                 threads: int, local: bool) -> None:
        import ray

        size = train.gpus
        if local:
            raise ValueError(f"train.gpus={size} needs Ray processes (each update rank is one); --debug runs in one")
        device = next(ppo.model.parameters()).device
        host = ray.util.get_node_ip_address()
        with socket.socket() as probe:
            probe.bind((host, 0))
            address = f"tcp://{host}:{probe.getsockname()[1]}"
        remote: Any = ray.remote(num_cpus=1, num_gpus=1 if device.type == "cuda" else 0, max_restarts=0)(UpdateRank)
        replica = copy.deepcopy(ppo.model).cpu()
        self.handles = [remote.remote(replica, ppo.settings, seed, device.type, threads, rank, size, address,
                                      train.rank_timeout) for rank in range(1, size)]
        self.ranks = Ranks(0, size, address=address, own_gpu=True)
        self.ranks.join(self.ranks.backend(device.type), train.rank_timeout)
        self.ranks.sync_parameters(ppo.model)             # as every replica's PPO does on construction
        ppo.ranks = self.ranks
        self.ppo = ppo
        self.others = rpc.All(self.handles, settings=rpc_settings)

    def load(self, state: Mapping[str, Any]) -> None:
        """Give every replica the learner's state."""
        self.others("load", {key: state[key] for key in ("model", "optimizer", "lr", "ppo_generator")})

    def update(self, segments: Sequence[Segment], version: int, cost: int) -> dict[str, float]:
        """The data-parallel step on ``segments``: each other rank sent its own share only (``1/N`` of the batch's
        bytes each), rank 0's taken here; its statistics."""
        shares = split_lanes(segments, self.ranks.size)
        self.others.scatter("update", [(share.to_wire(), version, cost, self.ppo.lr) for share in shares[1:]])
        stats = self.ppo.update([shares[0]], version, cost)
        self.others.wait()
        return stats

    def weights(self) -> list[np.ndarray]:
        """Every other replica's weights (to check they equal the learner's)."""
        return self.others("weights")

    def close(self) -> None:
        import ray
        import torch.distributed as dist

        self.others.close()
        for handle in self.handles:
            ray.kill(handle)
        if dist.is_initialized():
            dist.destroy_process_group()
