"""Hosts of their own on one machine: network namespaces joined by a bridge, each with its own address, links that
can be cut and slowed, commands run inside a chosen host, and everything removed afterwards.

A host is a namespace with one veth pair: ``eth0`` inside (its address, ``10.213.K.(i+1)/24``) and its other end in
this machine's namespace, enslaved to the bridge (:attr:`Host.link`: set it down and the host is cut off). The
subnet is one no interface of this machine uses. The bridge has no address, so nothing outside the namespaces made
here can be reached from them, nor they from this machine's own processes.

Needs root (``ip netns``); :func:`why_unavailable` says why not where it cannot be used.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Sequence


def why_unavailable() -> str | None:
    """Why namespaces cannot be made here (not root, no ``ip``), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    return None


def ip(*arguments: str, check: bool = True) -> subprocess.CompletedProcess:
    """``ip ARGUMENTS``; a failure raises with its message (``check``)."""
    completed = subprocess.run(["ip", *arguments], capture_output=True, text=True, timeout=30)
    if check and completed.returncode != 0:
        raise RuntimeError(f"ip {' '.join(arguments)}: {completed.stderr.strip()}")
    return completed


def free_subnet() -> str:
    """``10.213.K`` (K from 0) that no address of this machine lies in."""
    used = [ipaddress.ip_interface(word) for line in ip("-4", "-o", "addr").stdout.splitlines()
            for word in line.split()[3:4]]
    for k in range(256):
        network = ipaddress.ip_network(f"10.213.{k}.0/24")
        if not any(interface.network.overlaps(network) for interface in used):
            return f"10.213.{k}"
    raise RuntimeError("no free /24 in 10.213.0.0/16 for the hosts")


@dataclasses.dataclass(frozen=True)
class Host:
    """One namespace: its name, its address, and its link's end on the bridge."""

    namespace: str
    address: str
    link: str


