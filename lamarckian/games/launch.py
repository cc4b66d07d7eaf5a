"""Game servers the trainer starts itself (``mdp.game.launch``): every process that plays a game (an actor, on
whatever host it runs) launches ``mdp.game.instances`` servers on its own machine, waits until each accepts the
handshake, spreads its episodes over them (:class:`~lamarckian.games.client.GameClient` asks :meth:`Launcher.address`)
and keeps them alive: an instance that exits, or stops accepting the handshake, is started again with a backoff and
one console line (which instance, its exit code, the first and last lines of its stderr, kept with its stdout in
``mdp.game.logs``).

The players' spaces come from the first instance's ``hello`` (:meth:`Launcher.hello`): a process that only needs
them (the learner's) starts that one instance, and a process that plays keeps it as its instance 0, so every
instance starts once. The instances end when the last environment using them closes (:meth:`Launcher.release`:
SIGTERM, then SIGKILL after :data:`STOP_SECONDS`, so a game that saves on SIGTERM keeps its state), at exit, and,
killed by the kernel, if the process dies without closing them (``PR_SET_PDEATHSIG``): no game outlives its trainer
even after a SIGKILL.

The command is a list of arguments whose ``{port}`` (a free port of this machine, chosen anew at every start),
``{secret}`` (the secret file's path) and ``{instance}`` (0, 1, ...) are filled in; the server must listen on
``127.0.0.1:{port}`` and prove the secret in ``{secret}``.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from . import protocol

LOG = logging.getLogger("lamarckian.games")
PR_SET_PDEATHSIG = 1           # prctl option: the signal this process gets when the thread that forked it ends
RESTART = (1.0, 30.0)          # seconds before an instance is started again: first, at most (doubling)
STABLE = 60.0                  # seconds up after which an instance's next restart waits the first delay again
PROBE = 0.2                    # seconds between handshake attempts while an instance starts
MISSED = 2                     # failed health checks in a row after which a running instance is restarted
TAIL = 5                       # last lines of an instance's stderr quoted in the console line
HEAD = 3                       # first lines of it quoted too (where it printed more)
STOP_SECONDS = 5.0             # seconds an instance may take to end at SIGTERM before SIGKILL


def _die_with_parent() -> None:
    """In the game's process before it runs: SIGKILL when the launching thread ends (its process killed)."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def handshake(port: int, secret: bytes, timeout: float) -> dict[str, Any]:
    """The ``hello`` of the server at ``127.0.0.1:port``; OSError, ProtocolViolation or PermissionError if none."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        return protocol.client_handshake(sock, secret)


def tail(path: Path, lines: int = TAIL) -> str:
    """The last ``lines`` lines of a log, joined by `` | `` (empty: nothing was written)."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - 8192))
            kept = collections.deque(handle.read().decode(errors="replace").splitlines(), maxlen=lines)
    except OSError:
        return ""
    return " | ".join(line.strip() for line in kept if line.strip())


