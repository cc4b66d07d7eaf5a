"""Build the configured MDP (``mdp.create``) and wrap its controllers (``mdp.frame_skip``, statistics)."""

from __future__ import annotations

import copy
from typing import Any, Mapping

from ..config.loader import merge
from .base import MDP, Controller
from .images import resized
from .plugin import is_plugin, load_plugin
from .wrap import FrameSkip, IdleBonus, Statistics

KINDS = ("pong", "coins", "gym", "pettingzoo", "game", "service")
BY_NAME = {"game": "lamarckian.games.mdp:GameMDP",             # by name: lamarckian.games builds on this package
           "service": "lamarckian.games.service:ServiceMDP"}


def evaluation_config(mdp_config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``mdp`` section of evaluation environments: ``mdp.evaluation``'s keys merged over the rest (Atari: full
    games, the game's own score, ``mdp/gym/atari.yml``)."""
    rest = copy.deepcopy({key: value for key, value in mdp_config.items() if key != "evaluation"})
    return merge(rest, dict(mdp_config.get("evaluation") or {}))


def create_mdp(mdp_config: Mapping[str, Any], seed: int | None = None, *, evaluation: bool = False) -> MDP:
    """The MDP named by ``mdp.create`` (``pong``, ``coins``, ``gym``, ``pettingzoo``, ``game``: one served by a game
    server (``mdp.game``, docs/games.md), ``service``: agents of games that call the policy (``mdp.service``), or
    ``module:ClassName``: your own :class:`MDP` subclass, built as ``ClassName(**mdp.kwargs, seed=seed)``), seeded
    with ``seed``; its large frames resized (``mdp.resize``: :mod:`.images`); stepped in real time when
    ``mdp.realtime.period`` is set. ``evaluation``: an environment for
    deterministic evaluation, with ``mdp.evaluation``'s changes (:func:`evaluation_config`)."""
    if evaluation:
        mdp_config = evaluation_config(mdp_config)
    mdp = resized(_create(mdp_config, seed), mdp_config.get("resize"))
    period = (mdp_config.get("realtime") or {}).get("period")
    if period is None:
        return mdp
    from .realtime import RealTimeMDP

    return RealTimeMDP(mdp, period)


def _create(mdp_config: Mapping[str, Any], seed: int | None) -> MDP:
    kind = mdp_config["create"]
    if is_plugin(kind):
        return load_plugin(kind, "mdp.create")(**dict(mdp_config.get("kwargs") or {}), seed=seed)
    if kind == "pong":
        from .pong import Pong, PongSettings

        return Pong(PongSettings.from_mapping(mdp_config["pong"]), seed=seed)
    if kind == "coins":
        from .coins import Coins, CoinsSettings

        return Coins(CoinsSettings.from_mapping(mdp_config["coins"]), seed=seed)
    if kind == "gym":
        from .gym import GymMDP

        gym = mdp_config["gym"]
        return GymMDP(gym["id"], gym.get("kwargs"), preprocess=gym.get("preprocess"),
                      frame_stack=gym.get("frame_stack") or 1, observe=gym.get("observe"), atari=gym.get("atari"),
                      seed=seed)
    if kind in BY_NAME:
        return load_plugin(BY_NAME[kind], "mdp.create").from_config(mdp_config, seed=seed)
    if kind == "pettingzoo":
        from .pettingzoo import pettingzoo_mdp

        settings = mdp_config["pettingzoo"]
        return pettingzoo_mdp(settings["module"], settings.get("kwargs"), settings.get("rule", "random"), seed=seed)
    raise ValueError(f"mdp.create={kind!r}: expected one of {KINDS}")


def wrap_controller(controller: Controller, mdp_config: Mapping[str, Any]) -> Statistics:
    """Frame skip (if ``mdp.frame_skip`` > 1), the idle bonus (if ``mdp.idle_reward``), under episode statistics
    (idle action ``mdp.idle_action``)."""
    skip = mdp_config.get("frame_skip") or 1
    if skip > 1:
        controller = FrameSkip(controller, skip)
    idle_action, bonus = mdp_config.get("idle_action"), float(mdp_config.get("idle_reward") or 0.0)
    if bonus and idle_action is not None:
        controller = IdleBonus(controller, idle_action, bonus)
    return Statistics(controller, idle_action)
