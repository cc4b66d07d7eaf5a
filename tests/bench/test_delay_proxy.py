"""bench/hostlib/delay.py: the userspace delaying proxy (this kernel has no netem) passes every byte, in order, each
way ``delay`` seconds late; closing it cuts its connections."""

from __future__ import annotations

import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from hostlib.delay import DelayProxy  # noqa: E402


def echo_server() -> socket.socket:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            while data := connection.recv(1 << 16):
                connection.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    return server


def receive(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, "closed early"
        data += chunk
    return data


def test_bytes_come_back_whole_in_order_and_a_round_trip_later_by_twice_the_delay():
    server = echo_server()
    proxy = DelayProxy(server.getsockname(), 0.05)
    payload = bytes(range(256)) * 4096                   # 1 MiB: many chunks, each delayed alike
    with socket.create_connection(("127.0.0.1", proxy.port)) as client:
        started = time.monotonic()
        client.sendall(payload)
        echoed = receive(client, len(payload))
        elapsed = time.monotonic() - started
    proxy.close()
    server.close()
    assert echoed == payload
    assert elapsed >= 0.1                                # out and back: 2 × 50 ms at least


def test_closing_the_proxy_cuts_its_connections():
    server = echo_server()
    proxy = DelayProxy(server.getsockname(), 0.0)
    client = socket.create_connection(("127.0.0.1", proxy.port))
    client.sendall(b"ping")
    assert receive(client, 4) == b"ping"
    proxy.close()
    client.settimeout(10)
    assert client.recv(1) == b""
    client.close()
    server.close()
