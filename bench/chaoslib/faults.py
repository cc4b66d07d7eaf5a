"""The faults: a process SIGKILLed or hung (SIGSTOP, later SIGCONT), a disk that fills, a TCP link that stalls.
Each injector returns what it did as a dict for the event log. Only this machine is ever touched: the proxy
listens on and connects to loopback addresses only."""

from __future__ import annotations

import ipaddress
import os
import selectors
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from .procs import Proc


def kill(proc: Proc) -> dict[str, Any]:
    """SIGKILL ``proc``."""
    try:
        os.kill(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return {"pid": proc.pid, "name": proc.comm, "hit": False}
    return {"pid": proc.pid, "name": proc.comm, "hit": True}


def hang(proc: Proc, seconds: float) -> dict[str, Any]:
    """SIGSTOP ``proc`` now and SIGCONT it after ``seconds`` (a process that hangs, not one that dies)."""
    try:
        os.kill(proc.pid, signal.SIGSTOP)
    except ProcessLookupError:
        return {"pid": proc.pid, "name": proc.comm, "hit": False}

    def resume() -> None:
        try:
            os.kill(proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass                    # the job killed it meanwhile, as it should a peer that stopped answering

    timer = threading.Timer(seconds, resume)
    timer.daemon = True
    timer.start()
    return {"pid": proc.pid, "name": proc.comm, "hit": True, "seconds": seconds}


class SmallDisk:
    """A tmpfs of ``megabytes`` MiB mounted at ``folder`` (needs root): the run directory lives on it, and
    :meth:`fill` takes every free byte until :meth:`free` gives them back."""

    def __init__(self, folder: Path, megabytes: int) -> None:
        if os.geteuid() != 0:
            raise PermissionError("the full-disk fault mounts a tmpfs: it needs root")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m,mode=0700", "tmpfs", str(self.folder)],
                       check=True)
        self.filler = self.folder / ".chaos-filler"

    def fill(self) -> dict[str, Any]:
        """Write a file until the disk is full; the bytes it took."""
        written = 0
        block = b"\0" * (1 << 20)
        with open(self.filler, "ab", buffering=0) as stream:
            while True:
                try:
                    written += stream.write(block)
                except OSError:
                    break
            for size in (1 << 16, 1 << 12, 1):              # the last scraps too
                while True:
                    try:
                        written += stream.write(block[:size])
                    except OSError:
                        break
        return {"filled_bytes": written, "free_bytes": os.statvfs(self.folder).f_bavail * os.statvfs(
            self.folder).f_frsize}

    def free(self) -> dict[str, Any]:
        self.filler.unlink(missing_ok=True)
        return {"free_bytes": os.statvfs(self.folder).f_bavail * os.statvfs(self.folder).f_frsize}

    def close(self) -> None:
        """Unmount (what is on it is gone: copy it off first)."""
        subprocess.run(["umount", "-l", str(self.folder)], check=False)


def _loopback(host: str) -> str:
    if not ipaddress.ip_address(socket.gethostbyname(host)).is_loopback:
        raise ValueError(f"{host}: the stall proxy only talks to this machine's loopback addresses")
    return host


class StallProxy:
    """A TCP proxy on 127.0.0.1 in front of ``target_host:target_port`` (a loopback address) whose traffic
    :meth:`stall` holds for a while in both directions: connections stay open, bytes wait (a network stall, not a
    reset). :attr:`port` is where clients connect instead of the target."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (_loopback(target_host), target_port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.closed = False
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.thread = threading.Thread(target=self._pump, name="stall-proxy", daemon=True)
        self.thread.start()

    def stall(self, seconds: float) -> dict[str, Any]:
        """Hold every byte for ``seconds`` (the call returns at once)."""
        self.flowing.clear()
        timer = threading.Timer(seconds, self.flowing.set)
        timer.daemon = True
        timer.start()
        return {"port": self.port, "seconds": seconds, "connections": (len(self.selector.get_map()) - 1) // 2}

    def _pump(self) -> None:
        while not self.closed:
            if not self.flowing.is_set():
                self.flowing.wait(0.1)
                continue
            for key, _ in self.selector.select(0.1):
                if key.data is None:
                    self._accept()
                    continue
                try:
                    data = key.fileobj.recv(1 << 16)
                except OSError:
                    data = b""
                if not data:
                    self._drop(key.fileobj, key.data)
                    continue
                try:
                    key.data.sendall(data)
                except OSError:
                    self._drop(key.fileobj, key.data)

    def _accept(self) -> None:
        try:
            client, _ = self.listener.accept()
        except BlockingIOError:
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        for one, other in ((client, upstream), (upstream, client)):
            one.setblocking(True)
            self.selector.register(one, selectors.EVENT_READ, other)

    def _drop(self, one: socket.socket, other: socket.socket) -> None:
        for sock in (one, other):
            try:
                self.selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()

    def close(self) -> None:
        self.closed = True
        self.thread.join(2.0)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()
        self.selector.close()


def wait_for(test: Any, timeout: float, period: float = 0.2) -> bool:
    """Poll ``test()`` until it is true or ``timeout`` seconds pass; whether it became true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if test():
            return True
        time.sleep(period)
    return bool(test())
