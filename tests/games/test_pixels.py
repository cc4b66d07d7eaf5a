"""Pixel observations over the game protocol (the reference server's ``--pixels``): a uint8 image declared in the
handshake, sent as a typed array, kept uint8 in the actors' segments and trained with the CNN; the checker checks
the frames' shape and bounds; frames too small for the CNN are refused in one line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from lamarckian.config import load
from lamarckian.games.check import check
from lamarckian.rl.fleet.actor import Actor
from lamarckian.rl.fleet.learner import Learner
from lamarckian.rl.segment import Segment

from .helpers import ROOT, ServerProcess
from .test_training import segments_and_reports

PONG = ["--mdp", "pong", "--bot", "1", "--pixels", "40"]


@pytest.fixture(scope="module")
def pixels(tmp_path_factory):
    server = ServerProcess(tmp_path_factory.mktemp("pixels"), PONG)
    yield server
    server.stop()


def pixel_config(server: ServerProcess, *edits: str) -> dict:
    return load(["mdp/game.yml"], [f"mdp.game.address={server.address}", f"mdp.game.secret={server.secret}",
                                    "sample.envs=8", "sample.truncation=8", *edits])


def test_the_pixel_server_passes_the_checker(pixels):
    assert check(pixels.address, pixels.secret, timeout=10).violations == []


@pytest.fixture(scope="module")
def segment(pixels):
    actor = Actor(pixel_config(pixels), 0, own_process=False)
    try:
        return segments_and_reports(actor, 1)[-1]
    finally:
        actor.close()


def test_frames_reach_the_actors_segments_as_uint8(segment):
    assert segment["observations"].dtype == np.uint8


def test_frames_keep_their_size_channels_first_as_the_cnn_takes_them(segment):
    assert segment["observations"].shape == (8, 8, 3, 40, 40)


def test_frames_reach_the_learners_batch_as_uint8(pixels, segment, tmp_path):
    """The PPO batch the learner builds from the actors' segments keeps the frames uint8 (scaled only inside the
    network)."""
    learner = Learner(pixel_config(pixels, "ray.local_mode=true", f"root={tmp_path / 'run'}"))
    try:
        batch = learner.update_rule.prepare([Segment.from_wire(segment)], 0)
    finally:
        learner.close()
    assert batch["observations"].dtype == torch.uint8


def test_the_learner_trains_a_cnn_on_the_frames(pixels, tmp_path):
    learner = Learner(pixel_config(pixels, "ray.local_mode=true", "train.batch=128", f"root={tmp_path / 'run'}",
                                   "evaluator.progress=false"))
    learner.start_actors()
    try:
        with learner.fleet.gather.gathering("sample"):
            stats = [learner.step() for _ in range(2)]
        convolutions = [m for m in learner.model.modules() if isinstance(m, torch.nn.Conv2d)]
    finally:
        learner.close()
    assert convolutions != []
    assert np.isfinite(stats[-1]["kl"])


def test_frames_too_small_for_the_cnn_go_to_the_mlp_as_one_line_says_once(tmp_path):
    # once in the run: the learner says it, and its actors (children of a fork server started before) do not
    server = ServerProcess(tmp_path, [*PONG[:-1], "32"])
    completed = subprocess.run([sys.executable, str(ROOT / "train.py"), "-c", "mdp/game.yml", "-m",
                                f"mdp.game.address={server.address}", f"mdp.game.secret={server.secret}",
                                "sample.envs=8", "sample.truncation=8", "train.batch=128", "evaluator.interval=0",
                                "evaluator.terminate=self.iteration >= 1", f"root={tmp_path / 'run'}"],
                               capture_output=True, text=True, timeout=300, cwd=ROOT)
    server.stop()
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stderr.count("image observations of 32x32 pixels (3 channels) are smaller than the Nature CNN's "
                                  "36x36: the MLP takes them as a vector (mdp.resize makes them CNN input)") == 1
