"""The restricted evaluator: what it allows, what it refuses (and that refusal happens at parse time)."""

from __future__ import annotations

import math

import pytest

from lamarckian.config import Expression, ExpressionError

NAMES = {"self": {"cost": 2e8, "win": 0.75, "fitness": math.nan, "training": {"return": 3.0}, "items": [1, 2, 3]}}


@pytest.mark.parametrize(("source", "expected"), [
    ("self.cost > 1e8", True),
    ("self.cost > 1e8 and self.win >= 0.9", False),
    ("self.win >= 0.9 or self.cost >= 2e8", True),
    ("not self.win < 0.5", True),
    ("max(self.win, 0.8) * 2 - 1", pytest.approx(0.6)),
    ("abs(-3) + min(1, 2) ** 2", 4),
    ("self.fitness >= 475", False),  # nan compares false
    ("isnan(self.fitness)", True),
    ("self.items[1] + len(self.items)", 5),
    ("1 if self.win > 0.5 else 2", 1),
    ("0 < self.win < 1", True),
    ("self.training['return'] == 3", True),
])
def test_allowed(source, expected):
    assert Expression(source).evaluate(NAMES) == expected


@pytest.mark.parametrize("source", [
    "__import__('os')", "self.__class__", "self._private", "open('x')", "(lambda: 1)()",
    "[x for x in self.items]", "exec('1')", "eval('1')", "unknown > 1", "self.cost := 1", "max(key=abs)",
    "1 @ 2", "self.cost >",
])
def test_refused_at_parse_time(source):
    with pytest.raises(ExpressionError):
        Expression(source)


def test_runtime_failures_are_expression_errors():
    with pytest.raises(ExpressionError, match="no 'missing'"):
        Expression("self.missing > 1").evaluate(NAMES)
    with pytest.raises(ExpressionError, match="exponent"):
        Expression("10 ** 100000").evaluate(NAMES)
    with pytest.raises(ExpressionError, match="ZeroDivisionError"):
        Expression("1 / 0").evaluate(NAMES)
