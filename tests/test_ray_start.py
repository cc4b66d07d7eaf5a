"""A run without ``ray.address`` starts its own Ray, even where another cluster's address is on record.

``ray start`` and Ray's test clusters write their address to ``ray_current_cluster`` in Ray's temp folder, and a
bare ``ray.init()`` joins it (refusing ``num_cpus``): on CI a test cluster of one worker made another worker's
``ray.init(num_cpus=2)`` fail. Here the record names an address where nothing listens, in a temp folder of the
test's own (``RAY_TMPDIR``), so no other process sees it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
SCRIPT = """
import ray
from lamarckian.cli import start_ray

started = start_ray({"num_cpus": 1})
print(started, int(ray.cluster_resources()["CPU"]), flush=True)
ray.shutdown()
"""


def test_a_stale_cluster_address_is_not_joined():
    # short: Ray's unix sockets live under it, and their paths may not pass 107 characters
    folder = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    try:
        (folder / "ray").mkdir()
        (folder / "ray" / "ray_current_cluster").write_text("127.0.0.1:1")
        environment = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
        environment["RAY_TMPDIR"] = str(folder)
        done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=environment,
                              cwd=REPOSITORY, timeout=180)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.stdout.split() == ["True", "1"], done.stderr[-3000:]
