"""bench/peers.py's protocol (issue 52): a published run takes held-out seeds; tuning seeds and our-side changes are
an ablation that says so. The refusals come before anything starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]


def peers(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "bench/peers.py", "--peers", "--rows", "cartpole-ppo", *arguments],
                          cwd=REPOSITORY, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("arguments", [("--seeds", "0", "100"), ("--changes", "train.lr=0.01")])
def test_an_ablation_without_tuning_exits_2(arguments):
    assert peers(*arguments).returncode == 2


@pytest.mark.parametrize("arguments", [("--seeds", "0", "100"), ("--changes", "train.lr=0.01")])
def test_the_error_line_names_the_option(arguments):
    assert peers(*arguments).stderr.strip().splitlines()[-1].startswith(f"peers.py: error: {arguments[0]} ")


def test_the_refusal_names_the_held_out_seeds():
    assert "held-out seeds (100 and up)" in peers("--seeds", "3").stderr
