"""What an episode gave a player, as a type: the actors build it from the controller's ``get_result()`` (the
original Lamarckian's dict contract) plus who the opponents were, and send it as a plain dict (nothing received is
unpickled)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

RULE, SELF, POOL, NONE = "rule", "self", "pool", "none"
OPPONENT_KINDS = (RULE, SELF, POOL, NONE)


@dataclasses.dataclass
class EpisodeResult:
    """One player's episode.

    Attributes:
        fitness: the MDP's score of the episode (return, score difference...).
        win: 1 win, 0.5 draw, 0 loss; None when the MDP is not a game.
        rank: the place among the players (1 = best, ties share), for N-player games; None otherwise.
        objectives: named means for NSGA-II and the records (``return``, ``length``, ``lazy``...).
        opponent: who played the other seats: ``rule`` (the MDP's script), ``pool`` (snapshots), ``self`` (the
            newest snapshot, in evaluation) or ``none`` (one player).
        snapshots: the pool snapshot id of each other seat (``opponent == "pool"``).
        scores: the player's score (1, 0.5, 0) against each other seat, in ``snapshots`` order.
        capped: the episode was cut at ``evaluator.max_steps`` decisions.
        lost: the environment lost the episode (a game server's fault): it has no result of its own.
    """

    fitness: float
    win: float | None = None
    rank: float | None = None
    objectives: dict[str, float] = dataclasses.field(default_factory=dict)
    opponent: str = NONE
    snapshots: list[int] = dataclasses.field(default_factory=list)
    scores: list[float] = dataclasses.field(default_factory=list)
    capped: bool = False
    lost: bool = False

    def __post_init__(self) -> None:
        if self.opponent not in OPPONENT_KINDS:
            raise ValueError(f"opponent={self.opponent!r}: expected one of {OPPONENT_KINDS}")

    @classmethod
    def of(cls, result: Mapping[str, Any], **fields: Any) -> "EpisodeResult":
        """From a controller's ``get_result()`` (``fitness``, ``win``, ``objectives``, optional ``rank``)."""
        win = result.get("win")
        rank = result.get("rank")
        return cls(fitness=float(result["fitness"]), win=None if win is None else float(win),
                   rank=None if rank is None else float(rank),
                   objectives={str(k): float(v) for k, v in (result.get("objectives") or {}).items()}, **fields)

    def to_wire(self) -> dict[str, Any]:
        """Plain containers for the RPC layer."""
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> "EpisodeResult":
        """Undo :meth:`to_wire`; ValueError on anything else (a peer's malformed report)."""
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, Mapping) or "fitness" not in data or not set(data) <= names:
            raise ValueError(f"not an episode result: {data!r:.200}")
        return cls(**{**data, "snapshots": [int(i) for i in data.get("snapshots", [])],
                      "scores": [float(s) for s in data.get("scores", [])]})


def pairwise_scores(own: EpisodeResult, others: Sequence[EpisodeResult]) -> list[float]:
    """A player's score (1, 0.5, 0) against each other player of one game: by ``rank`` (lower is better) when
    every player has one, else by ``fitness`` (higher is better)."""
    ranked = own.rank is not None and all(other.rank is not None for other in others)

    def key(result: EpisodeResult) -> float:
        if ranked:
            return -float(result.rank or 0)       # every rank is set when ranked
        return float(result.fitness or 0.0)

    return [1.0 if key(own) > key(other) else 0.5 if key(own) == key(other) else 0.0 for other in others]
