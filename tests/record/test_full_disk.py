"""A full disk: a run stops with one clear line (exit code 1), every checkpoint on disk loads, and no file holds a
half-written row. The disk is a real tmpfs of a few MiB (mounting one needs root)."""

from __future__ import annotations

import csv
import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from lamarckian.record import Checkpoints, CsvLog
from lamarckian.record.table import append_text

REPOSITORY = Path(__file__).resolve().parents[2]

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs (the full disk) needs root")


@pytest.fixture
def small_disk(tmp_path):
    folder = tmp_path / "disk"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], check=True)
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(folder: Path) -> None:
    """Take every free byte of the disk under ``folder``."""
    with open(folder / "filler", "ab", buffering=0) as stream:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    stream.write(b"\0" * size)
            except OSError:
                pass


@needs_root
def test_an_append_that_does_not_fit_leaves_the_file_as_it_was(small_disk):
    log = CsvLog(small_disk / "evaluations.csv")
    log.write({"cost": 1, "fitness": 0.5})
    before = (small_disk / "evaluations.csv").read_bytes()
    fill(small_disk)
    with pytest.raises(OSError) as info:
        append_text(small_disk / "evaluations.csv", "x" * 100_000)
    assert info.value.errno == errno.ENOSPC
    assert (small_disk / "evaluations.csv").read_bytes() == before


@pytest.mark.slow
@needs_root
def test_train_py_on_a_disk_that_fills_stops_with_one_line_and_intact_checkpoints(small_disk):
    run = small_disk / "run"
    driver = subprocess.Popen(
        [sys.executable, "train.py", "-c", "mdp/gym.yml", "mdp/gym/cartpole.yml", "-m", f"root={run}",
         "evaluator.checkpoint.interval=0.5", "evaluator.interval=0.5", "evaluator.episodes=2",
         "evaluator.terminate=self.time >= 300"],
        cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not len(Checkpoints(run / "checkpoints").paths()) >= 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    fill(small_disk)
    _, stderr = driver.communicate(timeout=120)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert driver.returncode == 1
    assert "disk is full" in lines[-1]
    assert "Traceback" not in stderr, stderr
    assert all(torch.load(path, weights_only=True)["iteration"] > 0
               for path in Checkpoints(run / "checkpoints").paths())
    with open(run / "evaluations.csv", newline="") as stream:
        rows = list(csv.reader(stream))
    assert {len(row) for row in rows} == {len(rows[0])}
