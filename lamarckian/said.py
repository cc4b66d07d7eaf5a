"""Notes a run says once however often their cause recurs (one per environment built, one per model, one per
process). What a process said is kept in its environment (:data:`SAID`), which the processes it starts afterwards
(actors, evaluation, Ray's workers) inherit: they do not say it again."""

from __future__ import annotations

import logging
import os
import zlib

SAID = "LAMARCKIAN_SAID"        # the environment variable: the CRC-32s of the notes said, comma-separated


def warn_once(logger: logging.Logger, message: str) -> None:
    """``logger.warning(message)`` unless this process or the one that started it said ``message`` already."""
    digest = f"{zlib.crc32(message.encode()):08x}"
    said = [entry for entry in os.environ.get(SAID, "").split(",") if entry]
    if digest in said:
        return
    os.environ[SAID] = ",".join([*said, digest])
    logger.warning("%s", message)
