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


def notes_of_a_child(code: str) -> list[str]:
    """The lines a child process running ``code`` says, started after this process said "the grid is small"."""
    warn_once(LOG, "the grid is small")
    child = subprocess.run([sys.executable, "-c", "import logging; from lamarckian.said import warn_once; "
                            "from lamarckian.entry import guarded; "
                            "say = lambda m: warn_once(logging.getLogger('x'), m); " + code],
                           capture_output=True, text=True, timeout=60)
    return child.stderr.strip().splitlines()


def test_a_process_started_afterwards_does_not_say_it_again(monkeypatch):
    monkeypatch.delenv(SAID, raising=False)
    assert notes_of_a_child("say('the grid is small'); say('another note')") == ["another note"]


def test_a_program_says_its_notes_whatever_its_starter_said(monkeypatch):
    monkeypatch.delenv(SAID, raising=False)
    assert notes_of_a_child("guarded(lambda: say('the grid is small') or 0)") == ["the grid is small"]
