"""Actors in child processes of this machine, without Ray: what a run on one machine needs, started in a fraction
of Ray's time.

:func:`spawn` builds an object of an ``@all/@any/@gather`` class in a child process and returns a
:class:`ProcessActor`, a handle that All, Any and Gather take like a Ray actor handle: they ask it to serve (the
child answers with its ZeroMQ endpoint) and then talk to the object over the usual authenticated connections.

Children are forked from a *warm* fork server (:func:`warm_up`, Python's ``forkserver`` with the heavy modules
imported once), so a child starts in milliseconds instead of re-importing torch. The pipe between this process and
a child carries only the serve request, the endpoint and errors, as msgpack (nothing is unpickled from a child);
the child ignores Ctrl-C (its parent shuts it down) and exits at once when the pipe closes, so a parent that dies,
even by SIGKILL, leaves no child behind (its object's ``close`` runs only when the parent asks: after a crash a
call may still be running in the child). A child shows as ``lam:NAME`` in ps and top.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import signal
import traceback
from typing import Any, Callable, Sequence

import msgpack

from ..said import SAID
from .auth import adopt_secret
from .errors import ActorDiedError

CLOSE_SECONDS = 5.0    # how long a child may take to close before it is killed
PR_SET_NAME = 15        # prctl option: this thread's name, /proc/PID/comm
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")   # thread pools' sizes

#: variables a child gets from its parent's environment as it is when the child starts (the notes said: a child
#: does not say them again)
PASSED_ON = (SAID,)
_context: Any = None      # the multiprocessing context (forkserver where it exists), made by warm_up


def _start_method() -> str:
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def warm_up(preload: Sequence[str], threads: int = 1) -> None:
    """Start the fork server now, importing ``preload`` (module names) in it while this process goes on, so the
    children :func:`spawn` forks later start with them imported. Once per process; later calls do nothing.
    Where there is no fork server (Windows), children are spawned afresh.

    The children's OpenMP and BLAS pools get ``threads`` threads each (:data:`THREAD_VARIABLES` where this
    process's environment does not set them, as Ray does for its actors): a library imported by the fork server
    sizes its pool then, and pools of every core's size in every child spin against each other (measured: a
    Pendulum PPO run took 3.5× as long)."""
    global _context
    if _context is not None:
        return
    _context = multiprocessing.get_context(_start_method())
    if _context.get_start_method() != "forkserver":
        return
    _context.set_forkserver_preload(list(preload))
    from multiprocessing import forkserver

    unset = [name for name in THREAD_VARIABLES if name not in os.environ]
    os.environ.update({name: str(threads) for name in unset})     # the fork server inherits this environment
    try:
        forkserver.ensure_running()
    finally:
        for name in unset:
            del os.environ[name]


def _send(pipe: multiprocessing.connection.Connection, message: dict[str, Any]) -> None:
    pipe.send_bytes(msgpack.packb(message, use_bin_type=True))


def _receive(pipe: multiprocessing.connection.Connection) -> dict[str, Any]:
    message = msgpack.unpackb(pipe.recv_bytes(), raw=False)
    if not isinstance(message, dict):
        raise ValueError(f"a malformed message on an actor's pipe: {type(message).__name__}")
    return message


def _name_process(name: str) -> None:
    """Show the child as ``lam:NAME`` in ps and top (Linux: the first 15 bytes; elsewhere nothing)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(PR_SET_NAME, f"lam:{name}".encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _serve(factory: Callable[..., Any], args: tuple, kwargs: dict, pipe: multiprocessing.connection.Connection,
           name: str, environment: dict[str, str]) -> None:
    """The child: build the object, then answer the parent's requests until it says close or goes away.
    ``environment``: variables of the parent's own environment now (a child forks from the fork server, whose
    environment is the one the parent had when it started)."""
    os.environ.update(environment)
    signal.signal(signal.SIGINT, signal.SIG_IGN)       # Ctrl-C reaches the parent, which closes its children
    _name_process(name)
    # the object may start children of its own (an evolve.py learner's actors): multiprocessing refuses that in a
    # daemonic process. They end with it all the same: their pipes close when it exits.
    multiprocessing.current_process().daemon = False
    try:
        target = factory(*args, **kwargs)
    except BaseException as error:  # noqa: BLE001 - every failure goes back to the parent, named
        _send(pipe, {"error": "".join(traceback.format_exception_only(type(error), error)).strip(),
                     "traceback": traceback.format_exc()})
        return
    while True:
        try:
            request = _receive(pipe)
        except (EOFError, OSError):    # the parent died: its calls may still run here, so no close(); exit now
            os._exit(0)
        if request.get("op") == "start":
            adopt_secret(request["secret"])            # the object's own callers join the parent's run
            try:
                _send(pipe, {"endpoint": target._lamarckian_rpc_start(request["secret"], request["settings"])})
            except Exception as error:  # noqa: BLE001 - named to the parent
                _send(pipe, {"error": f"{type(error).__name__}: {error}"})
        elif request.get("op") == "release":
            target._lamarckian_rpc_release()
        else:
            break
    close = getattr(target, "close", None)
    if close is not None:
        close()
    os._exit(0)     # no atexit work of the parent's modules in a forked child


class ProcessActor:
    """A handle to an object served from a child process (see :func:`spawn`). All / Any / Gather call
    :meth:`begin_start` on every handle, then :meth:`endpoint`, so children build their objects in parallel."""

    def __init__(self, factory: Callable[..., Any], args: tuple, kwargs: dict, name: str) -> None:
        if _context is None:
            warm_up(())
        assert _context is not None
        self.name = name
        self.pipe, child_end = _context.Pipe()
        environment = {variable: os.environ[variable] for variable in PASSED_ON if variable in os.environ}
        self.process = _context.Process(target=_serve, args=(factory, args, kwargs, child_end, name, environment),
                                        name=name,
                                        daemon=True)
        self.process.start()
        child_end.close()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def __repr__(self) -> str:
        return f"{self.name}(pid={self.pid})"

    def alive(self) -> bool:
        return self.process.is_alive()

    def begin_start(self, secret: bytes, settings: dict[str, Any]) -> None:
        """Ask the child to serve its object under ``secret`` (answered by :meth:`endpoint`)."""
        try:
            _send(self.pipe, {"op": "start", "secret": bytes(secret), "settings": dict(settings)})
        except OSError:
            pass           # the child is gone: endpoint() reads its last words or its death

    def endpoint(self, timeout: float, index: int) -> dict[str, Any]:
        """The child's endpoint; :class:`ActorDiedError` naming its error if building the object failed, if the
        child died, or if no answer came within ``timeout`` seconds."""
        try:
            if not self.pipe.poll(timeout):
                raise ActorDiedError(repr(self), index, f"not serving within rpc.start_timeout={timeout}s")
            answer = _receive(self.pipe)
        except (EOFError, OSError):
            self.process.join(1.0)
            raise ActorDiedError(repr(self), index,
                                 f"before it could serve (exit code {self.process.exitcode})") from None
        if "error" in answer:
            raise ActorDiedError(repr(self), index, f"{answer['error']}\n{answer.get('traceback', '')}".rstrip())
        return answer["endpoint"]

    def _lamarckian_rpc_start(self, secret: bytes, settings: dict[str, Any]) -> dict[str, Any]:
        self.begin_start(secret, settings)
        return self.endpoint(float(settings.get("start_timeout", 120.0)), 0)

    def _lamarckian_rpc_release(self) -> None:
        try:
            _send(self.pipe, {"op": "release"})
        except OSError:
            pass

    def kill(self) -> None:
        """End the child now (SIGKILL) and reap it."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(CLOSE_SECONDS)
        self.pipe.close()

    def close(self) -> None:
        """Ask the child to close its object and exit; kill it if it does not within :data:`CLOSE_SECONDS`."""
        try:
            _send(self.pipe, {"op": "close"})
        except OSError:
            pass
        self.process.join(CLOSE_SECONDS)
        self.kill()


def spawn(factory: Callable[..., Any], *args: Any, name: str | None = None, **kwargs: Any) -> ProcessActor:
    """``factory(*args, **kwargs)`` (an ``@all/@any/@gather`` class, or a function returning an object of one)
    built in a new child process; the arguments travel to the child as the ``multiprocessing`` start method
    sends them (this machine only)."""
    return ProcessActor(factory, args, kwargs, name or str(getattr(factory, "__qualname__", "actor")))
