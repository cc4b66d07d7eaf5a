"""Several hosts for real: network namespaces with their own addresses on one bridge (bench/hostlib), a Ray node in
each, and the platform's distributed paths run across them. As root only (CI runs as root); elsewhere skipped, with
that reason."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY / "bench"))

from hostlib.netns import Hosts, why_unavailable  # noqa: E402
from hostlib.ray_nodes import RayNodes  # noqa: E402

CARTPOLE = ["mdp/gym.yml", "mdp/gym/cartpole.yml"]

pytestmark = pytest.mark.skipif(why_unavailable() is not None, reason=str(why_unavailable()))

#: a TCP echo inside a host: listens on its address, answers one line, prints "listening" first
ECHO = ("import socket, sys; s = socket.create_server((sys.argv[1], 7000)); print('listening', flush=True); "
        "c, _ = s.accept(); c.sendall(c.recv(64))")
#: connects from another host: prints what came back, or the error's name
CALL = ("import socket, sys\ntry:\n    c = socket.create_connection((sys.argv[1], 7000), timeout=2)\n"
        "    c.sendall(b'ping'); print(c.recv(64).decode())\nexcept OSError as e:\n    print(type(e).__name__)")


def echo_between(hosts: Hosts, server: int, client: int) -> str:
    listening = subprocess.Popen(["ip", "netns", "exec", hosts[server].namespace, sys.executable, "-c", ECHO,
                                  hosts[server].address], stdout=subprocess.PIPE, text=True)
    try:
        assert listening.stdout is not None
        listening.stdout.readline()
        return hosts.run(hosts[client], [sys.executable, "-c", CALL, hosts[server].address], timeout=30).stdout.strip()
    finally:
        listening.kill()
        listening.wait()


def test_hosts_reach_each_other_at_their_own_addresses():
    with Hosts(2) as hosts:
        assert hosts[0].address != hosts[1].address
        assert echo_between(hosts, 1, 0) == "ping"


def test_a_cut_link_parts_a_host_until_it_is_mended():
    with Hosts(2) as hosts:
        hosts.cut(hosts[1])
        parted = echo_between(hosts, 1, 0)
        hosts.mend(hosts[1])
        assert parted in ("TimeoutError", "OSError", "ConnectionRefusedError")
        assert echo_between(hosts, 1, 0) == "ping"


def test_nothing_is_left_after_the_hosts_close():
    with Hosts(2) as hosts:
        hosts.popen(hosts[0], ["sleep", "600"])              # a process the harness must end
        tag = hosts.tag
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert tag not in namespaces + links


def drive(hosts: Hosts, nodes: RayNodes, program: str, configs: list[str], changes: list[str], root: Path,
          log: Path, cwd: Path = REPOSITORY) -> subprocess.Popen:
    """``program`` (train.py, evolve.py) started on the head's host against the cluster (``ray.launch=ray``) with
    ``-c configs`` and ``-m changes``, its run directory ``root``, its console in ``log``."""
    return hosts.popen(hosts[0], [sys.executable, str(REPOSITORY / program), "-c", *configs, "-m", f"root={root}",
                                  f"ray.address={nodes.address}", "ray.launch=ray", *changes],
                       log=log, cwd=cwd, env=nodes.environment())


@pytest.mark.slow
def test_train_py_learns_cartpole_on_three_hosts_and_goes_on_when_one_is_lost(tmp_path):
    """ray.launch=ray from the head's host: one actor per host (each node offers 1 CPU), the learner's servers and
    the actors' servers bound at each host's own address (rpc/sockets.py bind_host's node-address branch). Once the
    actors are up, every process of host 2 is SIGKILLed: its actor's replacement waits in Ray's queue (no CPU is
    left for it) while the learner trains from the 2 actors left, to 475."""
    log = tmp_path / "train.log"
    with Hosts(3) as hosts, RayNodes(hosts, tmp_path / "nodes", cpus=1) as nodes:
        nodes.start()
        train = drive(hosts, nodes, "train.py", CARTPOLE, [
            "sample.actors=3", "sample.num_cpus=1", "evaluator.beside=false", "evaluator.interval=3",
            "evaluator.terminate=self.fitness >= 475 and self.time >= 20 or self.cost > 600000"], tmp_path / "run",
            log, tmp_path)
        wait_for_line(log, "actors on 3 hosts", 90)
        hosts.kill(hosts[2])
        code = train.wait(timeout=170)
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    placed = re.search(r"actors on (\d+) hosts: (.*)", text)
    assert placed is not None, text[-3000:]
    assert placed.group(1) == "3", placed.group(0)
    assert "replaced it (1 so far); 1 waiting for Ray to place them" in text, text[-3000:]
    evaluations = [float(m) for m in re.findall(r"fitness ([-\d.e+]+) over", text)]
    assert max(evaluations, default=0.0) >= 475, text[-3000:]


def wait_for_line(log: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in (log.read_text(errors="replace") if log.exists() else ""):
        assert time.monotonic() < deadline, f"no {text!r} in {log} after {timeout} s"
        time.sleep(0.2)


@pytest.mark.slow
def test_a_short_cut_is_ridden_out_and_a_partition_replaces_the_parted_actor(tmp_path):
    """At the default rpc.timeout (5 s): host 2 cut off for 3 s (its actor lives on: nobody is declared dead), later
    for 15 s (3× the timeout: its actor is declared dead and replaced on a host Ray can reach). The run goes on to
    its end, and the parted actor that comes back when the link is mended changes nothing (one replacement in
    all)."""
    log = tmp_path / "train.log"
    with Hosts(3) as hosts, RayNodes(hosts, tmp_path / "nodes", cpus=2) as nodes:
        nodes.start()
        train = drive(hosts, nodes, "train.py", CARTPOLE, [
            "sample.actors=3", "sample.num_cpus=1", "evaluator.beside=false", "evaluator.interval=1000000",
            "evaluator.terminate=self.time >= 40"], tmp_path / "run", log, tmp_path)
        wait_for_line(log, "actors on 3 hosts", 90)
        time.sleep(3)
        hosts.cut(hosts[2])
        time.sleep(3)
        hosts.mend(hosts[2])
        time.sleep(4)
        ridden_out = "actor died" not in log.read_text(errors="replace")
        hosts.cut(hosts[2])
        time.sleep(15)
        hosts.mend(hosts[2])
        code = train.wait(timeout=120)
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    assert ridden_out, text[-3000:]
    assert "replaced it (1 so far)" in text, text[-3000:]
    assert "(2 so far)" not in text, text[-3000:]
    assert "done: self.time >= 40 holds" in text, text[-3000:]


@pytest.mark.slow
def test_a_host_that_joins_after_the_run_started_gets_an_actor_that_works(tmp_path):
    """The head's host offers 1 CPU: the first actor starts there while the cluster has one address (it binds
    loopback), the second waits for a CPU; a second host joins and the second actor starts there, at that host's
    address, and the learner trains from both."""
    log = tmp_path / "train.log"
    with Hosts(2) as hosts, RayNodes(hosts, tmp_path / "nodes", cpus=1) as nodes:
        nodes.start(count=1)
        train = drive(hosts, nodes, "train.py", CARTPOLE, [
            "sample.actors=2", "sample.num_cpus=1", "evaluator.beside=false", "evaluator.interval=3",
            "evaluator.terminate=self.fitness >= 475 or self.cost > 600000"], tmp_path / "run", log, tmp_path)
        time.sleep(8)
        waited = "iter " not in log.read_text(errors="replace")       # no update before the second actor is up
        nodes.add(hosts[1])
        joined = hosts[1].address
        code = train.wait(timeout=150)
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    assert waited, text[-3000:]
    assert f"actors on 2 hosts: {joined} (1), 127.0.0.1 (1)" in text, text[-3000:]
    assert max((float(m) for m in re.findall(r"fitness ([-\d.e+]+) over", text)), default=0.0) >= 475, text[-3000:]


def game_namespaces(secret: Path) -> set[str]:
    """The network namespaces (hosts) of the running game servers whose command line names ``secret``."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if b"lamarckian.games\0serve" in command and str(secret).encode() in command:
            named = subprocess.run(["ip", "netns", "identify", entry.name], capture_output=True, text=True)
            found.add(named.stdout.strip())
    return found


