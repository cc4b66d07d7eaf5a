"""The example game servers in other languages (examples/games/: Node.js, C++), written from docs/games.md alone:
each passes the conformance checker, and PPO trains CartPole through each."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lamarckian.games.check import check

from .helpers import ROOT, serving

EXAMPLES = ROOT / "examples" / "games"


def command(language: str, folder: Path) -> list[str]:
    """The command that serves the example in ``language`` (the C++ one compiled into ``folder`` first)."""
    if language == "node":
        if shutil.which("node") is None:
            pytest.skip("Node.js is not installed (the example needs node on PATH)")
        return ["node", str(EXAMPLES / "cartpole_server.js")]
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed (the example needs a C++17 compiler)")
    binary = folder / "cartpole_server"
    subprocess.run(["g++", "-O2", "-std=c++17", "-o", str(binary), str(EXAMPLES / "cartpole_server.cpp")], check=True)
    return [str(binary)]


@pytest.fixture(params=["node", "cpp"])
def example(request, tmp_path):
    """A running example server: (address, secret file)."""
    with serving([*command(request.param, tmp_path), "--bind", "127.0.0.1:0"], tmp_path) as running:
        yield running


def test_the_example_server_conforms(example):
    address, secret = example
    assert check(address, secret, timeout=5).violations == []


@pytest.mark.slow
def test_ppo_trains_cartpole_through_the_example_server(example, tmp_path):
    address, secret = example
    completed = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "-c", "mdp/game/cartpole.yml", "-m", f"mdp.game.address={address}",
         f"mdp.game.secret={secret}", f"root={tmp_path / 'run'}", "evaluator.interval=3",
         "evaluator.terminate=self.fitness >= 200 or self.time > 50"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    evaluations = [float(m) for m in re.findall(r"fitness ([-\d.e+]+) over", completed.stderr)]
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert max(evaluations) >= 200, completed.stderr[-3000:]
