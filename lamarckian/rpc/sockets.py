"""Socket set-up shared by servers, relays and callers: heartbeats, size limits, CurveZMQ, bind address."""

from __future__ import annotations

import socket as stdlib_socket
import sys
from typing import Any, Iterator

import zmq

from .settings import RpcSettings

LOOPBACK = "127.0.0.1"
_SNDMORE, _EVENTS, _POLLIN = int(zmq.SNDMORE), int(zmq.EVENTS), int(zmq.POLLIN)   # plain ints: pyzmq's enum
                                                                                 # wrappers cost µs per message


def send_frames(socket: zmq.Socket, frames: list[Any]) -> None:
    """``send_multipart(frames, copy=False)`` without its per-call flag arithmetic (the hot path)."""
    last = len(frames) - 1
    for index, frame in enumerate(frames):
        socket.send(frame, _SNDMORE if index < last else 0, copy=False)


def readable_frames(socket: zmq.Socket) -> Iterator[list[zmq.Frame]]:
    """Every message waiting on ``socket`` now, as frames (``recv_multipart(copy=False)`` without its per-frame
    option lookups)."""
    while socket.get(_EVENTS) & _POLLIN:       # type: ignore[operator]  # EVENTS is an int option
        yield recv_frames(socket)


def recv_frames(socket: zmq.Socket) -> list[zmq.Frame]:
    """One whole message (blocking), as frames."""
    frames = [socket.recv(copy=False)]
    while frames[-1].more:
        frames.append(socket.recv(copy=False))
    return frames


def configure(socket: zmq.Socket, settings: RpcSettings) -> None:
    """Common options: no linger on close, ZMTP heartbeats (answered by libzmq's I/O thread, not Python)
    that drop a silent peer after ``settings.timeout``, and libzmq's own per-frame size limit."""
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.HEARTBEAT_IVL, int(settings.heartbeat * 1000))
    socket.setsockopt(zmq.HEARTBEAT_TIMEOUT, int(settings.timeout * 1000))
    socket.setsockopt(zmq.HEARTBEAT_TTL, int(settings.timeout * 1000))
    socket.setsockopt(zmq.MAXMSGSIZE, settings.max_message_bytes)


def make_server_curve(socket: zmq.Socket) -> bytes:
    """Turn on CurveZMQ for a server socket; returns its public key (Z85) to hand to clients via Ray."""
    if not zmq.has("curve"):
        raise RuntimeError("rpc.curve is on but this libzmq was built without CURVE support")
    public, secret = zmq.curve_keypair()
    socket.curve_secretkey = secret
    socket.curve_publickey = public
    socket.curve_server = True
    return public


def make_client_curve(socket: zmq.Socket, server_public_key: bytes) -> None:
    """Turn on CurveZMQ for a client socket talking to a server with ``server_public_key``."""
    public, secret = zmq.curve_keypair()
    socket.curve_secretkey = secret
    socket.curve_publickey = public
    socket.curve_serverkey = server_public_key


def running_ray() -> Any:
    """The ``ray`` module where this process is connected to Ray (a driver after ``ray.init``, a Ray worker), else
    None (Ray is never imported here)."""
    ray = sys.modules.get("ray")
    return ray if ray is not None and ray.is_initialized() else None


def node_id() -> str:
    """Ray's node id of this process, or the host name outside Ray."""
    ray = running_ray()
    if ray is not None:
        return ray.get_runtime_context().get_node_id()
    return stdlib_socket.gethostname()


def bind_host(settings: RpcSettings) -> str:
    """Where a server binds: ``settings.host`` if given; 127.0.0.1 when every node of the Ray cluster
    shares this machine's address (or outside Ray); otherwise this node's own IP."""
    if settings.host:
        return settings.host
    ray = running_ray()
    if ray is None:
        return LOOPBACK
    own = ray.util.get_node_ip_address()
    addresses = {node["NodeManagerAddress"] for node in ray.nodes() if node.get("Alive")}
    return LOOPBACK if addresses <= {own} else own


def bind_random_port(socket: zmq.Socket, host: str) -> str:
    """Bind to an OS-assigned port; returns the endpoint clients connect to."""
    socket.bind(f"tcp://{host}:*")
    return socket.getsockopt_string(zmq.LAST_ENDPOINT)
