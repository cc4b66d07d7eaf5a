"""Hyper-parameter search spaces: every config key given ``[lo, hi]`` (``-m train.lr=[0,0.01]``) is a dimension.

A dimension is real or integer by the type of the key's default in lamarckian.yml, and linear or (listed in
``ec.log``) logarithmic. Variation operators work on the unit interval (:meth:`Dimension.to_unit`), so SBX and
polynomial mutation treat a log-scaled learning rate by orders of magnitude.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Iterator, Mapping

import numpy as np

from ..config import DEFAULTS, ConfigError, lookup
from ..config.loader import read_yaml

#: config sections whose keys may be searched (they are a learner's own; the rest is shared by the run).
SEARCHABLE = ("mdp", "model", "rl", "sample", "train")


@dataclasses.dataclass(frozen=True)
class Dimension:
    """One searched key: ``lo <= value <= hi``; ``integer`` values are rounded; ``log`` works in log space."""

    key: str
    lo: float
    hi: float
    integer: bool = False
    log: bool = False

    def __post_init__(self) -> None:
        if not self.lo <= self.hi:
            raise ConfigError(f"{self.key}: search range [{self.lo}, {self.hi}] is empty (lo > hi)")
        if self.log and self.lo <= 0:
            raise ConfigError(f"{self.key} is in ec.log but its range [{self.lo}, {self.hi}] reaches 0 or below")

    def to_unit(self, value: float) -> float:
        """The value's position in the range, 0 at ``lo`` and 1 at ``hi`` (log scale for ``log``)."""
        if self.hi == self.lo:
            return 0.0
        if self.log:
            return (math.log(value) - math.log(self.lo)) / (math.log(self.hi) - math.log(self.lo))
        return (value - self.lo) / (self.hi - self.lo)

    def from_unit(self, unit: float) -> float | int:
        """Inverse of :meth:`to_unit`, clipped into the range (and rounded for integers)."""
        unit = min(1.0, max(0.0, float(unit)))
        if self.log:
            value = math.exp(math.log(self.lo) + unit * (math.log(self.hi) - math.log(self.lo)))
        else:
            value = self.lo + unit * (self.hi - self.lo)
        return self.clip(value)

    def clip(self, value: float) -> float | int:
        value = min(self.hi, max(self.lo, float(value)))
        return int(round(value)) if self.integer else value

    def sample(self, random: np.random.Generator) -> float | int:
        """Uniform over the range (over its logarithm for ``log``)."""
        return self.from_unit(random.random())


class SearchSpace:
    """The searched dimensions of a configuration loaded with ``ranges=True``, and the base config they edit."""

    def __init__(self, config: Mapping[str, Any], dimensions: list[Dimension]) -> None:
        self.base = config
        self.dimensions = dimensions

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "SearchSpace":
        """Find every ``[lo, hi]`` where lamarckian.yml has a number, and every ``[lo, hi]`` element of a list (``-m
        "mdp.reward.weights=[[0.05,5],1]"`` searches ``mdp.reward.weights.0``; ``model.hidden=[[32,256],64]``
        ``model.hidden.0``, an integer as the default's element); the base config gets the range's midpoint
        (so it is valid as it stands). Ranges outside :data:`SEARCHABLE` and ``ec.log`` entries that are not
        searched are errors."""
        defaults = read_yaml(DEFAULTS)
        logs = set(config["ec"]["log"])          # read before the ranges are resolved: no typed section yet
        dimensions = []
        for key, value in _leaves(config):
            try:
                default = lookup(defaults, key)
            except KeyError:
                continue  # an open mapping's own key: never a range
            for searched, (lo, hi), integer in _ranges(key, value, default):
                if key.split(".")[0] not in SEARCHABLE:
                    raise ConfigError(f"{key}: only keys under {', '.join(SEARCHABLE)} can be searched, "
                                      f"got the range {value}")
                dimensions.append(Dimension(searched, float(lo), float(hi), integer, searched in logs))
        unknown = logs - {d.key for d in dimensions}
        if unknown:
            raise ConfigError(f"ec.log lists {', '.join(sorted(unknown))}, which is not searched (give it [lo, hi])")
        space = cls(config, dimensions)
        space.base = space.apply({d.key: d.from_unit(0.5) for d in dimensions})
        return space

    def __len__(self) -> int:
        return len(self.dimensions)

    def __iter__(self) -> Iterator[Dimension]:
        return iter(self.dimensions)

    def sample(self, random: np.random.Generator) -> dict[str, float | int]:
        return {d.key: d.sample(random) for d in self.dimensions}

    def to_unit(self, values: Mapping[str, float]) -> np.ndarray:
        """``(len(self),)`` positions in [0, 1] of the searched values."""
        return np.array([d.to_unit(values[d.key]) for d in self.dimensions], dtype=np.float64)

    def from_unit(self, units: np.ndarray) -> dict[str, float | int]:
        return {d.key: d.from_unit(u) for d, u in zip(self.dimensions, units)}

    def apply(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of the base config with each ``key.path: value`` set."""
        return with_values(self.base, values)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_range(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(_is_number(v) for v in value)


def _ranges(key: str, value: Any, default: Any) -> Iterator[tuple[str, list[float], bool]]:
    """The searched dimensions of one key: ``(key, [lo, hi], integer)`` for a range where the default is a number;
    ``(key.i, [lo, hi], integer)`` for each range element of a list (integer where the default's element is)."""
    if _is_number(default):
        if _is_range(value):
            yield key, value, isinstance(default, int)
        return
    if isinstance(value, list) and (default is None or isinstance(default, list)):
        for index, element in enumerate(value):
            if _is_range(element):
                like = default[index] if isinstance(default, list) and index < len(default) else None
                yield f"{key}.{index}", element, isinstance(like, int) and not isinstance(like, bool)


def with_values(config: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``config`` with each dotted ``key.path: value`` of ``values`` set (a number part indexes a
    list: ``mdp.reward.weights.0``)."""
    copied = copy.deepcopy(dict(config))
    for key, value in values.items():
        *parents, leaf = key.split(".")
        node: Any = copied
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[int(leaf) if isinstance(node, list) else leaf] = value
    return copied


def _leaves(config: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in config.items():
        if isinstance(value, Mapping):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value
