"""An append-only CSV of rows (evaluations), flushed after each row so a killed run keeps what it wrote."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Mapping


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
        with open(self.path, "a", newline="") as stream:
            writer = csv.DictWriter(stream, self.columns, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow(row)


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