@pytest.mark.slow
def test_actors_on_two_hosts_launch_their_own_game_servers(tmp_path):
    """mdp.game.launch with one actor on each of 2 hosts: each host runs its own game instance (seen in that
    host's namespace, listening on its own loopback), and the run trains through both."""
    log, secret = tmp_path / "train.log", tmp_path / "game.secret"
    server = [sys.executable, "-m", "lamarckian.games", "serve", "--env", "CartPole-v1", "--bind",
              "tcp://127.0.0.1:{port}", "--secret", "{secret}"]
    seen: set[str] = set()
    with Hosts(2) as hosts, RayNodes(hosts, tmp_path / "nodes", cpus=1) as nodes:
        nodes.start()
        train = drive(hosts, nodes, "train.py", ["mdp/game/cartpole.yml"], [
            "sample.actors=2", "sample.num_cpus=1", "evaluator.beside=false", f"mdp.game.launch={' '.join(server)}",
            f"mdp.game.secret={secret}", "evaluator.terminate=self.cost > 100000"], tmp_path / "run", log)
        deadline = time.monotonic() + 170
        while train.poll() is None and time.monotonic() < deadline:
            seen |= game_namespaces(secret)
            time.sleep(0.5)
        code = train.wait(timeout=60)
        namespaces = {host.namespace for host in hosts}
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    assert "actors on 2 hosts" in text, text[-3000:]
    assert namespaces <= seen, (seen, text[-3000:])


