"""Variation and selection operators."""

from __future__ import annotations

import numpy as np
import pytest

from lamarckian.ec.operators import (polynomial_mutation, quantiles, sbx, significantly_better,
                                     softmax_of_z_scores)


def test_sbx_children_stay_in_bounds_and_centre_on_the_parents():
    random = np.random.default_rng(0)
    first, second = np.array([0.2, 0.9, 0.5]), np.array([0.4, 0.1, 0.5])
    children = [sbx(first, second, 15.0, random, probability=1.0) for _ in range(3000)]
    genes = np.array([c for pair in children for c in pair])
    assert genes.min() >= 0.0 and genes.max() <= 1.0
    np.testing.assert_allclose(genes.mean(axis=0), (first + second) / 2, atol=0.01)  # SBX preserves the mean
    assert np.all(genes[:, 2] == 0.5)  # equal genes are not crossed
    spread_high_eta = np.std([sbx(first, second, 100.0, random, 1.0)[0][0] for _ in range(2000)])
    spread_low_eta = np.std([sbx(first, second, 2.0, random, 1.0)[0][0] for _ in range(2000)])
    assert spread_low_eta > spread_high_eta


def test_polynomial_mutation_bounds_and_probability():
    random = np.random.default_rng(1)
    genes = np.array([0.0, 0.5, 1.0])
    mutated = np.array([polynomial_mutation(genes, 20.0, 1.0, random) for _ in range(2000)])
    assert mutated.min() >= 0.0 and mutated.max() <= 1.0 and mutated[:, 1].std() > 0.01
    unchanged = [np.array_equal(polynomial_mutation(genes, 20.0, 0.0, random), genes) for _ in range(50)]
    assert all(unchanged)


def test_quantiles_t_test_and_softmax():
    bottom, top = quantiles([5.0, 1.0, 3.0, 9.0, 7.0], 0.2)
    assert bottom == [1] and top == [3]
    assert quantiles([1.0], 0.2) == ([], [])
    random = np.random.default_rng(2)
    assert significantly_better(list(random.normal(1.0, 0.1, 20)), list(random.normal(0.0, 0.1, 20)), 0.05)
    assert not significantly_better(list(random.normal(0.0, 1.0, 5)), list(random.normal(0.0, 1.0, 5)), 1e-3)
    probabilities = softmax_of_z_scores([1.0, 2.0, 3.0], 1.0)
    assert probabilities.sum() == pytest.approx(1.0) and probabilities[2] > probabilities[1] > probabilities[0]
    assert softmax_of_z_scores([2.0, 2.0], 1.0) == pytest.approx([0.5, 0.5])
