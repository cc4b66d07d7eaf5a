"""Bulk streams: a caller's messages to a relay on another node over a TCP connection of their own, received
straight into the relay's shared-memory blocks.

Through ZeroMQ a 50 MB broadcast frame is read by libzmq's I/O thread into a freshly allocated buffer (every page
faulted in anew) and then copied into a block for the node's actors; measured between two network namespaces, that
path takes 2.2× as long as a plain socket reading into a reused buffer (docs/cluster.md). A stream skips both: the
relay reads each large frame with ``recv_into`` directly into the block its targets then map, and the caller's
writes run on a thread per stream, so the copies to several nodes go out at once.

What travels: each message is ``count`` (4 bytes, big-endian), ``count`` frame sizes (8 bytes each), then the
frames' bytes, the same frames (header, data, tag) that ZeroMQ would have carried. The relay verifies them exactly
as a ZeroMQ message (:meth:`.wire.Wire.unpack`: size, framing, trust, tag), so a stream adds no trust of its own; its
replies go back on the ZeroMQ link. A stream is opened only for a link that tags every message (between nodes
without CurveZMQ: a CurveZMQ link is encrypted, the stream would not be).

Authentication: on accepting, the relay sends 32 fresh random bytes ``s``; the caller answers with the routing id
``i`` of its ZeroMQ connection to the relay (16 bytes) and ``stream_proof(secret, s, i)``. The relay takes the
stream only if ``i`` is a peer that already passed the ZeroMQ handshake, and reads nothing else from it before
(at most 48 bytes, without blocking). A silent or wrong peer is closed and counted.
"""

from __future__ import annotations

import queue
import socket
import struct
import threading
from typing import Any, Callable, Sequence

from .auth import HANDSHAKE_NONCE_BYTES, TAG_BYTES, handshake_nonce, proofs_equal, stream_proof
from .errors import ProtocolError
from .local import BULK_BYTES, MAX_SHARED_FRAMES, Pool, SharedFrame, advance

IDENTITY_BYTES = 16
MAX_FRAMES = 4096                   # frames in one message on a stream
_COUNT = struct.Struct(">I")
_SIZE = struct.Struct(">Q")
_ANSWER_BYTES = IDENTITY_BYTES + TAG_BYTES
_IOV_MAX = 512                      # buffers per sendmsg (Linux allows 1024)


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


class StreamSender:
    """The caller's side: one TCP connection to a relay's stream port, written by a thread of its own (a send
    returns at once; messages go out in order). ``failure`` says why the stream broke (None while it works)."""

    def __init__(self, address: str, identity: bytes, secret: bytes, timeout: float) -> None:
        self.failure: str | None = None
        self._sock = socket.create_connection(_address(address), timeout)
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            nonce = _receive_exactly(self._sock, HANDSHAKE_NONCE_BYTES)
            self._sock.sendall(identity + stream_proof(secret, nonce, identity))
            self._sock.settimeout(None)
        except BaseException:
            self._sock.close()
            raise
        self._queue: queue.SimpleQueue[Sequence[Any] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"lamarckian-rpc-stream-{address}", daemon=True)
        self._thread.start()

    def send(self, frames: Sequence[Any]) -> None:
        """Queue one message (its buffers must stay unchanged until its reply came)."""
        self._queue.put(frames)

    def _run(self) -> None:
        while (frames := self._queue.get()) is not None:
            table = _COUNT.pack(len(frames)) + b"".join(_SIZE.pack(memoryview(f).nbytes) for f in frames)
            buffers: list[Any] = [table, *(memoryview(frame).cast("B") for frame in frames if len(frame))]
            try:
                while buffers:
                    buffers = advance(buffers, self._sock.sendmsg(buffers[:_IOV_MAX]))
            except OSError as error:
                self.failure = f"its bulk stream broke: {error}"
                return

    def close(self) -> None:
        """Stop the writer (a write blocked on a stuck relay is cut off) and close the connection."""
        self._queue.put(None)
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._thread.join(timeout=5)
        self._sock.close()


