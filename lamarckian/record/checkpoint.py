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
