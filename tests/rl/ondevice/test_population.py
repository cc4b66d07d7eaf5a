"""A vectorized population on Ant Sumo (CPU MuJoCo): P members on their own environments, one forward, one update,
each with its own settings and opponent pool; with a league the members play each other and are rated."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lamarckian.config import load
from lamarckian.ec.space import with_values
from lamarckian.model import to_blob
from lamarckian.rl.loop import TrainingLoop
from lamarckian.rl.ondevice.league import LeagueSettings
from lamarckian.rl.ondevice.population import OnDevicePopulationLearner

SMALL = ["mdp.vec.num_envs.cpu=8", "mdp.vec.horizon=8", "evaluator.progress=false", "evaluator.episodes=2",
         "evaluator.interval=0", "model.hidden=[32]", "mdp.vec.initial_share=0.5"]
LRS = [1e-4, 1e-3, 3e-3, 1e-2]


def population_with(config, league: LeagueSettings | None = None, **per_member) -> OnDevicePopulationLearner:
    """A population of 4 whose member m gets ``key=values[m]`` for each keyword (dots as ``__``)."""
    population = OnDevicePopulationLearner(config, 4, league)
    for member, model in enumerate(population.members):
        values = {key.replace("__", "."): values[member] for key, values in per_member.items()}
        population.load_member(member, with_values(config, values), model.state_dict(), None)
    return population


def learned(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters only the optimizer moves (the value head also moves with the value statistics: PopArt)."""
    return [p for name, p in model.named_parameters() if not name.startswith("value_head.")]


def test_members_train_on_their_own_environments_and_resume(tmp_path):
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], [*SMALL, "train.lr_schedule=constant"])
    population = population_with(config, LeagueSettings(share=0.5, refresh=2), train__lr=LRS)
    before = [[p.detach().clone() for p in learned(m)] for m in population.members]
    summary = TrainingLoop(population, tmp_path).run(stop=lambda trainer: trainer.iteration >= 3)
    assert population.cost == 3 * 8 * 8
    assert summary["episodes"] == 8
    moved = [max(float((a - b).abs().max().detach()) for a, b in zip(old, learned(m)))
             for old, m in zip(before, population.members)]
    assert all(step > 0 for step in moved)
    assert moved[3] > moved[0]      # a larger learning rate moves further
    assert population.opponents.shared.count == 4 + 1            # the members' league snapshots and the initial policy
    assert population.opponents.pool_stack.count == 4           # each member's pool (its initial snapshot)
    lanes = population.opponents.opponent.reshape(4, 2)
    assert (lanes[:, 0] == 8).all()                    # the first lane of each member plays the initial policy
    resumed = OnDevicePopulationLearner(config, 4, LeagueSettings(share=0.5, refresh=2))
    assert TrainingLoop(resumed, tmp_path).resume() is not None
    assert resumed.iteration == 3
    for a, b in zip(resumed.members, population.members):
        assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert torch.equal(resumed.population.steps, population.population.steps)
    assert population.population.steps[0] > 0
    assert resumed.population.lrs.tolist() == pytest.approx(LRS)
    resumed.step()
    population.close()
    resumed.close()


def test_games_feed_the_pools_the_league_and_the_ratings():
    """Counts of one rollout go to the member's own pool, the league record (PFSP then prefers the member it loses
    to) and the round's tally (the member that beats everyone rates highest)."""
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], SMALL)
    population = OnDevicePopulationLearner(config, 4, LeagueSettings(share=0.5, refresh=10))
    keys = population.opponents.keys
    outcomes = np.zeros((4, len(keys), 3))
    for member in range(4):
        for other in range(4):
            if other != member:           # the lower member number wins every game between two members
                outcomes[member, keys.index(("member", other))] = (10, 0, 0) if member < other else (0, 0, 10)
        outcomes[member, keys.index(("pool", member, 0))] = (3, 1, 1)
        outcomes[member, -1] = (5, 0, 5)
    population.record(outcomes)
    snapshot = population.opponents.pools[2].snapshots[0]
    assert (snapshot.wins, snapshot.draws, snapshot.losses) == (3, 1, 1)
    ratings = population.opponents.ratings()
    assert list(np.argsort(-ratings[:4])) == [0, 1, 2, 3]
    assert population.opponents.tally.games[0, 1] == 20
    assert population.opponents.tally.scores[0, 1] == 20   # each played both ways
    weights = population.opponents._probabilities()
    member_three = [weights[3, keys.index(("member", n))] for n in range(3)]
    assert weights[3].sum() == pytest.approx(1.0)
    assert weights[3, keys.index(("member", 3))] == 0.0
    assert weights[0, keys.index(("member", 1))] < weights[3, keys.index(("member", 0))]
    assert sum(member_three) == pytest.approx(0.5)        # league share; the rest is member 3's own pool
    population.opponents.reset_tally()
    assert population.opponents.tally.games.sum() == 0
    population.close()