class StreamListener:
    """A relay's listening socket for bulk streams, bound where its ZeroMQ server is (never blocks)."""

    def __init__(self, host: str) -> None:
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.address = f"{host}:{self.sock.getsockname()[1]}"

    def accept(self, secret: bytes, timeout: float) -> "InboundStream | None":
        """A new stream awaiting its proof (its nonce sent), or None if the connection went away already."""
        try:
            sock, _ = self.sock.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return None
        try:
            return InboundStream(sock, secret, timeout)
        except OSError:
            sock.close()
            return None

    def close(self) -> None:
        self.sock.close()


class InboundStream:
    """The relay's side of one stream: first its proof, read as it comes (:meth:`authenticate`), then whole
    messages (:meth:`read`)."""

    def __init__(self, sock: socket.socket, secret: bytes, timeout: float) -> None:
        self.sock = sock
        self.identity: bytes | None = None
        self._secret = secret
        self._timeout = timeout
        self._nonce = handshake_nonce()
        self._answer = b""
        sock.setblocking(False)
        sock.sendall(self._nonce)           # 32 bytes into an empty send buffer: never blocks

    def fileno(self) -> int:
        return self.sock.fileno()

    def authenticate(self, is_peer: Callable[[bytes], bool]) -> bool:
        """Read what came of the proof without blocking; True once it holds (the stream then belongs to the
        authenticated ZeroMQ peer :attr:`identity`). Raises :class:`ProtocolError` for a wrong proof, a peer that
        is not authenticated on ZeroMQ, or a closed connection."""
        try:
            data = self.sock.recv(_ANSWER_BYTES - len(self._answer))
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as error:
            raise ProtocolError("malformed", f"a bulk stream failed before its proof: {error}") from None
        if not data:
            raise ProtocolError("malformed", "a bulk stream closed before its proof")
        self._answer += data
        if len(self._answer) < _ANSWER_BYTES:
            return False
        identity, proof = self._answer[:IDENTITY_BYTES], self._answer[IDENTITY_BYTES:]
        if not proofs_equal(stream_proof(self._secret, self._nonce, identity), proof) or not is_peer(identity):
            raise ProtocolError("unauthenticated", "a bulk stream's proof does not hold")
        self.identity = identity
        self.sock.settimeout(self._timeout)     # an authenticated peer silent mid-message for this long is dropped
        return True

    def read(self, pool: Pool, max_bytes: int) -> tuple[list[memoryview], dict[int, SharedFrame]]:
        """One whole message: its frames, and for each frame read into one of ``pool``'s blocks (those of
        :data:`~.local.BULK_BYTES` or more), the block's frame by ``id`` of the frame's view. Raises
        :class:`ProtocolError` (the stream is then of no more use) for a malformed or oversize message, a silence
        of the stream's timeout, or a closed connection."""
        try:
            (count,) = _COUNT.unpack(_receive_exactly(self.sock, _COUNT.size))
            if not 1 <= count <= MAX_FRAMES:
                raise ProtocolError("malformed", f"a bulk stream message of {count} frames")
            sizes = [size for (size,) in _SIZE.iter_unpack(_receive_exactly(self.sock, count * _SIZE.size))]
            if sum(sizes) > max_bytes:
                raise ProtocolError("oversize", f"{sum(sizes)} bytes over rpc.max_message_bytes={max_bytes}")
            frames: list[memoryview] = []
            blocks: dict[int, SharedFrame] = {}
            for size in sizes:
                shared = pool.reserve(size, {f.block for f in blocks.values()}) \
                    if size >= BULK_BYTES and len(blocks) < MAX_SHARED_FRAMES else None
                view = memoryview(shared.block.memory)[:size] if shared is not None else memoryview(bytearray(size))
                _receive_into(self.sock, view)
                frames.append(view)
                if shared is not None:
                    blocks[id(view)] = shared
            return frames, blocks
        except OSError as error:
            raise ProtocolError("malformed", f"a bulk stream broke mid-message: {error}") from None

    def close(self) -> None:
        self.sock.close()


def _receive_exactly(sock: socket.socket, nbytes: int) -> bytes:
    buffer = bytearray(nbytes)
    _receive_into(sock, memoryview(buffer))
    return bytes(buffer)


def _receive_into(sock: socket.socket, view: memoryview) -> None:
    """Fill ``view`` from ``sock`` (blocking up to the socket's timeout for each piece); OSError if it closes."""
    got = 0
    while got < view.nbytes:
        count = sock.recv_into(view[got:])
        if not count:
            raise ConnectionResetError("closed by the peer")
        got += count
