"""The conformance checker a game author runs against their own server: ``python -m lamarckian.games check
tcp://HOST:PORT --secret FILE``. Each check opens its own connection, so one failure does not hide the others;
the result is one line per violation (none: the server conforms)."""

from __future__ import annotations

import collections
import socket
import ssl
import threading
from pathlib import Path
from typing import Any, Callable

import gymnasium
import numpy as np

from . import protocol
from .protocol import ProtocolViolation

STEPS = 1000          # steps of the round-trip check, at most (a time limit of up to 1,000 steps is reached)
AT_ONCE = 16          # episodes the concurrency check runs at once (fewer where hello's max_episodes says so)
HANDSHAKE_LIMIT = 5.0 # seconds a server may wait for a connection to authenticate (docs/games.md)
LARGE_ID = 2**53 - 1  # the largest id the trainer uses: JavaScript's Number.MAX_SAFE_INTEGER


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

    def receive(self, awaited: str = "the requests sent") -> dict[str, Any]:
        """The next message; :class:`Violation` naming ``awaited`` when none comes within the timeout."""
        try:
            return protocol.receive(self.sock, self.max_frame)
        except socket.timeout:
            raise Violation(f"no answer to {awaited} within the {self.sock.gettimeout():g} s timeout") from None

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        return self.receive(f"{message['type']} of episode {message.get('episode')}")

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
    for seat, (entry, state) in enumerate(zip(reply["players"], states)):
        space = specs[seats[seat]][1]
        if isinstance(space, gymnasium.spaces.Box):
            _check_box(state["observation"], space, f"{what}: seat {seats[seat]}'s observation")
        if isinstance(entry, dict) and entry.get("truncated") and not entry.get("done"):
            raise Violation(f"{what}: seat {seats[seat]} is truncated but not done (a time limit ends the episode: "
                            "send done and truncated, both true)")
    return states


def _check_box(observation: np.ndarray, space: gymnasium.spaces.Box, what: str) -> None:
    """No NaN or infinity, and within the space's finite bounds (typed arrays whose bytes are not little-endian
    decode to values far outside them)."""
    if not np.isfinite(observation).all():
        raise Violation(f"{what} holds NaN or infinity")
    low, high = np.broadcast_to(space.low, space.shape), np.broadcast_to(space.high, space.shape)
    outside = (observation < low - 1e-3 * np.abs(low) - 1e-6) | (observation > high + 1e-3 * np.abs(high) + 1e-6)
    if outside.any():
        index = tuple(int(i) for i in np.argwhere(outside)[0])
        raise Violation(f"{what}: entry {index} is {observation[index]:.4g}, outside the declared bounds "
                        f"[{low[index]:.4g}, {high[index]:.4g}] (typed arrays are little-endian: is yours?)")


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
    """:data:`AT_ONCE` episodes in flight at once get answers carrying their own ids, in any order; an unknown id
    gets an ``error`` for it."""
    seats = list(range(len(session.specs)))
    numbers = list(range(10, 10 + min(AT_ONCE, int(session.hello.get("max_episodes", AT_ONCE)))))
    for number in numbers:
        session.send({"type": "reset", "episode": number, "seats": seats, "seed": number})
    answers = {}
    for _ in numbers:
        reply = session.receive(f"{len(numbers)} resets sent at once (episodes {numbers[0]}..{numbers[-1]})")
        answers[reply.get("episode")] = reply
    if set(answers) != set(numbers):
        raise Violation(f"{len(numbers)} resets (episodes {numbers[0]}..{numbers[-1]}) were answered for episodes "
                        f"{sorted(map(str, answers))}")
    states = {n: _observation(answers[n], n, session.specs, seats, f"reset of episode {n}") for n in numbers}
    random = np.random.default_rng(1)
    for number in reversed(numbers):
        session.send({"type": "step", "episode": number,
                      "actions": _random_actions(session.specs, seats, states[number], random)})
    got = [session.receive(f"{len(numbers)} steps sent at once").get("episode") for _ in numbers]
    if collections.Counter(got) != collections.Counter(numbers):       # in any order (a broken reply: any type)
        raise Violation(f"steps of episodes {numbers[0]}..{numbers[-1]} were answered for episodes {got}")
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
    states = _observation(session.ask({"type": "reset", "episode": 6, "seats": seats}), 6, session.specs, seats,
                          "a reset after an error")
    session.send({"type": "close", "episode": 6})
    random = np.random.default_rng(2)
    actions = _random_actions(session.specs, seats, states, random)
    reply = session.ask({"type": "step", "episode": 6, "actions": actions})
    if reply.get("type") != "error" or reply.get("episode") != 6:
        raise Violation(f"a step of a closed episode (6) must get an error for episode 6, got {reply.get('type')!r} "
                        "(does the server ignore close?)")


