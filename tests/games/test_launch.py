"""Game servers the trainer starts itself (``mdp.game.launch``): up on their own ports, restarted with one console
line when they exit or stop answering, ended with their process (also after a SIGKILL), and a run that trains to
CartPole's threshold through them while one is killed."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lamarckian.games import launch, protocol
from lamarckian.games.client import GameSettings
from lamarckian.games.launch import Launcher

from .helpers import ROOT

DEADLINE = 120.0           # seconds an awaited event may take on a loaded machine


def serve(*extra: str) -> list[str]:
    """The reference server as a launch command."""
    return [sys.executable, "-m", "lamarckian.games", "serve", "--env", "CartPole-v1", "--bind",
            "tcp://127.0.0.1:{port}", "--secret", "{secret}", *extra]


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {DEADLINE} s"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def launcher(tmp_path, monkeypatch):
    """A launcher of two reference servers (a 1 s health check), closed afterwards."""
    monkeypatch.chdir(ROOT)
    running = Launcher(serve(), 2, tmp_path / "game.secret", tmp_path / "logs", start_timeout=DEADLINE, timeout=1.0)
    wait_for(lambda: all(running.address(i) for i in range(2)), "both instances up")
    yield running
    running.close()


def test_every_instance_answers_the_handshake_on_its_own_port(launcher):
    ports = {protocol.parse_address(launcher.address(i))[1] for i in range(2)}
    secret = protocol.read_secret(launcher.instances[0].secret_file)
    hellos = [launch.handshake(port, secret, 10.0) for port in ports]
    assert [hello["type"] for hello in hellos] == ["hello", "hello"]


def test_a_killed_instance_comes_back_on_a_new_process(launcher):
    first = launcher.instances[1].process.pid
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: launcher.address(1) is None or launcher.instances[1].process.pid != first, "the exit noticed")
    wait_for(lambda: launcher.address(1) is not None, "instance 1 up again")
    assert launcher.instances[1].process.pid != first


def test_a_killed_instance_is_one_console_line_with_its_exit_code_and_stderr(launcher, caplog):
    caplog.set_level(logging.WARNING, logger="lamarckian.games")
    os.kill(launcher.instances[0].process.pid, signal.SIGKILL)
    wait_for(lambda: any("game instance 0" in r.getMessage() for r in caplog.records), "the line")
    lines = [r.getMessage() for r in caplog.records if "game instance 0" in r.getMessage()]
    assert len(lines) == 1
    assert "exited with code -9" in lines[0]


def test_a_hung_instance_is_stopped_and_started_again(launcher, caplog):
    caplog.set_level(logging.WARNING, logger="lamarckian.games")
    hung = launcher.instances[1].process.pid
    os.kill(hung, signal.SIGSTOP)
    wait_for(lambda: any("stopped answering" in r.getMessage() for r in caplog.records), "the hang noticed")
    wait_for(lambda: not alive(hung), "the hung process gone")
    wait_for(lambda: launcher.address(1) is not None, "instance 1 up again")


def test_close_ends_every_instance(launcher):
    pids = [instance.process.pid for instance in launcher.instances]
    launcher.close()
    assert [alive(pid) for pid in pids] == [False, False]


def test_an_instance_that_fails_at_once_says_why_and_backs_off(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="lamarckian.games")
    failing = Launcher([sys.executable, "-c", "import sys; sys.exit('no level file {port}')"], 1,
                       tmp_path / "game.secret", tmp_path / "logs", start_timeout=DEADLINE, timeout=1.0)
    failing.address(0)                                 # the instances start when first asked for
    try:
        wait_for(lambda: len([r for r in caplog.records if "game instance 0" in r.getMessage()]) >= 2, "two lines")
    finally:
        failing.close()
    lines = [r.getMessage() for r in caplog.records if "game instance 0" in r.getMessage()]
    assert re.search(r"exited with code 1 while starting; its stderr \(\S+\.stderr\) says: no level file", lines[0])
    assert [re.search(r"again in (\d+) s", line).group(1) for line in lines[:2]] == ["1", "2"]


def test_no_instance_outlives_a_sigkilled_owner(tmp_path):
    """The owning process SIGKILLed (no close, no atexit): the kernel ends its games (PR_SET_PDEATHSIG)."""
    script = (f"import time\nfrom pathlib import Path\nfrom lamarckian.games.launch import Launcher\n"
              f"l = Launcher({serve()!r}, 2, Path({str(tmp_path / 'game.secret')!r}), "
              f"Path({str(tmp_path / 'logs')!r}), 120.0, 1.0)\n"
              "while not all(l.address(i) for i in range(2)): time.sleep(0.05)\n"
              "print(' '.join(str(i.process.pid) for i in l.instances), flush=True)\ntime.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(pid) for pid in owner.stdout.readline().split()]
    finally:
        owner.kill()
        owner.wait()
    wait_for(lambda: not any(alive(pid) for pid in pids), "no game left")
    assert len(pids) == 2


@pytest.mark.parametrize(("changes", "message"), [
    ({"address": "tcp://127.0.0.1:1", "launch": ("x", "{port}")}, "mdp.game.address and mdp.game.launch: set one"),
    ({"launch": "node server.js --secret {secret}"}, "no {port} in it"),
])
def test_a_bad_launch_setting_is_refused_naming_the_key(tmp_path, changes, message):
    values = {"address": None, "launch": None, "instances": 1, "start_timeout": 60.0, "logs": str(tmp_path),
              "secret": str(tmp_path / "s"), "connections": 2, "timeout": 5.0, "max_episodes": 10, "tls": None,
              "tls_name": None, **changes}
    with pytest.raises(ValueError, match=re.escape(message)):
        GameSettings(**values)


def test_a_launch_string_is_split_as_a_shell_would():
    settings = GameSettings(address=None, launch="node 'my game.js' --bind 127.0.0.1:{port}", instances=1,
                            start_timeout=60.0, logs="/tmp", secret="/tmp/s", connections=2, timeout=5.0,
                            max_episodes=10, tls=None, tls_name=None)
    assert settings.launch == ("node", "my game.js", "--bind", "127.0.0.1:{port}")


def test_train_py_reaches_475_through_launched_servers_while_one_is_killed(tmp_path):
    """The user's command with no server started by hand: 2 instances per actor; one is SIGKILLed once the first
    evaluation is written; the run says so in one line and still reaches the threshold; no game is left."""
    secret, log = tmp_path / "game.secret", tmp_path / "train.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "train.py"), "-c", "mdp/game/cartpole.yml", "-m",
             f"mdp.game.launch={' '.join(serve())}", "mdp.game.instances=2", f"mdp.game.secret={secret}",
             f"root={tmp_path / 'run'}", "sample.actors=1", "sample.envs=64", "evaluator.interval=5",
             "evaluator.terminate=self.fitness >= 475 or self.cost > 2000000"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        wait_for(lambda: (tmp_path / "run" / "evaluations.csv").exists() or process.poll() is not None,
                 "the first evaluation")
        os.kill(games(secret)[0], signal.SIGKILL)
        process.wait(900)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    errors = log.read_text()
    lines = [line for line in errors.splitlines() if re.search(r"game instance \d .*exited with code -9", line)]
    evaluations = [float(m) for m in re.findall(r"fitness ([-\d.e+]+) over", errors)]
    assert process.returncode == 0, errors[-3000:]
    assert len(lines) == 1, errors[-3000:]
    assert max(evaluations) >= 475, errors[-3000:]
    assert games(secret) == []


def games(secret: Path) -> list[int]:
    """Running game servers of this test (their command line names its secret file)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                command = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "lamarckian.games\0serve" in command and str(secret) in command and alive(int(entry.name)):
                found.append(int(entry.name))
    return sorted(found)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """train.py with 2 launched servers that note their starts and their saves on SIGTERM, one actor, no evaluation
    actor, to its third update: (exit code, the notes, the logs folder, train.py's stderr)."""
    folder = tmp_path_factory.mktemp("short_run")
    notes, logs = folder / "notes", folder / "logs"
    command = " ".join([sys.executable, str(ROOT / "tests" / "games" / "saving_server.py"), str(notes), *serve()[3:]])
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "-c", "mdp/game/cartpole.yml", "-m", f"mdp.game.launch={command}",
         "mdp.game.instances=2", f"mdp.game.secret={folder / 'game.secret'}", f"mdp.game.logs={logs}",
         f"root={folder / 'run'}", "sample.actors=1", "sample.envs=8", "train.batch=256", "evaluator.episodes=0",
         "evaluator.terminate=self.iteration >= 3"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    return done.returncode, notes.read_text().split(), logs, done.stderr