@pytest.mark.slow
def test_actors_on_two_hosts_play_a_game_server_on_a_third(tmp_path):
    """mdp.game.address on another host: the game server listens at host 2's own address (where it is told to
    bind); the actors, on hosts 0 and 1, reach it across the bridge and the run trains through it."""
    from lamarckian.games import protocol

    log, secret, address_file = tmp_path / "train.log", tmp_path / "game.secret", tmp_path / "game.address"
    protocol.write_secret(secret)
    with Hosts(3) as hosts, RayNodes(hosts, tmp_path / "nodes", cpus=1) as nodes:
        nodes.start(count=2)                                   # Ray on hosts 0 and 1; host 2 runs the game only
        game_host = hosts[2].address
        hosts.popen(hosts[2], [sys.executable, "-m", "lamarckian.games", "serve", "--env", "CartPole-v1", "--secret",
                               str(secret), "--bind", f"tcp://{game_host}:7100", "--address-file",
                               str(address_file)], log=tmp_path / "game.log", cwd=REPOSITORY)
        wait_until(lambda: address_file.exists() and address_file.read_text().strip() != "", 60, "the game server",
                   tmp_path / "game.log")
        address = address_file.read_text().strip()
        train = drive(hosts, nodes, "train.py", ["mdp/game/cartpole.yml"], [
            "sample.actors=2", "sample.num_cpus=1", "evaluator.beside=false", f"mdp.game.address={address}",
            f"mdp.game.secret={secret}", "evaluator.terminate=self.cost > 100000"], tmp_path / "run", log)
        code = train.wait(timeout=170)
    text = log.read_text(errors="replace")
    assert address == f"tcp://{game_host}:7100", address
    assert code == 0, text[-3000:]
    assert "actors on 2 hosts" in text, text[-3000:]


def ray_workers_in(hosts: Hosts, host: int) -> list[str]:
    """The Ray actors (their process titles, ``ray::PopulationLearner``...) living in host ``host``."""
    titles = []
    for pid in hosts.pids(hosts[host]):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if title.startswith(("ray::PopulationLearner", "ray::Actor")):
            titles.append(title)
    return titles


