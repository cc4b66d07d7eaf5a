"""Physics backends of the vectorized tasks. ``MuJoCoBatch``: CPU MuJoCo, one ``MjData`` per environment,
stepped by a thread pool (``mj_step`` releases the GIL)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np


class MuJoCoBatch:
    """``num_envs`` copies of one MJCF model.

    Args:
        xml: the MJCF text.
        num_envs: environments.
        threads: worker threads for stepping (1: step in the calling thread).
    """

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

    @property
    def qpos(self) -> np.ndarray:
        """``(num_envs, nq)`` positions (a copy)."""
        return np.stack([d.qpos for d in self.data])

    @property
    def qvel(self) -> np.ndarray:
        """``(num_envs, nv)`` velocities (a copy)."""
        return np.stack([d.qvel for d in self.data])

    def step(self, ctrl: np.ndarray, substeps: int) -> None:
        """Set ``ctrl`` ``(num_envs, nu)`` and advance ``substeps`` physics steps in every environment."""
        def run(indices: Sequence[int]) -> None:
            for i in indices:
                data = self.data[i]
                data.ctrl[:] = ctrl[i]
                self.mujoco.mj_step(self.model, data, nstep=substeps)

        if self.pool is None:
            run(range(self.num_envs))
        else:
            list(self.pool.map(run, self.chunks))

    def set_state(self, env_ids: Sequence[int], qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Overwrite positions and velocities of ``env_ids`` (rows of ``qpos``/``qvel``) and recompute kinematics."""
        for row, i in enumerate(env_ids):
            data = self.data[int(i)]
            data.qpos[:] = qpos[row]
            data.qvel[:] = qvel[row]
            data.time = 0.0
            self.mujoco.mj_forward(self.model, data)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
