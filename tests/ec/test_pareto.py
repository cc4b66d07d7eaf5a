"""Non-dominated sorting and NSGA-II selection, checked against DEAP."""

from __future__ import annotations

import numpy as np
import pytest
from deap import base, creator, tools

from lamarckian.ec.pareto import crowding_distance, dominates, non_dominated_fronts, select_nsga2

if not hasattr(creator, "FitnessMax3"):
    creator.create("FitnessMax3", base.Fitness, weights=(1.0, 1.0, 1.0))
    creator.create("FitnessMax2", base.Fitness, weights=(1.0, 1.0))


def deap_population(points: np.ndarray) -> list:
    fitness = creator.FitnessMax3 if points.shape[1] == 3 else creator.FitnessMax2
    population = []
    for index, point in enumerate(points):
        individual = [index]
        individual_fitness = fitness()
        individual_fitness.values = tuple(float(x) for x in point)
        population.append(type("Ind", (list,), {})(individual))
        population[-1].fitness = individual_fitness
    return population


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("objectives", [2, 3])
def test_fronts_match_deap(seed, objectives):
    random = np.random.default_rng(seed)
    points = random.integers(0, 6, size=(40, objectives)).astype(float)  # integer grid: ties and duplicates
    ours = [sorted(front) for front in non_dominated_fronts(points)]
    theirs = [sorted(ind[0] for ind in front) for front in tools.sortNondominated(deap_population(points), 40)]
    assert ours == theirs


@pytest.mark.parametrize("seed", range(6))
def test_nsga2_selection_matches_deap(seed):
    random = np.random.default_rng(seed)
    points = random.random((30, 2))  # continuous: no ties in crowding distance
    fronts = non_dominated_fronts(points)
    front_of = {i: number for number, front in enumerate(fronts) for i in front}
    for k in (5, 12, 20):
        ours = select_nsga2(points, k)
        theirs = [ind[0] for ind in tools.selNSGA2(deap_population(points), k)]
        assert len(ours) == len(theirs) == k
        last = max(front_of[i] for i in ours)
        # whole fronts before the overflowing one are identical
        assert sorted(i for i in ours if front_of[i] < last) == sorted(i for i in theirs if front_of[i] < last)
        # in the overflowing front both keep the same crowding distances (only ties at infinity may differ)
        distance = dict(zip(fronts[last], crowding_distance(points[fronts[last]])))
        assert sorted(distance[i] for i in ours if front_of[i] == last) == \
            sorted(distance[i] for i in theirs if front_of[i] == last)


def test_crowding_distance_by_hand():
    front = np.array([[0.0, 4.0], [1.0, 3.0], [3.0, 1.0], [4.0, 0.0]])
    distance = crowding_distance(front)
    assert np.isinf(distance[0]) and np.isinf(distance[3])
    assert distance[1] == pytest.approx(3 / 4 + 3 / 4) and distance[2] == pytest.approx(3 / 4 + 3 / 4)
    assert dominates(np.array([1, 2]), np.array([1, 1])) and not dominates(np.array([1, 1]), np.array([1, 1]))
