"""Physics backends of the vectorized tasks: ``num_envs`` copies of one MJCF model behind one interface.

- :class:`MuJoCoBatch` (``mujoco``): CPU MuJoCo, one ``MjData`` per environment, stepped by a thread pool
  (``mj_step`` releases the GIL); float64 inside, float32 tensors out.
- :class:`~lamarckian.mdp.vec.mjx.MJXBatch` (``mjx``): MJX, every environment in one jitted, vmapped step on the
  JAX device; state handed to torch through DLPack without copies.

Both take and give torch tensors on their ``device``: ``state()`` → ``qpos (E, nq)``, ``qvel (E, nv)`` float32;
``step(ctrl (E, nu), substeps)``; ``set_state(mask (E,), qpos, qvel)`` overwrites the environments where ``mask``
is true (a fixed-shape call: no host synchronization, no recompilation).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from typing import Protocol, Sequence

import numpy as np
import torch

BACKENDS = ("mujoco", "mjx")


class PhysicsBatch(Protocol):
    """What a task needs from a physics backend (see the module docstring)."""

    model: object          # the mujoco.MjModel the batch was compiled from
    num_envs: int
    device: torch.device

    def state(self) -> tuple[torch.Tensor, torch.Tensor]: ...

    def step(self, ctrl: torch.Tensor, substeps: int) -> None: ...

    def set_state(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None: ...

    def close(self) -> None: ...


class MuJoCoBatch:
    """``num_envs`` copies of one MJCF model on the CPU.

    Args:
        xml: the MJCF text.
        num_envs: environments.
        threads: worker threads for stepping (1: step in the calling thread).
    """

    device = torch.device("cpu")

    def __init__(self, xml: str, num_envs: int, threads: int = 1) -> None:
        import mujoco

        self.mujoco = mujoco
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.data = [mujoco.MjData(self.model) for _ in range(num_envs)]
        for data in self.data:
            mujoco.mj_forward(self.model, data)
        self.num_envs = num_envs
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        self.chunks = np.array_split(np.arange(num_envs), max(1, threads))

    def state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``qpos (E, nq)`` and ``qvel (E, nv)`` float32 (copies)."""
        qpos = np.stack([d.qpos for d in self.data]).astype(np.float32)
        qvel = np.stack([d.qvel for d in self.data]).astype(np.float32)
        return torch.from_numpy(qpos), torch.from_numpy(qvel)

    def step(self, ctrl: torch.Tensor, substeps: int) -> None:
        """Set ``ctrl`` ``(E, nu)`` and advance ``substeps`` physics steps in every environment."""
        controls = ctrl.detach().cpu().numpy().astype(np.float64)

        def run(indices: Sequence[int]) -> None:
            for i in indices:
                data = self.data[i]
                data.ctrl[:] = controls[i]
                self.mujoco.mj_step(self.model, data, nstep=substeps)

        if self.pool is None:
            run(range(self.num_envs))
        else:
            list(self.pool.map(run, self.chunks))

    def set_state(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Overwrite positions and velocities where ``mask`` ``(E,)`` is true; time and solver warm start restart."""
        positions, velocities = qpos.detach().cpu().double().numpy(), qvel.detach().cpu().double().numpy()
        for i in np.flatnonzero(mask.cpu().numpy()):
            data = self.data[int(i)]
            data.qpos[:] = positions[i]
            data.qvel[:] = velocities[i]
            data.qacc_warmstart[:] = 0.0
            data.time = 0.0
            self.mujoco.mj_forward(self.model, data)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def mjx_available() -> bool:
    """Whether MuJoCo XLA (and so JAX) can be imported."""
    return find_spec("jax") is not None and find_spec("mujoco.mjx") is not None


def create_physics(backend: str, xml: str, num_envs: int, device: str, threads: int = 1) -> PhysicsBatch:
    """The ``backend`` batch (``mujoco`` runs on the CPU whatever ``device`` says; ``mjx`` on ``device``)."""
    if backend == "mujoco":
        if torch.device(device).type != "cpu":
            raise ValueError(f"mdp.vec.device={device!r}: the mujoco backend runs on the CPU (use backend mjx)")
        return MuJoCoBatch(xml, num_envs, threads)
    if backend == "mjx":
        if not mjx_available():
            raise ValueError("mdp.vec.backend=mjx needs MuJoCo XLA: pip install 'lamarckian[mjx]' (and on a GPU "
                             "machine 'jax[cuda12]')")
        from .mjx import MJXBatch

        return MJXBatch(xml, num_envs, device)
    raise ValueError(f"mdp.vec.backend={backend!r}: expected one of {BACKENDS} (or isaacgym, through its server)")
