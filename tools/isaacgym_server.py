"""Serve a vectorized task to Lamarckian from another Python: Isaac Gym (Python 3.8, not on any registry) runs its
task here, in its own interpreter, and ``train.py -m mdp.vec.backend=isaacgym`` connects to it.

    # in Isaac Gym's environment (isaacgym + TimeChamber installed; needs numpy, msgpack, pyzmq only besides):
    python tools/isaacgym_server.py --task ant_sumo --num-envs 4096 --key-file ~/.lamarckian/isaacgym.key
    # prints the address; then, in Lamarckian's environment:
    python train.py -c mdp/vec/ant_sumo.yml rl/ppo_gpu.yml -m mdp.vec.backend=isaacgym \\
        mdp.vec.isaacgym.address=tcp://127.0.0.1:PORT mdp.vec.isaacgym.key_file=~/.lamarckian/isaacgym.key

    python tools/isaacgym_server.py --standin --num-envs 8     # a numpy stand-in task: the protocol without Isaac Gym

The protocol is Lamarckian's RPC framing (lamarckian/rpc/wire.py) written out again here because this file must run
where Lamarckian cannot be installed (Python 3.8): ``[header, *array frames, tag]``; header = ``b"LK"``, version 1,
kind, request id (8 bytes), nonce (16 bytes), msgpack body; arrays travel as raw frames referenced from the body (no
pickle, ever); the tag is HMAC-SHA256 over the header and every frame (the ``bulk_mac: hmac-sha256`` mode) under a
random 32-byte key that this script writes (mode 0600) to ``--key-file``. Messages with a bad tag or shape are
dropped and counted. The server binds to 127.0.0.1 (``--host`` for another of this machine's addresses) on a port
the OS picks.

Methods: ``spec()``, ``reset()``, ``step(actions)``, ``reset_idx(env_ids)``, ``stats()``, ``close()`` (the server
keeps serving the next client; Ctrl-C stops it). Arrays are
agent-major as in Lamarckian's VecTask: observations ``(A * E, obs)``, rewards ``(A * E,)``, done ``(E,)``.

NOT run against a real Isaac Gym here (no registry carries it): the ``--task`` path follows TimeChamber's
``isaacgym_task_map`` API and is the part to check first on a machine that has Isaac Gym.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import os
import secrets
import struct
import sys
import traceback

import msgpack
import numpy as np
import zmq

MAGIC, VERSION = b"LK", 1
PING, PONG, CALL, REPLY, ERROR = 1, 2, 3, 4, 5
EXT_NDARRAY, EXT_TUPLE, EXT_SCALAR = 1, 3, 4
PREFIX = struct.Struct(">2sBBQ16s")
LENGTH, COUNT = struct.Struct(">Q"), struct.Struct(">I")
TAG_BYTES = 32
SAFE_KINDS = "biufc"


class Dropped(Exception):
    """A message that is not answered (bad tag, malformed): counted under ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---- framing (the hmac-sha256 mode of lamarckian.rpc.auth) ------------------------------------------------------
def tag(key: bytes, header, frames) -> bytes:
    mac = hmac.new(key, bytes(header), hashlib.sha256)
    mac.update(COUNT.pack(len(frames)))
    for frame in frames:
        mac.update(LENGTH.pack(memoryview(frame).nbytes))
        mac.update(frame)
    return mac.digest()


def encode(value):
    """msgpack body and the array frames it references."""
    frames = []

    def default(item):
        if isinstance(item, np.ndarray) and item.dtype.kind in SAFE_KINDS:
            frames.append(np.ascontiguousarray(item).reshape(-1).view(np.uint8))
            return msgpack.ExtType(EXT_NDARRAY, msgpack.packb([len(frames) - 1, item.dtype.str, list(item.shape)]))
        if isinstance(item, tuple):
            return msgpack.ExtType(EXT_TUPLE, msgpack.packb(list(item), default=default, use_bin_type=True))
        if isinstance(item, np.generic) and item.dtype.kind in SAFE_KINDS:
            return msgpack.ExtType(EXT_SCALAR, msgpack.packb([item.dtype.str, item.tobytes()]))
        raise TypeError("cannot send {}".format(type(item).__name__))

    return msgpack.packb(value, default=default, use_bin_type=True, strict_types=True), frames


