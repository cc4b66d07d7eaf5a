"""The node-local channel: a link between two processes of one machine without TCP or libzmq's I/O thread.

A caller that finds an actor on its own node (same Ray node id, or same host outside Ray; ``rpc.local: auto``)
connects to the actor's Unix stream socket in the abstract namespace (no file, so nothing is left behind when
either side is SIGKILLed) and sends every message of that link on it, the handshake of :mod:`.auth` first: one
path per link, so nothing can overtake anything (the ZeroMQ connection stays open only for its heartbeats,
which still report a hung peer).

Large frames (:data:`BULK_BYTES` or more) travel through shared memory. The sender copies each into a *block*
of its :class:`Pool`: an anonymous in-memory file (``memfd_create``, no name in ``/dev/shm`` or anywhere, sealed
against resizing), passed once per peer with ``SCM_RIGHTS`` and mapped read-only by the receiver, who hands
out numpy views of it (no copy on the way in). When the receiver's last view of a frame is gone, it releases the
block (a release record with its next message); the sender reuses a block only when every peer it went to
released it or died, so no reader ever sees a block rewritten under it. A broadcast copies a frame once per
node and sends the same block to every actor there. The kernel frees a block's memory when the last process
that maps it drops it, SIGKILL included.

Record on the stream: ``<I`` frame count, then per frame ``<Q`` length (top bit: shared) and, for a shared
frame, ``<Q`` block id (top bit: the block's descriptor comes with this message); then the inline frames' bytes.
A count of ``0xFFFFFFFF`` is a release record: ``<I`` n, then n ``<Q`` block ids.

Safety: the socket name is 128 random bits; the server accepts only peers of its own uid (``SO_PEERCRED``) and
reads nothing but inline messages of at most :data:`HANDSHAKE_BYTES` from a peer that has not proved the run
secret; no block is sent before the handshake. Back-pressure: sockets are non-blocking; a sender whose socket is
full reads what the peer sent meanwhile into its inbox while it waits, so two peers sending to each other never
deadlock.
"""

from __future__ import annotations

import array
import collections
import errno
import fcntl
import itertools
import mmap
import os
import secrets
import select
import socket
import struct
import threading
import time
from typing import Any, Callable, Collection, NoReturn, Sequence

import numpy as np

BULK_BYTES = 64 << 10            # frames this large or larger travel through shared blocks
MAX_SHARED_FRAMES = 64           # per message (SCM_RIGHTS carries at most 253 descriptors)
MAX_BLOCKS = 32                  # per pool: when every one is still read by a peer, frames travel inline
MAX_FRAMES = 65536               # per message: a larger count is malformed
HANDSHAKE_BYTES = 4096           # the most an unauthenticated peer may send in one message
_COUNT = struct.Struct("<I")
_WORD = struct.Struct("<Q")
_ONE_FRAME = struct.Struct("<IQ")
_SHARED_BIT = 1 << 63            # in a length: the frame lies in a block
_NEW_BIT = 1 << 63               # in a block id: the block's descriptor comes with this message
_RELEASE = 0xFFFFFFFF            # a frame count that marks a release record
_READ_BYTES = 256 << 10
_FD_BYTES = array.array("i").itemsize
_ANCILLARY_BYTES = socket.CMSG_SPACE(MAX_SHARED_FRAMES * _FD_BYTES)
_CTRUNC, _CLOEXEC = int(socket.MSG_CTRUNC), int(socket.MSG_CMSG_CLOEXEC)    # plain ints: enum operators cost µs
_DONTWAIT = int(socket.MSG_DONTWAIT)
_TIMEVAL = struct.Struct("ll")
_POLLIN, _POLLOUT, _POLLHANGUP = select.POLLIN, select.POLLOUT, select.POLLERR | select.POLLHUP
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
_NAME_PREFIX = "lamarckian-rpc-"
_block_ids = itertools.count(1)


class ChannelClosed(Exception):
    """The peer closed the channel (its process ended or was killed) or sent something unreadable."""


