"""The reference game server, noting in a file each time it starts and each time it ends normally (as a game that
saves its state on SIGTERM would; a SIGKILL leaves no note). Usage: ``saving_server.py NOTES serve ...``.

Its SIGTERM handler is in place before the note of its start, so a SIGTERM at any moment after that note (a run that
ends while this instance still starts: the server's own handler comes only once it serves) is a save."""

from __future__ import annotations

import atexit
import signal
import sys
from pathlib import Path


def note(notes: Path, what: str) -> None:
    with notes.open("a") as stream:
        stream.write(f"{what}\n")


if __name__ == "__main__":
    notes = Path(sys.argv[1])
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(0))
    atexit.register(note, notes, "saved")
    note(notes, "started")
    from lamarckian.games.__main__ import main

    sys.exit(main(sys.argv[2:]))
