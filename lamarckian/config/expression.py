"""A restricted expression evaluator for config strings such as ``self.cost > 1e8 or self.win >= 0.9``.

The expression is parsed with :mod:`ast` and walked node by node; nothing reaches ``eval``/``exec``.
Allowed: literals, names given by the caller, public attributes (no leading underscore), constant
subscripts, arithmetic, comparisons, boolean operators, conditional expressions, and calls to a small
whitelist (min, max, abs, round, len, sum, float, int, bool).
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any, Callable, Mapping

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "abs": abs, "round": round, "len": len, "sum": sum,
    "float": float, "int": int, "bool": bool, "isnan": math.isnan,
}
CONSTANTS = {"True": True, "False": False, "None": None, "inf": math.inf, "nan": math.nan}
_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Not: operator.not_}
_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
MAX_EXPONENT = 1000


class ExpressionError(ValueError):
    """An expression uses something outside the allowed subset, or fails to evaluate."""


class Expression:
    """A parsed, checked expression; call :meth:`evaluate` with the names it may use.

    Args:
        source: the expression text.
        names: the free names the expression may use (for example ``{"self"}``); checked at parse time.
    """

    def __init__(self, source: str | bool | int | float,
                 names: frozenset[str] | set[str] = frozenset({"self"})) -> None:
        if isinstance(source, (bool, int, float)):   # a YAML constant (`-m key=true`) is the constant expression
            source = str(source)
        if not isinstance(source, str):
            raise ExpressionError(f"not an expression: {source!r} (expected text such as 'self.time > 60')")
        self.source = source
        try:
            self.tree = ast.parse(source.strip(), mode="eval").body
        except SyntaxError as error:
            raise ExpressionError(f"not an expression: {source!r} ({error.msg})") from None
        self.names = frozenset(names)
        self._check(self.tree)

    def _check(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            if node.id not in self.names and node.id not in FUNCTIONS and node.id not in CONSTANTS:
                raise ExpressionError(f"unknown name {node.id!r} in {self.source!r}; "
                                      f"allowed: {sorted(self.names | set(FUNCTIONS) | set(CONSTANTS))}")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                raise ExpressionError(f"private attribute {node.attr!r} in {self.source!r}")
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
                raise ExpressionError(f"only {sorted(FUNCTIONS)} may be called (positional arguments) "
                                      f"in {self.source!r}")
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _BINARY:
                raise ExpressionError(f"operator {type(node.op).__name__} not allowed in {self.source!r}")
        elif isinstance(node, ast.UnaryOp):
            if type(node.op) not in _UNARY:
                raise ExpressionError(f"operator {type(node.op).__name__} not allowed in {self.source!r}")
        elif isinstance(node, ast.Compare):
            if any(type(op) not in _COMPARE for op in node.ops):
                raise ExpressionError(f"comparison not allowed in {self.source!r}")
        elif not isinstance(node, (ast.Constant, ast.BoolOp, ast.And, ast.Or, ast.IfExp, ast.Subscript,
                                   ast.List, ast.Tuple, ast.Load)):
            raise ExpressionError(f"{type(node).__name__} not allowed in {self.source!r}")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, bool, type(None))):
            raise ExpressionError(f"literal {node.value!r} not allowed in {self.source!r}")
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.expr_context)):
                self._check(child)

    def evaluate(self, names: Mapping[str, Any]) -> Any:
        """The expression's value with ``names`` bound; any failure raises :class:`ExpressionError`."""
        try:
            return self._eval(self.tree, names)
        except ExpressionError:
            raise
        except Exception as error:  # noqa: BLE001 - any evaluation failure is the expression's
            raise ExpressionError(f"{self.source!r}: {type(error).__name__}: {error}") from None

    def _eval(self, node: ast.AST, names: Mapping[str, Any]) -> Any:  # noqa: PLR0911 - one branch per node type
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in names:
                return names[node.id]
            return FUNCTIONS.get(node.id, CONSTANTS.get(node.id))
        if isinstance(node, ast.Attribute):
            value = self._eval(node.value, names)
            if isinstance(value, Mapping):
                if node.attr not in value:
                    raise ExpressionError(f"{self.source!r}: no {node.attr!r}; have {sorted(value)}")
                return value[node.attr]
            return getattr(value, node.attr)
        if isinstance(node, ast.Subscript):
            return self._eval(node.value, names)[self._eval(node.slice, names)]
        if isinstance(node, ast.BoolOp):
            is_and = isinstance(node.op, ast.And)
            result: Any = is_and
            for value_node in node.values:
                result = self._eval(value_node, names)
                if bool(result) != is_and:
                    return result
            return result
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left, names), self._eval(node.right, names)
            if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
                raise ExpressionError(f"{self.source!r}: exponent {right} too large")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](self._eval(node.operand, names))
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, names)
            for op, right_node in zip(node.ops, node.comparators):
                right = self._eval(right_node, names)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            branch = node.body if self._eval(node.test, names) else node.orelse
            return self._eval(branch, names)
        if isinstance(node, ast.Call):
            return self._eval(node.func, names)(*(self._eval(arg, names) for arg in node.args))
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self._eval(element, names) for element in node.elts]
        raise ExpressionError(f"{type(node).__name__} not allowed in {self.source!r}")  # unreachable after _check

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"
