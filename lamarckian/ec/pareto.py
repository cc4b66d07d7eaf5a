"""Non-dominated sorting and crowding distance (NSGA-II, Deb et al. 2002), every objective maximized.

Same results as DEAP's ``tools.sortNondominated`` / ``tools.selNSGA2`` on objectives with weights +1
(checked by tests/ec/test_pareto.py against DEAP itself).
"""

from __future__ import annotations

import numpy as np


def dominates(a: np.ndarray, b: np.ndarray) -> bool:
    """``a`` is at least as good as ``b`` in every objective and better in one (maximization)."""
    return bool(np.all(a >= b) and np.any(a > b))


def non_dominated_fronts(objectives: np.ndarray) -> list[list[int]]:
    """Indices of ``objectives`` ``(n, m)`` by front: the first front is the Pareto set, each next front is
    the Pareto set of what remains. O(m n²)."""
    objectives = np.asarray(objectives, dtype=np.float64)
    count = len(objectives)
    dominated_by = [[] for _ in range(count)]  # the points each point dominates
    domination_count = np.zeros(count, dtype=int)
    for i in range(count):
        for j in range(i + 1, count):
            if dominates(objectives[i], objectives[j]):
                dominated_by[i].append(j)
                domination_count[j] += 1
            elif dominates(objectives[j], objectives[i]):
                dominated_by[j].append(i)
                domination_count[i] += 1
    fronts = [[i for i in range(count) if domination_count[i] == 0]]
    while fronts[-1]:
        following = []
        for i in fronts[-1]:
            for j in dominated_by[i]:
                domination_count[j] -= 1
                if domination_count[j] == 0:
                    following.append(j)
        fronts.append(sorted(following))
    return fronts[:-1]


def crowding_distance(objectives: np.ndarray) -> np.ndarray:
    """``(n,)`` crowding distance of the points of one front ``(n, m)``: the sum over objectives of the gap
    between each point's neighbours, normalized by the objective's span; the extremes get infinity."""
    objectives = np.asarray(objectives, dtype=np.float64)
    count, dimensions = objectives.shape
    distance = np.zeros(count)
    if count <= 2:
        return np.full(count, np.inf)
    for m in range(dimensions):
        order = np.argsort(objectives[:, m], kind="stable")
        values = objectives[order, m]
        distance[order[0]] = distance[order[-1]] = np.inf
        span = values[-1] - values[0]
        if span == 0:
            continue
        distance[order[1:-1]] += (values[2:] - values[:-2]) / span
    return distance


def select_nsga2(objectives: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` survivors: whole fronts in order, then the least crowded of the front that overflows."""
    chosen: list[int] = []
    for front in non_dominated_fronts(objectives):
        if len(chosen) + len(front) <= k:
            chosen.extend(front)
            continue
        distance = crowding_distance(np.asarray(objectives)[front])
        by_distance = np.argsort(-distance, kind="stable")
        chosen.extend(front[i] for i in by_distance[:k - len(chosen)])
        break
    return chosen


def ranks_and_crowding(objectives: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each point's front number (0 = Pareto set) and its crowding distance within that front."""
    count = len(objectives)
    rank, crowding = np.zeros(count, dtype=int), np.zeros(count)
    for number, front in enumerate(non_dominated_fronts(objectives)):
        rank[front] = number
        crowding[front] = crowding_distance(np.asarray(objectives)[front])
    return rank, crowding
