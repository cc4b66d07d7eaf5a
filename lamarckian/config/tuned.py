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
"""

from __future__ import annotations

import difflib
from typing import Any, Callable

from .errors import ConfigError

TUNED = "tuned"
BUILT_IN_ALGORITHMS = ("ppo", "impala", "a3c", "dqn", "sac")   # rl.algorithm's names (tests hold it to the registry)
_NOT_TUNABLE = (TUNED, "rl.algorithm")                           # what a preset may not set


def _leaves(data: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            keys += _leaves(value, f"{prefix}{key}.")
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
        if algorithm not in BUILT_IN_ALGORITHMS and ":" not in str(algorithm):
            close = difflib.get_close_matches(str(algorithm), BUILT_IN_ALGORITHMS, n=1)
            hint = f"; did you mean {TUNED}.{close[0]}?" if close else ""
            raise ConfigError(f"{key} (from {origin_of(key)}): no algorithm {algorithm!r} (expected one of "
                              f"{', '.join(BUILT_IN_ALGORITHMS)} or module:ClassName){hint}")
        if not isinstance(section, dict):
            raise ConfigError(f"{key} (from {origin_of(key)}): expected a mapping of settings, got "
                              f"{type(section).__name__}")
        for leaf in _leaves(section):
            if any(leaf == name or leaf.startswith(f"{name}.") for name in _NOT_TUNABLE):
                raise ConfigError(f"{key}.{leaf} (from {origin_of(f'{key}.{leaf}')}): a tuned section cannot set "
                                  f"{leaf}")
        validate(section, f"{key}.")


def apply_tuned(config: dict[str, Any], algorithm: str, set_by_edit: Callable[[str], bool],
                record: Callable[[str, str], None], origin_of: Callable[[str], str]) -> list[str]:
    """Merge ``tuned.<algorithm>`` into ``config`` (in place), each leaf unless a ``-m`` edit set it
    (``set_by_edit``); remove ``tuned``. ``record(key, origin)`` notes where each applied key came from. The keys
    applied."""
    section = (config.pop(TUNED, None) or {}).get(algorithm) or {}
    applied = []
    for leaf in _leaves(section):
        if set_by_edit(leaf):
            continue
        *parents, name = leaf.split(".")
        node, value = config, section
        for part in parents:
            node = node.setdefault(part, {})
            value = value[part]
        node[name] = value[name]
        record(leaf, f"{origin_of(f'{TUNED}.{algorithm}.{leaf}')} ({TUNED}.{algorithm})")
        applied.append(leaf)
    return applied
