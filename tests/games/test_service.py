"""The game calls the policy: a numpy-only game client (tests/games/numpy_client.py, no torch, no Lamarckian) plays
16 CartPole agents whose actions the actor computes in batched forwards; their episodes train the learner."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lamarckian.config import load
from lamarckian.games import protocol
from lamarckian.rl.fleet.learner import Learner

from .helpers import ROOT, free_port


def test_a_numpy_client_s_agents_train_the_learner(tmp_path):
    secret = tmp_path / "game.secret"
    protocol.write_secret(secret)
    address = f"tcp://127.0.0.1:{free_port()}"
    config = load(["mdp/service.yml"], [f"mdp.service.bind={address}", f"mdp.service.secret={secret}",
                                         "ray.local_mode=true", "sample.truncation=32", "train.batch=1024",
                                         f"root={tmp_path / 'run'}", "evaluator.progress=false"])
    client = subprocess.Popen([sys.executable, str(ROOT / "tests" / "games" / "numpy_client.py"), address,
                               str(secret), "16", "20"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    learner = Learner(config)
    learner.start_actors()
    try:
        with learner.fleet.gather.gathering("sample"):
            for _ in range(6):
                learner.step()
            batch = learner.fleet.actors[0].statistics()["batch"]
    finally:
        learner.close()
    output, errors = client.communicate(timeout=60)
    report = json.loads(output.strip().splitlines()[-1]) if output.strip() else {}
    assert report, errors[-2000:]
    assert (report["torch"], report["lamarckian"]) == (False, False)
    assert learner.cost >= 6 * 1024
    assert report["episodes"] >= 16
    assert learner.training["episodes"] >= 1
    assert learner.training["fitness"] > 0    # the game's own results
    assert batch >= 4                                     # the waiting agents share forwards


def test_the_service_needs_an_address():
    with pytest.raises(ValueError, match="mdp.service.bind"):
        from lamarckian.mdp import create_mdp

        create_mdp(load(["mdp/service.yml"])["mdp"])
