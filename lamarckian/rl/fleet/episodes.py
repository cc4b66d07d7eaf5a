"""An actor's whole episodes apart from sampling: deterministic evaluation against the rule or the newest snapshot,
and matches between the members of a population.

They run on environments and an event loop of their own (kept between calls: a game server's connections live in
them), so the sampling environments keep their episodes; sampling pauses meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping, Sequence

import numpy as np

from ...mdp import MDP, create_mdp
from ...model import ActorCritic
from ...model.stacked import StackedPolicies
from ...rating.results import NONE, RULE, SELF, EpisodeResult
from ..acting import BatchPolicy, PopulationPolicy, acting_policy
from .inference import BatchedInference
from .seat_play import cancel_tasks, play_seat, wrap_controllers
from .seating import Seating

EVALUATION_ENVS = 32     # evaluation environments an actor may make (more than sample.envs: one round of games)

#: one episode to play: its seats, and per seat the acting policy and the tag of its requests
Job = tuple[list[int], Sequence[tuple[BatchPolicy, int]]]


class EpisodeRunner:
    """Plays batches of whole episodes, every seat of every running game in one batched forward per round.

    Args:
        mdp_config: the ``mdp`` section its environments are made from.
        envs: ``sample.envs`` (it makes up to the larger of this and :data:`EVALUATION_ENVS` environments).
        seed: the seed of its first environment (the next ones count up).
        max_steps: ``evaluator.max_steps``, decisions per episode (0: no cap).
        members: the actor's network per policy ("" with one policy for every seat).
        seating: the actor's seats, their policies and pools.
        central: ``model.central_value`` (controllers carry the global state).
        hitch: ``mdp.hitch`` (an environment whose call takes longer steps on a thread of its own from then on).
    """

    def __init__(self, mdp_config: Mapping[str, Any], envs: int, seed: int, max_steps: int,
                 members: Mapping[str, ActorCritic], seating: Seating, central: bool, hitch: float | None = None
                 ) -> None:
        self.mdp_config, self.envs, self.seed, self.max_steps, self.hitch = mdp_config, envs, seed, max_steps, hitch
        self.members, self.seating, self.central = members, seating, central
        self.mdps: list[MDP] = []
        self.loop = asyncio.new_event_loop()
        self.population: StackedPolicies | None = None

    def run(self, jobs: Sequence[Job]) -> list[list[dict[str, Any]]]:
        """Play one episode per job on the evaluation environments (as many as jobs, up to the larger of
        ``sample.envs`` and :data:`EVALUATION_ENVS`), all at once; each job's per-seat results (wire form of
        :class:`EpisodeResult`)."""
        while len(self.mdps) < min(len(jobs), max(self.envs, EVALUATION_ENVS)):
            self.mdps.append(create_mdp(self.mdp_config, seed=self.seed + len(self.mdps), evaluation=True))
        inference = BatchedInference()
        queue = list(enumerate(jobs))
        results: list[list[dict[str, Any]]] = [[] for _ in jobs]
        seat_policy = self.seating.seat_policy

        async def run(mdp: MDP) -> None:
            while queue:
                number, (seats, players) = queue.pop(0)
                episode = mdp.reset(*seats)
                controllers = wrap_controllers(episode, mdp, self.mdp_config, self.central)
                ticks = [asyncio.ensure_future(tick) for tick in episode.ticks]
                models = [self.members[seat_policy[seat]] for seat in seats]     # the seat's architecture
                capped = await asyncio.gather(*(play_seat(c, policy, model, inference, tag, self.max_steps, self.hitch)
                                                for c, (policy, tag), model in zip(controllers, players, models)))
                if any(capped):                          # the environment would wait for actions forever
                    for tick in ticks:
                        tick.cancel()
                    await asyncio.gather(*ticks, return_exceptions=True)
                else:
                    await asyncio.gather(*ticks)
                lost = any(c.get_result().get("lost") for c in controllers)     # counted by the MDP
                results[number] = [EpisodeResult.of(c.get_result(), capped=any(capped) and not lost,
                                                    lost=lost).to_wire()
                                   for c in controllers]

        async def run_all() -> None:
            await asyncio.gather(*(run(mdp) for mdp in self.mdps))

        self.loop.run_until_complete(run_all())
        return results

    def evaluate(self, episodes: int, opponent: str = RULE) -> list[dict[str, Any]]:
        """Play ``episodes`` episodes with the deterministic policy against ``opponent`` (``rule``, or ``self``:
        the newest pool snapshot), alternating seats; the learner's results. With ``rl.shared_seats`` or
        ``rl.policies`` every seat plays its policy (``opponent`` does not apply) and the results are seat 0's."""
        if opponent not in (RULE, SELF):
            raise ValueError(f"evaluator.opponent={opponent!r}: expected {RULE!r} or {SELF!r}")
        seating = self.seating
        if seating.shared or seating.roles is not None:              # a memory per seat and game
            return self._evaluate_every_seat(episodes)
        learner = acting_policy(self.members[""], deterministic=True)
        newest: BatchPolicy | None = None
        if opponent == SELF and seating.seats > 1:
            if not seating.pools[""].ids:
                raise ValueError("evaluator.opponent=self needs an opponent pool")
            newest = seating.pools[""].newest()
        jobs: list[Job] = []
        for number in range(episodes):
            seat = number % seating.seats
            others = [s for s in range(seating.seats) if s != seat] if newest is not None else []
            opponents = [(newest, 0)] * len(others) if newest is not None else []     # a memory per game
            jobs.append(([seat, *others], [(learner, number), *opponents]))
        results = [per_seat[0] for per_seat in self.run(jobs)]
        kind = opponent if seating.seats > 1 else NONE
        return [{**result, "opponent": kind} for result in results]

    def _evaluate_every_seat(self, episodes: int) -> list[dict[str, Any]]:
        """``episodes`` games in which every seat plays its policy deterministically; seat 0's results, with
        ``rl.policies`` also each policy's mean over its seats as the objective ``fitness_<policy>``."""
        policies = {name: acting_policy(member, deterministic=True) for name, member in self.members.items()}
        seating = self.seating
        team = seating.seats
        jobs: list[Job] = [(list(range(team)), [(policies[seating.seat_policy[i]], number * team + i)
                                                for i in range(team)])
                           for number in range(episodes)]
        results = []
        roles = seating.roles
        for per_seat in self.run(jobs):
            result = {**per_seat[0], "opponent": NONE}
            if roles is not None:
                result["objectives"] = {**result["objectives"], **{
                    f"fitness_{name}": float(np.mean([per_seat[seat]["fitness"] for seat in roles.seats_of(name)]))
                    for name in roles.names}}
            results.append(result)
        return results

    def set_population(self, blobs: Sequence[np.ndarray]) -> int:
        """Policies for :meth:`play_matches` (one architecture, stacked for one batched forward)."""
        if self.seating.roles is not None:
            raise ValueError("rl.policies: matches of a population play one policy in every seat; this run trains a "
                             "policy per role")
        self.population = StackedPolicies(self.members[""], list(blobs))
        return self.population.count

    def play_matches(self, matches: Sequence[Sequence[int]]) -> list[list[dict[str, Any]]]:
        """Play one game per match: ``match[seat]`` is the population index playing that seat (deterministic);
        every seat of every running game acts in one stacked forward. The per-seat results of each match."""
        if self.population is None:
            raise RuntimeError("call set_population first")
        policy = PopulationPolicy(self.population, deterministic=True)
        jobs: list[Job] = [(list(range(len(match))), [(policy, int(index)) for index in match]) for match in matches]
        return self.run(jobs)

    def set_mdp_config(self, mdp_config: Mapping[str, Any]) -> None:
        """Make later environments from ``mdp_config``; the current ones are closed."""
        for mdp in self.mdps:
            mdp.close()
        self.mdp_config, self.mdps = mdp_config, []

    def close(self) -> None:
        """Stop what runs on its loop and close its environments."""
        cancel_tasks(self.loop)
        self.loop.close()
        for mdp in self.mdps:
            mdp.close()
