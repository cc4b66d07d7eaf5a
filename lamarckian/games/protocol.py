"""The game-server protocol (docs/games.md): length-prefixed msgpack frames over TCP, typed arrays, gymnasium
spaces as plain descriptions, and the HMAC-SHA256 challenge-response that proves a per-game secret both ways.

A frame is a 4-byte big-endian unsigned length followed by that many bytes: one msgpack map with a string
``type``. Nothing is unpickled: arrays are msgpack extension type 1 (``[dtype name, shape, raw little-endian
bytes]``) or plain nested lists, checked against the declared space before anyone uses them.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import socket
import struct
from pathlib import Path
from typing import Any, Mapping, Sequence

import gymnasium
import msgpack
import numpy as np

VERSION = 1
HEADER = struct.Struct(">I")
EXT_ARRAY = 1
NONCE_BYTES = 32
MIN_SECRET_BYTES = 16
DEFAULT_MAX_FRAME = 16 * 2**20          # bytes of one frame, at most (hello says the server's)
MAX_DIMS = 8
#: dtypes an array may declare (always little-endian on the wire)
DTYPES = {name: np.dtype(name).newbyteorder("<") for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
    "float64")}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}      # a little-endian dtype → its name
CLIENT_MESSAGES = ("reset", "step", "close")
SERVER_MESSAGES = ("observation", "error")


class ProtocolViolation(ValueError):
    """Bytes or a message that break the protocol (the connection that sent them is closed)."""


def parse_address(address: str | None) -> tuple[str, int]:
    """``tcp://HOST:PORT`` (``[v6]`` hosts too) as ``(host, port)``; ValueError naming the address otherwise (None:
    not set)."""
    if address is None:
        raise ValueError("no game address is set: expected tcp://HOST:PORT")
    rest = address.removeprefix("tcp://")
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    if not address.startswith("tcp://") or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"game address {address!r}: expected tcp://HOST:PORT")
    return host, int(port)


# ---- frames ------------------------------------------------------------------------------------------------
def pack(message: Mapping[str, Any]) -> bytes:
    """One frame: the length prefix and the msgpack body of ``message`` (numpy arrays as extension type 1)."""
    try:
        body = _PACKER.pack(message)
    except BaseException:
        _PACKER.reset()
        raise
    return HEADER.pack(len(body)) + body


def _encode_extension(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        name = DTYPE_NAMES.get(value.dtype)
        if name is None:
            if value.dtype.name not in DTYPES:
                raise TypeError(f"arrays of {value.dtype} cannot travel (one of {', '.join(DTYPES)})")
            value, name = value.astype(DTYPES[value.dtype.name]), value.dtype.name     # to little-endian
        return msgpack.ExtType(EXT_ARRAY, _ARRAY_PACKER.pack((name, value.shape, value.tobytes())))
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot send {type(value).__name__}")


_PACKER = msgpack.Packer(default=_encode_extension, use_bin_type=True)     # reused: one per process (one thread)
_ARRAY_PACKER = msgpack.Packer(use_bin_type=True)                        # an array's header inside the other's call


def _decode_extension(code: int, data: bytes) -> np.ndarray:
    if code != EXT_ARRAY:
        raise ProtocolViolation(f"unknown msgpack extension type {code}")
    try:
        name, shape, raw = msgpack.unpackb(data, raw=False)
    except Exception as error:  # noqa: BLE001 - a peer's bytes: any failure is a violation
        raise ProtocolViolation(f"malformed array ({type(error).__name__})") from None
    if name not in DTYPES:
        raise ProtocolViolation(f"array dtype {name!r} is not one of {', '.join(DTYPES)}")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or \
            not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise ProtocolViolation(f"array shape {shape!r:.80} is not a list of at most {MAX_DIMS} sizes")
    if not isinstance(raw, bytes) or len(raw) != DTYPES[name].itemsize * int(np.prod(shape, dtype=np.int64)):
        raise ProtocolViolation(f"array of {name} {shape} does not have its size in bytes")
    return np.frombuffer(raw, DTYPES[name]).reshape(shape)


def unpack(body: bytes) -> dict[str, Any]:
    """The message of one frame's body; :class:`ProtocolViolation` unless it is a map with a string ``type``."""
    try:
        message = msgpack.unpackb(body, ext_hook=_decode_extension, raw=False, strict_map_key=False)
    except ProtocolViolation:
        raise
    except Exception as error:  # noqa: BLE001 - a peer's bytes: any failure is a violation
        raise ProtocolViolation(f"undecodable frame ({type(error).__name__}: {error})") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolViolation("a frame holds a map with a string 'type'")
    return message


