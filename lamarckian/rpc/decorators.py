"""``@all``, ``@any`` and ``@gather``: let All / Any / Gather call a class's public methods.

The decorators stack in any order and return the same class, marked with the patterns it allows and
given three private methods the callers use: ``_lamarckian_rpc_start`` (serve, return the endpoint),
``_lamarckian_rpc_stats`` (messages served and dropped) and ``_lamarckian_rpc_release`` (a local caller
is done). They work on plain classes, on classes later wrapped by ``ray.remote`` and on Ray actor
classes (``@all`` above ``@ray.remote``).
"""

from __future__ import annotations

import os
import sys
from typing import Any, TypeVar

from .auth import adopt_secret
from .server import Server
from .settings import RpcSettings
from .sockets import running_ray

PATTERNS_ATTRIBUTE = "__lamarckian_rpc_patterns__"
_SERVER_ATTRIBUTE = "_lamarckian_rpc_server"

T = TypeVar("T")


def _actor_name(obj: Any) -> str:
    name = f"{type(obj).__qualname__}(pid={os.getpid()}"
    ray = running_ray()
    if ray is not None:
        actor_id = ray.get_runtime_context().get_actor_id()
        if actor_id:
            name += f", actor={actor_id[:8]}"
    return name + ")"


def _start(self: Any, secret: bytes, settings: dict) -> dict[str, Any]:
    """Serve this object (once; later callers share the server) and return its endpoint."""
    server: Server | None = self.__dict__.get(_SERVER_ATTRIBUTE)
    if server is not None and server.secret != bytes(secret):
        raise PermissionError(f"{server.name} already serves another run (a different secret)")
    if server is not None and server.settings != RpcSettings.from_mapping(settings):
        raise ValueError(f"{server.name} already serves with other rpc settings")
    if server is None:
        if running_ray() is not None:
            adopt_secret(secret)  # a Ray actor joins its caller's run: its own callers use the same secret
        server = Server(self, name=_actor_name(self), secret=secret, settings=RpcSettings.from_mapping(settings),
                        patterns=frozenset(getattr(type(self), PATTERNS_ATTRIBUTE)))
        self.__dict__[_SERVER_ATTRIBUTE] = server
    server.callers += 1
    return server.endpoint()


def _stats(self: Any) -> dict[str, int]:
    """Counters of this object's server: served calls, gathered items, dropped messages by reason."""
    server: Server | None = self.__dict__.get(_SERVER_ATTRIBUTE)
    return dict(server.stats) if server is not None else {}


def _release(self: Any) -> None:
    """A local caller closed; the server stops when none is left."""
    server: Server | None = self.__dict__.get(_SERVER_ATTRIBUTE)
    if server is None:
        return
    server.callers -= 1
    if server.callers <= 0:
        server.stop()
        del self.__dict__[_SERVER_ATTRIBUTE]


def _mark(cls: T, pattern: str) -> T:
    ray = sys.modules.get("ray")
    if ray is not None and isinstance(cls, ray.actor.ActorClass):  # @all above @ray.remote(...)
        original = cls.__ray_metadata__.modified_class.__ray_actor_class__
        return ray.remote(**cls._default_options)(_mark(original, pattern))
    if not isinstance(cls, type):
        raise TypeError(f"@{pattern} decorates a class, not {cls!r}")
    setattr(cls, PATTERNS_ATTRIBUTE, frozenset(getattr(cls, PATTERNS_ATTRIBUTE, ())) | {pattern})
    for name, method in (("_lamarckian_rpc_start", _start), ("_lamarckian_rpc_stats", _stats),
                         ("_lamarckian_rpc_release", _release)):
        setattr(cls, name, method)
    return cls


def all(cls: T) -> T:  # noqa: A001 - the original Lamarckian's public name
    """Allow ``All(actors)('method', ...)``: call on every actor, results in actor order."""
    return _mark(cls, "all")


def any(cls: T) -> T:  # noqa: A001 - the original Lamarckian's public name
    """Allow ``Any(actors)('method', ...)``: call on one free actor."""
    return _mark(cls, "any")


def gather(cls: T) -> T:
    """Allow ``Gather(All(actors)).gathering('method')``: every actor streams the method's results."""
    return _mark(cls, "gather")

