"""ZeroMQ RPC over Ray: ``@all/@any/@gather`` decorators and the ``All/Any/Gather`` callers.

Ray creates and places processes and hands out addresses; every call's data travels over ZeroMQ on
connections that both sides authenticate with a handshake (HMAC-SHA256 tags per message only between nodes
without CurveZMQ), with arrays as zero-copy frames and nothing unpickled.
"""

from .auth import run_secret
from .callers import All, Any, Gather
from .decorators import all, any, gather  # noqa: A004 - the original Lamarckian's public names
from .errors import ActorDiedError, ProtocolError, RemoteError, RPCError
from .replacing import Replacements, connect_replacing
from .settings import RpcSettings

__all__ = [
    "All", "Any", "Gather", "all", "any", "gather",
    "ActorDiedError", "ProtocolError", "RemoteError", "RPCError", "RpcSettings", "run_secret",
    "connect_replacing", "Replacements",
]
