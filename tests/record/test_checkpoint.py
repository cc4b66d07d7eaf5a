"""Checkpoints: atomic writes, the newest N kept, a broken newest file skipped."""

from __future__ import annotations

import torch

from lamarckian.record import Checkpoints


def test_keep_newest_and_skip_broken(tmp_path):
    checkpoints = Checkpoints(tmp_path, keep=2)
    for iteration in (1, 2, 3):
        checkpoints.save(iteration, {"iteration": iteration, "weights": torch.full((3,), float(iteration))})
    assert [p.name for p in checkpoints.paths()] == ["checkpoint-000000000002.pt", "checkpoint-000000000003.pt"]
    newest = checkpoints.paths()[-1]
    newest.write_bytes(newest.read_bytes()[:40])  # a half-written file (as if the disk filled up)
    path, state = checkpoints.load_newest()
    assert state["iteration"] == 2
    assert path.name.endswith("02.pt")
    assert not list(tmp_path.glob(".checkpoint-*"))  # no temporary files left behind


def test_failed_write_leaves_nothing(tmp_path):
    checkpoints = Checkpoints(tmp_path, keep=2)

    class Unsavable:
        def __reduce__(self):
            raise RuntimeError("cannot save")

    try:
        checkpoints.save(1, {"bad": Unsavable()})
    except RuntimeError:
        pass
    assert checkpoints.paths() == []
    assert list(tmp_path.iterdir()) == []
    assert checkpoints.load_newest() is None
