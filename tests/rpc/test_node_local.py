"""The node-local channel (lamarckian.rpc.local): links between processes of one node go over a Unix socket with
large frames in shared memory. Deaths on either side mid-transfer, versions racing readers, more in flight than a
socket holds, and peers without the secret or of another user."""

from __future__ import annotations

import gc
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from lamarckian.rpc import ActorDiedError, All, Any, Gather, RpcSettings, local
from lamarckian.rpc.auth import run_secret
from lamarckian.rpc.processes import spawn, warm_up
from lamarckian.rpc.server import Server

from .peers import Echo, Holder

BIG = 1 << 20       # bytes: well over local.BULK_BYTES, so it travels in shared memory


@pytest.fixture(scope="module", autouse=True)
def fork_server():
    warm_up(["numpy", "lamarckian.rpc"])


@pytest.fixture
def server():
    """A Holder served in this process (the server under test), stopped afterwards."""
    served = Server(Holder(), name="holder", secret=run_secret(), settings=RpcSettings.defaults(),
                    patterns=frozenset({"all"}))
    yield served
    served.stop()


def open_files(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def memfds(pid: int | str = "self") -> int:
    """Shared-memory files (memfds) process ``pid`` holds open or mapped."""
    held = sum("memfd:" in os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")
               if os.path.exists(f"/proc/{pid}/fd/{fd}"))
    with open(f"/proc/{pid}/maps") as maps:
        return held + sum("memfd:lamarckian" in line for line in maps)


def test_links_on_one_node_take_the_channel_and_off_keeps_zeromq():
    children = [spawn(Echo, tag) for tag in (1, 2)]
    others = [spawn(Echo, tag) for tag in (1, 2)]       # an actor serves one set of rpc settings
    try:
        with All(children) as everyone, All(others, settings={"local": "off"}) as over_zeromq:
            assert all(connection.channel is not None for connection in everyone.link.connections)
            assert all(connection.channel is None for connection in over_zeromq.link.connections)
            blob = np.arange(BIG // 4, dtype=np.float32)
            assert everyone("checksum", blob) == over_zeromq("checksum", blob)
    finally:
        for child in children + others:
            child.close()


def test_a_broadcast_is_written_once_for_every_actor_on_the_node():
    children = [spawn(Echo, tag) for tag in range(3)]
    try:
        with All(children) as everyone:
            blob = np.ones(BIG // 4, np.float32)
            for _ in range(5):
                assert everyone("nbytes", blob) == [BIG] * 3
            copies = len(everyone.link.pool.blocks) + sum(len(c.channel.pool.blocks) for c in everyone.link.connections)
            assert copies <= 2       # one block per version in flight, not one per actor
    finally:
        for child in children:
            child.close()


def test_the_large_frames_of_one_message_each_keep_their_own_bytes():
    child = spawn(Echo, 0)
    first, second = np.full(BIG, 1, np.uint8), np.full(BIG // 2, 2, np.uint8)   # the second fits the first's block
    header = list(range(40_000))                        # a header frame over BULK_BYTES: shared memory as well
    try:
        with All([child]) as one:
            replies = [one("echo", first, second, header)[0]["args"] for _ in range(3)]
    finally:
        child.close()
    intact = [np.array_equal(r[0], first) and np.array_equal(r[1], second) and list(r[2]) == header for r in replies]
    assert intact == [True, True, True]


def test_gathered_arrays_are_read_only_views_released_when_dropped():
    children = [spawn(Holder) for _ in range(2)]
    try:
        with Gather(All(children), credits=2) as gathering, gathering.gathering("version"):
            for _ in range(200):
                item = gathering()
                assert not item.flags.writeable
                del item
            pools = [connection.channel for connection in gathering.all.link.connections]
        assert all(channel is not None for channel in pools)
    finally:
        for child in children:
            child.close()


def test_versions_racing_readers_never_change_under_them():
    """Each actor keeps the last array it was sent while the next versions are written: a reused block would
    change what it kept. The caller keeps gathered versions the same way."""
    children = [spawn(Holder) for _ in range(2)]
    try:
        with All(children) as everyone:
            for version in range(1, 60):
                assert everyone("hold", np.full(BIG // 4, version, np.float32)) == [True, True]
            everyone.broadcast("hold", np.full(BIG // 4, -1, np.float32))
            everyone.wait()
        with Gather(All(children), credits=3) as gathering, gathering.gathering("version"):
            kept = [gathering() for _ in range(40)]
            expected = [float(array[0]) for array in kept]
            more = [gathering() for _ in range(100)]
            assert [float(array[0]) for array in kept] == expected
            assert all(float(array.min()) == float(array.max()) for array in kept + more)
    finally:
        for child in children:
            child.close()


def test_more_in_flight_than_a_socket_holds_does_not_deadlock():
    """Inline frames just under the shared-memory size, fired without waiting: both directions fill their socket
    buffers and each side reads while it waits to send."""
    child = spawn(Echo, 1)
    try:
        with All([child]) as everyone:
            frame = np.zeros((local.BULK_BYTES - 1024), np.uint8)
            for _ in range(300):
                everyone.broadcast("echo", frame)
            everyone.wait()
            assert everyone("add", 1) == [3]
    finally:
        child.close()


def gather_until_one_is_killed() -> int:
    """Gather large arrays from two children and SIGKILL one mid-stream; the index the error names."""
    children = [spawn(Holder) for _ in range(2)]
    gathering = Gather(All(children), credits=4)
    try:
        with pytest.raises(ActorDiedError) as died:
            with gathering.gathering("version"):
                for count in range(10_000):
                    gathering()
                    if count == 20:
                        os.kill(children[1].pid, signal.SIGKILL)
        return died.value.index
    finally:
        gathering.close()
        for child in children:
            child.close()


def test_a_killed_actor_mid_transfer_is_reported_and_leaves_nothing():
    gc.collect()
    files, entries = open_files(), shm_entries()
    assert gather_until_one_is_killed() == 1
    gc.collect()
    assert open_files() == files
    assert memfds() == 0
    assert shm_entries() == entries


CALLER = textwrap.dedent("""
    import sys, numpy as np
    from lamarckian.rpc import All

    class Remote:        # the endpoint of a server in the test's process
        def _lamarckian_rpc_start(self, secret, settings):
            return ENDPOINT

    everyone = All([Remote()], secret=bytes.fromhex(SECRET))
    assert everyone.link.connections[0].channel is not None
    blob = np.ones((1 << 22) // 4, np.float32)
    print("connected", flush=True)
    while True:
        everyone.broadcast("hold", blob)
""")


def test_a_caller_killed_mid_transfer_leaves_the_server_serving_and_nothing_behind(server):
    gc.collect()
    secret = server.secret
    files = open_files()
    script = CALLER.replace("ENDPOINT", repr(server.endpoint())).replace("SECRET", repr(secret.hex()))
    caller = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert caller.stdout.readline().strip() == "connected"
    time.sleep(0.5)
    caller.kill()
    caller.wait()
    caller.stdout.close()
    deadline = time.monotonic() + 10
    while server._channels and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server._channels
    server.target.kept = None      # what the dead caller sent is let go
    gc.collect()
    assert memfds() == 0
    assert open_files() == files
    with All([server_handle(server)], secret=secret) as everyone:
        assert everyone("hold", np.ones(BIG // 4, np.float32)) == [True]


def server_handle(server: Server):
    """A stand-in handle for a server of this process (what start_endpoints asks for)."""
    class Handle:
        def _lamarckian_rpc_start(self, secret, settings):
            return server.endpoint()
    return Handle()


def test_a_peer_without_the_secret_gets_nothing_served_and_no_memory(server):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as intruder:
        intruder.connect("\0" + server.local_name)
        body = b"LK\x02\x03" + struct.pack(">Q", 1) + b"\x93\xa4hold\x90\x80"    # a plain CALL, no handshake
        intruder.sendall(struct.pack("<IQ", 1, len(body)) + body)
        intruder.settimeout(1.0)
        time.sleep(0.3)
        with pytest.raises(TimeoutError):
            intruder.recv(1 << 16)
    deadline = time.monotonic() + 5
    while server.stats["unauthenticated"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.stats["unauthenticated"] == 1
    assert server.stats["served"] == 0


def test_a_message_over_the_handshake_limit_closes_an_unauthenticated_channel(server):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as intruder:
        intruder.connect("\0" + server.local_name)
        intruder.sendall(struct.pack("<IQ", 1, local.HANDSHAKE_BYTES + 1))
        intruder.settimeout(5.0)
        assert intruder.recv(16) == b""


@pytest.mark.skipif(os.getuid() != 0, reason="changing to another user needs root")
def test_a_process_of_another_user_is_refused(server):
    probe = textwrap.dedent(f"""
        import os, socket
        os.setgid(65534); os.setuid(65534)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\\0" + {server.local_name!r})
        s.settimeout(5)
        print(repr(s.recv(16)))
    """)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert result.stdout.strip() == "b''"
    assert server._listener.refused == 1


def test_any_uses_the_channel_for_calls_and_reports_a_death():
    child = spawn(Echo, 3)
    try:
        with Any([child]) as someone:
            assert someone("add", 1) == 5
            os.kill(child.pid, signal.SIGKILL)
            with pytest.raises(ActorDiedError):
                for _ in range(100):
                    someone("add", 1)
    finally:
        child.kill()


def test_a_receiver_keeping_every_array_gets_the_rest_inline_and_the_pool_stays_bounded():
    child = spawn(Holder)
    try:
        with Gather(All([child]), credits=2) as gathering, gathering.gathering("version"):
            kept = [gathering() for _ in range(local.MAX_BLOCKS + 20)]
            assert [int(array[0]) for array in kept] == list(range(1, local.MAX_BLOCKS + 21))
            assert len(gathering.all.link.connections[0].channel._blocks) <= local.MAX_BLOCKS
    finally:
        child.close()


def test_rpc_local_off_written_bare_in_yaml_means_off():
    import yaml

    assert RpcSettings.from_mapping(yaml.safe_load("local: off")).local == "off"
    with pytest.raises(ValueError, match="rpc.local"):
        RpcSettings.from_mapping({"local": "sometimes"})


def test_a_replacement_added_before_the_dead_one_is_removed_is_served():
    """The dead one's channel is closed at once; its descriptor number may be the replacement's by the time the
    dead one is removed, which must not unhook the replacement."""
    children = [spawn(Echo, 1), spawn(Echo, 2)]
    everyone = All(children)
    try:
        os.kill(children[1].pid, signal.SIGKILL)
        with pytest.raises(ActorDiedError):
            for _ in range(100):
                everyone("add", 0)
        children.append(spawn(Echo, 3))
        everyone.add(children[2])
        everyone.remove(children[1])
        assert everyone("add", 0) == [2, 4]
    finally:
        everyone.close()
        for child in children:
            child.kill()


def test_writing_into_a_received_array_through_torch_changes_nothing_else():
    """Received arrays are read-only, but torch.from_numpy writes anyway: the write lands in a private copy of the
    page, not in the sender's block (nor is it a crash), and later versions through the same block are intact."""
    import torch

    child = spawn(Holder)
    try:
        with Gather(All([child]), credits=1) as gathering, gathering.gathering("version"):
            for version in range(1, 41):
                item = gathering()
                assert float(item.min()) == float(item.max()) == version
                torch.from_numpy(item).add_(1000)       # torch warns that the array is read-only
                assert float(item[0]) == version + 1000
                del item
    finally:
        child.close()
