"""TensorBoard scalars and histograms (event files under the run directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np


class Scalars:
    """Writes ``{tag: value}`` (or a histogram) at a step; ``None`` folder disables it."""

    def __init__(self, folder: Path | None) -> None:
        self.writer = None
        if folder is not None:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(folder))

    def write(self, step: int, scalars: Mapping[str, float]) -> None:
        if self.writer is None:
            return
        for tag, value in scalars.items():
            if value is not None:
                self.writer.add_scalar(tag, float(value), step)

    def histogram(self, step: int, tag: str, values: Sequence[float]) -> None:
        if self.writer is not None and len(values):
            self.writer.add_histogram(tag, np.asarray(values, dtype=np.float64), step)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
