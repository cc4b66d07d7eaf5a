"""What users call to get a configuration: the files and edits read and resolved (:mod:`.loader`), then every
typed section of the run built from them (:mod:`.sections`), so a value out of range fails here, naming its key
and the file that set it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from .loader import DEFAULTS, Sources, read_config
from .sections import check_sections


def load(files: Iterable[str] = (), modifications: Iterable[str] = (), *, defaults: Path = DEFAULTS,
         ranges: bool = False, local_mode: bool = False) -> dict[str, Any]:
    """The resolved configuration: defaults ← each ``-c`` file in order ← each ``-m`` edit, then references.

    Raises :class:`ConfigError` (one line naming key and file) for any problem; starts nothing. With ``ranges``
    (evolve.py's search space) a two-element list stands for a range and the sections are checked per individual.
    ``local_mode`` (the programs' ``--debug``) sets ``ray.local_mode``, over whatever the files say, as the
    program's own choice: not a setting of the user's (no program refuses it as one it ignores). Nothing changes
    the configuration after load: what a program decides later is an argument or an object of its own.
    """
    return load_with_sources(files, modifications, defaults=defaults, ranges=ranges, local_mode=local_mode)[0]


def load_with_sources(files: Iterable[str] = (), modifications: Iterable[str] = (), *, defaults: Path = DEFAULTS,
                      ranges: bool = False, local_mode: bool = False) -> tuple[dict[str, Any], Sources]:
    """:func:`load`, and which file (or ``-m``) set each key the user set."""
    config, sources = read_config(files, modifications, defaults=defaults, ranges=ranges)
    if local_mode:
        config["ray"] = {**config["ray"], "local_mode": True}
    if not ranges:                      # evolve.py's search ranges are checked per individual
        check_sections(config, sources)
    return config, sources