def decode(body, frames):
    def array(data):
        index, dtype_str, shape = msgpack.unpackb(data)
        dtype = np.dtype(dtype_str)
        if not (isinstance(index, int) and 0 <= index < len(frames)) or dtype.kind not in SAFE_KINDS \
                or dtype.fields is not None or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise Dropped("malformed")
        count = int(np.prod(shape, dtype=object))
        if count * dtype.itemsize != frames[index].nbytes:
            raise Dropped("malformed")
        return np.frombuffer(frames[index], dtype=dtype, count=count).reshape(shape)

    def ext(code, data):
        if code == EXT_NDARRAY:
            return array(data)
        if code == EXT_TUPLE:
            return tuple(msgpack.unpackb(data, ext_hook=ext, raw=False, strict_map_key=False))
        if code == EXT_SCALAR:
            dtype_str, raw = msgpack.unpackb(data)
            return np.frombuffer(raw, dtype=np.dtype(dtype_str))[0]
        raise Dropped("malformed")  # no pickle extension here, whatever the peer sends

    try:
        return msgpack.unpackb(body, ext_hook=ext, raw=False, strict_map_key=False)
    except Dropped:
        raise
    except Exception:  # noqa: BLE001 - any undecodable body is dropped
        raise Dropped("malformed")


