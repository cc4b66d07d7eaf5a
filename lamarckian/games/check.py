"""The conformance checker a game author runs against their own server: ``python -m lamarckian.games check
tcp://HOST:PORT --secret FILE``. Each check opens its own connection, so one failure does not hide the others;
the result is one line per violation, and one line per check passed with what it covered."""

from __future__ import annotations

import collections
import dataclasses
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any, Callable

import gymnasium
import numpy as np

from . import protocol
from .protocol import ProtocolViolation

STEPS = 30_000        # steps of the round-trip check, at most
SECONDS = 30.0        # and seconds (a server that answers in 10 ms makes about 3,000 steps in them)
PATIENCE = 10         # episodes without a longer one before the round trip's searching policy starts afresh
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


class SearchingPolicy:
    """The round trip's actions: per seat a linear map of its Box observation ``(D,)`` (Discrete: the argmax of
    ``W (n, D) @ obs``; Box: ``tanh(W (A, D) @ obs)`` scaled into finite bounds), hill-climbed on episode length and
    drawn afresh after :data:`PATIENCE` episodes without a longer one, so that a game that ends by failing
    (CartPole) is kept alive to its time limit and the truncation is checked; random actions for other spaces."""

    def __init__(self, specs: list, seats: list[int], random: np.random.Generator) -> None:
        self.specs, self.seats, self.random = specs, seats, random
        self.best: list[np.ndarray | None] | None = None
        self.longest, self.stale = -1, 0
        self.weights = self._draw()

    def _shape(self, seat: int) -> tuple[int, int] | None:
        observation, action = self.specs[seat][1], self.specs[seat][2]
        if not isinstance(observation, gymnasium.spaces.Box):
            return None
        if isinstance(action, gymnasium.spaces.Discrete):
            return int(action.n), int(np.prod(observation.shape))
        if isinstance(action, gymnasium.spaces.Box):
            return int(np.prod(action.shape)), int(np.prod(observation.shape))
        return None

    def _draw(self) -> list[np.ndarray | None]:
        """Weights near the best so far (fresh ones when there is none)."""
        drawn: list[np.ndarray | None] = []
        for index, seat in enumerate(self.seats):
            shape = self._shape(seat)
            base = None if self.best is None else self.best[index]
            drawn.append(None if shape is None else self.random.standard_normal(shape) if base is None
                         else base + 0.5 * self.random.standard_normal(shape))
        return drawn

    def act(self, states: list[dict]) -> list[Any]:
        actions = _random_actions(self.specs, self.seats, states, self.random)
        for index, (seat, state, weights) in enumerate(zip(self.seats, states, self.weights)):
            if weights is None or state["done"]:
                continue
            scores = weights @ np.asarray(state["observation"], np.float64).reshape(-1)
            space = self.specs[seat][2]
            if isinstance(space, gymnasium.spaces.Discrete):
                action: Any = int(space.start) + int(np.argmax(scores))
            else:
                low, high = np.broadcast_to(space.low, space.shape), np.broadcast_to(space.high, space.shape)
                squashed = np.tanh(scores).reshape(space.shape)
                finite = np.isfinite(low) & np.isfinite(high)
                action = np.where(finite, low + (squashed + 1) / 2 * (high - low), squashed).astype(space.dtype)
            actions[index] = protocol.encode_action(action, space)
        return actions

    def ended(self, length: int) -> None:
        """An episode of ``length`` steps ended (not by its time limit): keep or drop its weights, draw the next."""
        if length > self.longest:
            self.best, self.longest, self.stale = self.weights, length, 0
        else:
            self.stale += 1
            if self.stale >= PATIENCE:
                self.best, self.longest, self.stale = None, -1, 0
        self.weights = self._draw()


def check_round_trip(session: Session) -> str:
    """Episodes (a reset, then steps of a :class:`SearchingPolicy`) until one ends by its time limit, or
    :data:`STEPS` steps or :data:`SECONDS` pass: every answer checked, ``truncated`` only with ``done``, results when
    done. What it covered."""
    seats = list(range(len(session.specs)))
    random = np.random.default_rng(0)
    policy = SearchingPolicy(session.specs, seats, random)
    began, steps, episode = time.monotonic(), 0, 0
    while steps < STEPS and time.monotonic() - began < SECONDS:
        episode += 1
        what = f"episode {episode}"
        states = _observation(session.ask({"type": "reset", "episode": episode, "seats": seats, "seed": episode}),
                              episode, session.specs, seats, f"reset of {what}")
        length = 0
        while not all(state["done"] for state in states) and steps < STEPS:
            reply = session.ask({"type": "step", "episode": episode, "actions": policy.act(states)})
            length, steps = length + 1, steps + 1
            states = _observation(reply, episode, session.specs, seats, f"step {length} of {what}")
        if any(state["truncated"] for state in states):
            return (f"{episode} episodes, {steps} steps; {what} reached its time limit at step {length} (truncated "
                    "with done)")
        if not all(state["done"] for state in states):
            session.send({"type": "close", "episode": episode})
            break
        policy.ended(length)
    return (f"{episode} episodes, {steps} steps; none ended by a time limit, so truncation was not exercised (a game "
            "without one, or one that outlasted the checker's searching policy)")