def test_the_gpu_way_of_acting_for_the_opponents_gives_the_same_actions():
    """A GPU parks every row in both stacked sets at fixed widths (no host sync); the CPU gives each set its rows:
    with mean actions both give every opponent the same action."""
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], SMALL)
    population = OnDevicePopulationLearner(config, 4, LeagueSettings(share=0.5, refresh=1))
    for member, pool in enumerate(population.opponents.pools):
        for extra in range(member):              # pools of different sizes, of weights unlike the initial ones
            with torch.no_grad():
                population.members[member].policy_head.bias.add_(0.1 * (extra + 1))
            pool.add(to_blob(population.members[member]), iteration=extra + 1)
    population.opponents.league_blobs = [to_blob(model) for model in population.members]
    population.opponents.stack()
    # environments 2m, 2m + 1 are member m's; opponents 0-3 the league, 4 | 5 6 | 7 8 9 | 10-13 the pools, 14 initial
    population.opponents.opponent = torch.tensor([0, 1, 6, 3, 7, 9, 13, 14], dtype=torch.int64)
    population.opponents.opponent_mean = torch.ones(8, dtype=torch.bool)
    observations = torch.randn(8, population.task.num_obs)
    exact = population.opponents.act(observations)
    population.opponents.fixed_width = True
    assert torch.allclose(population.opponents.act(observations), exact, atol=1e-6)
    assert len({tuple(row.tolist()) for row in exact}) > 4
    population.close()


def test_members_may_weigh_rewards_their_own_way():
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], SMALL)
    population = population_with(config, mdp__vec__reward__push=[0.0, 100.0, 200.0, 300.0])
    weights = population.task.settings.reward.push
    assert weights.shape == (8, 1)
    assert weights[:, 0].tolist() == [0.0, 0.0, 100.0, 100.0, 200.0, 200.0, 300.0, 300.0]
    population.step()
    population.close()


def test_a_population_that_does_not_divide_the_environments_is_refused():
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], SMALL)
    with pytest.raises(ValueError, match="mdp.vec.num_envs=8 must be a positive multiple of the population size 3"):
        OnDevicePopulationLearner(config, 3)


def test_members_of_other_learners_join_the_league_and_the_ratings():
    """A population split over learners: the other learners' members are league opponents (PFSP on the record
    against each) and entrants of the ratings, between the members and the initial policy."""
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], SMALL)
    population = OnDevicePopulationLearner(config, 4, LeagueSettings(share=0.5, refresh=10))
    stranger = [to_blob(population.members[0]) + 0.01, to_blob(population.members[1]) - 0.01]
    population.opponents.set_external({7: stranger[0], 9: stranger[1]})
    population.opponents.reset_tally()
    keys = population.opponents.keys
    assert population.opponents.shared.count == 4 + 2 + 1
    assert ("external", 9) in keys
    outcomes = np.zeros((4, len(keys), 3))
    outcomes[:, keys.index(("external", 7))] = (0, 0, 6)          # everyone loses to individual 7
    outcomes[:, keys.index(("external", 9))] = (6, 0, 0)          # and beats individual 9
    population.record(outcomes)
    ratings = population.opponents.ratings()
    assert len(ratings) == 4 + 2 + 1
    assert ratings[4] == ratings.max()
    assert ratings[5] == ratings.min()
    weights = population.opponents._probabilities()
    assert (weights[:, keys.index(("external", 7))] > 10 * weights[:, keys.index(("external", 9))]).all()
    population.opponents.set_external({7: stranger[0]})                       # 9 left: its record goes, 7's stays
    assert set(population.opponents.records) == {("external", 7)}
    assert population.opponents.shared.count == 4 + 1 + 1
    population.close()
