"""A live progress line in the terminal (rich), plus one printed line per evaluation."""

from __future__ import annotations

from typing import Mapping

from rich.console import Console
from rich.live import Live
from rich.text import Text


def format_number(value: float) -> str:
    """1234567 → '1.23M'."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.2f}{unit}"
    return f"{value:.3g}"


class Progress:
    """The status line updated in place (when the terminal allows) and permanent lines for milestones."""

    def __init__(self, enabled: bool = True) -> None:
        self.console = Console(stderr=True)
        self.live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True) \
            if enabled and self.console.is_terminal else None
        if self.live is not None:
            self.live.start()

    def update(self, fields: Mapping[str, str]) -> None:
        if self.live is not None:
            self.live.update(Text(" | ".join(f"{k} {v}" for k, v in fields.items())))

    def print(self, line: str) -> None:
        self.console.print(line, highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
