"""Physics backends of the vectorized tasks: ``num_envs`` copies of one MJCF model behind one interface.

- :class:`MuJoCoBatch` (``mujoco``): CPU MuJoCo, one ``MjData`` per environment, stepped by ``workers`` processes
  over shared memory; float64 inside, float32 tensors out.
- :class:`~lamarckian.mdp.vec.mjx.MJXBatch` (``mjx``): MJX, every environment in one jitted, vmapped step on the
  JAX device; state handed to torch through DLPack without copies.

Both take and give torch tensors on their ``device``: ``state()`` → ``qpos (E, nq)``, ``qvel (E, nv)`` float32;
``step(ctrl (E, nu), substeps)``; ``set_state(mask (E,), qpos, qvel)`` overwrites the environments where ``mask``
is true (a fixed-shape call: no host synchronization, no recompilation).
"""

from __future__ import annotations

import mmap
import signal
from importlib.util import find_spec
from typing import Any, Protocol

import numpy as np
import torch

BACKENDS = ("mujoco", "mjx")


class PhysicsBatch(Protocol):
    """What a task needs from a physics backend (see the module docstring)."""

    model: Any             # the mujoco.MjModel the batch was compiled from
    num_envs: int
    device: torch.device

    def state(self) -> tuple[torch.Tensor, torch.Tensor]: ...

    def step(self, ctrl: torch.Tensor, substeps: int) -> None: ...

    def set_state(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None: ...

    def close(self) -> None: ...


class _Slice:
    """Some of the environments: their ``MjData`` and the rows ``indices`` of the shared arrays they read their
    controls from and write their state to."""

    def __init__(self, mujoco, model, indices: np.ndarray, arrays: dict[str, np.ndarray]) -> None:
        self.mujoco, self.model, self.indices, self.arrays = mujoco, model, indices, arrays
        self.data = [mujoco.MjData(model) for _ in indices]
        for row, data in zip(indices, self.data):
            mujoco.mj_forward(model, data)
            arrays["qpos"][row], arrays["qvel"][row] = data.qpos, data.qvel

    def step(self, substeps: int) -> None:
        ctrl, qpos, qvel = self.arrays["ctrl"], self.arrays["qpos"], self.arrays["qvel"]
        for row, data in zip(self.indices, self.data):
            data.ctrl[:] = ctrl[row]
            self.mujoco.mj_step(self.model, data, nstep=substeps)
            qpos[row], qvel[row] = data.qpos, data.qvel

    def set_state(self) -> None:
        """Rows whose ``mask`` is set take ``qpos``/``qvel``; time and the solver's warm start restart."""
        mask, qpos, qvel = self.arrays["mask"], self.arrays["qpos"], self.arrays["qvel"]
        for row, data in zip(self.indices, self.data):
            if mask[row]:
                data.qpos[:], data.qvel[:] = qpos[row], qvel[row]
                data.qacc_warmstart[:] = 0.0
                data.time = 0.0
                self.mujoco.mj_forward(self.model, data)


def _serve(connection, mujoco, model, indices: np.ndarray, buffer: mmap.mmap, layout: dict) -> None:
    """A worker process: its slice of the environments, driven by ``(command, argument)`` messages. Ctrl-C is the
    parent's to handle (it saves and closes the workers): the worker ignores SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    piece = _Slice(mujoco, model, indices, _views(buffer, layout))
    connection.send(None)                                 # its initial state is in the shared arrays
    while True:
        command, argument = connection.recv()
        if command == "close":
            return
        piece.step(argument) if command == "step" else piece.set_state()
        connection.send(None)


def _views(buffer: mmap.mmap, layout: dict[str, tuple[int, tuple[int, ...]]]) -> dict[str, np.ndarray]:
    """float64 arrays over ``buffer``: name → (byte offset, shape)."""
    return {name: np.ndarray(shape, np.float64, buffer, offset) for name, (offset, shape) in layout.items()}


class MuJoCoBatch:
    """``num_envs`` copies of one MJCF model on the CPU, stepped by ``workers`` processes: this one steps the first
    share of the environments, forked worker processes the others (each core steps its own; threads would contend
    for Python's lock). Controls and states pass through shared memory, one short message per call and worker.

    Args:
        xml: the MJCF text.
        num_envs: environments.
        workers: processes stepping them, this one included (more than 1 needs ``fork``, as on Linux).
    """

    device = torch.device("cpu")

    def __init__(self, xml: str, num_envs: int, workers: int = 1) -> None:
        import multiprocessing

        import mujoco

        self.model = model = mujoco.MjModel.from_xml_string(xml)
        self.num_envs = num_envs
        shapes = {"ctrl": (num_envs, model.nu), "qpos": (num_envs, model.nq), "qvel": (num_envs, model.nv),
                  "mask": (num_envs,)}
        layout, offset = {}, 0
        for name, shape in shapes.items():
            layout[name] = (offset, shape)
            offset += 8 * int(np.prod(shape))
        self._buffer = mmap.mmap(-1, offset)              # anonymous and shared: forked workers see the same pages
        self.arrays = _views(self._buffer, layout)
        shares = np.array_split(np.arange(num_envs), max(1, min(int(workers), num_envs)))
        self._local = _Slice(mujoco, model, shares[0], self.arrays)
        self._workers = []
        if len(shares) > 1:
            if "fork" not in multiprocessing.get_all_start_methods():
                raise ValueError(f"mdp.vec.workers={workers}: worker processes need fork (Linux); use 1")
            context = multiprocessing.get_context("fork")
            for share in shares[1:]:
                ours, theirs = context.Pipe()
                process = context.Process(target=_serve, args=(theirs, mujoco, model, share, self._buffer, layout),
                                          daemon=True, name="lamarckian-physics")
                process.start()
                theirs.close()
                self._workers.append((process, ours))
            self._answers()

    def _run(self, command: str, substeps: int = 0) -> None:
        """``step`` or ``set`` in every worker and here at once; returns when all are done."""
        for process, connection in self._workers:
            try:
                connection.send((command, substeps))
            except (BrokenPipeError, OSError):
                raise RuntimeError(f"a physics worker process (pid {process.pid}) died") from None
        self._local.step(substeps) if command == "step" else self._local.set_state()
        self._answers()

    def _answers(self) -> None:
        """One answer from every worker (a worker that died: RuntimeError, never a hang)."""
        for process, connection in self._workers:
            try:
                connection.recv()
            except (EOFError, OSError):
                raise RuntimeError(f"a physics worker process (pid {process.pid}) died") from None

    def state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``qpos (E, nq)`` and ``qvel (E, nv)`` float32 (copies)."""
        return (torch.from_numpy(self.arrays["qpos"].astype(np.float32)),
                torch.from_numpy(self.arrays["qvel"].astype(np.float32)))

    def step(self, ctrl: torch.Tensor, substeps: int) -> None:
        """Set ``ctrl`` ``(E, nu)`` and advance ``substeps`` physics steps in every environment."""
        self.arrays["ctrl"][:] = ctrl.detach().cpu().numpy()
        self._run("step", substeps)

    def set_state(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Overwrite positions and velocities where ``mask`` ``(E,)`` is true; time and solver warm start restart."""
        rows = mask.detach().cpu().numpy().astype(bool)
        if not rows.any():
            return
        self.arrays["mask"][:] = rows
        self.arrays["qpos"][rows] = qpos.detach().cpu().double().numpy()[rows]
        self.arrays["qvel"][rows] = qvel.detach().cpu().double().numpy()[rows]
        self._run("set")

    def close(self) -> None:
        for process, connection in self._workers:
            try:
                connection.send(("close", 0))
            except (BrokenPipeError, OSError):
                pass
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
        self._workers = []


def mjx_available() -> bool:
    """Whether MuJoCo XLA (and so JAX) can be imported."""
    return find_spec("jax") is not None and find_spec("mujoco.mjx") is not None


def create_physics(backend: str, xml: str, num_envs: int, device: str, workers: int = 1) -> PhysicsBatch:
    """The ``backend`` batch (``mujoco`` runs on the CPU in ``workers`` processes; ``mjx`` on ``device``)."""
    if backend == "mujoco":
        if torch.device(device).type != "cpu":
            raise ValueError(f"mdp.vec.device={device!r}: the mujoco backend runs on the CPU (use backend mjx)")
        return MuJoCoBatch(xml, num_envs, workers)
    if backend == "mjx":
        if not mjx_available():
            raise ValueError("mdp.vec.backend=mjx needs MuJoCo XLA: pip install 'lamarckian[mjx]' (and on a GPU "
                             "machine 'jax[cuda12]')")
        from .mjx import MJXBatch

        return MJXBatch(xml, num_envs, device)
    raise ValueError(f"mdp.vec.backend={backend!r}: expected one of {BACKENDS} (or isaacgym, through its server)")
