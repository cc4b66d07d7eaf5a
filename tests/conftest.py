"""Shared fixtures: a real local Ray started once per test module that needs it; fixed global seeds per test."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ray_local():
    """A real local Ray with 2 CPUs (shut down after the module)."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` need a CUDA device: skipped (and said so) where there is none, as on CI."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (bench/device/run.sh runs these on a lent GPU)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def no_signal_handler_left_behind():
    """A test that installs a signal handler must put the previous one back."""
    import signal

    watched = (signal.SIGALRM, signal.SIGINT)
    before = {number: signal.getsignal(number) for number in watched}
    yield
    changed = [signal.Signals(number).name for number in watched if signal.getsignal(number) is not before[number]]
    for number in watched:
        signal.signal(number, before[number])
    assert not changed, f"the test left signal handlers installed: {changed}"


@pytest.fixture(autouse=True)
def fixed_seeds(request):
    """Every test starts Python's, numpy's and torch's global generators from a seed of its own (a hash of its
    id): an in-process outcome (a network's initial weights, a sampled batch) is the same on every run. Processes a
    test starts take their seeds from the run's ``seed`` setting."""
    import random
    import zlib

    import numpy as np
    import torch

    seed = zlib.crc32(request.node.nodeid.encode())
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
