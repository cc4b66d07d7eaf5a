"""status.json: where a run is now, replaced whole at most once per period."""

from __future__ import annotations

import os

from lamarckian.record import StatusFile, read_status


def test_the_status_is_replaced_at_most_once_per_period(tmp_path):
    status = StatusFile(tmp_path, period=60.0)
    status.write({"cost": 1})
    status.write({"cost": 2})
    assert read_status(tmp_path)["cost"] == 1


def test_a_forced_status_is_written_with_the_process_id(tmp_path):
    status = StatusFile(tmp_path, period=60.0)
    status.write({"cost": 1})
    status.write({"cost": 2}, force=True)
    assert read_status(tmp_path) == {"cost": 2, "pid": os.getpid(), "time": read_status(tmp_path)["time"]}


def test_no_status_yet_reads_as_none(tmp_path):
    assert read_status(tmp_path) is None


def test_no_folder_writes_nothing(tmp_path):
    StatusFile(None).write({"cost": 1}, force=True)
    assert not list(tmp_path.iterdir())
