"""Data-parallel training over ranks (``torch.distributed``): each rank samples its own share of the environments,
and the update is the one a single process would take on the whole batch.

:class:`Ranks` is this process's place in the group (``torchrun`` sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``/``MASTER_PORT``); gloo on CPUs, NCCL on GPUs. The helpers reduce what the update needs so that
every rank takes the same step: gradient sums, running-normalizer moments, minibatch advantage moments, statistics.

The batch layout: a rank holds ``L`` of the ``E = N × L`` lanes (environments) of a ``[T, E]`` rollout, rank ``r``
lanes ``r·L … r·L + L − 1``; flattened step-major, global sample ``t·E + e`` is rank ``e // L``'s local sample
``t·L + e % L``. Minibatches are drawn from one global permutation (the same generator on every rank), so N ranks
see exactly the minibatches one process would (``tests/rl/test_distributed.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
from typing import Iterator

import torch
import torch.distributed as dist


class RankLostError(RuntimeError):
    """A collective failed because another rank is gone."""


@dataclasses.dataclass(frozen=True)
class Ranks:
    """This process among ``size`` ranks (``rank`` 0 writes files and decides)."""

    rank: int
    size: int
    local_rank: int = 0
    address: str | None = None          # rank 0's tcp://host:port (None: torchrun's MASTER_ADDR / MASTER_PORT)
    own_gpu: bool | None = None         # every rank has a GPU of its own (None: as many GPUs as local ranks)

    @property
    def main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_environment(cls) -> "Ranks | None":
        """The group ``torchrun`` describes in the environment (None: not started by it, or alone)."""
        size = int(os.environ.get("WORLD_SIZE", "1"))
        if size <= 1:
            return None
        return cls(int(os.environ["RANK"]), size, int(os.environ.get("LOCAL_RANK", "0")))

    def device(self, device_type: str) -> torch.device:
        """This rank's device of ``device_type``: a GPU per local rank (ranks share GPUs round-robin when the node
        has fewer GPUs than ranks)."""
        if device_type != "cuda":
            return torch.device(device_type)
        return torch.device(f"cuda:{self.local_rank % max(1, torch.cuda.device_count())}")

    def backend(self, device_type: str) -> str:
        """NCCL where every local rank has a GPU of its own, else gloo (NCCL refuses two ranks on one GPU; gloo
        reduces CUDA tensors through the host)."""
        own_gpu = self.own_gpu
        if own_gpu is None:
            own_gpu = torch.cuda.device_count() >= int(os.environ.get("LOCAL_WORLD_SIZE", str(self.size)))
        return "nccl" if device_type == "cuda" and own_gpu else "gloo"

    def join(self, backend: str, timeout: float) -> None:
        """Join the process group (``timeout`` seconds: a collective a dead rank never enters fails then)."""
        if not dist.is_initialized():
            dist.init_process_group(backend, init_method=self.address, rank=self.rank, world_size=self.size,
                                    timeout=datetime.timedelta(seconds=timeout))

    def leave(self, timeout: float = 30.0) -> None:
        """Wait (``timeout`` seconds at most) for every rank to be done, then leave the process group. A rank that
        exits while the others still use the group dies in the interpreter's teardown (SIGABRT, "terminate called
        without an active exception") about every second time on 2 cores."""
        if not dist.is_initialized():
            return
        try:
            if dist.get_backend() == "gloo":
                dist.monitored_barrier(timeout=datetime.timedelta(seconds=timeout))
            else:
                dist.barrier()
        except (RuntimeError, dist.DistBackendError):      # another rank died: nobody to wait for
            pass
        dist.destroy_process_group()

    # ---- collectives ------------------------------------------------------------------------------------------
    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over the ranks, in place (and returned)."""
        with self._collective("a sum"):
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def broadcast(self, tensor: torch.Tensor) -> torch.Tensor:
        """Rank 0's ``tensor`` on every rank, in place (and returned)."""
        with self._collective("a broadcast"):
            dist.broadcast(tensor, src=0)
        return tensor

    @contextlib.contextmanager
    def _collective(self, what: str) -> Iterator[None]:
        """RankLostError naming this rank when a collective fails (another rank died, or hung past the timeout)."""
        try:
            yield
        except (RuntimeError, dist.DistBackendError) as error:
            raise RankLostError(f"rank {self.rank} of {self.size}: {what} over the ranks failed: another rank died "
                                f"or hung past train.rank_timeout ({str(error).splitlines()[0][:200]})") from error

    def decide(self, decision: bool, device: torch.device | str = "cpu") -> bool:
        """Rank 0's ``decision`` on every rank (each rank passes its own; only rank 0's counts)."""
        return bool(self.broadcast(torch.tensor([float(decision)], device=device)).item())

    def sync_parameters(self, module: torch.nn.Module) -> None:
        """Rank 0's parameters and buffers on every rank."""
        with torch.no_grad():
            for tensor in [*module.parameters(), *module.buffers()]:
                self.broadcast(tensor.data)

    def sum_gradients(self, parameters: list[torch.nn.Parameter]) -> None:
        """Each gradient summed over the ranks (one flat buffer; a missing gradient counts as zeros)."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
        flat = self.sum(torch.cat([g.reshape(-1) for g in grads]))
        offset = 0
        for parameter, grad in zip(parameters, grads):
            parameter.grad = flat[offset:offset + grad.numel()].view_as(grad).clone()
            offset += grad.numel()

    def moments(self, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Mean, population variance (per feature) and count of ``batch (n, ...)`` taken over every rank's rows."""
        count = self.sum(torch.tensor(float(batch.shape[0]), device=batch.device, dtype=batch.dtype))
        mean = self.sum(batch.sum(0)) / count
        var = self.sum((batch - mean).square().sum(0)) / count
        return mean, var, count


def owned_samples(global_index: torch.Tensor, lanes: int, ranks: Ranks) -> tuple[torch.Tensor, torch.Tensor]:
    """Of the global sample indices ``global_index``, those on this rank (a bool mask) and their local indices
    (for every entry; meaningful where the mask holds). ``lanes``: this rank's lanes ``L``."""
    width = lanes * ranks.size
    step, lane = global_index // width, global_index % width
    return lane // lanes == ranks.rank, step * lanes + lane % lanes