class Server:
    """A ROUTER socket serving one task object's public methods."""

    def __init__(self, task, key: bytes, host: str = "127.0.0.1", name: str = "isaacgym") -> None:
        self.task, self.key, self.name = task, key, name
        self.context = zmq.Context(io_threads=1)
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.HEARTBEAT_IVL, 1000)
        self.socket.setsockopt(zmq.HEARTBEAT_TIMEOUT, 30000)
        port = self.socket.bind_to_random_port("tcp://" + host)
        self.address = "tcp://{}:{}".format(host, port)
        self.nonce_prefix, self.counter = secrets.token_bytes(8), 0
        self.dropped = {}
        self.served = 0

    def send(self, identity: bytes, kind: int, request_id: int, value) -> None:
        try:
            body, frames = encode(value)
        except TypeError as error:
            kind, (body, frames) = ERROR, encode(["TypeError", str(error), "", self.name])
        self.counter += 1
        header = PREFIX.pack(MAGIC, VERSION, kind, request_id, self.nonce_prefix + LENGTH.pack(self.counter)) + body
        self.socket.send_multipart([identity, header] + frames + [tag(self.key, header, frames)], copy=False)

    def handle(self, frames) -> None:
        identity, views = frames[0].bytes, [frame.buffer for frame in frames[1:]]
        if len(views) < 2 or views[0].nbytes < PREFIX.size or views[-1].nbytes != TAG_BYTES:
            raise Dropped("malformed")
        header, data, received = views[0], views[1:-1], views[-1]
        magic, version, kind, request_id, _ = PREFIX.unpack_from(header)
        if magic != MAGIC or version != VERSION:
            raise Dropped("malformed")
        if not hmac.compare_digest(tag(self.key, header, data), bytes(received)):
            raise Dropped("unauthenticated")
        value = decode(header[PREFIX.size:], data)
        if kind == PING:
            self.send(identity, PONG, request_id, {"name": self.name, "patterns": ["all", "any"]})
        elif kind == CALL:
            self.call(identity, request_id, value)
        else:
            raise Dropped("malformed")

    def call(self, identity: bytes, request_id: int, value) -> None:
        if not (isinstance(value, list) and len(value) == 3 and isinstance(value[0], str)
                and isinstance(value[1], list) and isinstance(value[2], dict)):
            raise Dropped("malformed")
        name, args, kwargs = value
        try:
            if name.startswith("_") or name not in ("spec", "reset", "step", "reset_idx", "stats", "close"):
                raise AttributeError("{}: no method {!r}".format(self.name, name))
            result = self.stats() if name == "stats" else getattr(self.task, name)(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 - every failure goes back to the caller
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            self.send(identity, ERROR, request_id, [type(error).__name__, str(error), text, self.name])
            return
        self.served += 1
        self.send(identity, REPLY, request_id, result)

    def stats(self):
        return {"served": self.served, "dropped": dict(self.dropped)}

    def serve(self) -> None:
        try:
            while True:
                frames = self.socket.recv_multipart(copy=False)
                try:
                    self.handle(frames)
                except Dropped as dropped:
                    self.dropped[dropped.reason] = self.dropped.get(dropped.reason, 0) + 1
        finally:
            self.socket.close()
            self.context.term()


# ---- tasks -------------------------------------------------------------------------------------------------------
class StandInTask:
    """A numpy stand-in with the VecTask shapes: two point 'ants' push in a 3 m ring (8 actions, 40 observations);
    leaving the ring loses, ``max_episode_length`` steps draw. For protocol tests and set-up checks, not learning."""

    num_agents, num_obs, num_actions = 2, 40, 8

    def __init__(self, num_envs: int, seed: int = 0, max_episode_length: int = 200) -> None:
        self.num_envs, self.max_episode_length = num_envs, max_episode_length
        self.random = np.random.default_rng(seed)
        self.position = np.zeros((num_envs, 2, 2))
        self.progress = np.zeros(num_envs, dtype=np.int64)

    def spec(self):
        return {"num_envs": self.num_envs, "num_agents": self.num_agents, "num_obs": self.num_obs,
                "num_actions": self.num_actions, "max_episode_length": self.max_episode_length, "task": "standin"}

    def _spawn(self, ids) -> None:
        angle = self.random.uniform(0, 2 * np.pi, len(ids))
        for agent in range(2):
            self.position[ids, agent] = np.stack([np.cos(angle + np.pi * agent), np.sin(angle + np.pi * agent)], 1)
        self.progress[ids] = 0

    def _observe(self) -> np.ndarray:
        rows = np.zeros((2, self.num_envs, self.num_obs), np.float32)
        for agent in range(2):
            rows[agent, :, :2] = self.position[:, agent]
            rows[agent, :, 2:4] = self.position[:, 1 - agent] - self.position[:, agent]
            rows[agent, :, 4] = self.progress / self.max_episode_length
        return rows.reshape(2 * self.num_envs, self.num_obs)

    def reset(self) -> np.ndarray:
        self._spawn(np.arange(self.num_envs))
        return self._observe()

    def reset_idx(self, env_ids) -> None:
        self._spawn(np.asarray(env_ids, dtype=np.int64))

    def step(self, actions):
        actions = np.clip(np.asarray(actions, np.float32).reshape(2, self.num_envs, self.num_actions), -1, 1)
        self.position += 0.05 * actions[:, :, :2].transpose(1, 0, 2)
        self.progress += 1
        out = np.linalg.norm(self.position, axis=-1) > 3.0
        lose0, lose1 = out[:, 0] & ~out[:, 1], out[:, 1] & ~out[:, 0]
        time_out = (self.progress >= self.max_episode_length) & ~lose0 & ~lose1
        draw = (out[:, 0] & out[:, 1]) | time_out
        done = lose0 | lose1 | draw
        reward = np.stack([1.0 * lose1 - lose0, 1.0 * lose0 - lose1]).astype(np.float32).reshape(-1)
        self.reset_idx(np.flatnonzero(done))
        return [self._observe(), reward, done, {"win": lose1, "lose": lose0, "draw": draw, "time_outs": time_out}]

    def close(self) -> None:
        return None


class IsaacGymTask:
    """A TimeChamber task (``isaacgym_task_map``) behind the same methods; tensors come back as numpy."""

    def __init__(self, name: str, num_envs: int, config_file: str, device: str, seed: int) -> None:
        import isaacgym  # noqa: F401 - must be imported before torch
        import torch
        import yaml
        from timechamber.tasks import isaacgym_task_map

        with open(config_file) as handle:
            config = yaml.safe_load(handle)
        config.setdefault("env", {})["numEnvs"] = num_envs
        config["seed"] = seed
        self.torch = torch
        self.task = isaacgym_task_map[name](cfg=config, rl_device=device, sim_device=device, graphics_device_id=0,
                                            headless=True, virtual_screen_capture=False, force_render=False)
        self.name, self.num_envs = name, num_envs

    def spec(self):
        task = self.task
        return {"num_envs": self.num_envs, "num_agents": int(task.num_agents), "num_obs": int(task.num_obs),
                "num_actions": int(task.num_actions), "max_episode_length": int(task.max_episode_length),
                "task": self.name}

    def _host(self, value):
        if isinstance(value, dict):
            return {k: self._host(v) for k, v in value.items() if isinstance(v, (self.torch.Tensor, dict))}
        return value.detach().cpu().numpy()

    def reset(self):
        return self._host(self.task.reset()["obs"])

    def reset_idx(self, env_ids) -> None:
        self.task.reset_idx(self.torch.as_tensor(np.asarray(env_ids), device=self.task.device))

    def step(self, actions):
        observations, reward, done, extras = self.task.step(self.torch.as_tensor(np.asarray(actions),
                                                                                 device=self.task.device))
        return [self._host(observations["obs"]), self._host(reward), self._host(done).astype(bool),
                self._host(extras)]

    def close(self) -> None:
        return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--task", help="a TimeChamber task name (isaacgym_task_map), e.g. MA_Ant_Sumo")
    source.add_argument("--standin", action="store_true", help="serve the numpy stand-in task (no Isaac Gym)")
    parser.add_argument("--config", help="the TimeChamber task YAML (with --task)")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1", help="an address of this machine (default loopback)")
    parser.add_argument("--key-file", required=True, help="where to write the shared key (hex, mode 0600)")
    args = parser.parse_args(argv)
    if args.task and not args.config:
        parser.error("--task needs --config (the TimeChamber task YAML)")
    if args.num_envs < 1:
        parser.error("--num-envs must be at least 1")
    task = StandInTask(args.num_envs, args.seed) if args.standin else \
        IsaacGymTask(args.task, args.num_envs, args.config, args.device, args.seed)
    key = secrets.token_bytes(32)
    path = os.path.expanduser(args.key_file)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(key.hex())
    server = Server(task, key, args.host)
    print("serving {} ({} envs) at {}; key in {} (Python {})".format(
        args.task or "the stand-in task", args.num_envs, server.address, path, sys.version.split()[0]), flush=True)
    try:
        server.serve()
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
