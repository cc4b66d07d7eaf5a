"""The conformance checker: the reference server passes it, each deliberately broken server fails it with the line
that names its flaw, and the CLI's exit codes say which."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lamarckian.games.check import check

from .helpers import ROOT, ServerProcess


def test_the_reference_server_conforms(tmp_path):
    server = ServerProcess(tmp_path, ["--mdp", "pong", "-m", "mdp.pong.score=1"])
    violations = check(server.address, server.secret, timeout=5).violations
    server.stop()
    assert violations == []


def test_the_round_trip_reaches_cartpoles_time_limit(tmp_path):
    """CartPole ends by failing within a few dozen random steps; the checker's searching policy keeps it up to the
    500-step limit, so a server's truncation is checked (before: random actions, truncation almost never seen)."""
    server = ServerProcess(tmp_path, ["--env", "CartPole-v1"])
    passed = check(server.address, server.secret, timeout=5).passed
    server.stop()
    assert any(line.startswith("round trip: ") and "reached its time limit at step 500" in line for line in passed), \
        passed


@pytest.mark.parametrize("flaw,env,line", [
    ("swap_ids", "CartPole-v1", "round trip: reset of episode 1: the answer carries episode 2, not 1"),
    ("silent", "CartPole-v1", "episode ids: no answer to step of episode 999 within the 1 s timeout"),
    ("impostor", "CartPole-v1", "handshake: the game server did not prove the secret (wrong secret or an impostor)"),
    ("big_endian", "CartPole-v1", "round trip: reset of episode 1: seat 0's observation: entry (0,) is"),
    ("ignore_close", "CartPole-v1", "errors: a step of a closed episode (6) must get an error for episode 6"),
    ("truncated_not_done", "Pendulum-v1", "round trip: step 200 of episode 1: seat 0 is truncated but not done"),
    ("duplicate_reset", "CartPole-v1", "refusals: a second reset of running episode 20 must get an error for it"),
    ("drop_second", "CartPole-v1", "refusals: no answer to a step of episode 21 sent while its first step was in"),
    ("no_auth_limit", "CartPole-v1", "handshake limit: a connection that did not authenticate was still open"),
    ("small_ids", "CartPole-v1", "large ids: reset of episode 9007199254740991: the answer carries episode"),
])
def test_a_broken_server_fails_with_the_line_that_names_its_flaw(tmp_path, monkeypatch, flaw, env, line):
    monkeypatch.setenv("LAMARCKIAN_TEST_FLAW", flaw)
    server = ServerProcess(tmp_path, ["--env", env], module="tests.games.broken_server")
    violations = check(server.address, server.secret, timeout=1).violations
    server.stop()
    assert any(violation.startswith(line) for violation in violations), violations


def test_the_cli_exits_0_for_a_conforming_server_and_1_with_one_line_per_violation(tmp_path):
    good = ServerProcess(tmp_path, ["--env", "CartPole-v1"])
    environment = {**os.environ, "LAMARCKIAN_TEST_FLAW": "swap_ids"}
    bad = subprocess.Popen([sys.executable, "-m", "tests.games.broken_server", "serve", "--env", "CartPole-v1",
                            "--secret", str(good.secret), "--address-file", str(tmp_path / "bad")], cwd=ROOT,
                           env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        results = [subprocess.run([sys.executable, "-m", "lamarckian.games", "check", address, "--secret",
                                   str(good.secret), "--timeout", "2"], capture_output=True, text=True, cwd=ROOT)
                   for address in (good.address, _wait_for(tmp_path / "bad"))]
    finally:
        bad.terminate()
        bad.wait(10)
        good.stop()
    assert results[0].returncode == 0
    assert results[0].stdout.splitlines()[-1].endswith("conforms: 9 checks passed")
    assert results[1].returncode == 1
    assert results[1].stdout.startswith("round trip: ")


def test_the_cli_says_which_secret_file_is_missing_with_exit_code_2(tmp_path):
    result = subprocess.run([sys.executable, "-m", "lamarckian.games", "check", "tcp://127.0.0.1:9",
                             "--secret", str(tmp_path / "absent.secret")], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2
    assert "absent.secret" in result.stderr


def _wait_for(file) -> str:
    import time

    deadline = time.monotonic() + 60
    while not (file.exists() and file.read_text().strip()):
        assert time.monotonic() < deadline, "the broken server did not start"
        time.sleep(0.05)
    return file.read_text().strip()
