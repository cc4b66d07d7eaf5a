"""The status line where nobody sees it update in place (output to a file): printed as a line at least every
``every`` seconds, from the start of the run on."""

from __future__ import annotations

import time

import pytest

from lamarckian.record import Progress, SinceLine, StepRate


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


def test_the_rate_is_measured_over_the_last_ten_seconds():
    rate = StepRate(0.0, 0)
    for second in range(1, 31):
        rate.update(float(second), 1000 * second if second <= 20 else 20_000 + 100 * (second - 20))
    assert rate.update(31.0, 21_100) == pytest.approx(100.0)


def test_an_iteration_that_ends_at_once_shows_no_rate():
    rate = StepRate(100.0, 50_000)                   # a resume: segments in flight make the first iteration instant
    assert rate.text(100.001, 54_096) == "-"


def test_counts_since_the_last_line_start_again_after_each_line():
    progress = Progress(False)
    since = SinceLine(progress, {"updates": 10})
    since.grown({"updates": 14})
    progress.print("an evaluation's line")           # shows the counts of the call before it
    assert since.grown({"updates": 20}) == [6]


def test_counts_since_the_start_before_any_line():
    since = SinceLine(Progress(False), {"updates": 10})
    assert since.grown({"updates": 14}) == [4]
