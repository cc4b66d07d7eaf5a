"""The reference game server, noting in a file each time it starts and each time it ends normally (as a game that
saves its state on SIGTERM would; a SIGKILL leaves no note). Usage: ``saving_server.py NOTES serve ...``."""

from __future__ import annotations

import atexit
import sys
from pathlib import Path

from lamarckian.games.__main__ import main


def note(notes: Path, what: str) -> None:
    with notes.open("a") as stream:
        stream.write(f"{what}\n")


if __name__ == "__main__":
    notes = Path(sys.argv[1])
    note(notes, "started")
    atexit.register(note, notes, "saved")
    sys.exit(main(sys.argv[2:]))
