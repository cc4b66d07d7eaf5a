"""Tuned settings per task and algorithm: a task file's ``tuned.<algorithm>`` section (docs/config.md, "Tuned
settings").

    # mdp/gym/pendulum.yml
    tuned:
      ppo: {rl: {discount: 0.9}, train: {lr: 0.001}}
      sac: {train: {lr: 0.001, replay: {start: 100}}}

The section of the run's algorithm (``rl.algorithm`` after every ``-c`` file and ``-m`` edit) is merged over the
``-c`` files, whatever their order, so a task's values win over an algorithm file's generic ones; a ``-m`` edit of
the same key wins over both (and ``-m tuned.sac.train.lr=...`` edits the section itself). The other algorithms'
sections are ignored; the ``tuned`` key is gone from the resolved configuration.

A section applies to the network it was measured with: ``tuned.<algorithm>`` to a feed-forward one,
``tuned.<algorithm>_<recurrent>`` (``ppo_lstm``, ``impala_gru``) to a run whose ``model.recurrent`` is set. A
recurrent run never receives values measured on a feed-forward network (one logged line says the section was left
out).
"""

from __future__ import annotations

import difflib
import logging
from typing import Any, Callable

from ..registry import ALGORITHMS
from .errors import ConfigError

LOG = logging.getLogger("lamarckian.config")
TUNED = "tuned"
RECURRENT_CORES = ("lstm", "gru")                                # model.recurrent's values: tuned.<algorithm>_<core>
_NOT_TUNABLE = (TUNED, "rl.algorithm")                           # what a preset may not set


def leaves(data: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted keys of ``data``'s leaves (an empty mapping is a leaf)."""
    keys = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            keys += leaves(value, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def check_tuned(config: dict[str, Any], origin_of: Callable[[str], str],
                validate: Callable[[dict[str, Any], str], None]) -> None:
    """Refuse a ``tuned`` section for an algorithm that does not exist, or one that sets an unknown key (through
    ``validate(section, prefix)``) or a key no preset may set; each error names the key and the file."""
    tuned = config.get(TUNED) or {}
    if not isinstance(tuned, dict):
        raise ConfigError(f"{TUNED} (from {origin_of(TUNED)}): expected a mapping of algorithm to settings")
    for algorithm, section in tuned.items():
        key = f"{TUNED}.{algorithm}"
        built_in = ALGORITHMS.names()
        names = [*built_in, *(f"{a}_{core}" for a in built_in for core in RECURRENT_CORES)]
        if algorithm not in names and ":" not in str(algorithm):
            close = difflib.get_close_matches(str(algorithm), names, n=1)
            hint = f"; did you mean {TUNED}.{close[0]}?" if close else ""
            raise ConfigError(f"{key} (from {origin_of(key)}): no algorithm {algorithm!r} (expected one of "
                              f"{', '.join(built_in)} or module:ClassName, with _lstm or _gru for a "
                              f"recurrent network){hint}")
        if not isinstance(section, dict):
            raise ConfigError(f"{key} (from {origin_of(key)}): expected a mapping of settings, got "
                              f"{type(section).__name__}")
        for leaf in leaves(section):
            if any(leaf == name or leaf.startswith(f"{name}.") for name in _NOT_TUNABLE):
                raise ConfigError(f"{key}.{leaf} (from {origin_of(f'{key}.{leaf}')}): a tuned section cannot set "
                                  f"{leaf}")
        validate(section, f"{key}.")


def copy_leaf(config: dict[str, Any], values: dict[str, Any], leaf: str) -> None:
    """Set the dotted key ``leaf`` of ``config`` (in place) to its value in ``values``."""
    *parents, name = leaf.split(".")
    node, value = config, values
    for part in parents:
        node, value = node.setdefault(part, {}), value[part]
    node[name] = value[name]


def section_name(algorithm: str, recurrent: str | None) -> str:
    """The tuned section a run reads: ``algorithm`` for a feed-forward network, ``algorithm_<recurrent>`` for a
    recurrent one."""
    return f"{algorithm}_{recurrent}" if recurrent else algorithm


def apply_tuned(config: dict[str, Any], algorithm: str, set_by_edit: Callable[[str], bool],
                record: Callable[[str, str], None], origin_of: Callable[[str], str]) -> list[str]:
    """Merge the tuned section of ``algorithm`` for the run's network (:func:`section_name` of
    ``model.recurrent``) into ``config`` (in place), each leaf unless a ``-m`` edit set it (``set_by_edit``); remove
    ``tuned``. ``record(key, origin)`` notes where each applied key came from. The keys applied."""
    tuned = config.pop(TUNED, None) or {}
    recurrent = (config.get("model") or {}).get("recurrent")
    name = section_name(algorithm, recurrent)
    if recurrent and tuned.get(algorithm) and not tuned.get(name):
        LOG.warning("model.recurrent=%s: %s's %s.%s section was measured with a feed-forward network and is left out "
                    "(no %s.%s section); set values with -m, or in a file after the task's", recurrent,
                    origin_of(f"{TUNED}.{algorithm}"), TUNED, algorithm, TUNED, name)
    algorithm = name
    section = tuned.get(algorithm) or {}
    applied = []
    for leaf in leaves(section):
        if set_by_edit(leaf):
            continue
        copy_leaf(config, section, leaf)
        record(leaf, f"{origin_of(f'{TUNED}.{algorithm}.{leaf}')} ({TUNED}.{algorithm})")
        applied.append(leaf)
    return applied
