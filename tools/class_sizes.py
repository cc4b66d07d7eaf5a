"""The instance attributes of every class of a package, counted from its source (no import): ``python
tools/class_sizes.py [PACKAGE_DIR] [--limit N]`` prints the largest classes and exits 1 if one has more than
``--limit`` (default :data:`LIMIT`).

An attribute is a name stored on ``self`` in a method of the class (``self.x = ...``, ``self.x: T = ...``,
``self.x += ...``, ``self.a, self.b = ...``) or declared in the class body (``x: T``, a dataclass field or an
annotation). A class also has the attributes of its base classes that are defined in the package (found by name),
except those stored only by methods it overrides (they never run on its instances).
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

LIMIT = 25      # docs/architecture.md: no class of lamarckian/ over this many attributes


@dataclass
class ClassInfo:
    """One class: where it is, the names of its bases, the attributes its body declares and those each of its
    methods stores."""

    where: str
    bases: list[str]
    declared: set[str] = field(default_factory=set)
    methods: dict[str, set[str]] = field(default_factory=dict)


def _stored_names(target: ast.expr) -> list[str]:
    """The ``self.<name>`` an assignment target stores (tuples and lists unpacked)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _stored_names(element)]
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return [target.attr]
    return []


def _stores(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The attributes ``function`` stores on ``self``."""
    names: set[str] = set()
    for inner in ast.walk(function):
        if isinstance(inner, ast.Assign):
            names.update(name for target in inner.targets for name in _stored_names(target))
        elif isinstance(inner, (ast.AnnAssign, ast.AugAssign)):
            names.update(_stored_names(inner.target))
    return names


def _class_info(node: ast.ClassDef, where: str) -> ClassInfo:
    """``node``'s declarations and each method's stores (nested classes left out)."""
    info = ClassInfo(where, [_base_name(b) for b in node.bases])
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            info.declared.add(statement.target.id)
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            info.methods[statement.name] = _stores(statement)
    return info


def _base_name(base: ast.expr) -> str:
    """``Learner`` of ``Learner`` or ``fleet.Learner``; "" for anything else (``Generic[T]``...)."""
    if isinstance(base, ast.Name):
        return base.id
    if isinstance(base, ast.Attribute):
        return base.attr
    return ""


def classes_of(package: Path) -> dict[str, list[ClassInfo]]:
    """Every class under ``package`` by name (several where a name is used twice)."""
    found: dict[str, list[ClassInfo]] = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(_class_info(node, f"{path}:{node.lineno} {node.name}"))
    return found


def _resolved(info: ClassInfo, classes: dict[str, list[ClassInfo]], seen: frozenset[str]
              ) -> tuple[set[str], dict[str, set[str]]]:
    """``info``'s declarations and its methods as its instances run them (a method its class defines hides the
    bases'), bases defined in the package included (a base name used by several classes: the largest)."""
    declared: set[str] = set()
    methods: dict[str, set[str]] = {}
    for base in reversed(info.bases):             # the first base wins, as in the MRO of simple hierarchies
        if base in seen or base not in classes:
            continue
        resolved = [_resolved(candidate, classes, seen | {base}) for candidate in classes[base]]
        base_declared, base_methods = max(resolved, key=lambda r: len(r[0].union(*r[1].values())))
        declared |= base_declared
        methods.update(base_methods)
    methods.update(info.methods)
    return declared | info.declared, methods


def attributes(info: ClassInfo, classes: dict[str, list[ClassInfo]]) -> set[str]:
    """The attributes an instance of ``info``'s class can have."""
    declared, methods = _resolved(info, classes, frozenset())
    return declared.union(*methods.values())


def sizes(package: Path) -> list[tuple[int, str]]:
    """``(attributes, where)`` of every class under ``package``, largest first."""
    classes = classes_of(package)
    rows = [(len(attributes(info, classes)), info.where) for infos in classes.values() for info in infos]
    return sorted(rows, reverse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", default="lamarckian", type=Path)
    parser.add_argument("--limit", type=int, default=LIMIT)
    parser.add_argument("--top", type=int, default=10, help="classes to print")
    arguments = parser.parse_args(argv)
    rows = sizes(arguments.package)
    for count, where in rows[:arguments.top]:
        print(f"{count:4d}  {where}")
    over = [(count, where) for count, where in rows if count > arguments.limit]
    for count, where in over:
        print(f"over {arguments.limit}: {where} has {count} attributes", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
