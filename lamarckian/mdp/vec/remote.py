"""The ``isaacgym`` backend: a :class:`VecTask` whose environments live in another process —
``tools/isaacgym_server.py`` running a real Isaac Gym task in Isaac Gym's own Python — reached through Lamarckian's
RPC framing (msgpack body, arrays as raw frames, HMAC-SHA256 over every frame with the key the server wrote; nothing
is unpickled).

Tensors come back on the CPU (one copy per step each way); the learner moves them to its device.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from ...rpc import All
from ...rpc.errors import RPCError
from ...rpc.settings import RpcSettings
from .base import VecTask


class ServerEndpoint:
    """What the RPC layer needs to connect to a server it did not start: its address."""

    def __init__(self, address: str) -> None:
        self.address = address

    def _lamarckian_rpc_start(self, secret: bytes, settings: Mapping[str, Any]) -> dict[str, Any]:
        return {"address": self.address, "name": f"isaacgym server {self.address}", "node": "", "pid": 0,
                "patterns": ["all"], "curve_public_key": None}

    def __repr__(self) -> str:
        return f"isaacgym server {self.address}"


def read_key(path: str | os.PathLike) -> bytes:
    """The shared key the server wrote (hex); a clear error naming the file otherwise."""
    file = Path(path).expanduser()
    try:
        key = bytes.fromhex(file.read_text().strip())
    except FileNotFoundError:
        raise ValueError(f"mdp.vec.isaacgym.key_file={str(path)!r}: no such file (start isaacgym_server.py "
                         "first: it writes the key there)") from None
    except ValueError:
        raise ValueError(f"mdp.vec.isaacgym.key_file={str(path)!r}: not a hex key written by isaacgym_server.py") \
            from None
    if len(key) < 16:
        raise ValueError(f"mdp.vec.isaacgym.key_file={str(path)!r}: the key is shorter than 16 bytes")
    return key


class RemoteVecTask(VecTask):
    """A task served by ``tools/isaacgym_server.py`` at ``address``; tensors on the CPU."""

    device = torch.device("cpu")

    def __init__(self, address: str, key: bytes, timeout: float = 60.0) -> None:
        settings = RpcSettings.defaults(timeout=float(timeout), bulk_mac="hmac-sha256")
        self.address = address
        try:
            self.server = All([ServerEndpoint(address)], settings=settings, secret=key)
            spec = self._call("spec")
        except RPCError as error:
            raise ConnectionError(f"isaacgym server {address}: {error}") from None
        self.spec = spec
        self.num_envs, self.num_agents = int(spec["num_envs"]), int(spec["num_agents"])
        self.num_obs, self.num_actions = int(spec["num_obs"]), int(spec["num_actions"])
        self.max_episode_length = int(spec["max_episode_length"])

    @classmethod
    def connect(cls, settings: Mapping[str, Any], num_envs: int, seed: int = 0) -> "RemoteVecTask":
        """From the ``mdp.vec.isaacgym`` section; the server's environment count must be ``num_envs``."""
        if not settings.get("address") or not settings.get("key_file"):
            raise ValueError("mdp.vec.backend=isaacgym needs mdp.vec.isaacgym.address and .key_file (printed and "
                             "written by isaacgym_server.py)")
        task = cls(str(settings["address"]), read_key(settings["key_file"]), float(settings["timeout"]))
        if task.num_envs != num_envs:
            task.close()
            raise ValueError(f"isaacgym server {task.address} runs {task.num_envs} environments, mdp.vec.num_envs asks "
                             f"for {num_envs}")
        return task

    def _call(self, name: str, *args: Any) -> Any:
        return self.server(name, *args)[0]

    def reset(self) -> torch.Tensor:
        return torch.from_numpy(np.array(self._call("reset"), dtype=np.float32))

    def reset_idx(self, env_ids: torch.Tensor) -> None:
        self._call("reset_idx", np.asarray(torch.as_tensor(env_ids).cpu(), dtype=np.int64))

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        observations, reward, done, extras = self._call(
            "step", actions.detach().to("cpu", torch.float32).contiguous().numpy())
        as_tensor = lambda array, dtype: torch.from_numpy(np.array(array, dtype=dtype))  # noqa: E731 (own copy)
        return (as_tensor(observations, np.float32), as_tensor(reward, np.float32), as_tensor(done, np.bool_),
                {name: as_tensor(value, np.bool_ if name in ("win", "lose", "draw", "time_outs") else None)
                 for name, value in extras.items()})

    def close(self) -> None:
        self.server.close()
