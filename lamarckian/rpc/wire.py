"""Messages on the wire: ``[header, *data_frames, tag]``.

``header`` = magic ``b"LK"`` (2 bytes), protocol version (1 byte), kind (1 byte), request id (8 bytes,
big-endian), nonce (16 bytes), then the msgpack body made by :mod:`.codec`. ``data_frames`` are the raw
array buffers the body references; ``tag`` is the 32-byte HMAC of :mod:`.auth`. Checks run in order of
cost: size, shape, version, tag, and only then is the body parsed.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from typing import Any, Sequence

from . import codec
from .auth import TAG_BYTES, Signer
from .errors import ProtocolError
from .settings import RpcSettings

MAGIC = b"LK"
VERSION = 1
_PREFIX = struct.Struct(">2sBBQ16s")
PREFIX_BYTES = _PREFIX.size


class Kind(enum.IntEnum):
    """What a message asks or answers."""

    PING = 1  # client -> server: handshake / liveness; body: None
    PONG = 2  # server -> client; body: {"name", "patterns"}
    CALL = 3  # body: [method, args, kwargs]
    REPLY = 4  # body: the return value
    ERROR = 5  # body: [type_name, message, traceback, actor]
    GATHER_START = 6  # body: [method, args, kwargs, credits, generation]
    GATHER_STOP = 7  # body: generation; answered by REPLY
    GATHER_ITEM = 8  # body: [generation, value] (or an ERROR-shaped list with kind ERROR)
    CREDIT = 9  # body: number of credits returned
    RELAY = 10  # body: {"targets": [address...], "frames": n}; the last n data frames are the inner message
    RELAY_REPLY = 11  # body: {"sizes": [frames per target or -1 if it died]}; data frames: inner replies


_KINDS = {int(kind): kind for kind in Kind}     # a dict lookup, not an Enum call, per received message


@dataclasses.dataclass
class Message:
    """A received, verified and decoded message; ``frames`` keeps every data frame (for relays)."""

    kind: Kind
    request_id: int
    value: Any
    frames: Sequence[memoryview]


class Wire:
    """Packs and unpacks messages for one secret and one set of settings."""

    def __init__(self, secret: bytes, settings: RpcSettings) -> None:
        self.signer = Signer(secret, settings.bulk_mac)
        self.settings = settings

    def pack(self, kind: Kind, request_id: int, value: Any = None, extra: Sequence[Any] = ()) -> list[Any]:
        """Frames of one message; ``extra`` raw frames are appended after the value's own buffers."""
        body, buffers = codec.encode(value, self.settings.serializer)
        buffers.extend(memoryview(frame) for frame in extra)
        nonce = self.signer.nonce()
        header = _PREFIX.pack(MAGIC, VERSION, int(kind), request_id, nonce) + body
        return [header, *buffers, self.signer.tag(header, nonce, buffers)]

    def unpack(self, frames: Sequence[Any], *, decode: bool = True) -> Message:
        """Verify and decode frames (bytes or ``zmq.Frame``); raises :class:`ProtocolError` with a reason."""
        views = [frame.buffer if hasattr(frame, "buffer") else memoryview(frame) for frame in frames]
        total = 0
        for view in views:
            total += view.nbytes
        if total > self.settings.max_message_bytes:
            raise ProtocolError("oversize", f"{total} bytes over rpc.max_message_bytes={self.settings.max_message_bytes}")
        if len(views) < 2 or views[0].nbytes < PREFIX_BYTES or views[-1].nbytes != TAG_BYTES:
            raise ProtocolError("malformed", f"{len(views)} frames")
        header, data, tag = views[0], views[1:-1], views[-1]
        magic, version, kind, request_id, nonce = _PREFIX.unpack_from(header)
        if magic != MAGIC:
            raise ProtocolError("malformed", "bad magic")
        if version != VERSION:
            raise ProtocolError("version", f"protocol {version}, expected {VERSION}")
        self.signer.verify(header, nonce, data, bytes(tag))
        known = _KINDS.get(kind)
        if known is None:
            raise ProtocolError("malformed", f"unknown kind {kind}")
        kind = known
        value = codec.decode(header[PREFIX_BYTES:], data, self.settings.serializer) if decode else None
        return Message(kind, request_id, value, data)

