"""The original Lamarckian's import path for the RPC decorators; the code lives in :mod:`lamarckian.rpc.decorators`."""

from lamarckian.rpc.decorators import all, any, gather  # noqa: F401
