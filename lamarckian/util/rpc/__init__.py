"""The seed's import path for the RPC callers; the code lives in :mod:`lamarckian.rpc`."""

from lamarckian.rpc import (  # noqa: F401
    ActorDiedError, All, Any, Gather, RemoteError, RPCError, RpcSettings, all, any, gather,
)
