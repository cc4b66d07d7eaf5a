"""The ``mjx`` physics backend: MuJoCo XLA, every environment in one jitted, vmapped step on a JAX device.

State moves between JAX and torch through DLPack: ``state()`` gives torch views of the JAX arrays (no copy on
CUDA or CPU) and controls go the other way. JAX is imported here only, and told not to pre-allocate 75% of the
GPU (``XLA_PYTHON_CLIENT_PREALLOCATE=false``) so that torch's learner shares the card.

Compilation happens once per (batch size, substeps): 10-30 s on an H100/H200 for the two-ant scene, about as
long on a CPU. Resets are masked (fixed shapes), so they never recompile.
"""

from __future__ import annotations

import os

import torch


def jax_device(device: str):
    """The JAX device matching a torch device string (``cpu``, ``cuda``, ``cuda:1``)."""
    import jax

    parsed = torch.device(device)
    if parsed.type == "cpu":
        return jax.devices("cpu")[0]
    if parsed.type != "cuda":
        raise ValueError(f"mdp.vec.device={device!r}: the mjx backend runs on cpu or cuda")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if len(gpus) <= (parsed.index or 0):
        raise ValueError(f"mdp.vec.device={device!r}: JAX sees {len(gpus)} GPU(s) (a CUDA build of JAX is needed: "
                         "pip install 'jax[cuda12]')")
    return gpus[parsed.index or 0]


class MJXBatch:
    """``num_envs`` copies of one MJCF model stepped by MJX on ``device`` (the interface of
    :class:`~lamarckian.mdp.vec.physics.PhysicsBatch`).

    Args:
        xml: the MJCF text (explicit contact pairs keep MJX fast: it pays for every contact slot).
        num_envs: environments (one compiled step per batch size).
        device: torch device string; tensors handed out live there.
    """

    def __init__(self, xml: str, num_envs: int, device: str = "cpu") -> None:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax
        import jax.numpy as jnp
        import mujoco
        from mujoco import mjx

        self.jax, self.jnp, self.mjx = jax, jnp, mjx
        self.device = torch.device(device)
        self.jax_device = jax_device(device)
        self.num_envs = num_envs
        self.model = mujoco.MjModel.from_xml_string(xml)
        host = mujoco.MjData(self.model)
        mujoco.mj_forward(self.model, host)
        self.mjx_model = mjx.put_model(self.model, device=self.jax_device)
        single = mjx.put_data(self.model, host, device=self.jax_device)
        self.data = jax.jit(jax.vmap(lambda _: single))(jnp.arange(num_envs))
        self._steps: dict[int, object] = {}
        self._reset = jax.jit(self._masked_state)
        # torch buffers handed to JAX calls not yet known to be finished: kept alive until torch next reads the
        # state (that read waits for those calls), so torch's allocator cannot reuse them too early
        self._inputs: tuple[torch.Tensor, ...] = ()

    # ---- jitted pieces ---------------------------------------------------------------------------------------
    def _advance(self, substeps: int):
        if substeps not in self._steps:
            jax, mjx, model = self.jax, self.mjx, self.mjx_model

            def one(data, ctrl):
                data = data.replace(ctrl=ctrl)
                return jax.lax.fori_loop(0, substeps, lambda _, d: mjx.step(model, d), data)

            self._steps[substeps] = jax.jit(jax.vmap(one))
        return self._steps[substeps]

    def _masked_state(self, data, mask, qpos, qvel):
        jnp = self.jnp
        rows = mask[:, None] > 0
        return data.replace(qpos=jnp.where(rows, qpos, data.qpos), qvel=jnp.where(rows, qvel, data.qvel),
                            qacc_warmstart=jnp.where(rows, 0.0, data.qacc_warmstart),
                            time=jnp.where(mask > 0, 0.0, data.time))

    # ---- the PhysicsBatch interface ----------------------------------------------------------------------------
    def _to_jax(self, tensor: torch.Tensor):
        tensor = tensor.detach().to(self.device, torch.float32).contiguous()
        self._inputs += (tensor,)
        return self.jax.dlpack.from_dlpack(tensor)

    def state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``qpos (E, nq)`` and ``qvel (E, nv)`` float32: zero-copy views of the current JAX state (read-only:
        the next step makes new arrays, it does not write into these)."""
        qpos, qvel = torch.from_dlpack(self.data.qpos), torch.from_dlpack(self.data.qvel)
        self._inputs = ()
        return qpos, qvel

    def step(self, ctrl: torch.Tensor, substeps: int) -> None:
        """Set ``ctrl (E, nu)`` and advance ``substeps`` physics steps (one jitted call, asynchronous)."""
        self.data = self._advance(substeps)(self.data, self._to_jax(ctrl))

    def set_state(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Overwrite ``qpos``/``qvel`` rows where ``mask (E,)`` is true; their time and solver warm start restart."""
        self.data = self._reset(self.data, self._to_jax(mask.float()), self._to_jax(qpos), self._to_jax(qvel))

    def close(self) -> None:
        self._steps.clear()
        self._inputs = ()