def check_ids(session: Session) -> str:
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
    return f"{len(numbers)} episodes in flight at once, each answered under its own id; an unknown id refused"


def check_errors(session: Session) -> str:
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
    return "a malformed action and a step of a closed episode refused, the connection still serving"


def check_refusals(session: Session) -> str:
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
    second = "refused" if "error" in answers else "answered after the first"
    return f"a duplicate reset refused; a second step in flight {second}"


def check_large_ids(session: Session) -> str:
    """An episode id as large as the trainer's (2⁵³ − 1, what a JavaScript number holds exactly) comes back
    unchanged."""
    seats = list(range(len(session.specs)))
    _observation(session.ask({"type": "reset", "episode": LARGE_ID, "seats": seats}), LARGE_ID, session.specs, seats,
                 f"reset of episode {LARGE_ID}")
    return f"episode {LARGE_ID} answered under its id"


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


def check_limits(session: Session) -> str:
    """A frame over ``max_frame`` is refused: the server closes that connection (it may say why first)."""
    session.sock.sendall(protocol.HEADER.pack(session.max_frame + 1) + b"\0" * 64)
    try:
        while True:
            reply = session.receive()
            if reply.get("type") != "error":
                raise Violation(f"an oversize frame was answered with {reply.get('type')!r}")
    except (ConnectionError, OSError, ProtocolViolation):
        return f"a frame of {session.max_frame + 1} bytes ended the connection"


@dataclasses.dataclass
class Findings:
    """What :func:`check` found: one line per violation (none: the server conforms), one per check passed."""

    violations: list[str] = dataclasses.field(default_factory=list)
    passed: list[str] = dataclasses.field(default_factory=list)


def _spaces(specs: list) -> str:
    """The seats' spaces in a few words: ``seat0: Box(4,) float32 -> Discrete(2)``."""
    def short(space: gymnasium.Space) -> str:
        return f"Box{space.shape} {space.dtype}" if isinstance(space, gymnasium.spaces.Box) else str(space)

    return "; ".join(f"{name}: {short(observation)} -> {short(action)}" for name, observation, action in specs)


def check(address: str, secret_file: str | Path, timeout: float = 10.0, tls_ca: str | Path | None = None,
          tls_name: str | None = None) -> Findings:
    """Every check against the server at ``address``."""
    secret = protocol.read_secret(secret_file)
    tls = None if tls_ca is None else ssl.create_default_context(cafile=str(tls_ca))
    found = Findings()

    def session(key: bytes = secret) -> Session:
        return Session(address, key, timeout, tls, tls_name)

    try:
        first = session()
    except (OSError, ProtocolViolation, PermissionError) as error:
        found.violations.append(f"handshake: {error}")
        return found
    first.close()
    try:
        session(secret[::-1] + b"-not-the-secret")
        found.violations.append("handshake: a client with a wrong secret was let in")
    except (PermissionError, ConnectionError, OSError, ProtocolViolation):
        found.passed.append(f"handshake: the server proved the secret and refused a wrong one; protocol version "
                            f"{protocol.VERSION}, {_spaces(first.specs)}")
    limit_found = Findings()

    def watch_limit() -> None:                      # beside the other checks: it waits the server's 5 seconds
        began = time.monotonic()
        try:
            check_handshake_limit(address, timeout, tls, tls_name)
            limit_found.passed.append(f"handshake limit: a connection that did not authenticate was closed after "
                                      f"{time.monotonic() - began:.1f} s")
        except Violation as error:
            limit_found.violations.append(f"handshake limit: {error}")
        except OSError as error:
            limit_found.violations.append(f"handshake limit: could not connect ({error})")

    limit = threading.Thread(target=watch_limit, name="handshake limit")
    limit.start()
    checks: list[tuple[str, Callable[[Session], str]]] = [
        ("round trip", check_round_trip), ("episode ids", check_ids), ("errors", check_errors),
        ("refusals", check_refusals), ("large ids", check_large_ids), ("limits", check_limits)]
    for name, run in checks:
        try:
            opened = session()
        except (OSError, ProtocolViolation, PermissionError) as error:
            found.violations.append(f"{name}: could not connect again ({error})")
            continue
        try:
            found.passed.append(f"{name}: {run(opened)}")
        except Violation as error:
            found.violations.append(f"{name}: {error}")
        except (ConnectionError, OSError, ProtocolViolation) as error:
            found.violations.append(f"{name}: the connection failed ({type(error).__name__}: {error})")
        finally:
            opened.close()
    limit.join()
    found.violations += limit_found.violations
    found.passed += limit_found.passed
    try:                                            # the server outlives every check
        session().close()
        found.passed.append("afterwards: the server still accepts connections")
    except (OSError, ProtocolViolation, PermissionError) as error:
        found.violations.append(f"afterwards: the server no longer answers ({error})")
    return found
