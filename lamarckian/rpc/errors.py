"""Exceptions raised by the RPC layer at the caller."""

from __future__ import annotations


class RPCError(Exception):
    """Base class of every error the RPC layer raises."""


class RemoteError(RPCError):
    """A remote method raised.

    Attributes:
        type_name: qualified name of the remote exception's type, e.g. ``"builtins.ValueError"``.
        remote_message: ``str()`` of the remote exception.
        remote_traceback: the remote traceback, formatted as text.
        actor: the name of the actor that raised.
    """

    def __init__(self, type_name: str, remote_message: str, remote_traceback: str, actor: str) -> None:
        super().__init__(f"{actor} raised {type_name}: {remote_message}\n--- remote traceback ---\n{remote_traceback}")
        self.type_name = type_name
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        self.actor = actor


class ActorDiedError(RPCError):
    """A peer's process died (or stopped answering heartbeats) while a call needed it.

    Attributes:
        actor: the dead peer's name.
        index: its position in the All/Any/Gather it was part of, or ``None``.
    """

    def __init__(self, actor: str, index: int | None = None, detail: str = "") -> None:
        where = "" if index is None else f" (index {index})"
        super().__init__(f"{actor}{where} died" + (f": {detail}" if detail else ""))
        self.actor = actor
        self.index = index


class ProtocolError(RPCError):
    """A received message is malformed, unauthenticated, oversize or of another protocol version.

    Attributes:
        reason: one of ``"malformed"``, ``"unauthenticated"``, ``"oversize"``, ``"version"``.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason} message" + (f": {detail}" if detail else ""))
        self.reason = reason
