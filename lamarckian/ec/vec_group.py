"""A group of a vectorized population in a learner process of its own (a Ray actor with ``ec.learner_gpus`` GPUs: a
whole GPU, a share of one, or none on a CPU machine): ``ec.learners`` groups of ``ec.population / ec.learners``
members train at the same time, each group as one :class:`~.ondevice_rounds.OnDeviceRounds` on its own device. The
engine sends a group its members (weights, optimizer state, pools) and gets their reports back through our RPC; a group
that dies is replaced and its members trained again from the population's stored state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from .. import rpc
from ..cli import configure_process
from .ondevice_rounds import OnDeviceRounds
from .worker import node_name


@rpc.any
class VecGroupLearner:
    """Trains ``size`` members of a vectorized population a round at a time.

    Args:
        config: the run's base configuration (search ranges resolved).
        size: members in this group (``ec.population / ec.learners``).
        searched: the searched keys.
        index: this group's number (for the lineage's ``learner`` column).
        league_folder: where the group's league tables go (None: nowhere).
        own_process: alone in its process (a Ray actor): it sets the process-wide torch settings.
    """

    def __init__(self, config: Mapping[str, Any], size: int, searched: Sequence[str], index: int,
                 league_folder: str | None = None, *, own_process: bool = True) -> None:
        if own_process:
            configure_process(config)
        self.index = index
        self.rounds = OnDeviceRounds(config, size, searched, Path(league_folder) if league_folder else None)

    def train(self, tasks: Sequence[Mapping[str, Any]],
              opponents: Mapping[int, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
        """One round of the group's members (one task each, as :meth:`Individual.task` gives), with the other
        groups' members (id → model state dict) in a league; their reports."""
        reports = self.rounds.train_round(tasks, opponents)
        for report in reports:
            report.update(learner=self.index, node=node_name())
        return reports

    def close(self) -> None:
        self.rounds.close()
