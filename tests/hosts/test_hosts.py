"""Several hosts for real: network namespaces with their own addresses on one bridge (bench/hostlib), a Ray node in
each, and the platform's distributed paths run across them. As root only (CI runs as root); elsewhere skipped, with
that reason."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY / "bench"))

from hostlib.netns import Hosts, why_unavailable  # noqa: E402
from hostlib.ray_nodes import RayNodes  # noqa: E402

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


@pytest.mark.slow
def test_train_py_learns_cartpole_with_actors_on_three_hosts(tmp_path):
    """ray.launch=ray from the head's host: one actor per host (each node offers 1 CPU), the learner's servers
    and the actors' servers bound at each host's own address (rpc/sockets.py bind_host's node-address branch)."""
    with Hosts(3) as hosts, RayNodes(hosts, tmp_path / "nodes", cpus=1) as nodes:
        nodes.start()
        completed = hosts.run(hosts[0], [
            sys.executable, str(REPOSITORY / "train.py"), "-c", "mdp/gym.yml", "mdp/gym/cartpole.yml", "-m",
            f"root={tmp_path / 'run'}", f"ray.address={nodes.address}", "ray.launch=ray", "sample.actors=3",
            "sample.num_cpus=1", "evaluator.beside=false", "evaluator.interval=3",
            "evaluator.terminate=self.fitness >= 475 or self.cost > 600000"],
            timeout=170, cwd=tmp_path, env=nodes.environment())
    assert completed.returncode == 0, completed.stderr[-3000:]
    placed = re.search(r"actors on (\d+) hosts: (.*)", completed.stderr)
    assert placed is not None, completed.stderr[-3000:]
    assert placed.group(1) == "3", placed.group(0)
    evaluations = [float(m) for m in re.findall(r"fitness ([-\d.e+]+) over", completed.stderr)]
    assert max(evaluations, default=0.0) >= 475, completed.stderr[-3000:]
