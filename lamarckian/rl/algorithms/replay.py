"""Experience replay for the off-policy learners (issue 17 §1): a numpy ring of n-step transitions, sampled
uniformly or by priority through a sum tree (Schaul et al. 2016: P(i) ∝ p_i^α, importance weights
(N·P(i))^−β normalized by their maximum).

Transitions come from segments ``[T, L]`` (:func:`n_step_transitions`): the n-step window of step ``t`` stops at the
end of its episode (``dones``: terminated or cut by a time limit) or of the segment, and bootstraps from the
observation after the window's last step (none when the episode terminated there).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch


class SumTree:
    """Priorities of ``capacity`` slots in a binary tree of sums: update and prefix-sum search in O(log capacity),
    both vectorized over batches of slots."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a sum tree holds at least 1 slot, got {capacity}")
        self.capacity = capacity
        self.leaves = 1 << (capacity - 1).bit_length()         # a power of two: leaf i is node leaves + i
        self.tree = np.zeros(2 * self.leaves)

    def total(self) -> float:
        return float(self.tree[1])

    def priorities(self, slots: np.ndarray) -> np.ndarray:
        return self.tree[self.leaves + np.asarray(slots)]

    def update(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities (≥ 0) of ``slots``; a slot given twice keeps its last value."""
        slots, priorities = np.asarray(slots, np.int64), np.asarray(priorities, np.float64)
        if np.any(priorities < 0) or not np.all(np.isfinite(priorities)):
            raise ValueError("priorities must be finite and non-negative")
        nodes = self.leaves + slots
        self.tree[nodes] = priorities
        nodes = np.unique(nodes // 2)
        while nodes[0] >= 1:
            self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]
            if nodes[0] == 1:
                break
            nodes = np.unique(nodes // 2)

    def find(self, values: np.ndarray) -> np.ndarray:
        """The slot whose priority interval holds each value in ``[0, total)``: slot i covers
        ``[sum of priorities before i, … + p_i)``; slots of priority 0 are never returned."""
        values = np.array(values, np.float64)
        nodes = np.ones(len(values), np.int64)
        while nodes[0] < self.leaves:
            left = self.tree[2 * nodes]
            right = values >= left
            values = np.where(right, values - left, values)
            nodes = 2 * nodes + right
            stuck = self.tree[nodes] <= 0                    # rounding ran past the last positive child
            nodes = np.where(stuck, nodes ^ 1, nodes)
        return nodes - self.leaves

    def sample(self, count: int, random: np.random.Generator) -> np.ndarray:
        """``count`` slots drawn with probability ∝ priority (stratified: one draw per equal share of the total)."""
        total = self.total()
        if total <= 0:
            raise ValueError("nothing to sample: every priority is 0")
        values = (np.arange(count) + random.random(count)) * (total / count)
        return self.find(np.minimum(values, np.nextafter(total, 0.0)))


def n_step_transitions(rewards: np.ndarray, dones: np.ndarray, truncated: np.ndarray, steps: int, discount: float
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n-step returns of a segment ``[T, L]``: for each step ``t``, ``(return, last, bootstrap)`` where ``return`` is
    ``Σ_k γ^k r_{t+k}`` over the window (at most ``steps`` steps, not past the end of the episode or the segment),
    ``last`` the window's last step (its next observation bootstraps) and ``bootstrap`` ``γ^m`` for a window of ``m``
    steps, or 0 when the episode terminated in it (``dones`` and not ``truncated``)."""
    length, lanes = rewards.shape
    rewards = rewards.astype(np.float64)
    ended = dones.astype(bool)
    returns = np.zeros((length, lanes))
    last = np.zeros((length, lanes), np.int64)
    bootstrap = np.zeros((length, lanes))
    for t in range(length):
        total, scale = np.zeros(lanes), np.ones(lanes)
        open_ = np.ones(lanes, bool)                        # lanes whose window is still growing
        end = np.full(lanes, t)
        for k in range(min(steps, length - t)):
            step = t + k
            total += np.where(open_, scale * rewards[step], 0.0)
            end = np.where(open_, step, end)
            scale = np.where(open_, scale * discount, scale)
            open_ &= ~ended[step]
        terminated = ended[end, np.arange(lanes)] & ~truncated.astype(bool)[end, np.arange(lanes)]
        returns[t], last[t], bootstrap[t] = total, end, np.where(terminated, 0.0, scale)
    return returns, last, bootstrap


class ReplayBuffer:
    """A ring of ``capacity`` n-step transitions ``(observation, action, return, next_observation, bootstrap)``.

    Args:
        capacity: transitions kept (the oldest are overwritten).
        steps, discount: the n of the n-step returns and γ.
        alpha: priority exponent (0: uniform sampling, no sum tree), beta: importance-weight exponent.
        epsilon: added to |TD error| so that no transition's priority is 0.
        seed: the sampling generator's seed.
    """

    FIELDS = ("observations", "actions", "returns", "next_observations", "bootstraps")

    def __init__(self, capacity: int, steps: int = 1, discount: float = 0.99, alpha: float = 0.0, beta: float = 0.4,
                 epsilon: float = 1e-6, seed: int = 0) -> None:
        if capacity < 1 or steps < 1 or not 0 <= alpha or not 0 <= beta <= 1:
            raise ValueError("replay: capacity and steps >= 1, alpha >= 0, 0 <= beta <= 1")
        self.capacity, self.steps, self.discount = capacity, steps, discount
        self.alpha, self.beta, self.epsilon = alpha, beta, epsilon
        self.tree = SumTree(capacity) if alpha > 0 else None
        self.max_priority = 1.0
        self.random = np.random.default_rng(seed)
        self.arrays: dict[str, np.ndarray] = {}
        self.cursor = self.size = 0

    def __len__(self) -> int:
        return self.size

    def add_segment(self, observations: np.ndarray, actions: np.ndarray, rewards: np.ndarray, dones: np.ndarray,
                    truncated: np.ndarray, next_observations: np.ndarray) -> int:
        """Every step of a segment ``[T, L, ...]`` as an n-step transition (``next_observations[t]``: the
        observation after step ``t`` — the episode's last one where it ended). New transitions get the highest
        priority seen so far. Returns how many were added."""
        returns, last, bootstrap = n_step_transitions(rewards, dones, truncated, self.steps, self.discount)
        lanes = np.arange(rewards.shape[1])
        flat = {"observations": observations, "actions": actions, "returns": returns,
                "next_observations": next_observations[last, lanes], "bootstraps": bootstrap}
        flat = {name: np.asarray(value).reshape(-1, *np.asarray(value).shape[2:]) for name, value in flat.items()}
        count = len(flat["returns"])
        if not self.arrays:
            self.arrays = {name: np.zeros((self.capacity, *value.shape[1:]), value.dtype if name not in
                                          ("returns", "bootstraps") else np.float32) for name, value in flat.items()}
        kept = slice(max(0, count - self.capacity), count)        # more than fit: the newest
        slots = ((self.cursor + np.arange(count)) % self.capacity)[kept]
        for name, value in flat.items():
            self.arrays[name][slots] = value[kept]
        if self.tree is not None:
            self.tree.update(slots, np.full(len(slots), self.max_priority ** self.alpha))
        self.cursor = int((self.cursor + count) % self.capacity)
        self.size = min(self.capacity, self.size + count)
        return count

    def sample(self, count: int) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """``count`` transitions: the batch, their slots (for :meth:`update_priorities`) and importance weights
        (all 1 when sampling uniformly)."""
        if self.size == 0:
            raise ValueError("the replay buffer is empty")
        if self.tree is None:
            slots = self.random.integers(self.size, size=count)
            weights = np.ones(count, np.float32)
        else:
            slots = self.tree.sample(count, self.random)
            probabilities = self.tree.priorities(slots) / self.tree.total()
            unscaled = (self.size * probabilities) ** -self.beta
            weights = (unscaled / unscaled.max()).astype(np.float32)
        return {name: array[slots] for name, array in self.arrays.items()}, slots, weights

    def update_priorities(self, slots: np.ndarray, errors: np.ndarray) -> None:
        """New priorities ``(|error| + ε)^α`` of sampled transitions (their TD errors)."""
        if self.tree is None:
            return
        priorities = np.abs(np.asarray(errors, np.float64)) + self.epsilon
        self.max_priority = max(self.max_priority, float(priorities.max()))
        self.tree.update(slots, priorities ** self.alpha)

    def state_dict(self) -> dict[str, Any]:
        """Everything (the transitions included: it can be large) for a checkpoint, arrays as CPU tensors (a
        checkpoint loads with ``weights_only``)."""
        return {"arrays": {name: torch.from_numpy(array) for name, array in self.arrays.items()},
                "cursor": self.cursor, "size": self.size, "max_priority": self.max_priority,
                "tree": torch.from_numpy(self.tree.tree.copy()) if self.tree is not None else None,
                "random": self.random.bit_generator.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.arrays = {name: torch.as_tensor(value).numpy().copy() for name, value in state["arrays"].items()}
        self.cursor, self.size = int(state["cursor"]), int(state["size"])
        self.max_priority = float(state["max_priority"])
        if self.tree is not None and state["tree"] is not None:
            self.tree.tree = torch.as_tensor(state["tree"]).numpy().copy()
        self.random.bit_generator.state = state["random"]