class Frames:
    """Splits a byte stream into frame bodies (for ``asyncio.Protocol.data_received``: every complete frame of a
    chunk at once). ProtocolViolation for a frame over ``max_frame`` bytes."""

    def __init__(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        bodies, start, end = [], 0, len(self.buffer)
        while end - start >= HEADER.size:
            (length,) = HEADER.unpack_from(self.buffer, start)
            if length > self.max_frame:
                raise ProtocolViolation(f"a frame of {length} bytes is over the limit of {self.max_frame}")
            if end - start - HEADER.size < length:
                break
            bodies.append(bytes(self.buffer[start + HEADER.size:start + HEADER.size + length]))
            start += HEADER.size + length
        del self.buffer[:start]
        return bodies


async def read_message(reader: asyncio.StreamReader, max_frame: int) -> dict[str, Any]:
    """The next message; :class:`ProtocolViolation` for a frame over ``max_frame`` bytes or bad contents,
    ``asyncio.IncompleteReadError`` when the peer closes (mid-frame too)."""
    (length,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    if length > max_frame:
        raise ProtocolViolation(f"a frame of {length} bytes is over the limit of {max_frame}")
    return unpack(await reader.readexactly(length))


def receive(sock: socket.socket, max_frame: int) -> dict[str, Any]:
    """The next message from a blocking socket (:func:`read_message`'s twin); ConnectionError when it closes."""
    (length,) = HEADER.unpack(_exactly(sock, HEADER.size))
    if length > max_frame:
        raise ProtocolViolation(f"a frame of {length} bytes is over the limit of {max_frame}")
    return unpack(_exactly(sock, length))


def _exactly(sock: socket.socket, count: int) -> bytes:
    chunks, left = [], count
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# ---- the handshake -----------------------------------------------------------------------------------------
def read_secret(path: str | os.PathLike) -> bytes:
    """The per-game secret in ``path`` (surrounding white space ignored); ValueError naming the file when it is
    missing or shorter than 16 bytes."""
    file = Path(path).expanduser()
    try:
        secret = file.read_bytes().strip()
    except OSError as error:
        raise ValueError(f"game secret {file}: {error.strerror}") from None
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"game secret {file}: {len(secret)} bytes, at least {MIN_SECRET_BYTES} needed")
    return secret


def write_secret(path: str | os.PathLike) -> bytes:
    """Create ``path`` (mode 0600) holding a new random secret (64 hex digits) unless it exists; the secret. Safe
    when several processes do it at once: the file appears whole (written aside, then linked), and one wins."""
    file = Path(path).expanduser()
    if not file.exists():
        file.parent.mkdir(parents=True, exist_ok=True)
        aside = file.with_name(f".{file.name}.{os.getpid()}")
        descriptor = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(os.urandom(32).hex() + "\n")
        try:
            os.link(aside, file)
        except FileExistsError:
            pass
        finally:
            os.unlink(aside)
    return read_secret(file)


def proof(secret: bytes, role: bytes, first: bytes, second: bytes) -> bytes:
    """HMAC-SHA256 of ``role || first || second`` under the secret: what each side shows to prove it holds the
    secret (``role`` is ``b"client"`` or ``b"server"``, so one side's proof never passes for the other's)."""
    return hmac.new(secret, role + first + second, hashlib.sha256).digest()


def nonce() -> bytes:
    return os.urandom(NONCE_BYTES)


def check_nonce(message: Mapping[str, Any], what: str) -> bytes:
    value = message.get("nonce")
    if not isinstance(value, bytes) or len(value) != NONCE_BYTES:
        raise ProtocolViolation(f"{what}: 'nonce' must be {NONCE_BYTES} bytes")
    return value


def verify(expected: bytes, message: Mapping[str, Any]) -> bool:
    """Whether ``message['proof']`` equals ``expected`` (compared in constant time)."""
    given = message.get("proof")
    return isinstance(given, bytes) and hmac.compare_digest(given, expected)


def answer(secret: bytes, challenge: Mapping[str, Any]) -> tuple[dict[str, Any], bytes, bytes]:
    """The client's ``auth`` message answering a server's ``challenge``, and the two nonces (the client's, the
    server's) that :func:`accept_hello` needs. PermissionError for a refusal, ProtocolViolation off-protocol."""
    if challenge.get("type") == "error":
        raise PermissionError(f"the game server refused: {challenge.get('message')}")
    if challenge.get("type") != "challenge" or challenge.get("version") != VERSION:
        raise ProtocolViolation(f"expected a challenge of protocol version {VERSION}, got {challenge!r:.200}")
    server_nonce, own = check_nonce(challenge, "challenge"), nonce()
    auth = {"type": "auth", "version": VERSION, "nonce": own, "proof": proof(secret, b"client", server_nonce, own)}
    return auth, own, server_nonce


def accept_hello(secret: bytes, hello: Mapping[str, Any], own: bytes, server_nonce: bytes) -> dict[str, Any]:
    """``hello`` once its proof shows that the server holds the secret; PermissionError otherwise (or for a
    refusal), ProtocolViolation for anything off-protocol."""
    if hello.get("type") == "error":
        raise PermissionError(f"the game server refused: {hello.get('message')}")
    if hello.get("type") != "hello":
        raise ProtocolViolation(f"expected hello, got {hello.get('type')!r}")
    if not verify(proof(secret, b"server", own, server_nonce), hello):
        raise PermissionError("the game server did not prove the secret (wrong secret or an impostor)")
    player_specs(hello)
    return dict(hello)


def client_handshake(sock: socket.socket, secret: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> dict[str, Any]:
    """:func:`answer` and :func:`accept_hello` on a blocking socket; the server's ``hello``."""
    auth, own, server_nonce = answer(secret, receive(sock, max_frame))
    sock.sendall(pack(auth))
    return accept_hello(secret, receive(sock, max_frame), own, server_nonce)


async def client_handshake_async(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, secret: bytes,
                                 max_frame: int = DEFAULT_MAX_FRAME) -> dict[str, Any]:
    """:func:`client_handshake` on asyncio streams."""
    auth, own, server_nonce = answer(secret, await read_message(reader, max_frame))
    writer.write(pack(auth))
    return accept_hello(secret, await read_message(reader, max_frame), own, server_nonce)


# ---- spaces ------------------------------------------------------------------------------------------------
def describe_space(space: gymnasium.Space) -> dict[str, Any]:
    """A gymnasium space as plain data (see docs/games.md)."""
    if isinstance(space, gymnasium.spaces.Box):
        return {"type": "box", "shape": list(space.shape), "dtype": space.dtype.name,
                "low": space.low.reshape(-1).tolist(), "high": space.high.reshape(-1).tolist()}
    if isinstance(space, gymnasium.spaces.Discrete):
        return {"type": "discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return {"type": "multi_discrete", "nvec": space.nvec.reshape(-1).tolist(), "shape": list(space.shape),
                "start": space.start.reshape(-1).tolist()}
    if isinstance(space, gymnasium.spaces.MultiBinary):
        return {"type": "multi_binary", "n": space.n if isinstance(space.n, int) else np.asarray(space.n).tolist()}
    if isinstance(space, gymnasium.spaces.Dict):
        return {"type": "dict", "spaces": {name: describe_space(sub) for name, sub in space.spaces.items()}}
    if isinstance(space, gymnasium.spaces.Tuple):
        return {"type": "tuple", "spaces": [describe_space(sub) for sub in space.spaces]}
    raise ValueError(f"{type(space).__name__} spaces cannot be described (Box, Discrete, MultiDiscrete, "
                     "MultiBinary, Dict, Tuple)")


def build_space(description: Any, where: str = "space") -> gymnasium.Space:
    """Undo :func:`describe_space`; ProtocolViolation naming ``where`` for anything malformed."""
    if not isinstance(description, dict):
        raise ProtocolViolation(f"{where}: a space is a map, got {type(description).__name__}")
    kind = description.get("type")
    try:
        if kind == "box":
            shape = tuple(description["shape"])
            dtype = DTYPES[description.get("dtype", "float32")]
            low = np.asarray(description["low"], np.float64)
            high = np.asarray(description["high"], np.float64)
            low, high = (np.broadcast_to(bound, shape) if bound.size == 1 else bound.reshape(shape)
                         for bound in (low, high))
            return gymnasium.spaces.Box(low.astype(dtype), high.astype(dtype), shape, dtype.newbyteorder("="))
        if kind == "discrete":
            return gymnasium.spaces.Discrete(int(description["n"]), start=int(description.get("start", 0)))
        if kind == "multi_discrete":
            shape = description.get("shape", [len(description["nvec"])])
            start = np.asarray(description.get("start", np.zeros(len(description["nvec"]))), np.int64)
            return gymnasium.spaces.MultiDiscrete(np.asarray(description["nvec"], np.int64).reshape(shape),
                                                  start=start.reshape(shape))
        if kind == "multi_binary":
            count = description["n"]
            return gymnasium.spaces.MultiBinary(count if isinstance(count, int) else list(count))
        if kind == "dict":
            return gymnasium.spaces.Dict({str(name): build_space(sub, f"{where}.{name}")
                                          for name, sub in dict(description["spaces"]).items()})
        if kind == "tuple":
            if not isinstance(description["spaces"], list):
                raise TypeError("'spaces' is not a list")
            return gymnasium.spaces.Tuple([build_space(sub, f"{where}[{position}]")
                                           for position, sub in enumerate(description["spaces"])])
    except ProtocolViolation:
        raise
    except (KeyError, TypeError, ValueError, AssertionError) as error:
        raise ProtocolViolation(f"{where}: malformed {kind} space ({type(error).__name__}: {error})") from None
    raise ProtocolViolation(f"{where}: unknown space type {kind!r} (box, discrete, multi_discrete, multi_binary, "
                            "dict, tuple)")


def conform(value: Any, space: gymnasium.Space, where: str) -> Any:
    """``value`` (an extension array, nested lists or a number) as the space's numpy type and shape;
    ProtocolViolation naming ``where`` when it does not fit the shape or holds non-numbers."""
    if isinstance(space, gymnasium.spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            raise ProtocolViolation(f"{where}: expected a map with keys {sorted(space.spaces)}")
        return {name: conform(value[name], sub, f"{where}.{name}") for name, sub in space.spaces.items()}
    if isinstance(space, gymnasium.spaces.Tuple):
        if not isinstance(value, (list, tuple)) or len(value) != len(space.spaces):
            raise ProtocolViolation(f"{where}: expected a list of {len(space.spaces)} parts")
        return tuple(conform(part, sub, f"{where}[{position}]")
                     for position, (part, sub) in enumerate(zip(value, space.spaces)))
    if isinstance(space, gymnasium.spaces.Discrete):
        if isinstance(value, np.ndarray) and value.size == 1:
            value = value.reshape(-1)[0].item()
        if not isinstance(value, int) or isinstance(value, bool):
            raise ProtocolViolation(f"{where}: expected an integer, got {type(value).__name__}")
        if not space.start <= value < space.start + space.n:
            raise ProtocolViolation(f"{where}: {value} is outside {space}")
        return np.int64(value)
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):
        raise ProtocolViolation(f"{where}: not an array") from None
    if array.dtype.kind not in "biuf":
        raise ProtocolViolation(f"{where}: expected numbers, got {array.dtype}")
    if array.shape != space.shape:
        raise ProtocolViolation(f"{where}: shape {array.shape}, the space's is {space.shape}")
    if isinstance(space, (gymnasium.spaces.MultiDiscrete, gymnasium.spaces.MultiBinary)):
        low, high = (space.start, space.start + space.nvec) if isinstance(space, gymnasium.spaces.MultiDiscrete) \
            else (0, 2)
        if array.dtype.kind == "f" and not np.all(array == np.round(array)) or np.any(array < low) \
                or np.any(array >= high):
            raise ProtocolViolation(f"{where}: {array.tolist()!r:.80} is outside {space}")
    return array.astype(space.dtype, copy=False)


def encode_action(action: Any, space: gymnasium.Space) -> Any:
    """An action as plain msgpack (an int for Discrete, nested lists otherwise) that any game can read."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return int(np.asarray(action).reshape(-1)[0])
    if isinstance(space, gymnasium.spaces.Dict):
        return {name: encode_action(action[name], sub) for name, sub in space.spaces.items()}
    if isinstance(space, gymnasium.spaces.Tuple):
        return [encode_action(part, sub) for part, sub in zip(action, space.spaces)]
    return np.asarray(action, space.dtype).tolist()


def player_specs(hello: Mapping[str, Any]) -> list[tuple[str, gymnasium.Space, gymnasium.Space]]:
    """``(name, observation space, action space)`` of each seat the trainer plays, from a ``hello``."""
    players = hello.get("players")
    if not isinstance(players, list) or not players:
        raise ProtocolViolation("hello: 'players' must be a non-empty list")
    specs = []
    for seat, player in enumerate(players):
        if not isinstance(player, dict):
            raise ProtocolViolation(f"hello: players[{seat}] is not a map")
        specs.append((str(player.get("name", seat)), build_space(player.get("observation"),
                                                                 f"players[{seat}].observation"),
                      build_space(player.get("action"), f"players[{seat}].action")))
    return specs


def seat_list(value: Any, seats: int, where: str) -> list[int]:
    """Distinct seat numbers in ``0..seats-1``; ProtocolViolation otherwise."""
    if not isinstance(value, list) or not value or not all(
            isinstance(s, int) and not isinstance(s, bool) and 0 <= s < seats for s in value) \
            or len(set(value)) != len(value):
        raise ProtocolViolation(f"{where}: expected distinct seats in 0..{seats - 1}, got {value!r:.80}")
    return list(value)


def episode_id(message: Mapping[str, Any]) -> int:
    value = message.get("episode")
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
        raise ProtocolViolation(f"{message.get('type')}: 'episode' must be an integer in [0, 2^63)")
    return value


def result_of(value: Any, where: str) -> dict[str, Any]:
    """A seat's ``result`` map (``fitness``, optional ``win`` and ``objectives``) checked and made plain."""
    if not isinstance(value, dict) or not isinstance(value.get("fitness"), (int, float)):
        raise ProtocolViolation(f"{where}: a result is a map with a number 'fitness'")
    win = value.get("win")
    objectives = value.get("objectives") or {}
    if win is not None and not isinstance(win, (int, float)):
        raise ProtocolViolation(f"{where}: 'win' must be a number or nil")
    if not isinstance(objectives, dict) or not all(isinstance(k, str) and isinstance(v, (int, float))
                                                   for k, v in objectives.items()):
        raise ProtocolViolation(f"{where}: 'objectives' must map names to numbers")
    return {"fitness": float(value["fitness"]), "win": None if win is None else float(win),
            "objectives": {k: float(v) for k, v in objectives.items()}}


def seat_states(message: Mapping[str, Any], spaces: Sequence[gymnasium.Space], where: str) -> list[dict[str, Any]]:
    """The per-seat entries of an ``observation`` message, one per seat of its episode in the reset's order,
    checked: ``observation`` (conformed to the seat's space), ``reward``, ``done``, ``truncated``, ``result``
    (when done)."""
    players = message.get("players")
    if not isinstance(players, list) or len(players) != len(spaces):
        raise ProtocolViolation(f"{where}: 'players' must list {len(spaces)} seats")
    states = []
    for index, (entry, space) in enumerate(zip(players, spaces)):
        at = f"{where}.players[{index}]"
        if not isinstance(entry, dict):
            raise ProtocolViolation(f"{at}: not a map")
        reward, done, truncated = entry.get("reward", 0.0), entry.get("done", False), entry.get("truncated", False)
        if not isinstance(reward, (int, float)) or isinstance(reward, bool) or not isinstance(done, bool) \
                or not isinstance(truncated, bool):
            raise ProtocolViolation(f"{at}: 'reward' must be a number, 'done' and 'truncated' booleans")
        states.append({"observation": conform(entry.get("observation"), space, f"{at}.observation"),
                       "reward": float(reward), "done": done, "truncated": truncated and done,
                       "result": result_of(entry.get("result"), f"{at}.result") if done else None})
    return states
