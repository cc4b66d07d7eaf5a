"""The prepared device check (bench/device/run.sh) dry-run on the CPU, so it cannot rot between GPU loans: every
step of ``PART=all`` runs on small env counts, the budget arithmetic is printed, and bench/device/summarize.py turns
what comes back into the rows of docs/benchmarks.md. A second run with a budget too small skips steps, saying why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
DRY_RUN = {"SKIP_INSTALL": "1", "PHYSICS_ENVS": "16", "ENVS": "16", "TRAIN_ENVS": "16", "GAMES": "16", "TRAIN": "20",
           "MIN_TRAIN": "10", "SNAPSHOTS": "3", "PAIR_GAMES": "2", "EST_PHYSICS": "20", "EST_TESTS": "30",
           "EST_RATING": "60", "EST_POPULATION": "30", "EST_MULTIGPU": "40", "EST_VIDEO": "20"}


def dry_run(tmp_path: Path, budget: int, **more: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "out"
    env = {**os.environ, **DRY_RUN, "BUDGET": str(budget), "OUT": str(out), "WORK": str(tmp_path / "work"),
           "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "jax-cache"), **more}
    completed = subprocess.run(["bash", "bench/device/run.sh"], cwd=REPOSITORY, env=env, capture_output=True,
                               text=True, timeout=budget + 120)
    return completed, out


@pytest.fixture(scope="module")
def full_dry_run(tmp_path_factory):
    return dry_run(tmp_path_factory.mktemp("device"), 300)


@pytest.mark.slow
def test_the_dry_run_ends_well(full_dry_run):
    completed, _ = full_dry_run
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("step", ["1 (environment)", "2 (physics)", "3 (gpu tests)",
                                  "4 (self-play training and rating)", "5 (population throughput)",
                                  "6 (data-parallel ranks)", "7 (video)"])
def test_every_step_runs_and_says_how_long_it_took(full_dry_run, step):
    completed, _ = full_dry_run
    assert f"-- step {step} ran: took " in completed.stdout, completed.stdout[-3000:]


@pytest.mark.slow
def test_the_log_shows_the_budget_arithmetic_of_the_training(full_dry_run):
    completed, _ = full_dry_run
    assert "step 4 plan: 300 - " in completed.stdout


@pytest.mark.slow
def test_the_batch_sizes_are_precompiled_with_their_times(full_dry_run):
    completed, out = full_dry_run
    figures = json.loads((out / "figures.json").read_text())
    assert sorted(figures["compile"]["seconds"], key=int) == ["1", "8", "16", "64"]


@pytest.mark.slow
def test_what_comes_back_fits_a_device_call(full_dry_run):
    _, out = full_dry_run
    assert sorted(path.name for path in out.iterdir()) == ["elo.png", "figures.json", "final_checkpoint.pt",
                                                            "match.gif", "run.log", "summary.md"]


@pytest.mark.slow
@pytest.mark.parametrize("figure", ["Ant Sumo physics env-steps/s, 16 envs", "gpu-marked tests | 4 skipped",
                                    "final policy against the initial one, 16 deterministic games",
                                    "Elo over 3 snapshots", "population of 8 ÷ one learner, 16 envs",
                                    "2 data-parallel ranks sharing the GPU ÷ 1 rank", "GIF of the final policy"])
def test_the_summary_has_a_row_for_each_figure(full_dry_run, figure):
    _, out = full_dry_run
    rows = [line for line in (out / "summary.md").read_text().splitlines() if line.startswith("| ")]
    assert any(figure in row for row in rows), rows


@pytest.mark.slow
def test_summarize_reproduces_the_summary_from_what_came_back(full_dry_run):
    _, out = full_dry_run
    again = subprocess.run([sys.executable, "bench/device/summarize.py", str(out)], cwd=REPOSITORY,
                           capture_output=True, text=True)
    assert again.stdout == (out / "summary.md").read_text()


@pytest.fixture(scope="module")
def short_dry_run(tmp_path_factory):
    """A budget of 30 s where physics is estimated at 100 s: every step after the environment is skipped."""
    return dry_run(tmp_path_factory.mktemp("short"), 30, EST_PHYSICS="100")


def test_a_budget_too_small_skips_steps_and_says_why(short_dry_run):
    completed, _ = short_dry_run
    assert "== step 2 (physics) skipped: it needs ~100 s, " in completed.stdout, completed.stdout[-3000:]


def test_skipped_steps_are_not_failures(short_dry_run):
    completed, _ = short_dry_run
    assert completed.returncode == 0, completed.stdout[-3000:]


@pytest.mark.parametrize("row", ["| 2. physics | 100 | 0 | skipped: it needs ~100 s, ",
                                 "| 7. video | 20 | 0 | skipped: step 4 left no checkpoint |"])
def test_a_step_that_cannot_run_leaves_no_figure_but_its_reason(short_dry_run, row):
    _, out = short_dry_run
    assert row in (out / "summary.md").read_text()


def test_summarize_refuses_a_folder_that_is_not_a_device_run(tmp_path):
    completed = subprocess.run([sys.executable, "bench/device/summarize.py", str(tmp_path)], cwd=REPOSITORY,
                               capture_output=True, text=True)
    assert completed.returncode == 2, completed.stderr


def test_summarize_names_what_it_did_not_find(tmp_path):
    completed = subprocess.run([sys.executable, "bench/device/summarize.py", str(tmp_path)], cwd=REPOSITORY,
                               capture_output=True, text=True)
    assert f"{tmp_path / 'figures.json'}: not found" in completed.stderr


ATARI = {"PART": "atari", "ATARI_DEVICE": "cpu", "ATARI_ACTORS": "1",
         "ATARI_CHANGES": "sample.envs=2 sample.truncation=32 train.batch=128 evaluator.episodes=1 "
                          "evaluator.max_steps=100 evaluator.interval=5"}


@pytest.fixture(scope="module")
def atari_dry_run(tmp_path_factory):
    """``PART=atari`` (issue 42: Pong from pixels on the GPU machine) on the CPU: 15 s of training."""
    return dry_run(tmp_path_factory.mktemp("atari"), 75, **ATARI)


@pytest.mark.slow
def test_the_atari_dry_run_ends_well(atari_dry_run):
    completed, _ = atari_dry_run
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-2000:]


@pytest.mark.slow
def test_the_atari_figures_come_back(atari_dry_run):
    _, out = atari_dry_run
    assert json.loads((out / "figures.json").read_text())["atari"]["game"] == "Pong"


@pytest.mark.slow
def test_the_atari_summary_has_its_row(atari_dry_run):
    _, out = atari_dry_run
    assert "PPO from pixels on Pong: evaluation score 18 reached at" in (out / "summary.md").read_text()
