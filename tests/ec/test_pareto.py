"""NSGA-II's sorting and selection through DEAP (lamarckian.ec.deap_tools), checked against a brute-force reading of
the definitions: the adapter must hand back the right rows, every objective maximized."""

from __future__ import annotations

import numpy as np
import pytest

from lamarckian.ec.deap_tools import crossover, mutate, non_dominated_fronts, ranks_and_crowding, select_survivors


def dominates(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all(a >= b) and np.any(a > b))


def brute_force_fronts(points: np.ndarray) -> list[list[int]]:
    """Peel Pareto sets off one by one, straight from the definition."""
    left, fronts = list(range(len(points))), []
    while left:
        front = [i for i in left if not any(dominates(points[j], points[i]) for j in left)]
        fronts.append(sorted(front))
        left = [i for i in left if i not in front]
    return fronts


def crowding_by_hand(front: np.ndarray) -> np.ndarray:
    """Deb's crowding distance, divided by the number of objectives as DEAP scales it (same order)."""
    count, dimensions = front.shape
    distance = np.zeros(count)
    for m in range(dimensions):
        order = np.argsort(front[:, m], kind="stable")
        distance[order[0]] = distance[order[-1]] = np.inf
        span = front[order[-1], m] - front[order[0], m]
        if span > 0:
            distance[order[1:-1]] += (front[order[2:], m] - front[order[:-2], m]) / span
    return distance / dimensions


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("objectives", [2, 3])
def test_fronts_match_the_definition(seed, objectives):
    random = np.random.default_rng(seed)
    points = random.integers(0, 6, size=(40, objectives)).astype(float)  # integer grid: ties and duplicates
    assert non_dominated_fronts(points) == brute_force_fronts(points)


@pytest.mark.parametrize("seed", range(6))
def test_survivors_are_whole_fronts_then_the_least_crowded(seed):
    random = np.random.default_rng(seed)
    points = random.random((30, 2))  # continuous: no ties in crowding distance
    fronts = brute_force_fronts(points)
    front_of = {i: number for number, front in enumerate(fronts) for i in front}
    rank, crowding = ranks_and_crowding(points)
    assert [front_of[i] for i in range(30)] == rank.tolist()
    for k in (5, 12, 20):
        chosen = select_survivors(points, k)
        assert len(set(chosen)) == k
        last = max(front_of[i] for i in chosen)
        assert all(i in chosen for number in range(last) for i in fronts[number])
        distance = dict(zip(fronts[last], crowding_by_hand(points[fronts[last]])))
        kept = sorted((distance[i] for i in chosen if front_of[i] == last), reverse=True)
        assert kept == sorted(distance.values(), reverse=True)[:len(kept)]
        for i in fronts[last]:
            assert crowding[i] == pytest.approx(distance[i])


def test_crowding_distance_by_hand():
    front = np.array([[0.0, 4.0], [1.0, 3.0], [3.0, 1.0], [4.0, 0.0]])
    _, distance = ranks_and_crowding(front)
    assert np.isinf(distance[0])
    assert np.isinf(distance[3])
    assert distance[1] == pytest.approx((3 / 4 + 3 / 4) / 2)
    assert distance[2] == pytest.approx((3 / 4 + 3 / 4) / 2)


def test_sbx_children_stay_in_bounds_and_centre_on_the_parents():
    random = np.random.default_rng(0)
    first, second = np.array([0.2, 0.9, 0.5]), np.array([0.4, 0.1, 0.5])
    children = [crossover(first, second, 15.0, random) for _ in range(3000)]
    genes = np.array([c for pair in children for c in pair])
    assert genes.min() >= 0.0
    assert genes.max() <= 1.0
    np.testing.assert_allclose(genes.mean(axis=0), (first + second) / 2, atol=0.01)  # SBX preserves the mean
    assert np.all(genes[:, 2] == 0.5)  # equal genes are not crossed
    spread_high_eta = np.std([crossover(first, second, 100.0, random)[0][0] for _ in range(2000)])
    spread_low_eta = np.std([crossover(first, second, 2.0, random)[0][0] for _ in range(2000)])
    assert spread_low_eta > spread_high_eta


def test_polynomial_mutation_bounds_probability_and_reproducibility():
    random = np.random.default_rng(1)
    genes = np.array([0.0, 0.5, 1.0])
    mutated = np.array([mutate(genes, 20.0, 1.0, random) for _ in range(2000)])
    assert mutated.min() >= 0.0
    assert mutated.max() <= 1.0
    assert mutated[:, 1].std() > 0.01
    assert all(np.array_equal(mutate(genes, 20.0, 0.0, random), genes) for _ in range(50))
    again = [mutate(genes, 20.0, 1.0, np.random.default_rng(7)) for _ in range(2)]
    assert np.array_equal(*again)                          # the same generator state, the same child


def test_deap_leaves_pythons_random_stream_alone():
    import random

    random.seed(3)
    expected = random.random()
    random.seed(3)
    crossover(np.array([0.1, 0.2]), np.array([0.8, 0.9]), 15.0, np.random.default_rng(0))
    mutate(np.array([0.1, 0.2]), 20.0, 1.0, np.random.default_rng(0))
    assert random.random() == expected
