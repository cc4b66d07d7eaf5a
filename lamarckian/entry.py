"""The programs' entry points (``train.py``, ``evolve.py``, their ``lamarckian-*`` commands): Ctrl-C at any moment
of a program's start-up (its imports, the fork server's or Ray's start, building the job) ends it with one line and
exit code 130, and a Ray it had started is shut down; a Ctrl-C during the job itself is the job's to handle
(:func:`lamarckian.cli.run_job`: it saves and exits 130 too). Imports nothing heavy (only :mod:`lamarckian.said`):
the program's module is imported inside the guard."""

from __future__ import annotations

import importlib
import os
import signal
import sys
from pathlib import Path
from typing import Callable

from .said import SAID

INTERRUPTED = 130    # the shell's code for a program ended by SIGINT


def shutdown_ray() -> None:
    """Shut down a Ray this process started or joined (nothing where it never imported Ray). Also while
    ``ray.init()`` was cut short: it has started the node's processes before ``ray.is_initialized()`` says so, and
    ``ray.shutdown()`` ends them (it does nothing where there is nothing to end)."""
    ray = sys.modules.get("ray")
    if ray is not None:
        ray.shutdown()


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs (Linux ``/proc``; none where it cannot be read)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, waiting = [], list(children.get(pid, []))
    while waiting:
        child = waiting.pop()
        found.append(child)
        waiting.extend(children.get(child, []))
    return found


def end_descendants() -> None:
    """SIGKILL every process this one started and theirs: a Ctrl-C that cut ``ray.init()`` short inside the start
    of Ray's node leaves its processes (GCS, raylet, its agents) with no handle that ``ray.shutdown()`` could end."""
    for pid in descendants(os.getpid()):      # parents first: no child is adopted by init before it is seen
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def guarded(main: Callable[[], int]) -> int:
    """``main()``'s exit code; a Ctrl-C that escapes it (it came before the job ran) is one line and 130, and
    nothing it started is left running. The program's notes are its own: what the process that started it said
    (:mod:`lamarckian.said`) is forgotten first."""
    os.environ.pop(SAID, None)
    try:
        return main()
    except KeyboardInterrupt:
        end_descendants()          # first: once Ray's raylet is gone, its agents are no longer this process's
        shutdown_ray()
        print(f"{Path(sys.argv[0]).name}: interrupted (Ctrl-C) while starting, before any training", file=sys.stderr)
        return INTERRUPTED


def _program(module: str) -> int:
    return guarded(lambda: importlib.import_module(module).main())


def train() -> int:
    """``train.py``: :func:`lamarckian.train.main`, imported inside the guard."""
    return _program("lamarckian.train")


def evolve() -> int:
    """``evolve.py``: :func:`lamarckian.evolve.main`, imported inside the guard."""
    return _program("lamarckian.evolve")
