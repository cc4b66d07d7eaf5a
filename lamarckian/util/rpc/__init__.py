"""The original Lamarckian's import path for the RPC callers; the code lives in :mod:`lamarckian.rpc`.

The original Lamarckian's callers took keyword arguments that mean nothing here (``config=`` for its port range and
serializer, ``progress=``, ``ray=``, ``serializer=``): they are accepted, named in one warning, and ignored. Its
``gather.gathering('name')`` starts the loops at once and returns an object whose ``close()`` stops them, as ours
does.
"""

from __future__ import annotations

import warnings
from typing import Any as AnyValue

from lamarckian import rpc
from lamarckian.rpc import ActorDiedError, RemoteError, RPCError, RpcSettings, all, any, gather  # noqa: F401

#: keyword arguments of the original Lamarckian's All / Any / Gather that this implementation ignores
ORIGINAL_KEYWORDS = ("config", "progress", "ray", "serializer")


def _without_original_keywords(caller: str, kwargs: dict[str, AnyValue]) -> dict[str, AnyValue]:
    ignored = sorted(key for key in kwargs if key in ORIGINAL_KEYWORDS)
    if ignored:
        warnings.warn(f"{caller}: the original Lamarckian's keyword arguments {', '.join(ignored)} are ignored "
                      "(settings= takes lamarckian.rpc settings)", UserWarning, stacklevel=3)
    return {key: value for key, value in kwargs.items() if key not in ORIGINAL_KEYWORDS}


class All(rpc.All):
    """:class:`lamarckian.rpc.All` taking the original Lamarckian's keyword arguments too."""

    def __init__(self, actors: AnyValue, **kwargs: AnyValue) -> None:
        super().__init__(actors, **_without_original_keywords("All", kwargs))


class Any(rpc.Any):
    """:class:`lamarckian.rpc.Any` taking the original Lamarckian's keyword arguments too."""

    def __init__(self, actors: AnyValue, **kwargs: AnyValue) -> None:
        super().__init__(actors, **_without_original_keywords("Any", kwargs))


class Gather(rpc.Gather):
    """:class:`lamarckian.rpc.Gather` taking the original Lamarckian's keyword arguments too."""

    def __init__(self, everyone: rpc.All, **kwargs: AnyValue) -> None:
        super().__init__(everyone, **_without_original_keywords("Gather", kwargs))
