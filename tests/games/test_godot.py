"""A game in a real engine, headless: CartPole written in GDScript for Godot 3 (examples/games/godot/, the protocol's
MessagePack and HMAC-SHA256 by hand), which passes the conformance checker and which PPO learns to 475, launched
by the trainer. CI installs the engine (Debian's ``godot3-server``) before the tests (.ci/run)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from lamarckian.games.check import check
from lamarckian.games.launch import free_port

from .helpers import ROOT, serving

GODOT = shutil.which("godot3-server")
SERVER = ["godot3-server", "--no-window", "-s", "examples/games/godot/cartpole_server.gd"]
pytestmark = pytest.mark.skipif(GODOT is None, reason="Godot 3 is not installed (apt-get install godot3-server; "
                                                      ".ci/run installs it)")


@pytest.fixture
def godot(tmp_path):
    """The Godot server, listening: (address, secret file)."""
    with serving([*SERVER, "--bind", f"127.0.0.1:{free_port()}"], tmp_path) as running:
        yield running


def test_the_godot_server_passes_the_checker(godot):
    address, secret = godot
    assert check(address, secret, timeout=10).violations == []


def test_the_checker_keeps_the_godot_cartpole_up_to_its_time_limit(godot):
    address, secret = godot
    passed = check(address, secret, timeout=10).passed
    assert any("reached its time limit at step 500" in line for line in passed), passed


@pytest.mark.slow
def test_ppo_learns_the_godot_cartpole_launched_by_the_trainer(tmp_path):
    completed = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "-c", "mdp/game/cartpole.yml", "-m",
         f"mdp.game.launch={' '.join(SERVER)} --bind 127.0.0.1:{{port}} --secret {{secret}}", "mdp.game.instances=2",
         f"mdp.game.secret={tmp_path / 'game.secret'}", f"root={tmp_path / 'run'}",
         "evaluator.terminate=self.fitness >= 475 or self.cost > 3000000"],
        capture_output=True, text=True, timeout=900, cwd=ROOT)
    evaluations = [float(m) for m in re.findall(r"fitness ([-\d.e+]+) over", completed.stderr)]
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert max(evaluations) >= 475, completed.stderr[-3000:]
