"""PettingZoo environments: parallel ones as simultaneous-move MDPs (one seat per possible agent), AEC (turn-based)
ones through :mod:`.turns`."""

from __future__ import annotations

import importlib
from typing import Any, Mapping

import gymnasium
import numpy as np

from ..extras import EXTRA_OF_MODULE, EXTRA_OF_PETTINGZOO_FAMILY, install_hint
from .base import PlayerSpec
from .simultaneous import SimultaneousMDP
from .turns import TurnMDP

ALLOWED_PREFIXES = ("pettingzoo.", "mpe2.")   # config strings may import these packages' modules only


def game_module(module: str) -> Any:
    """The imported ``mdp.pettingzoo.module`` (only under :data:`ALLOWED_PREFIXES`); ValueError naming it."""
    if not module.startswith(ALLOWED_PREFIXES):
        raise ValueError(f"mdp.pettingzoo.module={module!r}: must be a module under {' or '.join(ALLOWED_PREFIXES)}")
    try:
        return importlib.import_module(module)
    except ImportError as error:
        name, top = error.name or "", module.split(".")[0]
        if not name or (name != top and (module == name or module.startswith(f"{name}."))):
            raise ValueError(f"mdp.pettingzoo.module={module!r}: {error}") from None   # no such game
        missing = name.split(".")[0]
        family = module.split(".")[1] if module.startswith("pettingzoo.") and module.count(".") > 1 else ""
        extra = EXTRA_OF_MODULE.get(top) if missing == top else \
            EXTRA_OF_PETTINGZOO_FAMILY.get(family) or EXTRA_OF_MODULE.get(missing)
        raise ValueError(f"mdp.pettingzoo.module={module!r} needs the Python package {missing!r}, which is not "
                         f"installed: {install_hint(extra, missing)}") from None


def pettingzoo_mdp(module: str, kwargs: dict[str, Any] | None = None, rule: str = "random",
                   seed: int | None = None) -> SimultaneousMDP | TurnMDP:
    """The game of ``mdp.pettingzoo.module``: its ``parallel_env`` as a :class:`ParallelMDP` where it has one, else
    its AEC ``env`` as a turn-based :class:`~.turns.TurnMDP` (seats nobody controls follow ``rule``)."""
    imported = game_module(module)
    if hasattr(imported, "parallel_env"):
        return ParallelMDP(module, kwargs, seed)
    if not hasattr(imported, "env"):
        raise ValueError(f"mdp.pettingzoo.module={module!r} has neither parallel_env() nor env()")
    return TurnMDP(imported.env(**(kwargs or {})), rule, seed)


class ParallelMDP(SimultaneousMDP):
    """A PettingZoo ``parallel_env``; seat i is ``possible_agents[i]``.

    An agent that leaves early keeps its controller until the episode ends; its actions are ignored and
    its reward is 0. Every seat must be controlled (PettingZoo games have no rule opponent here).
    """

    def __init__(self, module: str, kwargs: dict[str, Any] | None = None, seed: int | None = None) -> None:
        try:
            self.env = game_module(module).parallel_env(**(kwargs or {}))
        except AttributeError as error:
            raise ValueError(f"mdp.pettingzoo.module={module!r}: {error}") from None
        self.agents = list(self.env.possible_agents)
        self.specs = [PlayerSpec(self.env.observation_space(a), self.env.action_space(a)) for a in self.agents]
        self.seed = seed
        self.observations: dict[str, Any] = {}
        self.totals = [0.0] * len(self.agents)

    @classmethod
    def from_mdp(cls, mdp: Mapping[str, Any], seed: int | None = None) -> SimultaneousMDP | TurnMDP:
        """``mdp.pettingzoo``'s game (``module``, ``kwargs``, ``rule``): this class where the game has a
        ``parallel_env``, else a turn-based :class:`~.turns.TurnMDP` (:func:`pettingzoo_mdp`)."""
        settings = mdp["pettingzoo"]
        return pettingzoo_mdp(settings["module"], settings.get("kwargs"), settings.get("rule", "random"), seed=seed)

    def describe(self) -> list[PlayerSpec]:
        return self.specs

    def seat_names(self) -> list[str]:
        return list(self.agents)

    def start(self, seed: int | None) -> None:
        if seed is None and self.seed is not None:
            seed, self.seed = self.seed, None
        self.observations, _ = self.env.reset(seed=seed)
        self.totals = [0.0] * len(self.agents)
        self.over = self.timed_out = False

    def observe(self, player: int) -> Any:
        agent = self.agents[player]
        if agent in self.observations:
            return self.observations[agent]
        return np.zeros(self.specs[player].observation.shape, self.specs[player].observation.dtype)

    def step(self, actions: list[Any]) -> list[float]:
        live = set(self.env.agents)
        chosen = {agent: action for agent, action in zip(self.agents, actions) if agent in live}
        self.observations, rewards, terminations, truncations, _ = self.env.step(chosen)
        result = [float(rewards.get(agent, 0.0)) for agent in self.agents]
        self.totals = [t + r for t, r in zip(self.totals, result)]
        finished = {a for a in live if terminations.get(a) or truncations.get(a)}
        self.over = not self.env.agents or finished >= live
        self.timed_out = self.over and any(truncations.values()) and not any(terminations.values())
        return result

    def global_state_space(self) -> gymnasium.Space:
        """The game's own ``state_space`` where it has one (MPE, SISL), else every seat's observation."""
        own = getattr(self.env, "state_space", None)
        return own if own is not None else super().global_state_space()

    def global_state(self) -> Any:
        if getattr(self.env, "state_space", None) is not None:
            return np.asarray(self.env.state(), np.float32)
        return super().global_state()

    def result(self, player: int) -> dict[str, Any]:
        order = sorted(self.totals, reverse=True)
        rank = order.index(self.totals[player])
        return {"fitness": self.totals[player], "win": None, "objectives": {"rank": float(rank)}}

    def close(self) -> None:
        self.guard.close()
        self.env.close()
