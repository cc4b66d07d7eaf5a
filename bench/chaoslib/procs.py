"""Processes as /proc shows them: a job's tree, its processes found by name, their memory and open files.

A job started by :class:`~chaoslib.job.Job` carries the environment variable :data:`MARKER` with its run's id;
every process it starts inherits it (Ray's raylets and workers too, forkserver children too), so whatever is left of
a run after it ended can be found even when it was re-parented.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
from pathlib import Path
from typing import Callable, Iterable

MARKER = "LAMARCKIAN_CHAOS_RUN"
PAGE = os.sysconf("SC_PAGE_SIZE")
PR_SET_CHILD_SUBREAPER = 36


@dataclasses.dataclass(frozen=True)
class Proc:
    """One process: ``rss`` in bytes, ``fds`` open file descriptors, ``state`` the letter of /proc/PID/stat."""

    pid: int
    ppid: int
    state: str
    comm: str
    cmdline: str
    rss: int
    fds: int


def read(pid: int) -> Proc | None:
    """The process ``pid``, or None when it is gone (or not readable)."""
    base = Path("/proc") / str(pid)
    try:
        stat = (base / "stat").read_text()
        cmdline = (base / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        rss_pages = int((base / "statm").read_text().split()[1])
        try:
            fds = len(os.listdir(base / "fd"))
        except PermissionError:
            fds = 0
    except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError, ValueError):
        return None
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    return Proc(pid, int(fields[1]), fields[0], comm, cmdline, rss_pages * PAGE, fds)


def kind(proc: Proc) -> str:
    """What sort of process it is, for sums by kind: a Ray worker's task (``ray::PopulationLearner``), a child
    actor's name without its number (``lam:Actor``), else the program (``raylet``, ``gcs_server``, ``python``)."""
    if proc.cmdline.startswith("ray::"):
        return proc.cmdline.split()[0]
    if proc.comm.startswith("lam:"):
        return proc.comm.rstrip("0123456789")
    words = proc.cmdline.split()
    program = Path(words[0]).name if words else proc.comm
    if not program.startswith("python") or len(words) < 2:
        return program
    arguments = [word for word in words[1:] if word != "-B"]
    if arguments[0] == "-m":                                   # python -m lamarckian.remote server
        return " ".join(["python", *arguments[:3]])
    if arguments[0] == "-c":                                   # multiprocessing's fork server, resource tracker
        return "python -c " + arguments[2].split(".")[-1] if len(arguments) > 2 else "python -c"
    return f"python {Path(arguments[0]).name}"


def every() -> list[Proc]:
    """Every readable process of this machine."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            proc = read(int(entry))
            if proc is not None:
                found.append(proc)
    return found


def tree(roots: Iterable[int], processes: list[Proc] | None = None) -> list[Proc]:
    """``roots`` and all their descendants that are alive."""
    processes = every() if processes is None else processes
    children: dict[int, list[Proc]] = {}
    by_pid = {p.pid: p for p in processes}
    for proc in processes:
        children.setdefault(proc.ppid, []).append(proc)
    found, stack = [], [by_pid[r] for r in roots if r in by_pid]
    while stack:
        proc = stack.pop()
        found.append(proc)
        stack.extend(children.get(proc.pid, []))
    return found


def marked(run_id: str) -> list[Proc]:
    """Processes whose environment says they belong to the chaos run ``run_id``."""
    needle = f"{MARKER}={run_id}".encode() + b"\0"
    found = []
    for proc in every():
        try:
            environment = Path(f"/proc/{proc.pid}/environ").read_bytes() + b"\0"
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if needle in environment and proc.pid != os.getpid():
            found.append(proc)
    return found


def matching(roots: Iterable[int], test: Callable[[Proc], bool]) -> list[Proc]:
    """The live (not stopped, not zombie) processes of the trees under ``roots`` that pass ``test``."""
    return [p for p in tree(roots) if p.state not in ("Z", "T", "t", "X") and test(p)]


def become_subreaper() -> None:
    """Orphans of this process's descendants are re-parented to it (not to PID 1), so :func:`orphans` finds them
    and :func:`reap` collects them."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def orphans(own: Iterable[int]) -> list[Proc]:
    """Live processes re-parented to this one (a subreaper) other than its own children ``own``: what outlived the
    process that started it."""
    me, own = os.getpid(), set(own)
    return [p for p in every() if p.ppid == me and p.pid not in own and p.state != "Z"]


def reap(own: Iterable[int]) -> int:
    """Collect the exited orphans re-parented to this process (not its own children ``own``, which their
    :class:`subprocess.Popen` collects); how many."""
    me, own, count = os.getpid(), set(own), 0
    for proc in every():
        if proc.ppid == me and proc.pid not in own and proc.state == "Z":
            try:
                os.waitpid(proc.pid, os.WNOHANG)
                count += 1
            except ChildProcessError:
                pass
    return count
