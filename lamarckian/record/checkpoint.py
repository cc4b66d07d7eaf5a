"""Checkpoints written atomically (temporary file, fsync, rename), the newest N kept, the newest good one loaded.

A checkpoint is a ``torch.save`` of tensors, numbers, strings and containers, loaded with
``weights_only=True`` (no arbitrary unpickling). A file that fails to load (half-written, corrupt) is
reported and skipped in favour of the next newest.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

PATTERN = re.compile(r"^checkpoint-(\d{12})\.pt$")
log = logging.getLogger(__name__)


def atomic_write(path: Path, write: Any) -> None:
    """Call ``write(stream)`` on a temporary file beside ``path``, fsync it, then rename it onto ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class Checkpoints:
    """``checkpoint-<iteration>.pt`` files in one folder.

    Args:
        folder: where the files live.
        keep: how many of the newest to keep (older ones are deleted after each save).
    """

    def __init__(self, folder: Path, keep: int = 3) -> None:
        if keep < 1:
            raise ValueError(f"evaluator.checkpoint.keep must be at least 1, got {keep}")
        self.folder = Path(folder)
        self.keep = keep

    def paths(self) -> list[Path]:
        """Existing checkpoints, oldest first."""
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.iterdir() if PATTERN.match(p.name))

    def save(self, iteration: int, state: dict[str, Any]) -> Path:
        path = self.folder / f"checkpoint-{iteration:012d}.pt"
        atomic_write(path, lambda stream: torch.save(state, stream))
        for old in self.paths()[:-self.keep]:
            old.unlink(missing_ok=True)
        return path

    def load_newest(self) -> tuple[Path, dict[str, Any]] | None:
        """The newest checkpoint that loads, or None; broken ones are logged and skipped."""
        for path in reversed(self.paths()):
            try:
                return path, torch.load(path, map_location="cpu", weights_only=True)
            except Exception as error:  # noqa: BLE001 - any unreadable file is skipped, never fatal
                log.warning("skipping unreadable checkpoint %s: %s", path, error)
        return None


def plain(value: Any) -> Any:
    """``value`` (a config) as plain containers, numbers and strings: what a checkpoint loaded with
    ``weights_only=True`` may hold."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


#: the checkpoint format this code writes (the key ``format``); files without the key are format 1
CHECKPOINT_FORMAT = 2
#: what format 2 adds at the top level, with the value a format-1 file gets
_FORMAT_2_DEFAULTS: dict[str, Any] = {"training": {}, "evaluation": {}, "evaluations": [], "rng": None, "config": None}


def upgrade_checkpoint(state: dict[str, Any], path: Path | str = "checkpoint") -> dict[str, Any]:
    """A loaded checkpoint in today's format. Format 1 (before 2026-11-27: the learners' own dicts, no
    ``format`` key) gets empty history, no RNG states, and ``trainer`` guessed from its keys; a newer format than
    this code knows is an error naming ``path``."""
    found = int(state.get("format", 1))
    if found > CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: checkpoint format {found} is newer than this version of lamarckian reads "
                         f"({CHECKPOINT_FORMAT}); upgrade lamarckian")
    if found == CHECKPOINT_FORMAT:
        return state
    upgraded = {**_FORMAT_2_DEFAULTS, **state, "format": CHECKPOINT_FORMAT}
    upgraded["trainer"] = "OnDeviceLearner" if "initial" in state else "Learner"
    return upgraded


def process_rng_state() -> dict[str, Any]:
    """This process's random states (torch CPU and CUDA, numpy's global generator, ``random``) as tensors and
    plain values (``weights_only`` loads them)."""
    import random

    kind, keys, position, has_gauss, gauss = np.random.get_state(legacy=True)
    assert not isinstance(keys, str)
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": _plain_tuple(random.getstate()),
                             "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)),
                                       "position": int(position), "has_gauss": int(has_gauss), "gauss": float(gauss)}}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_process_rng(state: Mapping[str, Any]) -> None:
    """Undo :func:`process_rng_state`."""
    import random

    torch.set_rng_state(state["torch"])
    random.setstate(_tuple(state["python"]))
    numpy = state["numpy"]
    np.random.set_state((numpy["kind"], numpy["keys"].numpy().astype(np.uint32), numpy["position"],
                         numpy["has_gauss"], numpy["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _plain_tuple(value: Any) -> Any:
    return [_plain_tuple(v) for v in value] if isinstance(value, tuple) else value


def _tuple(value: Any) -> Any:
    return tuple(_tuple(v) for v in value) if isinstance(value, list) else value


def checkpoint_folder(path: Path, prefer: str = "snapshots") -> Path:
    """The folder of ``checkpoint-*.pt`` files ``path`` means: itself when it holds such files, else its ``prefer``
    subfolder (a run directory: ``snapshots/`` keeps every snapshot, ``checkpoints/`` the newest few and the
    opponent pool), else the other one; ``path`` unchanged when none has files (the caller reports it)."""
    path = Path(path)
    other = "checkpoints" if prefer == "snapshots" else "snapshots"
    for candidate in (path, path / prefer, path / other):
        if Checkpoints(candidate).paths():
            return candidate
    return path


def run_label(folder: Path) -> str:
    """The name a folder of checkpoints goes by in tables: its run directory's name for ``checkpoints/`` and
    ``snapshots/``, else its own."""
    return folder.resolve().parent.name if folder.name in ("checkpoints", "snapshots") else folder.name
