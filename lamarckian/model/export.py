"""A trained policy as a deterministic ONNX graph for deployment (``export.py --onnx``).

The graph takes ``observation`` ``(N, D)`` float32 (the flat vector :class:`~.observation.ObservationBatcher` makes;
images ``(N, C, H, W)`` uint8) and returns ``action``, what the environment takes (``(N, A)`` float32 inside the
bounds, or ``(N,)`` int64 for discrete actions; a factorised action's row ``(N, D)``: each categorical's choice with
its start added, then the Gaussian parts inside their bounds, in :mod:`.actions`' order), and ``policy_action``, the
same action as the learner stores it (SAC: in ``[-1, 1]``; PPO: the Gaussian mean before clipping; discrete: the
index), which a remote worker running the graph records in its segments. Observation normalization is inside the
graph.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium
import numpy as np
import torch
from torch import nn

from .network import ActorCritic
from .offpolicy import QNetwork, SquashedGaussianPolicy

OPSET = 18


class DeterministicPolicy(nn.Module):
    """``observation → (action, policy_action)`` of a feed-forward :class:`ActorCritic`, :class:`QNetwork` or
    :class:`SquashedGaussianPolicy` (the action evaluation games play: the mean, or the arg-max)."""

    low: torch.Tensor      # buffers of a continuous policy: the action bounds ``(A,)``
    high: torch.Tensor
    start: torch.Tensor    # a factorised policy's: each categorical part's first value ``(C,)``

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        if not isinstance(model, (ActorCritic, QNetwork, SquashedGaussianPolicy)):
            raise TypeError(f"cannot export a {type(model).__name__}")
        if getattr(model, "state_size", 0):
            raise ValueError("a recurrent policy (model.recurrent) cannot be exported yet: its state would be an "
                             "input and an output of the graph")
        self.model = model
        self.discrete = bool(model.discrete)
        self.factored = model.factored if isinstance(model, ActorCritic) else None
        if self.factored is not None:      # each categorical's start, the Gaussian parts' bounds side by side
            self.register_buffer("start", torch.tensor([part.start for part in self.factored.categorical]))
            bounds = [(part.low, part.high) for part in self.factored.continuous]
            self.register_buffer("low", torch.as_tensor(np.concatenate([b[0] for b in bounds]) if bounds else
                                                        np.zeros(0), dtype=torch.float32))
            self.register_buffer("high", torch.as_tensor(np.concatenate([b[1] for b in bounds]) if bounds else
                                                         np.zeros(0), dtype=torch.float32))
        elif not self.discrete:
            space = model.action_space
            assert isinstance(space, gymnasium.spaces.Box)
            self.register_buffer("low", torch.as_tensor(space.low, dtype=torch.float32).reshape(-1))
            self.register_buffer("high", torch.as_tensor(space.high, dtype=torch.float32).reshape(-1))

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        model = self.model
        if isinstance(model, QNetwork):
            index = model(observation).argmax(-1)
            return index, index
        if isinstance(model, SquashedGaussianPolicy):
            squashed = torch.tanh(model.parameters_of(observation)[0])
            return self._scaled(squashed), squashed
        out = model.action_mean(model.outputs(observation)[0])
        if self.factored is not None:
            return self._factored(out)
        if self.discrete:
            index = out.argmax(-1)
            return index, index
        if model.settings.bound == "tanh":
            return self._scaled(torch.tanh(out)), out
        return torch.minimum(torch.maximum(out, self.low), self.high), out

    def _factored(self, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A factorised action: each categorical's most likely index (``start`` added in ``action``), then the
        Gaussian means (inside their bounds in ``action``), in :mod:`.actions`' row order."""
        assert self.factored is not None and isinstance(self.model, ActorCritic)
        policy_action = self.factored.draw(out, getattr(self.model, "log_std", None), True, None)[0]
        columns = len(self.factored.categorical)
        chosen = policy_action[:, :columns] + self.start.to(policy_action.dtype)
        if not self.factored.gaussian:
            return chosen, policy_action
        means = policy_action[:, columns:]
        bounded = self._scaled(torch.tanh(means)) if self.model.settings.bound == "tanh" else \
            torch.minimum(torch.maximum(means, self.low), self.high)
        return torch.cat([chosen, bounded], -1), policy_action

    def _scaled(self, squashed: torch.Tensor) -> torch.Tensor:
        """``[-1, 1]`` to the action space's bounds."""
        return self.low + (squashed + 1.0) * 0.5 * (self.high - self.low)


def export_onnx(model: nn.Module, path: Path) -> Path:
    """Write ``model``'s deterministic policy to ``path`` (a batch dimension of any size); the path."""
    policy = DeterministicPolicy(model).eval()
    batcher = policy.model.batcher
    example = torch.zeros((2, *batcher.shape), dtype=torch.uint8 if batcher.stored_as_bytes else torch.float32)
    batch = torch.export.Dim("batch")
    program = torch.onnx.export(policy, (example,), dynamo=True, input_names=["observation"],
                                output_names=["action", "policy_action"], dynamic_shapes=({0: batch},),
                                opset_version=OPSET, verbose=False)
    if program is None:
        raise RuntimeError("torch.onnx.export returned no program")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    program.save(str(path))
    return path
