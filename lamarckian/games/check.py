"""The conformance checker a game author runs against their own server: ``python -m lamarckian.games check
tcp://HOST:PORT --secret FILE``. Each check opens its own connection, so one failure does not hide the others;
the result is one line per violation (none: the server conforms)."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Any, Callable

import gymnasium
import numpy as np

from . import protocol
from .protocol import ProtocolViolation

STEPS = 200           # steps of the round-trip check, at most


class Violation(Exception):
    """What a check found wrong."""


class Session:
    """One blocking connection that has passed the handshake."""

    def __init__(self, address: str, secret: bytes, timeout: float, tls: ssl.SSLContext | None,
                 tls_name: str | None) -> None:
        host, port = protocol.parse_address(address)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname=tls_name or host)
        self.hello = protocol.client_handshake(self.sock, secret)
        self.max_frame = int(self.hello.get("max_frame", protocol.DEFAULT_MAX_FRAME))
        self.specs = protocol.player_specs(self.hello)

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(protocol.pack(message))

    def receive(self) -> dict[str, Any]:
        try:
            return protocol.receive(self.sock, self.max_frame)
        except socket.timeout:
            raise Violation("no answer within the timeout") from None

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        return self.receive()

    def close(self) -> None:
        self.sock.close()


def _observation(reply: dict[str, Any], episode: int, specs: list, seats: list[int], what: str) -> list[dict]:
    if reply.get("type") != "observation":
        raise Violation(f"{what}: expected an observation, got {reply.get('type')!r} ({reply.get('message', '')})")
    if reply.get("episode") != episode:
        raise Violation(f"{what}: the answer carries episode {reply.get('episode')!r}, not {episode}")
    try:
        states = protocol.seat_states(reply, [specs[seat][1] for seat in seats], what)
    except ProtocolViolation as error:
        raise Violation(str(error)) from None
    for seat, state in zip(seats, states):
        if isinstance(specs[seat][1], gymnasium.spaces.Box) and not np.isfinite(state["observation"]).all():
            raise Violation(f"{what}: seat {seat}'s observation holds NaN or infinity")
    return states


def _random_actions(specs: list, seats: list[int], states: list[dict], random: np.random.Generator) -> list[Any]:
    actions = []
    for seat, state in zip(seats, states):
        space = specs[seat][2]
        space.seed(int(random.integers(2**31)))
        actions.append(None if state["done"] else protocol.encode_action(space.sample(), space))
    return actions


def check_round_trip(session: Session) -> None:
    """reset, then steps with random actions until the episode ends (or :data:`STEPS`); results when done."""
    seats = list(range(len(session.specs)))
    states = _observation(session.ask({"type": "reset", "episode": 1, "seats": seats, "seed": 1}), 1, session.specs,
                          seats, "reset")
    random = np.random.default_rng(0)
    for step in range(STEPS):
        if all(state["done"] for state in states):
            return
        reply = session.ask({"type": "step", "episode": 1, "actions": _random_actions(session.specs, seats, states,
                                                                                      random)})
        states = _observation(reply, 1, session.specs, seats, f"step {step + 1}")


def check_ids(session: Session) -> None:
    """Two episodes in flight at once get answers carrying their own ids; an unknown id gets an ``error`` for it."""
    seats = list(range(len(session.specs)))
    for number in (10, 11):
        session.send({"type": "reset", "episode": number, "seats": seats, "seed": number})
    answers = {}
    for _ in range(2):
        reply = session.receive()
        answers[reply.get("episode")] = reply
    if set(answers) != {10, 11}:
        raise Violation(f"two resets (episodes 10, 11) were answered for episodes {sorted(map(str, answers))}")
    states = {n: _observation(answers[n], n, session.specs, seats, f"reset of episode {n}") for n in (10, 11)}
    random = np.random.default_rng(1)
    for number in (11, 10):
        session.send({"type": "step", "episode": number,
                      "actions": _random_actions(session.specs, seats, states[number], random)})
    got = sorted(session.receive().get("episode") for _ in range(2))
    if got != [10, 11]:
        raise Violation(f"steps of episodes 11 and 10 were answered for episodes {got}")
    reply = session.ask({"type": "step", "episode": 999, "actions": [None] * len(seats)})
    if reply.get("type") != "error" or reply.get("episode") != 999:
        raise Violation(f"a step of an unknown episode (999) must get an error for episode 999, got {reply!r:.120}")


def check_errors(session: Session) -> None:
    """A malformed action gets an ``error`` for its episode, and the connection goes on serving."""
    seats = list(range(len(session.specs)))
    _observation(session.ask({"type": "reset", "episode": 5, "seats": seats}), 5, session.specs, seats, "reset")
    reply = session.ask({"type": "step", "episode": 5, "actions": ["not an action"] * len(seats)})
    if reply.get("type") != "error" or reply.get("episode") != 5:
        raise Violation(f"a malformed action must get an error for episode 5, got {reply.get('type')!r}")
    reply = session.ask({"type": "reset", "episode": 6, "seats": seats})
    _observation(reply, 6, session.specs, seats, "a reset after an error")
    session.send({"type": "close", "episode": 6})
    reply = session.ask({"type": "step", "episode": 6, "actions": [None] * len(seats)})
    if reply.get("type") != "error":
        raise Violation("a step of a closed episode must get an error")


def check_limits(session: Session) -> None:
    """A frame over ``max_frame`` is refused: the server closes that connection (it may say why first)."""
    session.sock.sendall(protocol.HEADER.pack(session.max_frame + 1) + b"\0" * 64)
    try:
        while True:
            reply = session.receive()
            if reply.get("type") != "error":
                raise Violation(f"an oversize frame was answered with {reply.get('type')!r}")
    except (ConnectionError, OSError, ProtocolViolation):
        return


def check(address: str, secret_file: str | Path, timeout: float = 10.0, tls_ca: str | Path | None = None,
          tls_name: str | None = None) -> list[str]:
    """Every check against the server at ``address``; one line per violation (empty: it conforms)."""
    secret = protocol.read_secret(secret_file)
    tls = None if tls_ca is None else ssl.create_default_context(cafile=str(tls_ca))

    def session(key: bytes = secret) -> Session:
        return Session(address, key, timeout, tls, tls_name)

    try:
        first = session()
    except (OSError, ProtocolViolation, PermissionError) as error:
        return [f"handshake: {error}"]
    first.close()
    violations = []
    try:
        session(secret[::-1] + b"-not-the-secret")
        violations.append("handshake: a client with a wrong secret was let in")
    except (PermissionError, ConnectionError, OSError, ProtocolViolation):
        pass
    checks: list[tuple[str, Callable[[Session], None]]] = [
        ("round trip", check_round_trip), ("episode ids", check_ids), ("errors", check_errors),
        ("limits", check_limits)]
    for name, run in checks:
        try:
            opened = session()
        except (OSError, ProtocolViolation, PermissionError) as error:
            violations.append(f"{name}: could not connect again ({error})")
            continue
        try:
            run(opened)
        except Violation as error:
            violations.append(f"{name}: {error}")
        except (ConnectionError, OSError, ProtocolViolation) as error:
            violations.append(f"{name}: the connection failed ({type(error).__name__}: {error})")
        finally:
            opened.close()
    try:                                            # the server outlives every check
        session().close()
    except (OSError, ProtocolViolation, PermissionError) as error:
        violations.append(f"afterwards: the server no longer answers ({error})")
    return violations