def check_refusals(session: Session) -> None:
    """A duplicate ``reset`` of a running id gets an ``error`` for that id; a second step sent while the first is in
    flight is either refused with an ``error`` for its id (which ends the episode) or answered after the first; the
    connection goes on serving."""
    seats = list(range(len(session.specs)))
    _observation(session.ask({"type": "reset", "episode": 20, "seats": seats}), 20, session.specs, seats,
                 "reset of episode 20")
    reply = session.ask({"type": "reset", "episode": 20, "seats": seats})
    if reply.get("type") != "error" or reply.get("episode") != 20:
        raise Violation(f"a second reset of running episode 20 must get an error for it, got {reply.get('type')!r}")
    states = _observation(session.ask({"type": "reset", "episode": 21, "seats": seats}), 21, session.specs, seats,
                          "reset of episode 21")
    random = np.random.default_rng(3)
    step = {"type": "step", "episode": 21, "actions": _random_actions(session.specs, seats, states, random)}
    session.sock.sendall(protocol.pack(step) * 2)            # in one write: the second arrives before any answer
    answers: list[Any] = []
    while len(answers) < 2 and "error" not in answers:
        answer = session.receive("a step of episode 21 sent while its first step was in flight (answer it after the "
                                 "first, or refuse it with an error)")
        if answer.get("episode") != 21:
            raise Violation(f"two steps of episode 21 were answered for episode {answer.get('episode')!r}")
        answers.append(answer.get("type"))
    _observation(session.ask({"type": "reset", "episode": 22, "seats": seats}), 22, session.specs, seats,
                 "a reset after two steps in flight")


def check_large_ids(session: Session) -> None:
    """An episode id as large as the trainer's (2⁵³ − 1, what a JavaScript number holds exactly) comes back
    unchanged."""
    seats = list(range(len(session.specs)))
    _observation(session.ask({"type": "reset", "episode": LARGE_ID, "seats": seats}), LARGE_ID, session.specs, seats,
                 f"reset of episode {LARGE_ID}")


def check_handshake_limit(address: str, timeout: float, tls: ssl.SSLContext | None, tls_name: str | None) -> None:
    """A connection that never authenticates is closed by the server within :data:`HANDSHAKE_LIMIT` seconds (and
    a little slack)."""
    host, port = protocol.parse_address(address)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock = tls.wrap_socket(sock, server_hostname=tls_name or host) if tls is not None else sock
        sock.settimeout(HANDSHAKE_LIMIT + 3.0)
        try:
            while sock.recv(65536):
                pass
        except socket.timeout:
            raise Violation(f"a connection that did not authenticate was still open after {HANDSHAKE_LIMIT + 3:g} s "
                            f"(close it after {HANDSHAKE_LIMIT:g} s)") from None
        except OSError:
            return


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
    limit_violations: list[str] = []

    def watch_limit() -> None:                      # beside the other checks: it waits the server's 5 seconds
        try:
            check_handshake_limit(address, timeout, tls, tls_name)
        except Violation as error:
            limit_violations.append(f"handshake limit: {error}")
        except OSError as error:
            limit_violations.append(f"handshake limit: could not connect ({error})")

    limit = threading.Thread(target=watch_limit, name="handshake limit")
    limit.start()
    checks: list[tuple[str, Callable[[Session], None]]] = [
        ("round trip", check_round_trip), ("episode ids", check_ids), ("errors", check_errors),
        ("refusals", check_refusals), ("large ids", check_large_ids), ("limits", check_limits)]
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
    limit.join()
    violations += limit_violations
    try:                                            # the server outlives every check
        session().close()
    except (OSError, ProtocolViolation, PermissionError) as error:
        violations.append(f"afterwards: the server no longer answers ({error})")
    return violations
