"""The reference server as a process, against hostile clients: a wrong secret, oversize, undecodable and truncated
frames, wrong episode ids, wrong action types. It answers or drops the one client and keeps serving the others."""

from __future__ import annotations

import socket

import pytest

from lamarckian.games import protocol

from .helpers import ServerProcess


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    server = ServerProcess(tmp_path_factory.mktemp("game"), ["--env", "CartPole-v1"])
    yield server
    server.stop()


def connect(server: ServerProcess, secret: bytes | None = None) -> tuple[socket.socket, dict]:
    sock = socket.create_connection(protocol.parse_address(server.address), timeout=10)
    hello = protocol.client_handshake(sock, secret or protocol.read_secret(server.secret))
    return sock, hello


def ask(sock: socket.socket, message: dict) -> dict:
    sock.sendall(protocol.pack(message))
    return protocol.receive(sock, protocol.DEFAULT_MAX_FRAME)


def test_hello_describes_the_players(cartpole):
    sock, hello = connect(cartpole)
    sock.close()
    assert [(str(observation), str(action)) for _, observation, action in protocol.player_specs(hello)] == \
        [("Box([-4.8               -inf -0.41887903        -inf], [4.8               inf 0.41887903        inf], "
          "(4,), float32)", "Discrete(2)")]


def test_a_wrong_secret_is_refused(cartpole):
    with pytest.raises(PermissionError, match="authentication failed"):
        connect(cartpole, b"not the secret at all")


def test_an_impostor_server_is_caught_by_the_client(cartpole):
    """The client checks the server's proof: a server without the secret cannot pass for the game."""
    sock = socket.create_connection(protocol.parse_address(cartpole.address), timeout=10)
    with pytest.raises(PermissionError):
        protocol.client_handshake(sock, b"a secret the server does not hold")
    sock.close()


def test_wrong_episode_ids_and_actions_get_errors_and_the_connection_goes_on(cartpole):
    sock, _ = connect(cartpole)
    answers = [ask(sock, {"type": "step", "episode": 41, "actions": [0]}),
               ask(sock, {"type": "reset", "episode": 1, "seats": [0], "seed": 3}),
               ask(sock, {"type": "reset", "episode": 1, "seats": [0]}),
               ask(sock, {"type": "step", "episode": 1, "actions": [0.5]}),
               ask(sock, {"type": "reset", "episode": 2, "seats": [0]}),
               ask(sock, {"type": "step", "episode": 2, "actions": [1]})]
    sock.close()
    assert [(a["type"], a.get("episode")) for a in answers] == [
        ("error", 41), ("observation", 1), ("error", 1), ("error", 1), ("observation", 2), ("observation", 2)]


@pytest.mark.parametrize("frame", [
    protocol.HEADER.pack(protocol.DEFAULT_MAX_FRAME + 1) + b"\0" * 16,     # oversize
    protocol.HEADER.pack(5) + b"\xc1\xc1\xc1\xc1\xc1",                    # not msgpack
    protocol.pack({"no": "type"}),                                        # not a message
    protocol.pack({"type": "reset", "episode": "one", "seats": [0]}),     # a string id
    protocol.HEADER.pack(100) + b"\x81",                                  # truncated: the client hangs up mid-frame
], ids=["oversize", "undecodable", "untyped", "string-id", "truncated"])
def test_a_hostile_frame_costs_only_its_connection(cartpole, frame):
    sock, _ = connect(cartpole)
    sock.sendall(frame)
    if frame.startswith(protocol.HEADER.pack(100)):
        sock.shutdown(socket.SHUT_WR)
    sock.settimeout(10)
    replies = []
    try:
        while True:
            replies.append(protocol.receive(sock, protocol.DEFAULT_MAX_FRAME))
    except (ConnectionError, OSError):
        pass
    sock.close()
    other, _ = connect(cartpole)
    answer = ask(other, {"type": "reset", "episode": 7, "seats": [0]})
    other.close()
    assert [r["type"] for r in replies] in ([], ["error"])
    assert answer["type"] == "observation"


def test_the_server_counts_what_it_refused(tmp_path):
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1"])
    with pytest.raises(PermissionError):
        connect(server, b"wrong secret, wrong secret")
    sock, _ = connect(server)
    sock.sendall(protocol.pack({"type": "launch"}))
    with pytest.raises((ConnectionError, OSError)):
        while True:
            protocol.receive(sock, protocol.DEFAULT_MAX_FRAME)
    sock.close()
    counters = server.stop()
    assert (counters["refused"], counters["violations"]) == (1, 1)
