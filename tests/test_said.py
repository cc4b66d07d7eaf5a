"""A note is said once in a run: not again in the process, nor in a process it starts afterwards."""

from __future__ import annotations

import logging
import subprocess
import sys

from lamarckian.said import SAID, warn_once

LOG = logging.getLogger("lamarckian.test_said")


def test_a_note_is_said_once_in_a_process(caplog, monkeypatch):
    monkeypatch.delenv(SAID, raising=False)
    for _ in range(3):
        warn_once(LOG, "the grid is small")
    assert [r.getMessage() for r in caplog.records] == ["the grid is small"]


def test_a_process_started_afterwards_does_not_say_it_again(monkeypatch):
    monkeypatch.delenv(SAID, raising=False)
    warn_once(LOG, "the grid is small")
    child = subprocess.run([sys.executable, "-c", "import logging; from lamarckian.said import warn_once; "
                            "warn_once(logging.getLogger('x'), 'the grid is small'); "
                            "warn_once(logging.getLogger('x'), 'another note')"],
                           capture_output=True, text=True, timeout=60)
    assert child.stderr.strip().splitlines() == ["another note"]


def test_a_program_says_its_notes_whatever_its_starter_said(monkeypatch):
    monkeypatch.delenv(SAID, raising=False)
    warn_once(LOG, "the grid is small")
    program = subprocess.run([sys.executable, "-c", "import logging; from lamarckian.entry import guarded; "
                              "from lamarckian.said import warn_once; "
                              "guarded(lambda: warn_once(logging.getLogger('x'), 'the grid is small') or 0)"],
                             capture_output=True, text=True, timeout=60)
    assert program.stderr.strip().splitlines() == ["the grid is small"]
