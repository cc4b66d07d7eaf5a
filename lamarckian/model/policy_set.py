"""Several policies' networks as one module (``rl.policies``: a policy per role of an asymmetric game)."""

from __future__ import annotations

from typing import Iterator, Mapping

from torch import nn


class PolicySet(nn.ModuleDict):
    """One network per policy, in the order given: its weight blob (:func:`~lamarckian.model.to_blob`) is the
    members' blobs one after the other, its ``state_dict`` holds every member's under ``<policy>.``, so weight
    broadcasts, checkpoints and snapshots carry all the policies at once.

    Args:
        members: policy name → its network (an :class:`~lamarckian.model.ActorCritic`).
    """

    def __init__(self, members: Mapping[str, nn.Module]) -> None:
        super().__init__(dict(members))

    def members(self) -> Iterator[tuple[str, nn.Module]]:
        """``(policy name, network)`` in blob order."""
        return iter(self.items())
