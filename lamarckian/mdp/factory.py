"""Build the configured MDP (``mdp.create``) and wrap its controllers (``mdp.frame_skip``, statistics)."""

from __future__ import annotations

import copy
from typing import Any, Mapping

from ..config.loader import merge
from ..registry import ENVIRONMENTS, VECTORIZED
from .base import MDP, Controller
from .images import resized
from .wrap import FrameSkip, IdleBonus, Statistics


def evaluation_config(mdp_config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``mdp`` section of evaluation environments: ``mdp.evaluation``'s keys merged over the rest (Atari: full
    games, the game's own score, ``mdp/gym/atari.yml``)."""
    rest = copy.deepcopy({key: value for key, value in mdp_config.items() if key != "evaluation"})
    return merge(rest, dict(mdp_config.get("evaluation") or {}))


def create_mdp(mdp_config: Mapping[str, Any], seed: int | None = None, *, evaluation: bool = False) -> MDP:
    """The MDP named by ``mdp.create`` (:data:`~lamarckian.registry.ENVIRONMENTS`: ``pong``, ``coins``, ``gym``,
    ``pettingzoo``, ``game``: one served by a game server (``mdp.game``, docs/games.md), ``service``: agents of games
    that call the policy (``mdp.service``), or ``module:ClassName``: your own :class:`MDP` subclass, built by its
    :meth:`~.base.MDP.from_mdp`, by default ``ClassName(**mdp.kwargs, seed=seed)``), seeded with ``seed``; its
    large frames resized (``mdp.resize``: :mod:`.images`); stepped in real time when ``mdp.realtime.period`` is set.
    ``evaluation``: an environment for deterministic evaluation, with ``mdp.evaluation``'s changes
    (:func:`evaluation_config`)."""
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
    if kind == VECTORIZED:
        raise ValueError(f"mdp.create={VECTORIZED}: a vectorized task (mdp.vec) trains in one process, not as an MDP "
                         f"of the actor fleet")
    cls: type[MDP] = ENVIRONMENTS.get_class(kind, MDP)
    mdp = cls.from_mdp(mdp_config, seed=seed)
    weights = (mdp_config.get("reward") or {}).get("weights")
    if weights is not None and not mdp.reward_components:
        raise ValueError(f"mdp.reward.weights={list(weights)!r}: the reward of mdp.create={kind} is a number, not a "
                         "vector (remove the key)")
    return mdp


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
