"""train.py misuse: one clear line on stderr, exit code 2, nothing started (no run directory, no Ray)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("arguments", "expected"), [
    (["-m", "train.lrr=0.1"], "unknown key train.lrr (from -m train.lrr=0.1); did you mean train.lr?"),
    (["-m", "sample.envs=many"], "sample.envs (from -m sample.envs=many): expected int"),
    (["-m", "evaluator.terminate=self.cost >"], "evaluator.terminate"),
    (["-c", "no/such/file.yml"], "config file not found: no/such/file.yml"),
    (["-m", "train.lr"], "expected key.path=value"),
    (["--no-such-flag"], "unrecognized arguments"),
    (["-c", "mdp/gym.yml", "-m", "mdp.gym.id=NoSuchEnv-v0"], "NoSuchEnv"),
])
def test_misuse_exits_2_with_one_line(tmp_path, arguments, expected):
    root = tmp_path / "run"
    completed = subprocess.run([sys.executable, str(REPOSITORY / "train.py"), "-m", f"root={root}", *arguments],
                               capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = completed.stderr.strip().splitlines()
    assert completed.returncode == 2, completed.stderr
    assert len(lines) == 1 and expected in lines[0], completed.stderr
    assert not root.exists()
    assert "ray" not in completed.stdout.lower()
