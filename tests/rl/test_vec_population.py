"""A vectorized population on Ant Sumo (CPU MuJoCo): P members on their own environments, one forward, one update."""

from __future__ import annotations

import pytest
import torch

from lamarckian.config import load
from lamarckian.rl.loop import TrainingLoop
from lamarckian.rl.vec_population import VecPopulationLearner

SMALL = ["mdp.vec.num_envs.cpu=8", "mdp.vec.horizon=8", "evaluator.progress=false", "evaluator.episodes=2",
         "evaluator.interval=0", "model.hidden=[32]"]


def test_members_train_on_their_own_environments_and_resume(tmp_path):
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], SMALL)
    population = VecPopulationLearner(config, lrs=[1e-4, 1e-3, 3e-3, 1e-2], snapshot_every=2)
    before = [[p.detach().clone() for p in m.parameters()] for m in population.members]
    summary = TrainingLoop(population, tmp_path).run(stop=lambda trainer: trainer.iteration >= 3)
    assert population.cost == 3 * 8 * 8 and summary["episodes"] == 8
    moved = [max(float((a - b).abs().max().detach()) for a, b in zip(old, m.parameters()))
             for old, m in zip(before, population.members)]
    assert all(step > 0 for step in moved) and moved[3] > moved[0]      # a larger learning rate moves further
    assert population.league.count == 5                                   # the initial policy and 4 members
    resumed = VecPopulationLearner(config, lrs=[1e-4, 1e-3, 3e-3, 1e-2], snapshot_every=2)
    assert TrainingLoop(resumed, tmp_path).resume() is not None and resumed.iteration == 3
    for a, b in zip(resumed.members, population.members):
        assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert resumed.population.steps == population.population.steps > 0
    resumed.step()
    population.close()
    resumed.close()


def test_a_population_that_does_not_divide_the_environments_is_refused():
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], SMALL)
    with pytest.raises(ValueError, match="mdp.vec.num_envs=8 must be a positive multiple of the population size 3"):
        VecPopulationLearner(config, lrs=[1e-3] * 3)
