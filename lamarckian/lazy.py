"""Names of a package imported on first use (PEP 562), so that importing the package pulls in no heavy module."""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable, Mapping


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``name`` from its submodule ``where[name]`` when first
    asked for."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f".{where[name]}", package), name)

    return __getattr__
