"""A3C (actors send gradients) and IMPALA (V-trace policy gradient on whatever arrived): the actor-side gradient
improves a bandit, a NaN gradient is counted and never applied, A3C learns CartPole, IMPALA trains CartPole with its
policy lag reported."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from lamarckian.config import load
from lamarckian.model import ActorCritic, ModelSettings
from lamarckian.rl.algorithms.a3c import segment_gradient
from lamarckian.rl.algorithms.ppo import PPOSettings
from lamarckian.rl.fleet.a3c_learner import A3CLearner
from lamarckian.rl.fleet.factory import fleet_learner
from lamarckian.rl.loop import TrainingLoop

from .test_ppo import bandit_segment


def test_segment_gradients_improve_a_bandit():
    """Action 1 pays 1, action 0 pays 0: descending the actors' gradients makes action 1 likely."""
    config = load(["rl/a3c.yml"])
    space = gymnasium.spaces.Box(-1, 1, (1,), np.float32)
    model = ActorCritic(space, gymnasium.spaces.Discrete(2),
                        ModelSettings.defaults(hidden=(8,), normalize_observation=False, normalize_value=False))
    parameters = list(model.parameters())
    for _ in range(60):
        gradient, _ = segment_gradient(model, bandit_segment(model, 8, 4), PPOSettings.from_config(config))
        assert gradient.shape == (sum(p.numel() for p in parameters),)
        assert gradient.dtype == np.float32
        with torch.no_grad():
            offset = 0
            for parameter in parameters:
                parameter -= 0.5 * torch.from_numpy(gradient[offset:offset + parameter.numel()]).view_as(parameter)
                offset += parameter.numel()
    assert model(torch.zeros(1, 1))[0].probs[0, 1].item() > 0.9


def test_nan_gradients_are_counted_and_never_applied(tmp_path):
    config = load(["rl/a3c.yml"], ["mdp.create=tests.rl.algorithms.offpolicy_tasks:BrokenWalk", "mdp.kwargs={every: 2}",
                                   "ray.local_mode=true", "sample.actors=1", "sample.envs=2", "sample.truncation=8",
                                   "model.hidden=[16]", "evaluator.progress=false", "evaluator.episodes=2",
                                   f"root={tmp_path}"])
    learner = fleet_learner(config)
    assert isinstance(learner, A3CLearner)
    try:
        TrainingLoop(learner, None).run(stop=lambda trainer: trainer.iteration >= 12)
        assert learner.malformed > 0
        assert all(torch.isfinite(p).all() for p in learner.model.parameters())
    finally:
        learner.close()


@pytest.mark.slow
def test_a3c_learns_cartpole(ray_local, tmp_path):
    config = load(["mdp/gym.yml", "mdp/gym/cartpole.yml", "rl/a3c.yml"], [
        "evaluator.progress=false", "evaluator.interval=5", "evaluator.episodes=5", f"root={tmp_path}"])
    learner = fleet_learner(config)
    try:
        loop = TrainingLoop(learner, None)
        loop.run(stop=lambda trainer: trainer.evaluator.latest.get("fitness", 0) >= 475 or trainer.elapsed > 600)
        assert loop.decided["fitness"] >= 475, loop.decided      # the evaluation the stop rule acted on
    finally:
        learner.close()


def test_impala_trains_and_reports_the_policy_lag(tmp_path):
    config = load(["mdp/gym.yml", "rl/impala.yml"], [
        "ray.local_mode=true", "sample.actors=2", "sample.envs=4", "sample.truncation=16", "train.batch=128",
        "model.hidden=[16]", "evaluator.progress=false", "evaluator.episodes=2", f"root={tmp_path}"])
    learner = fleet_learner(config)
    try:
        assert learner.update_rule.settings.objective == "vtrace"
        assert learner.update_rule.settings.epochs == 1
        with learner.running():
            stats = [learner.step() for _ in range(10)]
        assert all(np.isfinite(s["loss/policy"]) and s["staleness_max"] >= s["staleness"] >= 0 for s in stats)
        assert max(s["staleness_max"] for s in stats) >= 1     # actors sampled on while the learner trained
    finally:
        learner.close()
