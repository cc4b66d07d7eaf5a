"""Selection helpers of PBT and the tournament."""

from __future__ import annotations

import numpy as np
import pytest

from lamarckian.ec.operators import quantiles, significantly_better, softmax_of_z_scores


def test_quantiles_t_test_and_softmax():
    bottom, top = quantiles([5.0, 1.0, 3.0, 9.0, 7.0], 0.2)
    assert bottom == [1]
    assert top == [3]
    assert quantiles([1.0], 0.2) == ([], [])
    random = np.random.default_rng(2)
    assert significantly_better(list(random.normal(1.0, 0.1, 20)), list(random.normal(0.0, 0.1, 20)), 0.05)
    assert not significantly_better(list(random.normal(0.0, 1.0, 5)), list(random.normal(0.0, 1.0, 5)), 1e-3)
    probabilities = softmax_of_z_scores([1.0, 2.0, 3.0], 1.0)
    assert probabilities.sum() == pytest.approx(1.0)
    assert probabilities[2] > probabilities[1] > probabilities[0]
    assert softmax_of_z_scores([2.0, 2.0], 1.0) == pytest.approx([0.5, 0.5])
