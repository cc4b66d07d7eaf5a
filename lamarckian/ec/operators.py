"""Variation and selection operators as plain functions (DEAP style). Genes live on the unit interval [0, 1]
(see :meth:`SearchSpace.to_unit`): crossover and mutation never leave it.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats


def sbx(first: np.ndarray, second: np.ndarray, eta: float, random: np.random.Generator,
        probability: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Simulated binary crossover bounded to [0, 1] (Deb & Agrawal 1995; DEAP ``cxSimulatedBinaryBounded``):
    each gene pair is crossed with ``probability``; larger ``eta`` keeps children closer to the parents."""
    a, b = np.array(first, dtype=np.float64), np.array(second, dtype=np.float64)
    for i in range(len(a)):
        if random.random() > probability or abs(a[i] - b[i]) < 1e-14:
            continue
        x1, x2 = min(a[i], b[i]), max(a[i], b[i])
        children = []
        for beta in (1.0 + 2.0 * x1 / (x2 - x1), 1.0 + 2.0 * (1.0 - x2) / (x2 - x1)):
            alpha = 2.0 - beta ** -(eta + 1.0)
            u = random.random()
            if u <= 1.0 / alpha:
                beta_q = (u * alpha) ** (1.0 / (eta + 1.0))
            else:
                beta_q = (1.0 / (2.0 - u * alpha)) ** (1.0 / (eta + 1.0))
            children.append(beta_q)
        c1 = 0.5 * (x1 + x2 - children[0] * (x2 - x1))
        c2 = 0.5 * (x1 + x2 + children[1] * (x2 - x1))
        c1, c2 = min(max(c1, 0.0), 1.0), min(max(c2, 0.0), 1.0)
        if random.random() < 0.5:
            c1, c2 = c2, c1
        a[i], b[i] = c1, c2
    return a, b


def polynomial_mutation(genes: np.ndarray, eta: float, probability: float,
                        random: np.random.Generator) -> np.ndarray:
    """Bounded polynomial mutation on [0, 1] (Deb; DEAP ``mutPolynomialBounded``), each gene with ``probability``."""
    genes = np.array(genes, dtype=np.float64)
    power = 1.0 / (eta + 1.0)
    for i in range(len(genes)):
        if random.random() > probability:
            continue
        x = genes[i]
        u = random.random()
        if u < 0.5:
            xy = 1.0 - x
            delta_q = (2.0 * u + (1.0 - 2.0 * u) * xy ** (eta + 1.0)) ** power - 1.0
        else:
            xy = x
            delta_q = 1.0 - (2.0 * (1.0 - u) + 2.0 * (u - 0.5) * xy ** (eta + 1.0)) ** power
        genes[i] = min(max(x + delta_q, 0.0), 1.0)
    return genes


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