def lineage_rows(path: Path) -> list[dict]:
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def wait_until(condition, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s\n{log.read_text(errors='replace')[-3000:]}"
        time.sleep(0.2)


@pytest.mark.slow
def test_evolve_py_loses_a_host_goes_on_keeps_every_member_and_uses_the_host_again(tmp_path):
    """The cluster of issue 53 (head 1 CPU, two workers 2 CPUs): PBT of 4 with one actor a learner. Every process of
    host 2 is SIGKILLed after the first rounds: the console names the host, rounds go on within rpc.timeout + one
    round, the individuals whose learner died are trained again (a lineage row for each; none is missing but the
    rounds in flight at the Ctrl-C that ends the run); host 2 comes back, Ray actors of the run live there again, and
    rounds go on."""
    log, lineage = tmp_path / "evolve.log", tmp_path / "run" / "lineage.jsonl"
    with Hosts(3) as hosts, RayNodes(hosts, tmp_path / "nodes", cpus=[1, 2, 2]) as nodes:
        nodes.start()
        lost_host = hosts[2].address
        evolve = drive(hosts, nodes, "evolve.py", [*CARTPOLE, "ec/ea/pbt.yml", "ec/wrap/mdp.yml"], [
            "ec.population=4", "sample.actors=1", "train.lr=[0.0001,0.003]", "ec.stop=self.time >= 600"],
            tmp_path / "run", log, tmp_path)
        wait_until(lambda: len(lineage_rows(lineage)) >= 4, 150, "4 rounds", log)
        before = lineage_rows(lineage)
        hosts.kill(hosts[2])
        killed = time.monotonic()
        wait_until(lambda: len(lineage_rows(lineage)) > len(before), 120, "a round after the kill", log)
        first_after = time.monotonic() - killed
        wait_until(lambda: f"host {hosts[2].address} lost" in log.read_text(errors="replace"), 120, "the loss", log)
        lost = len(lineage_rows(lineage))
        nodes.add(hosts[2])
        wait_until(lambda: ray_workers_in(hosts, 2), 120, "an actor of the run on the returned host", log)
        back = len(lineage_rows(lineage))
        wait_until(lambda: len(lineage_rows(lineage)) >= back + 2, 120, "rounds after the return", log)
        evolve.send_signal(signal.SIGINT)
        code = evolve.wait(timeout=120)
    text, rows = log.read_text(errors="replace"), lineage_rows(lineage)
    longest_round = max(row["round_seconds"] for row in before)
    assert code == 130, text[-3000:]
    assert first_after <= 5.0 + longest_round + 5.0, (first_after, longest_round)   # rpc.timeout + a round (+5 s)
    retrained = {int(n) for line in re.findall(r"while training individuals? ([\d, ]+);", text)
                 for n in line.split(", ")}
    reported = {row["id"] for row in rows}
    assert retrained <= reported, (retrained, text[-3000:])
    assert len(set(range(max(reported) + 1)) - reported) <= 4, text[-3000:]   # only rounds in flight at Ctrl-C
    assert lost > len(before), text[-3000:]
    assert f"host {lost_host} joined" in text, text[-3000:]
    assert "still waiting for the next iteration" not in text, text[-3000:]


REMOTE_SAC = ["mdp/gym.yml", "mdp/gym/pendulum.yml", "rl/sac.yml"]
REMOTE_SMALL = ["sample.envs=2", "sample.truncation=8", "model.hidden=[32,32]"]


@pytest.mark.slow
def test_remote_workers_on_one_host_feed_a_trainer_on_another_through_a_relay_on_a_third(tmp_path):
    """python -m lamarckian.remote across hosts: the relay server on host 1, bound at that host's own address; two
    workers (no Ray) on host 2; train.py with SAC and rl.remote.server on host 0, against its Ray node. The trainer has
    no actors of its own: every env step it learns from crossed two links. It reaches its step budget and exits 0; the
    relay's statistics name both workers, with their segments, and nothing refused or dropped as garbage."""
    from lamarckian.remote.keys import keygen

    keys, allowed = tmp_path / "keys", tmp_path / "keys" / "workers"
    for name in ("server", "trainer", "alice", "bob"):
        keygen(keys, name)
    allowed.mkdir()
    for name in ("alice", "bob"):
        (allowed / f"{name}.key").write_bytes((keys / f"{name}.key").read_bytes())
    server_log, train_log = tmp_path / "server.log", tmp_path / "train.log"
    with Hosts(3) as hosts, RayNodes(hosts, tmp_path / "nodes", cpus=1) as nodes:
        nodes.start(count=1)                                     # Ray on host 0 only
        address = f"tcp://{hosts[1].address}:5555"
        server = hosts.popen(hosts[1], [sys.executable, "-m", "lamarckian.remote", "server", "--bind", address,
                                        "--keys", str(allowed), "--secret", str(keys / "server.key_secret"),
                                        "--trainer", str(keys / "trainer.key")], log=server_log, cwd=REPOSITORY)
        wait_for_line(server_log, "serving on", 60)
        workers = [hosts.popen(hosts[2], [sys.executable, "-m", "lamarckian.remote", "worker", "--server", address,
                                          "--key", str(keys / f"{name}.key_secret"), "-c", *REMOTE_SAC, "-m",
                                          *REMOTE_SMALL], log=tmp_path / f"{name}.log", cwd=REPOSITORY)
                   for name in ("alice", "bob")]
        train = drive(hosts, nodes, "train.py", REMOTE_SAC, [
            *REMOTE_SMALL, f"rl.remote.server={address}", f"rl.remote.key={keys / 'trainer.key_secret'}",
            f"rl.remote.server_key={keys / 'server.key'}", "train.replay.start=64", "train.replay.batch=32",
            "evaluator.episodes=2", "evaluator.terminate=self.cost >= 1000 or self.time >= 400"], tmp_path / "run",
            train_log)                                           # the time: a safety net for a loaded machine
        code = train.wait(timeout=480)
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    text = train_log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    rows = (tmp_path / "run" / "evaluations.csv").read_text().splitlines()
    assert float(rows[-1].split(",")[rows[0].split(",").index("cost")]) >= 1000, rows[-3:]
    statistics = json.loads(server_log.read_text().split("server statistics: ")[-1].splitlines()[0])
    assert {name: worker["segments"] > 0 for name, worker in statistics["workers"].items()} == \
        {"alice": True, "bob": True}, statistics
    assert (statistics["refused"], statistics.get("garbage", 0)) == (0, 0), statistics    # counters start at none
