"""A worker that Ctrl-C reached exits within its closing deadline even when closing hangs (the chaos harness saw a
worker need SIGKILL), saying where every thread was."""

from __future__ import annotations

import subprocess
import sys


def test_a_hung_close_ends_in_130_with_every_threads_stack():
    code = "import time; from lamarckian.remote.__main__ import exit_after; exit_after(0.5); time.sleep(30)"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 130
    assert "closing took over 0.5 s; exiting" in completed.stderr
    assert 'File "<string>", line 1 in <module>' in completed.stderr       # faulthandler's stack of the hang