def machine_id() -> str:
    """This kernel's boot id (two processes with the same one can share a channel), or "" where unknown."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as file:
            return file.read().strip()
    except OSError:
        return ""


def available() -> bool:
    """Whether this platform has what the channel needs (Linux: memfds, seals, abstract Unix sockets)."""
    return hasattr(os, "memfd_create") and hasattr(fcntl, "F_ADD_SEALS") and hasattr(socket, "SO_PEERCRED")


# --- the sender's shared memory -------------------------------------------------------------------------


class Block:
    """One reusable memfd of a sender, mapped read-write here and read-only by its receivers; ``holders`` are
    the channels whose peer may still read it."""

    __slots__ = ("id", "fd", "capacity", "memory", "holders")

    def __init__(self, capacity: int) -> None:
        self.id = next(_block_ids)
        self.capacity = capacity
        self.fd = os.memfd_create("lamarckian-block", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.fd, capacity)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, _SEALS)
            self.memory = mmap.mmap(self.fd, capacity, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self.fd)
            raise
        self.holders: set[Channel] = set()

    def close(self) -> None:
        os.close(self.fd)
        self.memory.close()


class SharedFrame:
    """A frame written into a :class:`Block` (its first ``nbytes``)."""

    __slots__ = ("block", "nbytes")

    def __init__(self, block: Block, nbytes: int) -> None:
        self.block = block
        self.nbytes = nbytes

    def __len__(self) -> int:
        return self.nbytes


class Pool:
    """A sender's blocks (one per caller link, one per served channel). A frame goes into the smallest free block
    that fits, or a new one sized to the next power of two: one copy, on the sending side only. A pool keeps its
    blocks (and their pages) until it closes, :data:`MAX_BLOCKS` at most: when a receiver keeps every one of them
    (a replay buffer of received arrays), further frames travel inline instead."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []

    def put(self, buffer: Any, taken: Collection[Block] = ()) -> SharedFrame | None:
        """Copy ``buffer`` (any contiguous buffer) into a free block other than ``taken`` (those an earlier frame of
        the same message went into: no peer holds them yet, but they are not free); None when the pool is full."""
        view = memoryview(buffer)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        frame = self.reserve(view.nbytes, taken)
        if frame is not None:
            frame.block.memory[:view.nbytes] = view
        return frame

    def reserve(self, nbytes: int, taken: Collection[Block] = ()) -> SharedFrame | None:
        """A free block of ``nbytes`` or more other than ``taken``, for the caller to fill (its first ``nbytes``)
        before it sends the frame; None when the pool is full."""
        best = None
        for block in self.blocks:
            if not block.holders and block not in taken and block.capacity >= nbytes and \
                    (best is None or block.capacity < best.capacity):
                best = block
        if best is None:
            if len(self.blocks) >= MAX_BLOCKS:
                return None
            best = Block(max(BULK_BYTES, 1 << (nbytes - 1).bit_length()))
            self.blocks.append(best)
        return SharedFrame(best, nbytes)

    def share_large(self, frames: Sequence[Any]) -> list[Any]:
        """``frames`` with each of :data:`BULK_BYTES` or more (up to :data:`MAX_SHARED_FRAMES`) put into a block:
        do it once, then send the result on every channel that should get it."""
        taken: set[Block] = {frame.block for frame in frames if isinstance(frame, SharedFrame)}
        out: list[Any] = []
        for frame in frames:
            if (len(taken) < MAX_SHARED_FRAMES and not isinstance(frame, SharedFrame)
                    and memoryview(frame).nbytes >= BULK_BYTES):
                put = self.put(frame, taken)
                if put is not None:
                    taken.add(put.block)
                    frame = put
            out.append(frame)
        return out

    def close(self) -> None:
        """Close this side of every block (receivers keep what they mapped)."""
        for block in self.blocks:
            block.close()
        self.blocks.clear()


# --- the receiver's views ------------------------------------------------------------------------------


