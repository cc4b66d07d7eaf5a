"""The memory a run on the actor fleet will take, estimated before anything is started, and the refusal of a run that
would not fit in the machine's free memory (one line naming the keys that size it).

The big items are the observations: every actor keeps the segments it is making and those it sent that the learner
has not released (``sample.credits``), one step per lane of ``sample.truncation``; the learner holds a batch of
``train.batch`` env steps and re-scores it in float chunks (images travel and are stored as ``uint8``); the
off-policy learners keep a replay of ``train.replay.capacity`` transitions (an observation and the next one each);
and every process (the learner, the actors, the evaluation actor) holds a Python with torch.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping, cast

import numpy as np
import torch

from ...config.sections import RLSettings, SampleSettings, TrainSettings
from ...model.observation import ObservationBatcher
from ...model.policy_set import PolicySet
from ..algorithms.replay_settings import ReplaySettings
from ..policies import Roles

PROCESS_BYTES = 400 << 20         # a process with torch, numpy and the package imported, before any data (measured)
STEP_OVERHEAD = 64                # bytes of a lane step beside its observation (action, log-probability, value...)
FLOAT_CHUNK = 256 << 20           # the learner's re-scoring converts at most this much to float at once (ppo.score)
FREE_SHARE = 0.9                  # a run may plan on this share of the machine's free memory


def size_text(nbytes: float) -> str:
    """``17.8 GB`` (decimal units)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes:.0f} B"


@dataclasses.dataclass(frozen=True)
class Footprint:
    """Bytes by what holds them (the order of :meth:`line`)."""

    parts: dict[str, float]
    sizing: str               # the keys that set the largest part

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def line(self) -> str:
        """``about 17.8 GB: the actors' segments 12.1 GB, ...``."""
        parts = ", ".join(f"{name} {size_text(value)}" for name, value in self.parts.items() if value)
        return f"about {size_text(self.total)} ({parts})"


def estimate(observation_bytes: int, lanes_per_env: int, sample: SampleSettings, batch: int, replay: int,
             next_observations: bool) -> Footprint:
    """The footprint of a fleet run.

    Args:
        observation_bytes: one lane step's observation as it is stored (``uint8`` images, ``float32`` vectors).
        lanes_per_env: learner seats recorded per environment (every seat with ``rl.shared_seats``).
        sample: the actor fleet's size (actors, environments, segment length, segments in flight).
        batch: ``train.batch`` env steps.
        replay: ``train.replay.capacity`` transitions (0: an on-policy learner).
        next_observations: lanes keep the next observation too (the off-policy learners).
    """
    step = observation_bytes * (2 if next_observations else 1) + STEP_OVERHEAD
    segments = sample.actors * (sample.credits + 1) * sample.envs * lanes_per_env * sample.truncation * step
    learner = batch * step + min(FLOAT_CHUNK, batch * observation_bytes * 4)
    replayed = replay * (2 * observation_bytes + STEP_OVERHEAD)
    processes = (sample.actors + 2) * PROCESS_BYTES      # the actors, the learner, the evaluation actor
    parts = {"the actors' segments": float(segments), "the learner's batch": float(learner),
             "the replay": float(replayed), "the processes": float(processes)}
    largest = max(parts, key=lambda name: parts[name])
    sizing = {"the actors' segments": "sample.envs, sample.truncation, sample.credits or sample.actors",
              "the learner's batch": "train.batch", "the replay": "train.replay.capacity",
              "the processes": "sample.actors"}[largest]
    return Footprint(parts, sizing)


def free_memory() -> int | None:
    """Bytes the machine can give a new run now (``MemAvailable``); None where the kernel does not say."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check(footprint: Footprint, free: int | None) -> None:
    """ValueError (a usage error: exit 2) when ``footprint`` would not fit in :data:`FREE_SHARE` of ``free``."""
    if free is not None and footprint.total > FREE_SHARE * free:
        raise ValueError(f"this run needs {footprint.line()}, the machine has {size_text(free)} free: lower "
                         f"{footprint.sizing}")


def observation_bytes(model: torch.nn.Module) -> int:
    """Bytes of one observation as the lanes store it: ``uint8`` images, ``float32`` vectors (the largest of a
    policy set's networks)."""
    members = [member for _, member in model.members()] if isinstance(model, PolicySet) else [model]
    sizes = []
    for member in members:
        batcher = cast(ObservationBatcher, member.batcher)
        count = int(np.prod(batcher.shape))
        sizes.append(count if batcher.stored_as_bytes else 4 * count)
    return max(sizes)


def of_run(config: Mapping[str, Any], model: torch.nn.Module, seats: int, roles: Roles | None,
           off_policy: bool) -> Footprint:
    """:func:`estimate` for the learner of ``config`` with network ``model`` on an MDP of ``seats`` seats."""
    sample, train = SampleSettings.from_config(config), TrainSettings.from_config(config)
    if RLSettings.from_config(config).shared_seats:
        lanes = seats
    elif roles is not None:
        lanes = max(len(roles.seats_of(name)) for name in roles.names)
    else:
        lanes = 1
    replay = ReplaySettings.from_config(config).capacity if off_policy else 0
    return estimate(observation_bytes(model), lanes, sample, train.batch, replay, off_policy)
