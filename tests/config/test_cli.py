"""train.py misuse: one clear line on stderr, exit code 2, nothing started (no run directory, no Ray)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lamarckian.train import main

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("arguments", "expected"), [
    (["-m", "train.lrr=0.1"], "unknown key train.lrr (from -m train.lrr=0.1); did you mean train.lr?"),
    (["-m", "sample.envs=many"], "sample.envs (from -m sample.envs=many): expected int"),
    (["-m", "evaluator.terminate=self.cost >"], "evaluator.terminate"),
    (["-c", "no/such/file.yml"], "config file not found: no/such/file.yml"),
    (["-m", "train.lr"], "expected key.path=value"),
    (["--no-such-flag"], "unrecognized arguments"),
    (["-c", "mdp/gym.yml", "-m", "mdp.gym.id=NoSuchEnv-v0"], "NoSuchEnv"),
    (["-m", "sample.envs=0"], "sample.envs=0: out of range (from -m sample.envs=0)"),
    (["-m", "rl.opponent.rule=1.5"], "rl.opponent.rule=1.5: out of range"),
    (["-m", "evaluator.checkpoint.keep=0"], "evaluator.checkpoint.keep=0: out of range"),
])
def test_misuse_exits_2_with_one_line(tmp_path, capsys, monkeypatch, arguments, expected):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "run"
    try:
        code = main(["-m", f"root={root}", *arguments])
    except SystemExit as exit_:                # argparse's own misuse exit
        code = exit_.code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1, captured.err
    assert expected in lines[0], captured.err
    assert not root.exists()
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()     # nothing was started


def test_the_script_at_the_root_is_the_same_program(tmp_path):
    completed = subprocess.run([sys.executable, str(REPOSITORY / "train.py"), "-m", f"root={tmp_path}/run",
                                "train.lrr=0.1"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert completed.returncode == 2
    assert "did you mean train.lr?" in completed.stderr


@pytest.mark.parametrize("files, change, message", [
    (["mdp/vec/ant_sumo.yml"], "sample.envs=64", "sample.envs (from -m sample.envs=64) has no effect here"),
    (["mdp/vec/ant_sumo.yml"], "rl.opponent.rule=0.5", "rl.opponent.rule (from -m rl.opponent.rule=0.5) has no"),
    (["mdp/gym.yml"], "mdp.vec.horizon=8", "mdp.vec applies to a vectorized task only"),
])
def test_a_setting_the_trainer_would_ignore_is_refused(tmp_path, capsys, files, change, message):
    assert main(["-c", *files, "-m", change, f"root={tmp_path}/run"]) == 2
    error = capsys.readouterr().err
    assert message in error
    assert len(error.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_debug_on_a_vectorized_task_is_not_refused_as_an_ignored_setting(tmp_path, capsys):
    """--debug chooses the local mode at load, not as a ray.* setting, which a vectorized run would refuse."""
    assert main(["--debug", "-c", "mdp/vec/ant_sumo.yml", "--print-config", "-m", f"root={tmp_path}/run"]) == 0
    assert "local_mode: true" in capsys.readouterr().out