class _Region:
    """What a received frame's array is built on: its own private, copy-on-write mapping of the frame's bytes in
    the sender's block (reading shares the sender's pages; a write, say through ``torch.from_numpy``, gets a page
    of its own instead of a crash or a change the sender would see). The array is flagged read-only, as one over a
    ZeroMQ frame is. When the last array over it is gone, the block goes back to the sender (listed in the next
    message this side sends) and the mapping is dropped."""

    __slots__ = ("__array_interface__", "_memory", "_released", "_block")

    def __init__(self, fd: int, nbytes: int, block: int, released: collections.deque[int]) -> None:
        self._released = released
        self._block = block
        self._memory = mmap.mmap(fd, nbytes, access=mmap.ACCESS_COPY)
        address = np.frombuffer(self._memory, np.uint8).ctypes.data
        self.__array_interface__ = {"data": (address, True), "shape": (nbytes,), "typestr": "|u1", "version": 3}

    def __del__(self) -> None:
        self._released.append(self._block)


class _Block:
    """The receiver's descriptor of one of the peer's blocks (checked once: sealed against shrinking)."""

    __slots__ = ("fd", "capacity")

    def __init__(self, fd: int) -> None:
        try:
            if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & _SEALS != _SEALS:
                raise ChannelClosed("a block that is not sealed against shrinking")
            self.capacity = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def close(self) -> None:
        os.close(self.fd)


# --- one end of a link -----------------------------------------------------------------------------------


