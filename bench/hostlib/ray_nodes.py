"""A Ray cluster over :class:`~hostlib.netns.Hosts`: the head (GCS) on the first host, a worker node on each other,
every node started with ``ray start --block`` inside its host at the host's own address, with its own temp folder,
and one authentication token for all (as a cluster of real machines shares it: ``RAY_AUTH_TOKEN``)."""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from .netns import Host, Hosts

GCS_PORT = 6379        # inside the head's own namespace: no other process of this machine can hold it
STARTED = "Ray runtime started"    # what ``ray start`` prints once its node runs


class RayNodes:
    """Ray nodes on ``hosts`` (the head on ``hosts[0]``), ``cpus`` CPUs each; their logs and temp folders in
    ``folder``.

    Args:
        hosts: the hosts (made).
        folder: the nodes' logs (``ray-<host>.log``).
        cpus: CPUs each node offers Ray (one per host, or one for all).

    Each node's temp folder is under a short new folder in /tmp (Ray's Unix sockets live there, and a socket's
    path may not pass 107 bytes), removed by :meth:`close`.
    """

    def __init__(self, hosts: Hosts, folder: Path, cpus: float | Sequence[float] = 1) -> None:
        self.hosts, self.folder = hosts, Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.temp = Path(tempfile.mkdtemp(prefix=f"{hosts.tag}-", dir="/tmp"))
        self.cpus = list(cpus) if isinstance(cpus, Sequence) else [cpus] * len(hosts)
        self.env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
                    "RAY_USAGE_STATS_ENABLED": "0"}
        self.nodes: dict[str, subprocess.Popen] = {}

    def __enter__(self) -> "RayNodes":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def address(self) -> str:
        """The head's GCS address (``ray.address`` of a driver on any host)."""
        return f"{self.hosts[0].address}:{GCS_PORT}"

    def start(self, count: int | None = None, timeout: float = 120.0) -> None:
        """The head, then the other nodes of the first ``count`` hosts (default: all); returns once all are
        alive."""
        deadline = time.monotonic() + timeout
        self.add(self.hosts[0], head=True, wait=False)
        self.wait_started(0, deadline)
        joining = list(self.hosts.hosts)[1:count]
        for host in joining:
            self.add(host, wait=False)
        for host in joining:
            self.wait_started(self.hosts.hosts.index(host), deadline)
        self.wait_for(1 + len(joining), max(1.0, deadline - time.monotonic()))

    def add(self, host: Host, head: bool = False, wait: bool = True, timeout: float = 120.0) -> None:
        """Start a node on ``host`` (the head, or one joining the head; ``wait``: until Ray counts it alive)."""
        index = self.hosts.hosts.index(host)
        role = ["--head", f"--port={GCS_PORT}", "--include-dashboard=false"] if head else [f"--address={self.address}"]
        argv = [sys.executable, "-m", "ray.scripts.scripts", "start", *role, f"--node-ip-address={host.address}",
                f"--num-cpus={self.cpus[index]:g}", "--num-gpus=0", f"--temp-dir={self.temp / str(index)}",
                "--disable-usage-stats", "--block"]
        self.nodes[host.namespace] = self.hosts.popen(host, argv, log=self.folder / f"ray-{index}.log",
                                                      cwd=self.folder, env=self.env)
        if wait:
            self.wait_started(index, time.monotonic() + timeout)
            self.wait_for(len(self.nodes), timeout)

    def wait_started(self, index: int, deadline: float) -> None:
        """Until node ``index``'s ``ray start`` says its runtime started (RuntimeError if it ended or took past
        ``deadline``)."""
        log = self.folder / f"ray-{index}.log"
        node = self.nodes[self.hosts[index].namespace]
        while STARTED not in (log.read_text(errors="replace") if log.exists() else ""):
            if node.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Ray node on {self.hosts[index].address} did not start (see {log})")
            time.sleep(0.2)

    def alive(self) -> list[str]:
        """The addresses of the nodes the head counts alive (asked from the head's host)."""
        probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
                 "print(' '.join(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']))")
        completed = self.hosts.run(self.hosts[0], [sys.executable, "-c", probe, self.address], timeout=60,
                                   cwd=self.folder, env=self.env)
        return completed.stdout.split() if completed.returncode == 0 else []

    def wait_for(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.alive()) < count:
            dead = [name for name, node in self.nodes.items() if node.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"Ray nodes: {len(self.alive())} of {count} alive after "
                                   f"{timeout - max(0.0, deadline - time.monotonic()):.0f} s (ended: {dead}); logs in "
                                   f"{self.folder}")
            time.sleep(1.0)

    def close(self) -> None:
        """End every process of the hosts (the nodes and whatever ran on them), remove the nodes' temp folders."""
        for host in self.hosts.hosts:
            self.hosts.kill(host)
        shutil.rmtree(self.temp, ignore_errors=True)

    def environment(self) -> dict[str, str]:
        """What a driver started in a host needs beside the address (the token)."""
        return dict(self.env)

