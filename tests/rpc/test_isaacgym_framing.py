"""tools/isaacgym_server.py writes Lamarckian's framing out again (it runs under Isaac Gym's Python 3.8, where the
package cannot be installed): its constants and header layout must stay those of lamarckian/rpc."""

from __future__ import annotations

import importlib.util
import secrets
from pathlib import Path

import numpy as np

from lamarckian.rpc import RpcSettings, auth, codec, wire

SERVER = Path(__file__).resolve().parents[2] / "tools" / "isaacgym_server.py"


def load_server():
    spec = importlib.util.spec_from_file_location("isaacgym_server", SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_framing_constants_match_the_package():
    server = load_server()
    assert (server.MAGIC, server.VERSION) == (wire.MAGIC, wire.SEALED)  # the isaacgym server speaks the sealed framing
    assert server.PREFIX.format == wire._PREFIX.format
    assert server.PREFIX.size == wire.PREFIX_BYTES
    assert [server.PING, server.PONG, server.CALL, server.REPLY, server.ERROR] == \
        [wire.Kind.PING, wire.Kind.PONG, wire.Kind.CALL, wire.Kind.REPLY, wire.Kind.ERROR]
    assert (server.EXT_NDARRAY, server.EXT_TUPLE, server.EXT_SCALAR) == \
        (codec.EXT_NDARRAY, codec.EXT_TUPLE, codec.EXT_SCALAR)
    assert server.TAG_BYTES == auth.TAG_BYTES
    assert (server.LENGTH.format, server.COUNT.format) == (auth._LENGTH.format, auth._COUNT.format)


def test_a_reply_framed_by_the_server_is_read_by_the_package():
    server = load_server()
    key = secrets.token_bytes(32)
    value = {"obs": np.arange(6, dtype=np.float32).reshape(2, 3), "done": (True, 3)}
    body, frames = server.encode(value)
    header = server.PREFIX.pack(server.MAGIC, server.VERSION, server.REPLY, 42, secrets.token_bytes(16)) + body
    message = wire.Wire(key, RpcSettings.defaults(bulk_mac="hmac-sha256")).unpack(
        [header, *[bytes(f) for f in frames], server.tag(key, header, frames)])
    assert message.kind == wire.Kind.REPLY
    assert message.request_id == 42
    assert np.array_equal(message.value["obs"], value["obs"])
    assert message.value["done"] == (True, 3)