class Channel:
    """One end of a node-local link (either side): whole messages in, whole messages out, in order.

    ``trusted`` is False until the peer proved the run secret: until then a message may carry no block and at
    most :data:`HANDSHAKE_BYTES`; after, up to ``max_bytes``. ``pool`` holds the blocks this side sends.
    """

    def __init__(self, sock: socket.socket, max_bytes: int, *, trusted: bool = False) -> None:
        sock.setblocking(True)      # a wait is one blocking syscall (SO_RCVTIMEO bounds it); other calls pass DONTWAIT
        self.sock = sock
        self.max_bytes = max_bytes
        self.trusted = trusted
        self.closed = False
        self.pool = Pool()
        self._fileno = sock.fileno()
        self._buffer = bytearray(_READ_BYTES)
        self._view = memoryview(self._buffer)
        self._rest = b""
        self._fds: collections.deque[int] = collections.deque()
        self._inbox: collections.deque[list[Any]] = collections.deque()
        self._blocks: dict[int, _Block] = {}                                # the peer's blocks we were sent
        self._released: collections.deque[int] = collections.deque()     # blocks of the peer we are done with
        self._lent: dict[int, Block] = {}                                   # our blocks the peer may still read
        self._mapped: set[int] = set()                                      # our blocks the peer has mapped
        self._timeout: float | None = None
        self._sent_at = 0.0
        self._gap = 0.0

    def fileno(self) -> int:
        return self._fileno

    # --- sending ------------------------------------------------------------------------------------

    def send(self, frames: Sequence[Any]) -> None:
        """Send one message. Large frames go through this channel's pool unless they already are
        :class:`SharedFrame` (a broadcast's, put once). Blocks while the socket is full, reading the peer's
        messages meanwhile. Raises :class:`ChannelClosed` if the peer is gone."""
        if len(frames) == 1 and not self._released:     # a small call or reply: the hot path
            frame = frames[0]
            nbytes = len(frame) if isinstance(frame, bytes) else memoryview(frame).nbytes
            if nbytes < BULK_BYTES:
                self._send_buffers([_ONE_FRAME.pack(1, nbytes), frame], None, _ONE_FRAME.size + nbytes)
                return
        if self.trusted:            # nothing is shared before the handshake
            frames = self.pool.share_large(frames)
        table = bytearray(self._release_record())
        table += _COUNT.pack(len(frames))
        inline: list[Any] = []
        fds = array.array("i")
        total = 0
        for frame in frames:
            if isinstance(frame, SharedFrame):
                block = frame.block
                table += _WORD.pack(frame.nbytes | _SHARED_BIT)
                if block.id in self._mapped:
                    table += _WORD.pack(block.id)
                else:
                    table += _WORD.pack(block.id | _NEW_BIT)
                    fds.append(block.fd)
                self._lend(block)
            else:
                view = memoryview(frame)
                table += _WORD.pack(view.nbytes)
                if view.nbytes:
                    inline.append(view)
                    total += view.nbytes
        self._send_buffers([table, *inline], fds, total + len(table))

    def _lend(self, block: Block) -> None:
        self._mapped.add(block.id)
        self._lent[block.id] = block
        block.holders.add(self)

    def _release_record(self) -> bytes:
        """The blocks of the peer this side no longer reads, as a release record (empty if none)."""
        if not self._released:
            return b""
        ids = []
        while self._released:
            ids.append(self._released.popleft())
        return _COUNT.pack(_RELEASE) + _COUNT.pack(len(ids)) + struct.pack(f"<{len(ids)}Q", *ids)

    def _send_buffers(self, buffers: list[Any], fds: array.array | None, total: int) -> None:
        """Send ``buffers`` (``total`` bytes) and ``fds`` whole."""
        self._sent_at = time.perf_counter()
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)] if fds else []
        while buffers:
            try:
                sent = self.sock.sendmsg(buffers, ancillary, _DONTWAIT)
            except BlockingIOError:
                self._wait_writable()
                continue
            except InterruptedError:
                continue
            except OSError as error:
                self._fail(f"send: {error}")
            if sent == total:
                return
            ancillary = []      # the descriptors went with the first byte
            total -= sent
            buffers = advance(buffers, sent)
            if buffers:
                self._wait_writable()

    def _wait_writable(self) -> None:
        """Wait until the socket takes more, reading whatever the peer sends meanwhile into the inbox."""
        waiting = select.poll()
        waiting.register(self._fileno, _POLLIN | _POLLOUT)
        for _, events in waiting.poll():
            if events & _POLLIN:
                self._read()
            elif events & _POLLHANGUP:
                self._fail("peer hung up")

    # --- receiving ----------------------------------------------------------------------------------

    def pending(self) -> bool:
        """Whether whole messages wait in the inbox (read while sending)."""
        return bool(self._inbox)

    def recv(self, timeout: float | None, spin: float = 0.0, *, adaptive: bool = False) -> list[Any] | None:
        """The next message as a list of frames (memoryviews; shared ones are read-only views of the sender's
        block), or None if none came within ``timeout`` seconds (None: wait for ever). It polls for up to ``spin``
        seconds before it sleeps in the kernel (a message that comes that soon skips a wake-up); ``adaptive``
        polls only while messages have lately come within a third of ``spin`` of this side's last send, and
        for twice that gap at most (a server answering a caller that calls it again at once, not one whose calls
        go round several actors or come now and then: there the polling would only take a core from them).
        Raises :class:`ChannelClosed`."""
        if self.closed:
            raise ChannelClosed("closed")
        if adaptive:
            spin = 2 * self._gap if self._gap < spin / 3 else 0.0
        if spin and not self._inbox:
            deadline = time.perf_counter() + spin
            while not self._read() and time.perf_counter() < deadline:
                os.sched_yield()        # a thread that has work to do gets the core first
        if timeout != self._timeout:
            seconds = 0.0 if timeout is None else max(timeout, 1e-6)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                                 _TIMEVAL.pack(int(seconds), int(seconds % 1 * 1e6)))
            self._timeout = timeout
        while not self._inbox:
            if not self._read(wait=True):
                return None
        if adaptive:        # how soon after our last send this came (a moving average, seconds)
            self._gap += 0.25 * (time.perf_counter() - self._sent_at - self._gap)
        return self._inbox.popleft()

    def drain(self) -> list[list[Any]]:
        """Every whole message available now, without blocking (the inbox first). Raises :class:`ChannelClosed`
        only when nothing was left to hand out before the peer went away."""
        try:
            self._read()
        except ChannelClosed:
            if not self._inbox:
                raise
        messages = list(self._inbox)
        self._inbox.clear()
        return messages

    def _read(self, wait: bool = False) -> bool:
        """Read what the socket holds (after waiting up to the receive timeout for the first bytes, with
        ``wait``) and parse every whole message into the inbox; False if nothing came."""
        flags = _CLOEXEC if wait else _CLOEXEC | _DONTWAIT
        got = False
        while True:
            try:
                size, ancillary, received, _ = self.sock.recvmsg_into([self._buffer], _ANCILLARY_BYTES, flags)
            except BlockingIOError:
                return got
            except InterruptedError:
                continue
            except OSError as error:
                self._fail(f"receive: {error}")
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds = array.array("i")
                    fds.frombytes(payload[: len(payload) - len(payload) % _FD_BYTES])
                    self._fds.extend(fds)
            if received & _CTRUNC:
                self._fail("descriptors were cut off")
            if not size:
                self._fail("closed by the peer")
            got = True
            data = self._view[:size]
            self._rest = self._rest + data if self._rest else bytes(data)
            self._parse()
            if size < _READ_BYTES:
                return True
            flags = _CLOEXEC | _DONTWAIT

    def _parse(self) -> None:
        data = self._rest
        view = memoryview(data)
        offset = 0
        while True:
            end = self._parse_one(view, offset)
            if end is None:
                break
            offset = end
        self._rest = bytes(view[offset:]) if offset else data

    def _parse_one(self, view: memoryview, offset: int) -> int | None:
        """Take the record at ``offset``: a message goes to the inbox, a release frees our blocks. Returns the
        offset after it, or None if it is not all here yet."""
        if len(view) - offset < _COUNT.size:
            return None
        (count,) = _COUNT.unpack_from(view, offset)
        position = offset + _COUNT.size
        if count == _RELEASE:
            return self._parse_release(view, position)
        if count == 1 and len(view) >= position + _WORD.size and not _WORD.unpack_from(view, position)[0] & _SHARED_BIT:
            return self._parse_small(view, position)
        return self._parse_frames(view, position, count)

    def _parse_small(self, view: memoryview, position: int) -> int | None:
        """One inline frame (a small call or reply: the hot path)."""
        (length,) = _WORD.unpack_from(view, position)
        if length > (self.max_bytes if self.trusted else HANDSHAKE_BYTES):
            self._fail(f"a message of {length} bytes from a peer allowed less")
        start = position + _WORD.size
        if len(view) < start + length:
            return None
        self._inbox.append([view[start:start + length]])
        return start + length

    def _parse_frames(self, view: memoryview, position: int, count: int) -> int | None:
        """A message of ``count`` frames, inline or shared."""
        if count > MAX_FRAMES:
            self._fail(f"{count} frames in one message")
        entries = []        # (length, block id or None)
        inline = total = 0
        for _ in range(count):
            if len(view) < position + _WORD.size:
                return None
            (length,) = _WORD.unpack_from(view, position)
            position += _WORD.size
            if length & _SHARED_BIT:
                if not self.trusted or len(view) < position + _WORD.size:
                    if not self.trusted:
                        self._fail("a shared frame from a peer that has not passed the handshake")
                    return None
                (block,) = _WORD.unpack_from(view, position)
                position += _WORD.size
                length &= ~_SHARED_BIT
                entries.append((length, block))
            else:
                inline += length
                entries.append((length, None))
            total += length
            limit = self.max_bytes if self.trusted else HANDSHAKE_BYTES
            if total > limit:
                self._fail(f"a message of {total}+ bytes from a peer allowed {limit}")
        if len(view) < position + inline:
            return None
        frames: list[Any] = []
        for length, block in entries:
            if block is None:
                frames.append(view[position:position + length])
                position += length
            else:
                frames.append(self._region(block, length))
        self._inbox.append(frames)
        return position

    def _parse_release(self, view: memoryview, position: int) -> int | None:
        if len(view) < position + _COUNT.size:
            return None
        (count,) = _COUNT.unpack_from(view, position)
        position += _COUNT.size
        if len(view) < position + count * _WORD.size:
            return None
        for block_id in struct.unpack_from(f"<{count}Q", view, position):
            block = self._lent.pop(block_id, None)
            if block is not None:
                block.holders.discard(self)
        return position + count * _WORD.size

    def _region(self, block: int, nbytes: int) -> memoryview:
        """A read-only view of the first ``nbytes`` of the peer's block (mapped on first sight)."""
        if block & _NEW_BIT:
            block &= ~_NEW_BIT
            if not self._fds:
                self._fail("a new block without its descriptor")
            try:
                known = _Block(self._fds.popleft())
            except (OSError, ChannelClosed) as error:
                self._fail(f"a block that cannot be used: {error}")
            old = self._blocks.pop(block, None)
            if old is not None:
                old.close()
            self._blocks[block] = known
        found = self._blocks.get(block)
        if found is None or nbytes > found.capacity:
            self._fail(f"a frame of {nbytes} bytes in unknown or smaller block {block}")
        try:
            region = _Region(found.fd, nbytes, block, self._released)
        except OSError as error:
            self._fail(f"a block that cannot be mapped: {error}")
        return memoryview(np.asarray(region))      # type: ignore[arg-type]  # numpy arrays are buffers

    # --- closing ------------------------------------------------------------------------------------

    def _fail(self, why: str) -> NoReturn:
        self.close()
        raise ChannelClosed(why)

    def close(self) -> None:
        """Close the socket, every descriptor received but not mapped yet, and this side's pool; the peer's
        blocks still in use here stay mapped until their arrays are gone. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.shutdown()
        self.sock.close()
        while self._fds:
            os.close(self._fds.popleft())
        for block in self._lent.values():
            block.holders.discard(self)
        self._lent.clear()
        for known in self._blocks.values():
            known.close()
        self._blocks.clear()
        self.pool.close()

    def shutdown(self) -> None:
        """Wake a thread blocked in :meth:`recv` on this channel (it sees the channel closed)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def advance(buffers: list[Any], sent: int) -> list[Any]:
    """What is left of ``buffers`` after ``sent`` bytes went out."""
    for index, buffer in enumerate(buffers):
        view = memoryview(buffer).cast("B")
        if sent < view.nbytes:
            return [view[sent:], *buffers[index + 1:]]
        sent -= view.nbytes
    return []


