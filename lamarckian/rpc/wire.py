"""Messages on the wire, in two framings.

``SEALED`` (framing byte 1): ``[header, *data_frames, tag]``; ``header`` = magic ``b"LK"`` (2 bytes), framing (1
byte), kind (1 byte), request id (8 bytes, big-endian), nonce (16 bytes), then the msgpack body of :mod:`.codec`;
``tag`` is the 32-byte HMAC of :mod:`.auth`. Used on links that need a tag per message (between nodes without
CurveZMQ, ``rpc.mac: always``) and by peers that do not handshake (``tools/isaacgym_server.py``).

``PLAIN`` (framing byte 2): ``[header, *data_frames]``, the header without the nonce. Accepted only from a peer
that passed the per-connection handshake (:mod:`.auth`) on a link that needs no tags, and for the handshake
messages themselves.

``data_frames`` are the raw array buffers the body references. Checks run in order of cost: size, shape,
framing, trust, tag, and only then is the body parsed.
"""

from __future__ import annotations

import enum
import struct
from typing import Any, Sequence

from . import codec
from .auth import TAG_BYTES, Signer
from .errors import ProtocolError
from .settings import RpcSettings

MAGIC = b"LK"
SEALED = 1
PLAIN = 2
_PREFIX = struct.Struct(">2sBBQ16s")    # sealed
_SHORT = struct.Struct(">2sBBQ")        # plain; also the start of a sealed header
PREFIX_BYTES = _PREFIX.size
SHORT_BYTES = _SHORT.size


class Kind(enum.IntEnum):
    """What a message asks or answers."""

    PING = 1  # client -> server: liveness (and the handshake of peers without one); body: None
    PONG = 2  # server -> client; body: {"name", "patterns"}
    CALL = 3  # body: [method, args, kwargs]
    REPLY = 4  # body: the return value
    ERROR = 5  # body: [type_name, message, traceback, actor]
    GATHER_START = 6  # body: [method, args, kwargs, credits, generation]
    GATHER_STOP = 7  # body: generation; answered by REPLY
    GATHER_ITEM = 8  # body: [generation, value] (or an ERROR-shaped list with kind ERROR)
    CREDIT = 9  # body: number of credits returned
    RELAY = 10  # body: {"targets": {relay address: [target...]}, "frames": n}; the last n data frames: inner message
    RELAY_REPLY = 11  # body: {"sizes": [frames per target or -1 if it died]}; data frames: inner replies
    HELLO = 12  # client -> server: the client's handshake nonce (32 bytes)
    CHALLENGE = 13  # server -> client: [server nonce, server proof]
    PROOF = 14  # client -> server: [client proof, sealed]; answered by PONG


HANDSHAKE_KINDS = frozenset({Kind.HELLO, Kind.CHALLENGE, Kind.PROOF})
_KINDS = {int(kind): kind for kind in Kind}     # a dict lookup, not an Enum call, per received message


class Trust(enum.IntEnum):
    """What a receiver accepts from one peer."""

    NONE = 0     # not authenticated yet: plain handshake messages only
    SEALED = 1   # sealed messages only (tag checked)
    CHANNEL = 2  # the connection is authenticated: plain messages, and sealed ones (tag checked)


class Message:
    """A received, verified and decoded message; ``frames`` keeps every data frame (for relays)."""

    __slots__ = ("kind", "request_id", "value", "frames")

    def __init__(self, kind: Kind, request_id: int, value: Any, frames: Sequence[memoryview]) -> None:
        self.kind = kind
        self.request_id = request_id
        self.value = value
        self.frames = frames


class Wire:
    """Packs and unpacks messages for one secret and one set of settings (one thread: the encoder is reused)."""

    def __init__(self, secret: bytes, settings: RpcSettings) -> None:
        self.signer = Signer(secret, settings.bulk_mac)
        self.settings = settings
        self._encoder = codec.Encoder()
        self._decoder = codec.Decoder(())
        self._max_bytes = settings.max_message_bytes

    def pack(self, kind: Kind, request_id: int, value: Any = None, extra: Sequence[Any] = (), *,
             sealed: bool = True) -> list[Any]:
        """Frames of one message; ``extra`` raw frames are appended after the value's own buffers."""
        body = self._encoder.encode(value)
        buffers = self._encoder.buffers
        if extra:
            buffers.extend(memoryview(frame) for frame in extra)
        if not sealed:
            return [_SHORT.pack(MAGIC, PLAIN, kind, request_id) + body, *buffers]
        nonce = self.signer.nonce()
        header = _PREFIX.pack(MAGIC, SEALED, kind, request_id, nonce) + body
        return [header, *buffers, self.signer.tag(header, nonce, buffers)]

    def unpack(self, frames: Sequence[Any], trust: Trust = Trust.SEALED) -> Message:
        """Verify and decode frames (bytes or ``zmq.Frame``) from a peer trusted as ``trust``; raises
        :class:`ProtocolError` with a reason (malformed, oversize, version, unauthenticated)."""
        if not frames or type(frames[0]) is memoryview:
            views = frames                                      # a node-local channel's
        else:
            try:
                views = [frame.buffer for frame in frames]      # zmq.Frame
            except AttributeError:
                views = [memoryview(frame) for frame in frames]  # bytes (a relay's inner frames)
        total = 0
        for view in views:
            total += view.nbytes
        if total > self._max_bytes:
            raise ProtocolError("oversize", f"{total} bytes over rpc.max_message_bytes={self._max_bytes}")
        if not views or views[0].nbytes < SHORT_BYTES:
            raise ProtocolError("malformed", f"{len(views)} frames")
        header = views[0]
        magic, framing, kind, request_id = _SHORT.unpack_from(header)
        if magic != MAGIC:
            raise ProtocolError("malformed", "bad magic")
        if framing == PLAIN:
            if trust != Trust.CHANNEL and kind not in HANDSHAKE_KINDS:
                raise ProtocolError("unauthenticated", "a plain message from a peer that has not passed the handshake")
            body, data = header[SHORT_BYTES:], views[1:]
        elif framing == SEALED:
            if len(views) < 2 or header.nbytes < PREFIX_BYTES or views[-1].nbytes != TAG_BYTES:
                raise ProtocolError("malformed", f"{len(views)} frames")
            if trust == Trust.NONE:
                raise ProtocolError("unauthenticated", "a call from a peer that has not passed the handshake")
            data = views[1:-1]
            self.signer.verify(header, bytes(header[SHORT_BYTES:PREFIX_BYTES]), data, bytes(views[-1]))
            body = header[PREFIX_BYTES:]
        else:
            raise ProtocolError("version", f"framing {framing}, expected {SEALED} or {PLAIN}")
        known = _KINDS.get(kind)
        if known is None:
            raise ProtocolError("malformed", f"unknown kind {kind}")
        self._decoder.buffers = data
        try:
            return Message(known, request_id, self._decoder.decode(body), data)
        finally:
            self._decoder.buffers = ()      # the next message's frames, not this one's, are kept (shared memory)
