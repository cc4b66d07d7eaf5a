"""DEAP's NSGA-II parts over numpy arrays: non-dominated sorting, crowding distance, survivor selection (every
objective maximized), bounded SBX crossover and polynomial mutation on genes in [0, 1].

DEAP works on individuals that carry a ``fitness``; these functions wrap rows of an objectives matrix (or a gene
vector) into such individuals and hand back indices (or arrays). DEAP's operators draw from Python's ``random``
module: each call here seeds it from the caller's numpy generator and puts its state back afterwards, so a run
stays reproducible from its seed and nothing else in the process is disturbed.
"""

from __future__ import annotations

import contextlib
import random as python_random
from typing import Iterator

import numpy as np
from deap import base, tools


class _Point(list):
    """One row of the objectives as a DEAP individual (the list holds its index)."""

    fitness: base.Fitness


def _points(objectives: np.ndarray) -> list[_Point]:
    objectives = np.asarray(objectives, dtype=np.float64)
    fitness_class = type("Maximize", (base.Fitness,), {"weights": (1.0,) * objectives.shape[1]})
    points = []
    for index, row in enumerate(objectives):
        point = _Point([index])
        point.fitness = fitness_class(tuple(float(value) for value in row))
        points.append(point)
    return points


def non_dominated_fronts(objectives: np.ndarray) -> list[list[int]]:
    """Row indices of ``objectives`` ``(n, m)`` by front (DEAP ``sortNondominated``): the first front is the Pareto
    set, each next one the Pareto set of what remains; indices ascending within a front."""
    if len(objectives) == 0:
        return []
    points = _points(objectives)
    return [sorted(point[0] for point in front) for front in tools.sortNondominated(points, len(points))]


def ranks_and_crowding(objectives: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's front number (0 = Pareto set) and its crowding distance within that front (DEAP
    ``assignCrowdingDist``: Deb's distance divided by the number of objectives; a front's extremes get infinity)."""
    count = len(objectives)
    rank, crowding = np.zeros(count, dtype=int), np.zeros(count)
    if count == 0:
        return rank, crowding
    points = _points(objectives)
    for number, front in enumerate(tools.sortNondominated(points, count)):
        tools.emo.assignCrowdingDist(front)
        for point in front:
            rank[point[0]], crowding[point[0]] = number, point.fitness.crowding_dist
    return rank, crowding


def select_survivors(objectives: np.ndarray, k: int) -> list[int]:
    """Row indices of the ``k`` NSGA-II survivors (DEAP ``selNSGA2``): whole fronts in order, then the least crowded
    of the front that overflows."""
    return [point[0] for point in tools.selNSGA2(_points(objectives), k)]


@contextlib.contextmanager
def _python_random_from(generator: np.random.Generator) -> Iterator[None]:
    """Python's ``random`` seeded from ``generator`` inside the block, restored after it."""
    saved = python_random.getstate()
    python_random.seed(int(generator.integers(2**63)))
    try:
        yield
    finally:
        python_random.setstate(saved)


def crossover(first: np.ndarray, second: np.ndarray, eta: float,
              generator: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two children of genes in [0, 1] by bounded simulated binary crossover (DEAP ``cxSimulatedBinaryBounded``:
    each gene pair crossed with probability 0.5; a larger ``eta`` keeps the children closer to the parents)."""
    a, b = [float(x) for x in first], [float(x) for x in second]
    if not a:
        return np.zeros(0), np.zeros(0)
    with _python_random_from(generator):
        a, b = tools.cxSimulatedBinaryBounded(a, b, eta=float(eta), low=0.0, up=1.0)
    return np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)


def mutate(genes: np.ndarray, eta: float, probability: float, generator: np.random.Generator) -> np.ndarray:
    """Genes in [0, 1] after bounded polynomial mutation (DEAP ``mutPolynomialBounded``), each gene with
    ``probability``."""
    values = [float(x) for x in genes]
    if not values:
        return np.zeros(0)
    with _python_random_from(generator):
        (values,) = tools.mutPolynomialBounded(values, eta=float(eta), low=0.0, up=1.0, indpb=float(probability))
    return np.clip(np.asarray(values, dtype=np.float64), 0.0, 1.0)
