"""The chaos harness (bench/chaos.py): its stalling proxy on real loopback sockets, and every scenario under its
faults for 5 minutes in all (slow: CI keeps it), which must end with every check held."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY / "bench"))

from chaoslib.faults import StallProxy  # noqa: E402


@pytest.fixture
def echo_server():
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            while data := connection.recv(1024):
                connection.sendall(data)

    import threading

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def test_the_proxy_passes_bytes_and_holds_them_while_stalled(echo_server):
    proxy = StallProxy("127.0.0.1", echo_server)
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        client.sendall(b"before")
        assert client.recv(1024) == b"before"
        proxy.stall(1.0)
        started = time.monotonic()
        client.sendall(b"during")
        assert client.recv(1024) == b"during"
        assert time.monotonic() - started >= 0.8
        client.close()
    finally:
        proxy.close()


def test_the_proxy_refuses_any_address_but_loopback():
    with pytest.raises(ValueError, match="loopback"):
        StallProxy("192.0.2.1", 9)


@pytest.mark.slow
def test_every_scenario_survives_five_minutes_of_faults(tmp_path):
    completed = subprocess.run([sys.executable, "bench/chaos.py", "--minutes", "5", "--out", str(tmp_path)],
                               cwd=REPOSITORY, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-3000:]
