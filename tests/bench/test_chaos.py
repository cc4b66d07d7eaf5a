"""The chaos harness (bench/chaos.py): its stalling proxy on real loopback sockets, and every scenario under its
faults for 5 minutes in all (slow: CI keeps it), which must end with every check held."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY / "bench"))

import chaos  # noqa: E402
from chaoslib.faults import StallProxy  # noqa: E402
from chaoslib.scenarios import Scenario  # noqa: E402
from chaoslib.schedule import Fault, Log, Watch  # noqa: E402


@pytest.fixture
def echo_server():
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            while data := connection.recv(1024):
                connection.sendall(data)

    import threading

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def test_the_proxy_passes_bytes_and_holds_them_while_stalled(echo_server):
    proxy = StallProxy("127.0.0.1", echo_server)
    try:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        client.sendall(b"before")
        assert client.recv(1024) == b"before"
        proxy.stall(1.0)
        started = time.monotonic()
        client.sendall(b"during")
        assert client.recv(1024) == b"during"
        assert time.monotonic() - started >= 0.8
        client.close()
    finally:
        proxy.close()


def test_the_proxy_refuses_any_address_but_loopback():
    with pytest.raises(ValueError, match="loopback"):
        StallProxy("192.0.2.1", 9)


def write_run(folder: Path, costs: list[tuple[float, int]], fault_times: list[float],
              steps_lost: float = 100.0) -> None:
    """A scenario's logs as the harness writes them: status samples of one process, faults, a result."""
    for t, cost in costs:
        Log(folder / "samples.jsonl").write({"t": t, "cost": cost, "pid": 7})
    for t in fault_times:
        Log(folder / "events.jsonl").write({"t": t, "kind": "learner killed", "hit": True})
    result = {"seconds": costs[-1][0], "checkpoint_interval": 10.0, "steps_lost": [steps_lost], "leftover": [],
              "zombies": 0, "checks": {}}
    (folder / "result.json").write_text(chaos.json.dumps(result))


def test_a_run_reporting_no_progress_between_faults_is_summarized_over_its_whole_length(tmp_path):
    # reports every 4 s, env steps counted every 40 s: most 8-second windows are flat, their median rate is 0
    write_run(tmp_path, [(4.0 * i, 1000 * (i // 10)) for i in range(41)], [100.0])
    figures, failed = chaos.summarize("evolve", tmp_path, baseline=None)
    assert figures["rate"] == pytest.approx(4000 / 160.0)
    assert failed == []


def test_a_rollback_is_not_judged_against_a_rate_that_holds_the_faults_losses(tmp_path):
    write_run(tmp_path, [(4.0 * i, 1000 * (i // 10)) for i in range(41)], [100.0], steps_lost=50_000.0)
    figures, failed = chaos.summarize("evolve", tmp_path, baseline=None)
    assert figures["rollback_checked"] is False
    assert failed == []


def test_a_run_that_never_moved_fails_with_that_reason(tmp_path):
    write_run(tmp_path, [(10.0 * i, 0) for i in range(20)], [50.0])
    _, failed = chaos.summarize("evolve", tmp_path, baseline=None)
    assert any("no measurable progress" in line for line in failed)



def watched_job(tmp_path: Path, costs: list[float]) -> tuple[Watch, list[float]]:
    """A Watch over a job whose status reports ``costs`` one after another (the last one from then on), and the
    times its one fault (due every 0.05 s) fell. The watch observes ``len(costs) + 10`` times, 0.02 s apart at the
    least: a loaded machine stretches the run, it never cuts it short."""
    reports = iter(costs)
    status = {"time": 0.0, "cost": 0.0}
    observed = [0]

    def next_status() -> dict:
        observed[0] += 1
        status["cost"] = next(reports, status["cost"])
        status["time"] += 1.0
        return dict(status)

    watch = Watch(tmp_path, "no-such-run", next_status, lambda: [])
    fell: list[float] = []
    watch.run([Fault("poke", 0.05, lambda: fell.append(watch.now()) or {"hit": True})], seconds=120.0, period=0.02,
              until=lambda: observed[0] >= len(costs) + 10)
    return watch, fell


def test_a_fault_waits_until_the_job_has_reported_env_steps(tmp_path):
    _, fell = watched_job(tmp_path, [0.0])
    assert fell == []


def test_each_fault_waits_for_the_job_to_move_on_from_the_one_before(tmp_path):
    _, fell = watched_job(tmp_path, [0.0, 0.0, 10.0, 10.0, 10.0, 10.0, 20.0])       # two moves: two faults
    assert len(fell) == 2


def test_a_waiting_fault_logs_how_long_it_waited(tmp_path):
    watch, _ = watched_job(tmp_path, [0.0] * 10 + [10.0])
    waited = [event["waited"] for event in Log(tmp_path / "events.jsonl").read() if event["kind"] == "poke"]
    assert waited[0] > 0.1

WAITS_FOR_CTRL_C = ("import signal, sys, time; signal.signal(signal.SIGINT, lambda *_: sys.exit(130)); "
                    "print('ready', flush=True); time.sleep(600)")


class TwoJobs(Scenario):
    """Two real processes that end with code 130 on Ctrl-C, as the programs do."""

    name = "two"

    def start(self) -> None:
        for name in ("server", "worker"):
            self.job(name, [sys.executable, "-c", WAITS_FOR_CTRL_C]).start()
        for job in self.jobs.values():                  # Ctrl-C only once each has its handler
            while "ready" not in job.log.read_text():
                assert job.running(), job.log.read_text()
                time.sleep(0.05)

    def result(self) -> dict:
        return {}


def test_a_job_killed_moments_before_the_end_is_not_counted_as_failing_its_ctrl_c(tmp_path):
    scenario = TwoJobs(tmp_path, "two-test", random.Random(0), 60.0)
    scenario.start()
    try:
        scenario.kill_job("worker", restart_after=600.0)        # down, waiting for its restart, at the stop
        result = scenario.stop()
    finally:
        scenario.close()
    assert result["checks"]["every job ended on Ctrl-C (exit 0 or 130)"]


def test_a_job_that_ended_by_itself_before_the_ctrl_c_fails_the_check(tmp_path):
    scenario = TwoJobs(tmp_path, "two-test", random.Random(0), 60.0)
    scenario.start()
    try:
        scenario.jobs["worker"].kill()                          # nobody's fault on the timetable
        result = scenario.stop()
    finally:
        scenario.close()
    assert not result["checks"]["every job ended on Ctrl-C (exit 0 or 130)"]


@pytest.mark.slow
def test_every_scenario_survives_five_minutes_of_faults(tmp_path):
    completed = subprocess.run([sys.executable, "bench/chaos.py", "--minutes", "5", "--out", str(tmp_path)],
                               cwd=REPOSITORY, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-3000:]
