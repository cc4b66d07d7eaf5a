"""Shared fixtures: a real local Ray started once per test module that needs it."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ray_local():
    """A real local Ray with 2 CPUs (shut down after the module)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
