"""The timing loop the benchmarks share: median seconds per call over repeated blocks, after a warm-up."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def seconds_per_call(call: Callable[[], object], steps: int, repeats: int,
                     finished: Callable[[], object] | None = None, warmup: int = 1) -> float:
    """Median over ``repeats`` blocks of ``steps`` calls of the seconds per call. ``finished`` (if given) runs at
    the end of each block inside the timing: it waits for work queued on a device. ``warmup`` untimed calls first
    (compilation, caches)."""
    for _ in range(warmup):
        call()
    if finished is not None:
        finished()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(steps):
            call()
        if finished is not None:
            finished()
        times.append((time.perf_counter() - started) / steps)
    return statistics.median(times)
