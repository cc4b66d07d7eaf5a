"""The status line where nobody sees it update in place (output to a file): printed as a line at least every
``every`` seconds, from the start of the run on."""

from __future__ import annotations

import time

from lamarckian.record import Progress


def printed_within(capsys, seconds: float) -> str:
    time.sleep(seconds)
    return capsys.readouterr().err


def test_a_run_with_no_iteration_yet_says_it_is_starting(capsys):
    progress = Progress(True, every=0.5)
    try:
        assert "starting: no iteration finished yet" in printed_within(capsys, 1.8)
    finally:
        progress.close()


def test_the_latest_status_is_printed_when_nothing_was_for_a_while(capsys):
    progress = Progress(True, every=0.5)
    try:
        progress.update({"iter": "7", "steps": "1.2k"})
        assert "iter 7 | steps 1.2k" in printed_within(capsys, 1.8)
    finally:
        progress.close()


def test_a_closed_progress_prints_nothing_more(capsys):
    progress = Progress(True, every=0.5)
    progress.close()
    assert printed_within(capsys, 1.8) == ""
