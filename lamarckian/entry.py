"""The programs' entry points (``train.py``, ``evolve.py``, their ``lamarckian-*`` commands): Ctrl-C at any moment
of a program's start-up (its imports, the fork server's or Ray's start, building the job) ends it with one line and
exit code 130, and a Ray it had started is shut down; a Ctrl-C during the job itself is the job's to handle
(:func:`lamarckian.cli.run_job`: it saves and exits 130 too). Imports nothing heavy: the program's module is
imported inside the guard."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Callable

INTERRUPTED = 130    # the shell's code for a program ended by SIGINT


def shutdown_ray() -> None:
    """Shut down a Ray this process started or joined (nothing where it never imported Ray)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def guarded(main: Callable[[], int]) -> int:
    """``main()``'s exit code; a Ctrl-C that escapes it (it came before the job ran) is one line and 130."""
    try:
        return main()
    except KeyboardInterrupt:
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
