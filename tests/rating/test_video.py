"""evaluate.py --video: one game filmed to a playable H.264 mp4 or an animated GIF, for the ring tasks (MuJoCo's
renderer through EGL) and for MDPs that render RGB frames (Pong, Coins, a gymnasium environment)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import av
import pytest
import torch
from PIL import Image

from lamarckian.config import load
from lamarckian.mdp import create_mdp
from lamarckian.record import Checkpoints
from lamarckian.rl import build_model
from lamarckian.rl.loop import TrainingLoop
from lamarckian.rl.ondevice.learner import OnDeviceLearner

REPOSITORY = Path(__file__).resolve().parents[2]
WROTE = re.compile(r"wrote (\S+): (\d+) frames, a game of (\d+) steps")


def evaluate(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "evaluate.py", *arguments], capture_output=True, text=True,
                          cwd=REPOSITORY, timeout=600, env={**os.environ, **(env or {})})


def mp4_frames(path: Path) -> tuple[int, tuple[int, int], str]:
    """Decoded frame count, (width, height) and codec of an mp4: what a player sees."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        count = sum(1 for _ in container.decode(stream))
        return count, (stream.codec_context.width, stream.codec_context.height), stream.codec_context.name


def gif_frames(path: Path, fps: float) -> tuple[int, tuple[int, int]]:
    """How many frames at ``fps`` a GIF shows (Pillow stores a run of identical frames as one longer frame; a GIF
    times frames in whole centiseconds) and its size."""
    with Image.open(path) as image:
        shown = 0
        for index in range(image.n_frames):
            image.seek(index)
            shown += image.info["duration"]
        return round(shown * fps / 1000), image.size


@pytest.fixture(scope="module")
def sumo_run(tmp_path_factory) -> Path:
    """A saved Ant Sumo run (a few iterations: its checkpoint and initial policy)."""
    root = tmp_path_factory.mktemp("sumo")
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], ["mdp.vec.num_envs.cpu=4", "mdp.vec.horizon=8",
                                                               "evaluator.episodes=0", f"root={root}"])
    learner = OnDeviceLearner(config)
    TrainingLoop(learner, root).run(stop=lambda trainer: trainer.iteration >= 2)
    learner.close()
    return root / "checkpoints"


@pytest.mark.slow
def test_a_sumo_match_becomes_an_mp4_and_a_gif(sumo_run, tmp_path):
    for name, size in (("match.mp4", (320, 240)), ("match.gif", (200, 150))):
        completed = evaluate("-c", "mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml", "--checkpoints", str(sumo_run),
                             "--video", str(tmp_path / name), "--video-size", f"{size[0]}x{size[1]}", "--fps", "10")
        assert completed.returncode == 0, completed.stderr[-2000:]
        written = WROTE.search(completed.stderr)
        frames, steps = int(written.group(2)), int(written.group(3))
        # a frame every 2 control steps (20 Hz → 10 fps) while the game runs, then the result held for 1.5 s
        assert frames == -(-steps // 2) + round(1.5 * 10)
        if name.endswith(".mp4"):
            assert mp4_frames(tmp_path / name) == (frames, size, "h264")
        else:
            assert gif_frames(tmp_path / name, fps=10) == (frames, size)
    assert "against initial policy" in completed.stderr


def saved_checkpoint(folder: Path, config: dict) -> Path:
    """A checkpoint of a fresh network for ``config``'s MDP (what evaluate.py reads of a train.py run)."""
    mdp = create_mdp(config["mdp"], seed=0)
    torch.manual_seed(1)
    model = build_model(mdp, config)
    mdp.close()
    Checkpoints(folder).save(7, {"model": model.state_dict(), "iteration": 7, "cost": 700, "elapsed": 1.0})
    return folder


@pytest.mark.parametrize("files, changes, side", [
    (["mdp/pong.yml"], ["mdp.pong.max_steps=120"], 320),            # 160-pixel renders, scaled up
    (["mdp/coins.yml"], ["mdp.coins.max_steps=60"], 320),
    (["mdp/gym.yml", "mdp/gym/cartpole.yml"], [], None),               # gymnasium's rgb_array frames
])
def test_mdps_that_render_frames_are_filmed(tmp_path, files, changes, side):
    folder = saved_checkpoint(tmp_path / "checkpoints", load(files, changes))
    completed = evaluate("-c", *files, "-m", *(changes or ["seed=0"]), "--checkpoints", str(folder),
                         "--video", str(tmp_path / "episode.gif"))
    assert completed.returncode == 0, completed.stderr[-2000:]
    written = WROTE.search(completed.stderr)
    frames, steps = int(written.group(2)), int(written.group(3))
    assert steps >= 1
    assert frames == steps + round(1.5 * 30)                # a frame a step, the result held
    count, (width, height) = gif_frames(tmp_path / "episode.gif", fps=30)
    assert count == frames
    assert (side is None or min(width, height) >= side)


@pytest.mark.parametrize("arguments, message", [
    (["--video", "match.avi"], "must end in one of .mp4, .gif"),
    (["--video", "match.mp4", "--video-size", "big"], "--video-size 'big'"),
    (["--video", "match.mp4", "--fps", "0"], "--fps must be positive"),
])
def test_bad_video_arguments_are_one_line(sumo_run, tmp_path, arguments, message):
    arguments = [a if not a.startswith("match") else str(tmp_path / a) for a in arguments]
    completed = evaluate("-c", "mdp/vec/ant_sumo.yml", "--checkpoints", str(sumo_run), *arguments)
    assert completed.returncode == 2, completed.stderr[-1500:]
    assert message in completed.stderr, completed.stderr[-1500:]
    assert len(completed.stderr.strip().splitlines()) == 1


def test_no_opengl_is_one_clear_line(sumo_run, tmp_path):
    """A GL back end that cannot start (here: OSMesa pointed at a library that does not exist)."""
    completed = evaluate("-c", "mdp/vec/ant_sumo.yml", "--checkpoints", str(sumo_run), "--video",
                         str(tmp_path / "match.mp4"), env={"MUJOCO_GL": "osmesa",
                                                           "PYOPENGL_OSMESA_LIBRARY": "/nonexistent/libOSMesa.so"})
    assert completed.returncode == 2, completed.stderr[-1500:]
    assert "OpenGL" in completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "match.mp4").exists()