def test_a_run_ends(short_run):
    code, _, _, errors = short_run
    assert code == 0, errors[-3000:]


def test_each_instance_starts_once(short_run):
    """The learner's process reads the spaces from one instance; the actor keeps its instance 0 for play: 1 + 2."""
    assert short_run[1].count("started") == 3


def test_every_instance_gets_sigterm_and_ends_on_its_own(short_run):
    assert short_run[1].count("saved") == 3


def test_an_instances_stdout_goes_to_the_logs_folder(short_run):
    printed = " ".join(path.read_text() for path in short_run[2].glob("*.stdout"))
    assert "serving tcp://127.0.0.1:" in printed


def test_a_launch_that_fails_at_once_quotes_the_first_lines_of_its_stderr_and_names_the_file(tmp_path):
    """A program that prints its cause first, then its usage (as Go's flag package does): the cause is quoted."""
    script = tmp_path / "fails.py"
    script.write_text("import sys\nprint('flag provided but not defined: -bind', file=sys.stderr)\n"
                      "for i in range(20):\n    print(f'  -option{i} string', file=sys.stderr)\nsys.exit(2)\n")
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "-c", "mdp/game/cartpole.yml", "-m",
         f"mdp.game.launch={sys.executable} {script} --bind 127.0.0.1:{{port}}", f"mdp.game.logs={tmp_path / 'logs'}",
         f"mdp.game.secret={tmp_path / 'game.secret'}", f"root={tmp_path / 'run'}"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    assert done.returncode == 2
    assert "flag provided but not defined: -bind" in done.stderr
    assert re.search(r"its stderr \(\S+/logs/game-\S+\.stderr\)", done.stderr)
