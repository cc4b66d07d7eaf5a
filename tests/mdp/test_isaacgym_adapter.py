"""The isaacgym backend against a stand-in task process: ``tools/isaacgym_server.py --standin`` speaks the same protocol
as with a real Isaac Gym task (which cannot be installed here), in its own process, over real ZeroMQ sockets.

``LAMARCKIAN_SERVER_PYTHON`` names the interpreter that runs the server (default: this one); Isaac Gym's is
Python 3.8 with numpy, msgpack and pyzmq, e.g. ``LAMARCKIAN_SERVER_PYTHON=/path/to/python3.8 pytest ...``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import zmq

from lamarckian.mdp.vec.remote import RemoteVecTask, read_key
from lamarckian.rpc.errors import ActorDiedError

REPOSITORY = Path(__file__).resolve().parents[2]
SERVER = REPOSITORY / "tools" / "isaacgym_server.py"
SERVER_PYTHON = os.environ.get("LAMARCKIAN_SERVER_PYTHON", sys.executable)
E = 4


def start_server(key_file: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([SERVER_PYTHON, str(SERVER), "--standin", "--num-envs", str(E), "--key-file",
                                str(key_file), *extra], stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    assert "serving" in line, line
    return process, line.split(" at ")[1].split(";")[0]


@pytest.fixture
def server(tmp_path):
    process, address = start_server(tmp_path / "key")
    yield address, tmp_path / "key"
    process.kill()
    process.wait()


def test_standin_round_trip(server):
    address, key_file = server
    assert (key_file.stat().st_mode & 0o777) == 0o600
    task = RemoteVecTask(address, read_key(key_file), timeout=10)
    assert (task.num_envs, task.num_agents, task.num_obs, task.num_actions) == (E, 2, 40, 8)
    observations = task.reset()
    assert observations.shape == (2 * E, 40)
    assert observations.dtype == torch.float32
    push = torch.zeros(2 * E, 8)
    push[:E, :2] = observations[:E, :2] / observations[:E, :2].norm(dim=1, keepdim=True)  # agent 0 walks outward
    ended, lost, rewards = torch.zeros(E, dtype=torch.bool), torch.zeros(E, dtype=torch.bool), torch.zeros(2, E)
    for step in range(80):
        observations, reward, done, extras = task.step(push)
        assert done.dtype == torch.bool
        assert extras["lose"].dtype == torch.bool
        first = done & ~ended
        lost |= first & extras["lose"] & ~extras["win"]
        rewards[:, first] = reward.reshape(2, E)[:, first]
        ended |= done
        if ended.all():
            break
    assert lost.all()
    assert torch.all(rewards[0] == -1)
    assert torch.all(rewards[1] == 1)
    task.reset_idx(torch.tensor([1]))
    assert task._call("stats")["served"] >= 4
    task.close()


def test_a_wrong_key_is_refused_and_counted(server):
    address, key_file = server
    with pytest.raises(ConnectionError, match=address):
        RemoteVecTask(address, bytes(32), timeout=1.5)
    task = RemoteVecTask(address, read_key(key_file), timeout=10)
    assert task._call("stats")["dropped"].get("unauthenticated", 0) >= 1
    task.close()


def test_malformed_frames_are_dropped_and_the_server_goes_on(server):
    address, key_file = server
    context = zmq.Context()
    raw = context.socket(zmq.DEALER)
    raw.connect(address)
    raw.send_multipart([b"LK\x01\x03" + bytes(24) + b"\xc1", b"x" * 32])        # bad tag, bad body
    raw.send_multipart([b"not our protocol"])
    raw.close(linger=1000)
    context.term()
    task = RemoteVecTask(address, read_key(key_file), timeout=10)
    assert task.reset().shape == (2 * E, 40)
    assert sum(task._call("stats")["dropped"].values()) >= 2
    task.close()


def test_remote_errors_name_the_server(server):
    address, key_file = server
    task = RemoteVecTask(address, read_key(key_file), timeout=10)
    with pytest.raises(Exception, match="isaacgym") as error:
        task.step(torch.zeros(3, 8))                          # not (A * E, 8)
    assert "reshape" in str(error.value) or "size" in str(error.value)
    task.close()


def test_a_killed_server_is_reported_not_waited_on(tmp_path):
    process, address = start_server(tmp_path / "key")
    task = RemoteVecTask(address, read_key(tmp_path / "key"), timeout=3)
    task.reset()
    process.kill()
    process.wait()
    with pytest.raises(ActorDiedError):
        for _ in range(50):
            task.step(torch.zeros(2 * E, 8))
    task.close()


def test_train_py_trains_through_the_server(server, tmp_path):
    address, key_file = server
    completed = subprocess.run([sys.executable, "train.py", "-c", "mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml", "-m",
                                "mdp.vec.backend=isaacgym", f"mdp.vec.isaacgym.address={address}",
                                f"mdp.vec.isaacgym.key_file={key_file}", f"mdp.vec.num_envs.cpu={E}",
                                "mdp.vec.horizon=8", "evaluator.progress=false", f"root={tmp_path / 'run'}",
                                "evaluator.terminate=self.iteration >= 3"],
                               capture_output=True, text=True, cwd=REPOSITORY, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "holds after 3 iterations" in completed.stderr


def test_annealing_rewards_the_server_computes_is_refused(server, tmp_path):
    """The server's task computes its own rewards: there is no dense scale here to anneal."""
    address, key_file = server
    completed = subprocess.run([sys.executable, "train.py", "-c", "mdp/vec/ant_sumo.yml", "-m",
                                "mdp.vec.backend=isaacgym", f"mdp.vec.isaacgym.address={address}",
                                f"mdp.vec.isaacgym.key_file={key_file}", f"mdp.vec.num_envs.cpu={E}",
                                "mdp.vec.reward.anneal=1000", "evaluator.terminate=self.iteration >= 1",
                                f"root={tmp_path / 'run'}"],
                               capture_output=True, text=True, cwd=REPOSITORY, timeout=300)
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert "mdp.vec.reward.anneal" in completed.stderr
    assert "RemoteVecTask" in completed.stderr


def test_bad_settings_are_clear(tmp_path, server):
    address, key_file = server
    with pytest.raises(ValueError, match="key_file"):
        RemoteVecTask.connect({"address": address, "key_file": str(tmp_path / "missing"), "timeout": 5}, num_envs=E)
    with pytest.raises(ValueError, match="runs 4 environments"):
        RemoteVecTask.connect({"address": address, "key_file": str(key_file), "timeout": 5}, num_envs=16)
    completed = subprocess.run([SERVER_PYTHON, str(SERVER), "--task", "MA_Ant_Sumo", "--key-file",
                                str(tmp_path / "k")], capture_output=True, text=True)
    assert completed.returncode == 2
    assert "--config" in completed.stderr
    np.testing.assert_equal(len(read_key(key_file)), 32)