def excerpt(path: Path, since: int = 0, first: int = HEAD, last: int = TAIL) -> str:
    """What a log holds from byte ``since`` on, in one line: all of it when short, else its ``first`` lines and its
    ``last`` lines (a program that prints its cause first and its usage after it); empty: nothing was written."""
    try:
        with path.open("rb") as handle:
            handle.seek(since)
            lines = [line.strip() for line in handle.read(65536).decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    if len(lines) <= first + last:
        return " | ".join(lines)
    return f"{' | '.join(lines[:first])} | ... | {' | '.join(lines[-last:])}"


class Instance:
    """One launched game server: its process, port, and logs (``.stderr``, ``.stdout``, appended over its restarts)."""

    def __init__(self, index: int, command: Sequence[str], secret_file: Path, logs: Path) -> None:
        self.index, self.command, self.secret_file = index, tuple(command), secret_file
        self.log = logs / f"game-{socket.gethostname()}-{os.getpid()}-{index}.stderr"
        self.output = self.log.with_suffix(".stdout")
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.started = 0.0
        self.logged = 0               # the size of its stderr log when it last started (what it wrote since)

    def arguments(self) -> list[str]:
        values = {"port": str(self.port), "secret": str(self.secret_file), "instance": str(self.index)}
        return [argument.format(**values) for argument in self.command]

    def start(self) -> None:
        self.port, self.started = free_port(), time.monotonic()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as stderr, self.output.open("ab") as stdout:
            self.logged = stderr.tell()
            self.process = subprocess.Popen(self.arguments(), stdin=subprocess.DEVNULL, stdout=stdout,
                                            stderr=stderr, start_new_session=True, preexec_fn=_die_with_parent)

    def wait_ready(self, secret: bytes, limit: float, closing: threading.Event | None = None) -> dict[str, Any]:
        """Its ``hello`` once it accepts the handshake; RuntimeError (saying why) when it exits first, ``limit``
        seconds pass or ``closing`` is set (it is stopped then)."""
        assert self.process is not None
        deadline = time.monotonic() + limit
        while True:
            if closing is not None and closing.is_set():
                self.stop()
                raise RuntimeError("closing")
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(f"exited with code {code} while starting{self.stderr_note(self.logged)}")
            try:
                return handshake(self.port, secret, max(PROBE, min(5.0, deadline - time.monotonic())))
            except (OSError, protocol.ProtocolViolation, PermissionError) as error:
                if time.monotonic() >= deadline:
                    self.stop()
                    raise RuntimeError(f"did not accept the handshake within mdp.game.start_timeout={limit:g} s "
                                       f"({error}){self.stderr_note(self.logged)}") from None
            time.sleep(PROBE)

    def stderr_note(self, since: int | None = None) -> str:
        """What its stderr says, for a console line: from byte ``since`` on (this start's) with its first and last
        lines, or its last lines; and the file."""
        said = tail(self.log) if since is None else excerpt(self.log, since)
        if not said:
            return f"; nothing on its stderr ({self.log})"
        return f"; its stderr ({self.log}) {'ends' if since is None else 'says'}: {said}"

    def terminate(self) -> None:
        """SIGTERM (the game may save and exit; :meth:`stop` waits for it)."""
        process = self.process                    # its keeper may clear it meanwhile
        if process is not None and process.poll() is None:
            process.terminate()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL when it has not exited :data:`STOP_SECONDS` later; reaped. Called by the thread that
        started it (the kernel kills it when that thread ends: ``PR_SET_PDEATHSIG``)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def describe(self) -> str:
        pid = f"pid {self.process.pid}, " if self.process is not None else ""
        return f"game instance {self.index} ({pid}{' '.join(self.arguments())})"


class Launcher:
    """The game servers of this process (one launcher per command): instance 0 starts with the first
    :meth:`hello`, the others with the first :meth:`address` (a process that only reads the spaces starts one);
    each is restarted when it exits or stops answering, and all end at the last :meth:`release` (and at exit). A
    thread per instance keeps it; :meth:`address` is what clients connect to (None while that instance is not up)."""

    _running: dict[tuple, "Launcher"] = {}

    def __init__(self, command: Sequence[str], instances: int, secret_file: Path, logs: Path, start_timeout: float,
                 timeout: float) -> None:
        self.secret = protocol.write_secret(secret_file)      # an actor on another host writes its own
        self.command, self.start_timeout, self.timeout = tuple(command), start_timeout, timeout
        self.instances = [Instance(i, command, secret_file, logs) for i in range(instances)]
        self.up: list[str | None] = [None] * instances
        self.first_start: list[str | None] = [None] * instances   # why an instance's first start failed
        self.hellos: list[dict[str, Any] | None] = [None] * instances
        self.changed = threading.Condition()
        self.closing = threading.Event()
        self.keepers: list[threading.Thread | None] = [None] * instances
        self.users = 0
        self.key: tuple | None = None
        atexit.register(self.close)

    @classmethod
    def of(cls, command: Sequence[str], instances: int, secret_file: Path, logs: Path, start_timeout: float,
           timeout: float) -> "Launcher":
        """This process's launcher for these settings (made on first use; its instances start when asked for)."""
        key = (tuple(command), instances, str(secret_file), str(logs))
        if key not in cls._running:
            launcher = cls._running[key] = cls(command, instances, secret_file, logs, start_timeout, timeout)
            launcher.key = key
        return cls._running[key]

    def acquire(self) -> "Launcher":
        """An environment uses the instances (until its :meth:`release`)."""
        self.users += 1
        return self

    def release(self) -> None:
        """An environment is done with the instances: after the last, they end (:meth:`close`) and a later
        :meth:`of` makes a new launcher."""
        self.users -= 1
        if self.users <= 0:
            self.close()

    def hello(self) -> dict[str, Any]:
        """The first instance's ``hello`` (the players' spaces), starting it if it is not running; ValueError naming
        the command, why it failed and what it printed, when its first start fails."""
        self._start(0)
        with self.changed:
            self.changed.wait_for(lambda: self.hellos[0] is not None or self.first_start[0] is not None
                                  or self.closing.is_set())
        hello = self.hellos[0]
        if hello is None:
            why = self.first_start[0] or "closed while starting"
            self.close()
            raise ValueError(f"mdp.game.launch: {self.instances[0].describe()} {why}")
        return hello

    def address(self, index: int) -> str | None:
        """``tcp://127.0.0.1:PORT`` of instance ``index`` (modulo their count) once it accepts the handshake; None
        while it starts (every instance starts at the first call)."""
        for number in range(len(self.instances)):
            self._start(number)
        return self.up[index % len(self.up)]

    def _start(self, index: int) -> None:
        if self.keepers[index] is None and not self.closing.is_set():
            keeper = self.keepers[index] = threading.Thread(target=self._keep, args=(self.instances[index],),
                                                            name=f"game instance {index}", daemon=True)
            keeper.start()

    def _keep(self, instance: Instance) -> None:
        """Start ``instance``, watch it, start it again after each end, waiting longer after each quick end. The
        instance is killed with this thread's process (``PR_SET_PDEATHSIG`` follows the thread that started it,
        which lives until :meth:`close`)."""
        delay = RESTART[0]
        while not self.closing.is_set():
            reason = self._run_once(instance)
            self.up[instance.index] = None
            with self.changed:
                if self.hellos[instance.index] is None and self.first_start[instance.index] is None:
                    self.first_start[instance.index] = reason
                self.changed.notify_all()
            if self.closing.is_set():
                break
            if time.monotonic() - instance.started > STABLE:
                delay = RESTART[0]
            LOG.warning("%s %s; starting it again in %g s", instance.describe(), reason, delay)
            instance.stop()
            self.closing.wait(delay)
            delay = min(2 * delay, RESTART[1])
        instance.stop()

    def _run_once(self, instance: Instance) -> str:
        """Run ``instance`` until it exits or stops answering (a handshake every ``timeout`` seconds); why it
        ended."""
        try:
            instance.start()
        except OSError as error:
            return f"could not start ({error})"
        try:
            hello = instance.wait_ready(self.secret, self.start_timeout, self.closing)
        except RuntimeError as error:
            return str(error)
        with self.changed:
            self.hellos[instance.index] = hello
            self.changed.notify_all()
        self.up[instance.index] = f"tcp://127.0.0.1:{instance.port}"
        missed, checked = 0, time.monotonic()
        while not self.closing.wait(PROBE):
            assert instance.process is not None
            code = instance.process.poll()
            if code is not None:
                return f"exited with code {code} after {time.monotonic() - instance.started:.0f} s" \
                       f"{instance.stderr_note()}"
            if time.monotonic() - checked < self.timeout:
                continue
            checked = time.monotonic()
            try:
                handshake(instance.port, self.secret, self.timeout)
                missed = 0
            except (OSError, protocol.ProtocolViolation, PermissionError) as error:
                missed += 1
                if missed >= MISSED:
                    return (f"stopped answering ({MISSED} handshakes in a row failed within mdp.game.timeout: "
                            f"{error}); it was stopped")
        return "closing"

    def close(self) -> None:
        """End every instance (SIGTERM to all at once; each keeper kills its own if it has not exited
        :data:`STOP_SECONDS` later) and wait for their threads (once)."""
        if self.closing.is_set():
            return
        self.closing.set()
        with self.changed:
            self.changed.notify_all()
        if self.key is not None and Launcher._running.get(self.key) is self:
            del Launcher._running[self.key]
        for instance in self.instances:
            instance.terminate()
        for keeper in self.keepers:
            if keeper is not None:
                keeper.join(STOP_SECONDS + 2 * PROBE + 1.0)
