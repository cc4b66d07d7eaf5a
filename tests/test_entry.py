"""Ctrl-C at any moment of train.py's and evolve.py's start-up: exit 130 with one line, and no process left behind.

Each case starts the program in a session of its own, waits for a moment of its start-up that it can see from
outside (the interpreter running, torch's library mapped, a child process started, Ray's processes up, an actor
process up), sends SIGINT to the program alone (as ``kill -INT``; a terminal's Ctrl-C also reaches the children,
which ignore it) and waits for it to end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
CARTPOLE = ["-c", "mdp/gym.yml", "mdp/gym/cartpole.yml", "-m", "sample.actors=1", "evaluator.episodes=0"]
EVOLVE = ["-c", "mdp/gym.yml", "mdp/gym/cartpole.yml", "ec/ea/pbt.yml", "ec/wrap/mdp.yml", "-m", "ec.population=2",
          "sample.actors=1", "evaluator.episodes=0"]
DEADLINE = 120.0         # seconds a moment may take to come, and the program to end after it


def children(pid: int) -> list[int]:
    try:
        return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
                for child in (task / "children").read_text().split()]
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    found, todo = [], children(pid)
    while todo:
        process = todo.pop()
        found.append(process)
        todo.extend(children(process))
    return found


def read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """Running (a zombie is not: it has ended and waits for its parent to collect it)."""
    stat = read(f"/proc/{pid}/stat")
    return bool(stat) and stat.rsplit(")", 1)[1].split()[0] != "Z"


def names(pid: int) -> list[str]:
    return [read(f"/proc/{process}/cmdline").replace("\0", " ") + read(f"/proc/{process}/comm")
            for process in descendants(pid)]


MOMENTS: dict[str, Callable[[int], bool]] = {
    "interpreter": lambda pid: True,
    "torch import": lambda pid: "libtorch_cpu" in read(f"/proc/{pid}/maps"),
    "first child": lambda pid: bool(descendants(pid)),
    "Ray's processes": lambda pid: any("raylet" in name for name in names(pid)),
    "an actor": lambda pid: any("lam:" in name for name in names(pid)),
}


def default_interrupt() -> None:
    """In the program's process before it runs: SIGINT does what it does by default. A suite started in the
    background (``nohup ... &``, as CI may be) hands its children SIGINT ignored, and Python then installs no
    handler: the program would never see the Ctrl-C this test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_at(program: str, arguments: list[str], moment: str, tmp_path: Path
                 ) -> tuple[subprocess.CompletedProcess[str], set[int]]:
    """Run ``program``, SIGINT it at ``moment``: its outcome and every descendant seen before it ended."""
    process = subprocess.Popen([sys.executable, str(REPOSITORY / program), *arguments, f"root={tmp_path / 'run'}"],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, preexec_fn=default_interrupt)
    seen: set[int] = set()
    try:
        began = time.monotonic()
        while not MOMENTS[moment](process.pid):
            seen.update(descendants(process.pid))
            assert process.poll() is None, f"{program} ended before {moment}"
            assert time.monotonic() - began < DEADLINE, f"no {moment} in {DEADLINE} s"
            time.sleep(0.002)
        seen.update(descendants(process.pid))
        os.kill(process.pid, signal.SIGINT)
        deadline = time.monotonic() + DEADLINE
        while process.poll() is None and time.monotonic() < deadline:
            seen.update(descendants(process.pid))
            time.sleep(0.01)
        out, err = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err), seen


def left_behind(seen: set[int]) -> list[int]:
    """The processes of ``seen`` still running once they have had a while to end (waits on their ending)."""
    deadline = time.monotonic() + DEADLINE
    while any(alive(pid) for pid in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in seen if alive(pid)]


PYTHON_STARTUP = "Fatal Python error: init_import_site"   # CPython's own words when SIGINT cuts its start short


def test_before_the_interpreter_has_a_handler_the_default_ends_it(tmp_path):
    """The earliest moment: Python may not yet have its SIGINT handler, and then the signal ends it as a shell
    reports with 130 (a negative return code here); once our code runs, nothing is printed but at most one line.
    In between, while CPython imports ``site`` with its handler in place, CPython itself ends with 1 and its
    traceback (:data:`PYTHON_STARTUP`): no line of ours has run, and that outcome is CPython's."""
    completed, seen = interrupt_at("train.py", CARTPOLE, "interpreter", tmp_path)
    if PYTHON_STARTUP in completed.stderr:
        assert completed.returncode == 1, completed.stderr
    else:
        assert completed.returncode in (130, -signal.SIGINT), completed.stderr
        assert len(completed.stderr.strip().splitlines()) <= 1, completed.stderr
    assert left_behind(seen) == []


CASES = [
    ("train.py", CARTPOLE, "torch import"),
    ("train.py", CARTPOLE, "first child"),                                  # the actors' fork server
    ("train.py", CARTPOLE, "an actor"),
    ("train.py", [*CARTPOLE, "ray.launch=ray"], "Ray's processes"),
    ("evolve.py", EVOLVE, "torch import"),
    ("evolve.py", EVOLVE, "first child"),
]


@pytest.fixture(scope="module")
def outcome(request, tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], set[int]]:
    program, arguments, moment = request.param
    return interrupt_at(program, arguments, moment, tmp_path_factory.mktemp("run"))


@pytest.mark.parametrize("outcome", CASES, indirect=True, scope="module",
                         ids=[f"{program} at {moment}" for program, _, moment in CASES])
class TestCtrlCWhileStarting:
    def test_exits_130(self, outcome):
        completed, _ = outcome
        assert completed.returncode == 130, completed.stderr

    def test_says_so_in_one_line(self, outcome):
        completed, _ = outcome
        assert len([line for line in completed.stderr.splitlines() if "interrupted" in line]) == 1, completed.stderr

    def test_no_traceback(self, outcome):
        completed, _ = outcome
        assert "Traceback" not in completed.stderr, completed.stderr

    def test_leaves_no_process_behind(self, outcome):
        _, seen = outcome
        assert left_behind(seen) == []
