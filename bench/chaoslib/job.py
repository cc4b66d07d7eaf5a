"""A job under test: one command (train.py, evolve.py, a relay server or worker) started, killed and restarted as
the same command, its output appended to one log, every process it starts marked as the chaos run's."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Sequence

from .procs import MARKER


def _default_interrupt() -> None:
    """In the job's process before it runs: SIGINT does what it does by default (a harness started in the
    background, as ``nohup ... &`` does, hands its children SIGINT ignored, and Ctrl-C could not end them)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Job:
    """``command`` run from ``cwd``; stdout and stderr go to ``log`` (appended over restarts).

    Args:
        name: what the event log calls it.
        command: the argument vector.
        log: the output file.
        run_id: the chaos run's id, put in the environment (:data:`~chaoslib.procs.MARKER`).
        environment: more variables.
    """

    def __init__(self, name: str, command: Sequence[str], log: Path, run_id: str, cwd: Path,
                 environment: dict[str, str] | None = None) -> None:
        self.name = name
        self.command = list(command)
        self.log = Path(log)
        self.cwd = cwd
        self.environment = {**os.environ, MARKER: run_id, "PYTHONUNBUFFERED": "1", **(environment or {})}
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self.exits: list[int] = []          # return codes of the runs that ended (-9: SIGKILL)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        """Start the command (again); a run still going is an error."""
        if self.running():
            raise RuntimeError(f"{self.name} is still running (pid {self.pid})")
        with open(self.log, "ab") as stream:
            stream.write(f"\n=== chaos: start {self.starts + 1} of {self.name} at {time.time():.3f}\n".encode())
            stream.flush()
            self.process = subprocess.Popen(self.command, cwd=self.cwd, env=self.environment, stdout=stream,
                                            stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=_default_interrupt)
        self.starts += 1

    def running(self) -> bool:
        if self.process is None:
            return False
        code = self.process.poll()
        if code is not None and len(self.exits) < self.starts:
            self.exits.append(code)
        return code is None

    def kill(self) -> None:
        """SIGKILL the job's main process only (what a crash or the OOM killer does): its children must notice."""
        if self.running():
            self.process.kill()
            self.process.wait()
            self.running()

    def interrupt(self, grace: float = 60.0) -> int:
        """Ctrl-C (SIGINT to the process), as a user ends a run: it saves and exits; SIGKILL after ``grace``
        seconds. Its return code."""
        if self.process is None:
            return 0
        if self.running():
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.running()
        return self.process.returncode

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` s for the job to end by itself; its return code, or None."""
        if self.process is None:
            return None
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self.running()
        return code