class Hosts:
    """``count`` hosts on one bridge (a context manager: made on entry, removed on exit, also after an error).

    Args:
        count: how many hosts.
        tag: names the namespaces and links (default: from this process's id).
    """

    def __init__(self, count: int, tag: str | None = None) -> None:
        self.tag = tag or f"lh{os.getpid() % 100000}"
        self.bridge = f"{self.tag}br"
        self.hosts: list[Host] = []
        self.count = count
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> "Hosts":
        try:
            self.make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getitem__(self, index: int) -> Host:
        return self.hosts[index]

    def __len__(self) -> int:
        return len(self.hosts)

    def make(self) -> None:
        subnet = free_subnet()
        ip("link", "add", self.bridge, "type", "bridge")
        ip("link", "set", self.bridge, "up")
        for index in range(self.count):
            host = Host(f"{self.tag}h{index}", f"{subnet}.{index + 1}", f"{self.tag}v{index}")
            ip("netns", "add", host.namespace)
            self.hosts.append(host)
            ip("link", "add", host.link, "type", "veth", "peer", "name", "eth0", "netns", host.namespace)
            ip("link", "set", host.link, "master", self.bridge)
            ip("link", "set", host.link, "up")
            ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
            ip("-n", host.namespace, "link", "set", "eth0", "up")
            ip("-n", host.namespace, "link", "set", "lo", "up")
        for host in self.hosts:
            self.wait_forwarding(host)

    def wait_forwarding(self, host: Host, deadline: float = 60.0) -> None:
        """Return once ``host``'s link is up and its bridge port forwards (the kernel enables the port when its
        link-state watcher runs, up to a second or more after ``link set up`` on a busy machine); a RuntimeError
        after ``deadline`` seconds."""
        waited_until = time.monotonic() + deadline
        while True:
            shown = json.loads(ip("-j", "-d", "link", "show", "dev", host.link).stdout)[0]
            state = shown.get("linkinfo", {}).get("info_slave_data", {}).get("state")
            if shown.get("operstate") == "UP" and state == "forwarding":
                return
            if time.monotonic() > waited_until:
                raise RuntimeError(f"{host.link}: not forwarding {deadline:g} s after it was set up "
                                   f"(operstate {shown.get('operstate')}, port {state})")
            time.sleep(0.05)

    # ---- running things in a host ----------------------------------------------------------------------------
    def popen(self, host: Host, argv: Sequence[str], *, log: Path | None = None, cwd: Path | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen:
        """``argv`` started inside ``host`` (its output appended to ``log``, else discarded)."""
        environment = {**os.environ, **(env or {})}
        output: Any = open(log, "ab") if log is not None else subprocess.DEVNULL   # noqa: SIM115 - the child owns it
        process = subprocess.Popen(["ip", "netns", "exec", host.namespace, *argv], stdout=output,
                                   stderr=subprocess.STDOUT, cwd=cwd, env=environment, start_new_session=True,
                                   preexec_fn=_default_interrupt)
        if log is not None:
            output.close()
        self.processes.append(process)
        return process

    def run(self, host: Host, argv: Sequence[str], timeout: float, *, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """``argv`` run inside ``host`` to its end (output captured as text)."""
        return subprocess.run(["ip", "netns", "exec", host.namespace, *argv], capture_output=True, text=True,
                              timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})})

    # ---- faults ---------------------------------------------------------------------------------------------
    def cut(self, host: Host) -> None:
        """Cut ``host`` off the bridge (its processes live on, unreachable)."""
        ip("link", "set", host.link, "down")

    def mend(self, host: Host) -> None:
        """Join ``host`` to the bridge again; returns once its port forwards, every host's memory of addresses that
        did not answer while it was cut forgotten (else a connection in the next seconds fails at once with 'no
        route to host')."""
        ip("link", "set", host.link, "up")
        self.wait_forwarding(host)
        for each in self.hosts:
            ip("-n", each.namespace, "neigh", "flush", "all")

    def limit(self, host: Host, mbit: float) -> None:
        """Traffic towards ``host`` at most ``mbit`` Mbit/s (a token bucket on its link, its bucket 10 ms of the
        rate: a kernel timer tick's worth, so that the rate holds up to 1 Gbit/s and more)."""
        burst = max(4096, int(mbit * 1e6 / 8 / 100))        # bytes
        ip_tc = ["tc", "qdisc", "replace", "dev", host.link, "root", "tbf", "rate", f"{mbit:g}mbit",
                 "burst", str(burst), "latency", "400ms"]
        completed = subprocess.run(ip_tc, capture_output=True, text=True, timeout=30)
        if completed.returncode != 0:
            raise RuntimeError(f"{' '.join(ip_tc)}: {completed.stderr.strip()}")

    def unlimit(self, host: Host) -> None:
        """Traffic towards ``host`` at the link's own rate again."""
        subprocess.run(["tc", "qdisc", "del", "dev", host.link, "root"], capture_output=True, timeout=30)

    # ---- the end --------------------------------------------------------------------------------------------
    def pids(self, host: Host) -> list[int]:
        """The processes living in ``host``'s namespace."""
        listed = ip("netns", "pids", host.namespace, check=False).stdout.split()
        return [int(pid) for pid in listed]

    def kill(self, host: Host, timeout: float = 20.0) -> int:
        """SIGKILL every process in ``host`` and wait until they are gone (or ``timeout`` s); how many there were."""
        pids = self.pids(host)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for process in self.processes:             # reap the ones started here (the rest are reaped by init)
            if process.poll() is None and process.pid in pids:
                try:
                    process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    pass
        deadline = time.monotonic() + timeout
        while self.pids(host) and time.monotonic() < deadline:
            time.sleep(0.1)
        return len(pids)

    def close(self, timeout: float = 20.0) -> None:
        """SIGKILL every process in the hosts, then remove the namespaces, their links and the bridge; checks that
        none is left (RuntimeError naming what is)."""
        for host in self.hosts:
            self.kill(host, timeout)
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=timeout)
        for host in self.hosts:
            ip("netns", "del", host.namespace, check=False)
            ip("link", "del", host.link, check=False)
        ip("link", "del", self.bridge, check=False)
        left = self.leftovers()
        self.hosts = []
        if left:
            raise RuntimeError(f"hosts harness {self.tag}: left behind {left}")

    def leftovers(self, wait: float = 10.0) -> list[str]:
        """Namespaces and links of this harness that still exist (``wait`` s for links: a veth goes once the last
        process of its namespace is gone)."""
        deadline = time.monotonic() + wait
        while any(name.startswith(self.tag) for name in link_names()) and time.monotonic() < deadline:
            time.sleep(0.2)
        namespaces = [line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line.strip()]
        return [name for name in namespaces + link_names() if name.startswith(self.tag)]


def _default_interrupt() -> None:
    """In a host's new process: Ctrl-C (SIGINT) does what it does in a terminal, even where this harness runs in
    the background (a shell's background job starts with SIGINT ignored, and its children inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def link_names() -> list[str]:
    """The network interfaces of this machine's namespace."""
    return [line.split(":")[1].strip().split("@")[0] for line in ip("-o", "link").stdout.splitlines()]
