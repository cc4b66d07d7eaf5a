"""Environments from the user's own code: ``mdp.create: package.module:ClassName`` (or ``mdp.vec.task`` likewise)
names a class that the factory imports and builds, so a new MDP or VecTask needs no change to this package."""

from __future__ import annotations

import importlib
from typing import Any


def is_plugin(name: str) -> bool:
    """``name`` has the ``module:ClassName`` form."""
    return isinstance(name, str) and ":" in name


def load_plugin(spec: str, key: str) -> Any:
    """The object ``module:Name`` names; ValueError naming ``key`` when the module or the name is missing."""
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"{key}={spec!r}: cannot import {module_name!r} ({error})") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"{key}={spec!r}: module {module_name!r} has no {attribute!r}") from None
