"""Selection helpers of PBT and the tournament as plain functions (NSGA-II's operators are DEAP's: see
:mod:`.deap_tools`)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats


def quantiles(fitness: Sequence[float], share: float) -> tuple[list[int], list[int]]:
    """Indices of the bottom and top ``share`` of ``fitness`` (at least one each when there are two or more)."""
    order = [int(i) for i in np.argsort(np.asarray(fitness, dtype=np.float64), kind="stable")]
    count = max(1, int(math.floor(share * len(order)))) if len(order) >= 2 else 0
    return order[:count], order[len(order) - count:]


def significantly_better(better: Sequence[float], worse: Sequence[float], significance: float) -> bool:
    """Welch's t-test: is the mean of ``better`` above that of ``worse`` at the one-sided ``significance``?"""
    if len(better) < 2 or len(worse) < 2:
        return float(np.mean(better)) > float(np.mean(worse)) if better and worse else False
    result = stats.ttest_ind(better, worse, equal_var=False, alternative="greater")
    p_value = float(result.pvalue)
    if math.isnan(p_value):  # both constant: better only if strictly higher
        return float(np.mean(better)) > float(np.mean(worse))
    return p_value < significance


def softmax_of_z_scores(fitness: Sequence[float], temperature: float) -> np.ndarray:
    """Probabilities ∝ exp(z / temperature), z the fitness standardized over ``fitness``."""
    values = np.asarray(fitness, dtype=np.float64)
    spread = values.std()
    z = (values - values.mean()) / spread if spread > 0 else np.zeros_like(values)
    weights = np.exp((z - z.max()) / max(temperature, 1e-9))
    return weights / weights.sum()
