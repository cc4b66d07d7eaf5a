"""Remote workers end to end: worker processes (torch, and an exported ONNX policy without torch; Ray never
imported), the relay, and an off-policy trainer; a worker killed and restarted, an unknown key refused."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from lamarckian.config import load
from lamarckian.mdp import create_mdp
from lamarckian.model.export import export_onnx
from lamarckian.remote.fleet import connect
from lamarckian.rl.algorithms import build_model
from lamarckian.rl.fleet.factory import fleet_learner

from .helpers import relay

pytestmark = pytest.mark.slow
CONFIG = ["mdp/gym.yml", "mdp/gym/pendulum.yml", "rl/sac.yml"]
SMALL = ["sample.envs=2", "sample.truncation=8", "model.hidden=[32,32]"]


def start_worker(server, name: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lamarckian.remote", "worker", "--server", server.server.endpoint,
                             "--key", str(server.keys / f"{name}.key_secret"), "--server-key",
                             str(server.keys / "server.key"), "-c", *CONFIG, "-m", *SMALL, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not condition():
        time.sleep(0.1)
    return condition()


@pytest.fixture
def server(tmp_path):
    yield from relay(tmp_path)


def test_workers_train_an_off_policy_learner_through_the_relay(server, tmp_path):
    config = load(CONFIG, [*SMALL, f"rl.remote.server={server.server.endpoint}",
                           f"rl.remote.key={server.keys / 'trainer.key_secret'}",
                           f"rl.remote.server_key={server.keys / 'server.key'}", "train.replay.start=64",
                           "train.replay.ratio=0.05", "train.replay.batch=32", "sample.eval=2"])
    policy = build_model(create_mdp(config["mdp"]), config)
    onnx = export_onnx(policy, tmp_path / "policy.onnx")
    learner = fleet_learner(config, connect)
    workers = {"alice": start_worker(server, "alice"), "bob": start_worker(server, "bob", "--onnx", str(onnx))}
    rogue = start_worker(server, "mallory")
    try:
        with learner.running():
            steps = []

            def both_delivered() -> bool:
                steps.append(learner.step())
                received = server.server.statistics()["workers"]
                return all(received.get(name, {}).get("segments", 0) > 0 for name in workers)

            assert wait_for(both_delivered, 90)
            stats = steps[-1]
            assert stats["replay"] > 64
            assert stats["updates"] >= 1
            assert stats["remote/workers"] == 2
            assert stats["remote/garbage"] == 0

            workers["alice"].send_signal(signal.SIGKILL)            # killed mid-run: training carries on
            workers["alice"].wait(10)
            before = server.server.statistics()["workers"]["bob"]["segments"]
            assert wait_for(lambda: learner.step() is not None and            # the learner does not wait for
                            server.server.statistics()["workers"]["bob"]["segments"] > before, 60)   # segments
            workers["alice"] = start_worker(server, "alice")           # and it comes back
            before = server.server.statistics()["workers"]["alice"]["segments"]
            assert wait_for(lambda: learner.step() is not None and
                            server.server.statistics()["workers"]["alice"]["segments"] > before, 60)
            evaluation = learner.evaluate()                           # deterministic episodes in the trainer
            assert evaluation["episodes"] == 2
            assert evaluation["fitness"] < 0
        final = server.server.statistics()["workers"]
        assert "ray" not in final["alice"]["imports"]
        assert "torch" in final["alice"]["imports"]
        assert final["bob"]["imports"] == ["onnxruntime"]
        assert final["bob"]["policy"] == "onnx"
        assert learner.fleet.gather.counts["mismatched"] == 0
        assert rogue.wait(30) == 2
        assert "refused the key" in rogue.stdout.read()
        assert server.server.statistics()["refused"] >= 1
    finally:
        learner.close()
        for process in (*workers.values(), rogue):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        ended = []
        for process in workers.values():
            try:
                ended.append(process.wait(30))
            except subprocess.TimeoutExpired:
                process.kill()
                ended.append(None)
        assert all(code in (0, -signal.SIGKILL) for code in ended), ended    # SIGTERM ends a worker cleanly