# --- making channels -------------------------------------------------------------------------------------


def connect(name: str, max_bytes: int) -> Channel:
    """Connect to the listener called ``name`` (an endpoint's ``local``); raises ``OSError`` if it is not there."""
    if not name.startswith(_NAME_PREFIX):
        raise OSError(errno.EINVAL, f"not a lamarckian channel name: {name!r}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.connect("\0" + name)
    except OSError:
        sock.close()
        raise
    return Channel(sock, max_bytes)


class Listener:
    """Accepts channels on an abstract Unix socket from one thread; peers of another uid are refused.

    ``on_channel(channel)`` is called on the accepting thread for each new channel (untrusted until the
    handshake); ``refused`` counts peers of other users.
    """

    def __init__(self, on_channel: Callable[[Channel], None], max_bytes: int) -> None:
        self.name = _NAME_PREFIX + secrets.token_hex(16)
        self.refused = 0
        self._on_channel = on_channel
        self._max_bytes = max_bytes
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        self._sock.bind("\0" + self.name)
        self._sock.listen(128)
        self._thread = threading.Thread(target=self._accept, name="lamarckian-rpc-local", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        uid = os.getuid()
        credentials = struct.Struct("3i")
        while True:
            try:
                sock, _ = self._sock.accept()
            except OSError:
                return      # stop() shut the socket down
            peer = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, credentials.size)
            _, peer_uid, _ = credentials.unpack(peer)
            if peer_uid != uid:
                self.refused += 1
                sock.close()
                continue
            self._on_channel(Channel(sock, self._max_bytes))

    def stop(self) -> None:
        """Stop accepting (idempotent); channels already made stay open."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
