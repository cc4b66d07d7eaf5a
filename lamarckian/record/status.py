"""``status.json`` in a run directory: where the run is now (process id, counters, wall-clock time), replaced at
most once per ``period`` seconds, for a watchdog or a script to poll without parsing logs or TensorBoard files.

Written to a temporary file and renamed over the old one, so a reader sees the previous or the new status, never a
mix; not fsynced (a status lost in a crash is replaced by the restarted run's first one).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Mapping

log = logging.getLogger(__name__)


class StatusFile:
    """``folder/status.json``; ``None`` folder: nothing written.

    Args:
        folder: the run directory.
        period: seconds between writes at most (:meth:`write` with ``force`` writes anyway).
    """

    def __init__(self, folder: Path | None, period: float = 1.0) -> None:
        self.path = Path(folder) / "status.json" if folder is not None else None
        self.period = period
        self.written = -float("inf")

    def write(self, fields: Mapping[str, Any], force: bool = False) -> None:
        """Replace the file with ``fields`` plus ``pid`` and ``time`` (Unix seconds), if ``period`` has passed.
        A failed write (a full disk) is logged and skipped: the status never stops a run."""
        now = time.monotonic()
        if self.path is None or (not force and now - self.written < self.period):
            return
        self.written = now
        temporary = self.path.with_name(f".status.json.{os.getpid()}")
        try:
            temporary.write_text(json.dumps({**fields, "pid": os.getpid(), "time": time.time()}))
            os.replace(temporary, self.path)
        except OSError as error:
            log.warning("status file %s not written: %s", self.path, error)
            temporary.unlink(missing_ok=True)


def read_status(folder: Path) -> dict[str, Any] | None:
    """The run's latest status, or None when there is none yet."""
    try:
        return json.loads((Path(folder) / "status.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
