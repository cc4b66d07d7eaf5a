"""The values an MDP kind needs, whatever files a run was composed of: a game's sampling, a single-agent task's
learning values.

A game served by another process (``mdp.create: game``) waits on the network for every step: it needs hundreds of
episodes in flight per actor, a short batching wait and actors that sample ahead — the ``sample`` section of
``mdp/game.yml``. A run whose ``mdp.create`` is such a kind gets that section for every key that only the defaults
or a task's tuned section set (``-c mdp/gym/cartpole.yml -m mdp.create=game`` samples as ``mdp/game/cartpole.yml``
does); a key a ``-c`` file or a ``-m`` edit set is the user's and stays. A task's tuned section was measured on the
task run in-process, with its own sampling and schedules: under such a kind it is left out, in one logged line
(the bundled game task files, mdp/game/*.yml, set ``tuned: null``, so only a hand-composed run sees the line).

A single-agent gymnasium task (``mdp.create: gym``) is judged by what it learns from each env step, not by env steps
per second: a task with no tuned section for the run's algorithm gets that algorithm's section of
``untuned/gym.yml`` (sample-efficient values, chosen by ablation over tasks nobody tuned) for every key only the
defaults set. The shipped defaults stay the throughput values of a self-play game that runs thousands of env steps
per second; a task's own tuned section, a ``-c`` file and a ``-m`` edit win over both.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from .tuned import TUNED, copy_leaf, leaves

KIND_SAMPLING = {"game": "mdp/game.yml"}     # mdp.create → the bundled file whose `sample` section it needs
KIND_UNTUNED = {"gym": "untuned/gym.yml"}      # mdp.create → the file whose tuned sections an untuned task gets
DEFAULTS_ORIGIN = "lamarckian.yml"
LOG = logging.getLogger("lamarckian.config")


def drop_tuned_for_kind(config: dict[str, Any], algorithm: str, origin_of: Callable[[str], str]) -> None:
    """Remove the ``tuned`` sections (in place) where ``mdp.create`` is a kind with its own sampling, logging one
    line where the run's algorithm had one."""
    kind = str(config.get("mdp", {}).get("create"))
    if kind not in KIND_SAMPLING:
        return
    section = (config.pop(TUNED, None) or {}).get(algorithm)
    if section:
        LOG.warning("mdp.create=%s: %s's %s.%s section was measured on the task run in-process and is left out (its "
                    "sampling and schedules do not fit a game that waits on the network); %s's sampling applies. "
                    "Set values with -m, or in a file after the task's", kind, origin_of(f"{TUNED}.{algorithm}"),
                    TUNED, algorithm, KIND_SAMPLING[kind])


def apply_kind_sampling(config: dict[str, Any], read: Callable[[str], dict[str, Any]],
                        set_by_edit: Callable[[str], bool], record: Callable[[str, str], None],
                        origin_of: Callable[[str], str]) -> None:
    """Merge the ``sample`` section of ``mdp.create``'s file (``read(name)`` loads it) into ``config`` (in place),
    each key that the defaults or a tuned section set; ``record(key, origin)`` notes the origin."""
    kind = str(config.get("mdp", {}).get("create"))
    name = KIND_SAMPLING.get(kind)
    if name is None:
        return
    for key, value in (read(name).get("sample") or {}).items():
        leaf = f"sample.{key}"
        origin = origin_of(leaf)
        if set_by_edit(leaf) or not (origin == DEFAULTS_ORIGIN or f"({TUNED}." in origin):
            continue
        if config["sample"].get(key) != value:
            config["sample"][key] = value
            record(leaf, f"{name} (the sampling of mdp.create={kind})")


def apply_kind_untuned(config: dict[str, Any], section: str, tuned: bool, read: Callable[[str], dict[str, Any]],
                       is_set: Callable[[str], bool], record: Callable[[str, str], None]) -> list[str]:
    """Merge ``section`` (the run's algorithm, ``_<recurrent>`` for a recurrent network: as the tuned sections) of
    ``mdp.create``'s untuned file (``read(name)`` loads it) into ``config`` (in place) where the task has no tuned
    section of that name (``tuned`` false), each key that no file and no edit set (``is_set``); ``record(key,
    origin)`` names the file and why. The keys applied."""
    kind = str(config.get("mdp", {}).get("create"))
    name = KIND_UNTUNED.get(kind)
    if name is None or tuned:
        return []
    values = (read(name).get(TUNED) or {}).get(section) or {}
    applied = []
    for leaf in leaves(values):
        if is_set(leaf):
            continue
        copy_leaf(config, values, leaf)
        record(leaf, f"{name} ({section}: mdp.create={kind} is a single-agent task, and no {TUNED}.{section} section "
                     "was given: sample-efficient values)")
        applied.append(leaf)
    return applied
