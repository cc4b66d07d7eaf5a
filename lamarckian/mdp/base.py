"""The asyncio MDP contract (the original Lamarckian's shape).

An :class:`MDP` describes its players, and ``mdp.reset(*players)`` starts an episode: it returns the
controllers of the requested players and the ``ticks``, coroutines that advance the environment (players not
requested are driven by the MDP's own rule, if it has one). A player's loop is::

    while await controller.ready():       # turn-based games: waits for the player's turn; False once done
        action = await policy(controller.get_state())
        await controller(action)          # returns when the environment (and the others' moves) advanced
        reward = controller.get_reward()
    result = controller.get_result()      # {"fitness": ..., "win": ..., "objectives": {...}}
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
from typing import Any, Coroutine, Mapping, NamedTuple

import gymnasium
import numpy as np


@dataclasses.dataclass(frozen=True)
class PlayerSpec:
    """What one player sees and does: gymnasium spaces for its observation and its action."""

    observation: gymnasium.Space
    action: gymnasium.Space


class Controller(abc.ABC):
    """One player's handle on a running episode."""

    @abc.abstractmethod
    def get_state(self) -> Any:
        """The player's current observation (an array, or a dict of arrays for dict spaces)."""

    @abc.abstractmethod
    async def __call__(self, action: Any) -> None:
        """Submit an action; returns once the environment has advanced."""

    async def ready(self) -> bool:
        """Wait until this player is to act (turn-based games; at once in simultaneous ones) and say whether the
        episode goes on for it (not :attr:`done`)."""
        return not self.done

    @abc.abstractmethod
    def get_reward(self) -> float:
        """Reward of the last step for this player."""

    @property
    @abc.abstractmethod
    def done(self) -> bool:
        """The episode is over for this player (terminated or truncated)."""

    @property
    def truncated(self) -> bool:
        """The episode ended by a time limit, not by reaching a terminal state (bootstrap from it)."""
        return False

    @abc.abstractmethod
    def get_result(self) -> dict[str, Any]:
        """At the end: ``fitness`` (float), ``win`` (1, 0.5 draw, 0; None when not a game), ``objectives``."""

    def hitched(self, seconds: float) -> None:
        """The actor saw this seat's last call take ``seconds``, more than ``mdp.hitch``: an environment whose calls
        block (a gymnasium or PettingZoo step) moves them to a thread of its own (:mod:`.hitch`), so the actor's other
        environments act while it waits. Default: nothing (an environment that awaits its answers never blocks)."""

    def location(self) -> str:
        """Where this seat's environment runs, for a console line about what waits on it (a game server's address,
        a gymnasium id); default: the controller's class."""
        return type(self).__name__


class SeatController(Controller):
    """A seat of a game MDP that keeps ``over``, ``timed_out`` and ``result(player)``: what a controller only reads
    from the game (subclasses add acting and rewards)."""

    def __init__(self, mdp: Any, player: int) -> None:
        self.mdp, self.player = mdp, player

    @property
    def done(self) -> bool:
        return self.mdp.over

    @property
    def truncated(self) -> bool:
        return self.mdp.timed_out

    def get_result(self) -> dict[str, Any]:
        return self.mdp.result(self.player)

    def hitched(self, seconds: float) -> None:
        self.mdp.hitched(seconds)

    def location(self) -> str:
        return f"{type(self.mdp).__name__} seat {self.player}"


class Episode(NamedTuple):
    """What ``MDP.reset`` returns: the requested players' controllers and the coroutines to run beside them."""

    controllers: list[Controller]
    ticks: list[Coroutine[Any, Any, None]]


class MDP(abc.ABC):
    """An environment with ``len(mdp)`` players. A subclass is an environment kind: ``mdp.create`` names it
    (:data:`lamarckian.registry.ENVIRONMENTS`: a built-in name, or your own ``module:ClassName``), and
    :meth:`from_mdp` builds it."""

    #: entries of a vector reward, each an objective of the results (0: the reward is a number)
    reward_components: int = 0

    @classmethod
    def from_mdp(cls, mdp: Mapping[str, Any], seed: int | None = None) -> MDP:
        """The environment the run's ``mdp`` section asks for: by default ``cls(**mdp.kwargs, seed=seed)``; a kind
        with a sub-section of its own (``mdp.gym``, ``mdp.pong``...) reads it here."""
        user_class: Any = cls                   # a subclass of yours, whose constructor takes these
        return user_class(**dict(mdp.get("kwargs") or {}), seed=seed)

    @abc.abstractmethod
    def describe(self) -> list[PlayerSpec]:
        """One spec per player."""

    def __len__(self) -> int:
        return len(self.describe())

    def seat_names(self) -> list[str]:
        """A name per seat (``rl.policy_mapping`` maps names to policies): ``player_<i>`` unless the game names its
        seats (a PettingZoo game's agents: ``adversary_0``, ``agent_0``...)."""
        return [f"player_{seat}" for seat in range(len(self))]

    @abc.abstractmethod
    def reset(self, *players: int, seed: int | None = None) -> Episode:
        """Start an episode; controllers for ``players`` in that order; other players follow the rule."""

    def global_state_space(self) -> gymnasium.Space | None:
        """The space of :meth:`global_state`, the privileged state a central critic sees (``model.central_value``);
        None: this MDP has none."""
        return None

    def global_state(self) -> Any:
        """The whole game's state now (a central critic's input; the policies never see it)."""
        raise NotImplementedError(f"{type(self).__name__} has no global state")

    def counters(self) -> dict[str, float]:
        """Running totals of what the environment wants counted (a game server's lost episodes...); the actors send
        their changes with each segment and the learner records the sums (TensorBoard ``env/NAME``)."""
        return {}

    def render(self) -> np.ndarray:
        """An RGB frame ``(height, width, 3)`` uint8 of the current state."""
        raise NotImplementedError(f"{type(self).__name__} does not render")

    def hitched(self, seconds: float) -> None:
        """A seat's call took ``seconds``, more than ``mdp.hitch`` (:meth:`Controller.hitched`); default: nothing."""

    def close(self) -> None:
        """Release the environment's resources."""


class Lockstep:
    """Simultaneous moves: every requested player submits, then one environment step runs (for ticks).

    ``await lockstep.submit(player, action)`` blocks until the step that uses the action is done;
    the tick coroutine calls ``await lockstep.actions()`` to get ``{player: action}`` and
    ``lockstep.release()`` after stepping.
    """

    def __init__(self, players: tuple[int, ...]) -> None:
        self.players = players
        self.pending: dict[int, Any] = {}
        self._all_in = asyncio.Event()
        self._stepped: asyncio.Future | None = None

    async def submit(self, player: int, action: Any) -> None:
        if player in self.pending:
            raise RuntimeError(f"player {player} acted twice in one step")
        self.pending[player] = action
        if self._stepped is None:
            self._stepped = asyncio.get_running_loop().create_future()
        stepped = self._stepped
        if len(self.pending) == len(self.players):
            self._all_in.set()
        await stepped

    async def actions(self) -> dict[int, Any]:
        if self.players:
            await self._all_in.wait()
        return self.pending

    def release(self) -> None:
        self.pending = {}
        self._all_in.clear()
        stepped, self._stepped = self._stepped, None
        if stepped is not None:
            stepped.set_result(None)
