"""The memory a run will take, estimated before anything starts; a run that would not fit is refused in one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lamarckian.config.sections import SampleSettings
from lamarckian.rl.fleet import footprint

from ...games.helpers import ROOT

PONG = ("-c", "mdp/gym/atari.yml", "-m", "mdp.gym.id=ALE/Pong-v5")


def sample(**changes) -> SampleSettings:
    return SampleSettings.defaults(**{"actors": 2, "envs": 16, "truncation": 64, "credits": 2, **changes})


def test_the_actors_segments_grow_with_every_key_that_sizes_them():
    small = footprint.estimate(1000, 1, sample(), 4096, 0, False).parts["the actors' segments"]
    large = footprint.estimate(1000, 2, sample(envs=32, truncation=128, credits=3), 4096, 0, False)
    assert large.parts["the actors' segments"] == small * 2 * 2 * 2 * 4 / 3


def test_the_replay_holds_an_observation_and_the_next_one():
    replay = footprint.estimate(1000, 1, sample(), 256, 10_000, True).parts["the replay"]
    assert replay == 10_000 * (2 * 1000 + footprint.STEP_OVERHEAD)


def test_a_run_that_would_not_fit_names_the_keys_to_lower():
    estimate = footprint.estimate(28_224, 1, sample(envs=100_000), 4096, 0, False)
    with pytest.raises(ValueError, match=r"this run needs about .* GB .* free: lower sample.envs, sample.truncation"):
        footprint.check(estimate, 16 << 30)


def test_a_run_that_fits_passes():
    footprint.check(footprint.estimate(28_224, 1, sample(), 4096, 0, False), 16 << 30)


def run_train(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "train.py"), *arguments], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_train_refuses_a_pixel_run_larger_than_the_machine_before_starting(tmp_path):
    completed = run_train(*PONG, "sample.envs=100000", f"root={tmp_path}")
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert "lower sample.envs" in completed.stderr.splitlines()[-1]


def test_print_config_shows_the_estimate():
    completed = run_train(*PONG, "--print-config")
    assert completed.stdout.splitlines()[-1].startswith("# memory: about ")
