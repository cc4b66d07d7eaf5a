"""An append-only CSV of rows (evaluations), written row by row so a killed run keeps what it wrote, and never a
half row: a write that fails (a full disk) is undone."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Mapping


def append_text(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` (created if missing) whole or not at all: if the write fails (a full disk), the
    file is cut back to its old length and the error raised."""
    data = text.encode("utf-8")
    handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(handle).st_size
        try:
            written = 0
            while written < len(data):
                written += os.write(handle, data[written:])
        except OSError:
            os.ftruncate(handle, size)
            raise
    finally:
        os.close(handle)


class CsvLog:
    """Rows of ``{column: value}``; the columns are fixed by the first row written to a new file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.columns: list[str] | None = None
        if self.path.is_file() and self.path.stat().st_size:
            with open(self.path, newline="") as stream:
                self.columns = next(csv.reader(stream), None)

    def write(self, row: Mapping[str, float | int | str]) -> None:
        new = self.columns is None or not self.path.is_file()     # -D may have deleted it since it was opened
        if new:
            self.columns = list(row)
            self.path.parent.mkdir(parents=True, exist_ok=True)
        stream = io.StringIO(newline="")
        writer = csv.DictWriter(stream, self.columns or list(row), extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)
        append_text(self.path, stream.getvalue())


def read_rows(path: Path) -> list[dict[str, float]]:
    """The rows of a :class:`CsvLog` file with numeric values (non-numbers become nan)."""
    rows = []
    with open(path, newline="") as stream:
        for row in csv.DictReader(stream):
            converted = {}
            for key, value in row.items():
                try:
                    converted[key] = float(value)
                except (TypeError, ValueError):
                    converted[key] = float("nan")
            rows.append(converted)
    return rows
