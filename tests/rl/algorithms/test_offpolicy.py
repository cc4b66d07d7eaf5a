"""The off-policy learners (issue 17): SAC's squashed log-densities, the DQN target, next observations in segments,
Ape-X exploration, and the replay learner on real actors: NaN segments dropped, a killed actor replaced with the
buffer kept, resume with and without the buffer, the original Lamarckian's DQN command, bad settings in one line."""

from __future__ import annotations

import copy
import os
import signal
import time

import gymnasium
import numpy as np
import pytest
import torch

from lamarckian.config import load
from lamarckian.model import ModelSettings
from lamarckian.model.offpolicy import QNetwork, SquashedGaussianPolicy
from lamarckian.rl.acting import EpsilonGreedy
from lamarckian.rl.algorithms.dqn import DQN
from lamarckian.rl.algorithms.dqn_settings import DQNSettings
from lamarckian.rl.algorithms.sac import SAC
from lamarckian.rl.algorithms.sac_settings import SACSettings
from lamarckian.rl.fleet.factory import fleet_learner
from lamarckian.rl.fleet.replay_learner import OffPolicyLearner
from lamarckian.rl.loop import TrainingLoop
from lamarckian.rl.segment import Lane
from lamarckian.train import main as train_main

SETTINGS = ModelSettings.defaults(hidden=(16,), activation="relu", normalize_observation=False)


def test_squashed_log_density_matches_a_monte_carlo_histogram():
    policy = SquashedGaussianPolicy(gymnasium.spaces.Box(-1.0, 1.0, (2,)), gymnasium.spaces.Box(-1.0, 1.0, (1,)),
                                    SETTINGS)
    with torch.no_grad():                       # u ~ N(0.7, 0.8) whatever the observation
        for head, bias in ((policy.mean_head, 0.7), (policy.log_std_head, float(np.log(0.8)))):
            head.weight.zero_()
            head.bias.fill_(bias)
        actions, log_probs = policy.sample(torch.zeros(400_000, 2), torch.Generator().manual_seed(0))
    actions, densities = actions.squeeze(1).numpy(), log_probs.exp().numpy()
    edges = np.linspace(-0.95, 0.95, 20)
    counts, _ = np.histogram(actions, edges)
    bins = np.digitize(actions, edges) - 1
    for index in range(len(edges) - 1):
        if counts[index] < 2000:
            continue
        histogram = counts[index] / (len(actions) * (edges[1] - edges[0]))
        predicted = densities[bins == index].mean()            # the claimed density in that bin
        assert predicted == pytest.approx(histogram, rel=0.05), index
    # without the tanh correction (the Gaussian's density of u = atanh(a)) the histogram disagrees
    unsquashed = np.arctanh(actions)
    gaussian = np.exp(-0.5 * ((unsquashed - 0.7) / 0.8) ** 2) / (0.8 * np.sqrt(2 * np.pi))
    index = int(np.argmax(counts))
    histogram = counts[index] / (len(actions) * (edges[1] - edges[0]))
    assert abs(gaussian[bins == index].mean() / histogram - 1) > 0.2


@pytest.mark.parametrize("critics, target_critics", [(2, 2), (10, 2)])      # twin critics, REDQ
def test_sac_fits_its_critics_and_moves_the_temperature_towards_the_target_entropy(critics, target_critics):
    torch.manual_seed(0)
    policy = SquashedGaussianPolicy(gymnasium.spaces.Box(-1.0, 1.0, (3,)), gymnasium.spaces.Box(-2.0, 2.0, (2,)),
                                    SETTINGS)
    sac = SAC(policy, SETTINGS, SACSettings.defaults(critics=critics, target_critics=target_critics, tau=0.05), 3e-3,
              None)
    batch = {"observations": torch.randn(64, 3), "actions": torch.rand(64, 2) * 2 - 1, "returns": torch.randn(64),
             "next_observations": torch.randn(64, 3), "bootstraps": torch.full((64,), 0.9)}
    losses = [float(sac.update(batch, torch.ones(64))[1]["loss"]) for _ in range(300)]
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20])
    entropy = float(sac.update(batch, torch.ones(64))[1]["entropy"])
    # the temperature falls while the policy's entropy is above the target (−2) and rises below it
    assert (float(sac.log_alpha.detach()) < 0) == (entropy > sac.target_entropy)
    state = sac.state_dict()
    copy_ = SAC(policy, SETTINGS, SACSettings.defaults(critics=critics, target_critics=target_critics), 3e-3, None)
    copy_.load_state_dict(state)
    assert torch.equal(copy_.critics(batch["observations"], batch["actions"]),
                       sac.critics(batch["observations"], batch["actions"]))


def test_double_dqn_target_and_hard_target_copies_by_hand():
    torch.manual_seed(0)
    model = QNetwork(gymnasium.spaces.Box(-1.0, 1.0, (3,)), gymnasium.spaces.Discrete(4), SETTINGS, dueling=True)
    dqn = DQN(model, DQNSettings.defaults(target_update=2), lr=0.01, grad_clip=None)
    with torch.no_grad():
        for parameter in dqn.target.parameters():
            parameter.add_(0.5)                 # a target network visibly different from the online one
    batch = {"observations": torch.randn(5, 3), "actions": torch.tensor([0, 1, 2, 3, 0]),
             "returns": torch.randn(5), "next_observations": torch.randn(5, 3),
             "bootstraps": torch.tensor([0.99, 0.0, 0.99 ** 3, 0.99, 0.99])}
    with torch.no_grad():
        chosen = model(batch["observations"])[torch.arange(5), batch["actions"]]
        best = model(batch["next_observations"]).argmax(-1)
        expected = chosen - (batch["returns"] + batch["bootstraps"]
                             * dqn.target(batch["next_observations"])[torch.arange(5), best])
    target_before = copy.deepcopy(dqn.target.state_dict())
    errors, _ = dqn.update(batch, torch.ones(5))
    assert torch.allclose(errors, expected, atol=1e-6)
    assert all(torch.equal(value, dqn.target.state_dict()[name]) for name, value in target_before.items())
    dqn.update(batch, torch.ones(5))            # the second update copies the online network
    assert all(torch.equal(value, model.state_dict()[name]) for name, value in dqn.target.state_dict().items())


def test_lanes_cut_next_observations_with_the_last_one_of_an_episode_cut_by_time():
    lane = Lane(keep_next=True)
    observations = [np.array([float(i)], np.float32) for i in range(6)]
    for step, (done, truncated) in enumerate([(False, False), (True, True), (False, False), (True, False),
                                              (False, False)]):
        lane.decide(observations[step], np.int64(0), 0.0, 0.0, 0)
        lane.outcome(1.0, done, truncated)
        if truncated:
            lane.set_final(0.0, np.array([99.0], np.float32))     # the observation the time limit cut off
    lane.decide(observations[5], np.int64(0), 0.0, 0.0, 0)
    part = lane.take(4)
    assert part["next_observations"][:, 0].tolist() == [1.0, 99.0, 3.0, 4.0]
    lane.decide(np.array([7.0], np.float32), np.int64(0), 0.0, 0.0, 0)
    lane.outcome(1.0, False, False)
    lane.decide(np.array([8.0], np.float32), np.int64(0), 0.0, 0.0, 0)
    assert lane.take(2)["next_observations"][:, 0].tolist() == [5.0, 7.0]


def test_ape_x_lanes_explore_with_powers_of_epsilon():
    model = QNetwork(gymnasium.spaces.Box(-1.0, 1.0, (2,)), gymnasium.spaces.Discrete(3), SETTINGS, dueling=False)
    server = EpsilonGreedy(model, 0.4, 7.0, first=4, total=8, random=np.random.default_rng(0))
    assert server.epsilons == pytest.approx(0.4 ** (1 + 7.0 * np.arange(4, 8) / 7))
    greedy = model.act(torch.zeros(1, 2))[0].item()
    server.set_exploration(0.0)
    assert {int(server.serve([(np.zeros(2, np.float32), 0)])[0][0]) for _ in range(20)} == {greedy}
    server.set_exploration(1.0)
    assert {int(server.serve([(np.zeros(2, np.float32), 3)])[0][0]) for _ in range(200)} == {0, 1, 2}


def walk_config(tmp_path, *changes: str) -> dict:
    return load(["rl/dqn.yml"], ["mdp.create=tests.rl.algorithms.offpolicy_tasks:BrokenWalk", "mdp.kwargs={every: 3}",
                                 "ray.local_mode=true", "sample.envs=2", "sample.truncation=8", "train.replay.start=32",
                                 "train.replay.batch=16", "model.hidden=[16]", "evaluator.progress=false",
                                 "evaluator.episodes=2", f"root={tmp_path}", *changes])


def test_segments_with_nan_rewards_are_dropped_and_counted(tmp_path):
    learner = fleet_learner(walk_config(tmp_path))
    assert isinstance(learner, OffPolicyLearner)
    try:
        TrainingLoop(learner, None).run(stop=lambda trainer: trainer.replay_update.updates >= 20)
        assert learner.nonfinite > 0
        assert len(learner.replay) >= 32
        assert np.isfinite(learner.replay.arrays["returns"][:len(learner.replay)]).all()
    finally:
        learner.close()


@pytest.mark.parametrize("keep", [True, False])
def test_resume_with_and_without_the_buffer(tmp_path, keep):
    config = walk_config(tmp_path, f"train.replay.checkpoint={str(keep).lower()}")
    learner = fleet_learner(config)
    try:
        TrainingLoop(learner, tmp_path).run(stop=lambda trainer: trainer.replay_update.updates >= 10)
        stored = learner.replay.arrays["observations"][:len(learner.replay)].copy()
        updates = learner.replay_update.updates
    finally:
        learner.close()
    resumed = fleet_learner(config)
    try:
        loop = TrainingLoop(resumed, tmp_path)
        assert loop.resume() is not None
        assert resumed.replay_update.updates == updates
        if keep:
            assert np.array_equal(resumed.replay.arrays["observations"][:len(resumed.replay)], stored)
        else:
            assert len(resumed.replay) == 0
        loop.run(stop=lambda trainer: trainer.replay_update.updates >= updates + 5)    # refills, then learns on
        assert len(resumed.replay) >= 32
    finally:
        resumed.close()



@pytest.mark.parametrize("ratio", [0.25, 2.0])
def test_updates_per_env_step_hold_the_ratio_when_the_actors_are_slow(tmp_path, ratio):
    """Actors whose env steps take 5 ms each are far slower than the learner's updates of a 16-unit network: the
    learner makes ``ratio`` updates per env step all the same (the steps that filled the buffer to ``start`` count
    too), waiting for data when none is owed (before: one update per iteration with nothing new)."""
    config = load(["rl/dqn.yml"], ["mdp.create=tests.rl.algorithms.offpolicy_tasks:SlowWalk", "ray.local_mode=true",
                                   "sample.envs=2", "sample.truncation=8", "train.replay.start=32",
                                   "train.replay.batch=16", f"train.replay.ratio={ratio}", "model.hidden=[16]",
                                   "evaluator.episodes=0", f"root={tmp_path}"])
    learner = fleet_learner(config)
    try:
        with learner.running():
            while learner.cost < 400:
                learner.step()
        assert ratio * learner.cost - 1 < learner.replay_update.updates <= ratio * learner.cost
    finally:
        learner.close()

@pytest.mark.slow
def test_a_killed_actor_is_replaced_and_the_buffer_kept(ray_local, tmp_path):
    config = load(["mdp/gym.yml", "rl/dqn.yml"], ["sample.actors=2", "sample.envs=2", "sample.truncation=8",
                                                  "train.replay.start=64", "evaluator.progress=false",
                                                  f"root={tmp_path}"])
    learner = fleet_learner(config)
    try:
        with learner.running():
            while learner.replay_update.updates < 5:
                learner.step()
            victim = learner.fleet.actors[0]
            pid = ray_local.get(victim.__ray_call__.remote(lambda actor: os.getpid()))
            stored = len(learner.replay)
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 120
            while (learner.fleet.replaced == 0 or learner.iteration < 20 or len(learner.fleet.actors) < 2) \
                    and time.monotonic() < deadline:        # the replacement joins once Ray has started it
                learner.step()
                assert len(learner.replay) >= stored
            assert victim not in learner.fleet.actors
            assert len(learner.fleet.actors) == 2
            assert len(learner.replay) > stored
    finally:
        learner.close()


def test_the_seed_dqn_command_trains_cartpole(tmp_path):
    assert train_main(["-c", "mdp/gym.yml", "mdp/gym/cartpole.yml", "rl/dqn.yml", "--debug", "-m", f"root={tmp_path}",
                       "train.replay.start=200", "evaluator.progress=false", "evaluator.episodes=2",
                       "evaluator.terminate=self.iteration >= 30"]) == 0
    assert (tmp_path / "evaluations.csv").is_file()
    assert list((tmp_path / "checkpoints").iterdir())


@pytest.mark.parametrize("files, changes, message", [
    (["mdp/gym.yml", "mdp/gym/pendulum.yml", "rl/dqn.yml"], [], "rl.algorithm=dqn needs a discrete action space"),
    (["mdp/gym.yml", "rl/sac.yml"], [], "rl.algorithm=sac needs a bounded continuous"),
    (["rl/dqn.yml"], [], "rl.algorithm=dqn trains single-player MDPs; mdp.create=pong has 2 seats"),
    (["mdp/gym.yml", "rl/dqn.yml"], ["model.normalize_observation=true"], "model.normalize_observation=true"),
    (["mdp/gym.yml"], ["rl.algorithm=a2c"],
     "rl.algorithm='a2c': expected one of ppo, impala, a3c, dqn, sac, td3 or module:ClassName"),
    (["mdp/gym.yml", "rl/dqn.yml"], ["train.replay.start=0"], "train.replay.start=0: out of range"),
])
def test_bad_off_policy_settings_are_one_line(tmp_path, capsys, files, changes, message):
    assert train_main(["-c", *files, "-m", f"root={tmp_path}/run", *changes]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error
    assert len(error.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_weights_reach_the_actors_every_refresh_updates(tmp_path):
    """``train.replay.refresh``: the weights go out every K updates inside an iteration, not only at its end."""
    learner = fleet_learner(load(["mdp/gym.yml", "mdp/gym/pendulum.yml", "rl/sac.yml"], [
        "sample.envs=2", "sample.truncation=8", "train.replay.start=16", "train.replay.batch=8", "model.hidden=[8]",
        "train.replay.ratio=4", "train.replay.refresh=8", "evaluator.episodes=0", f"root={tmp_path}"]))
    try:
        with learner.running():
            while learner.replay_update.updates == 0:
                before, stats = learner.version, learner.step()
        assert learner.version - before == (int(stats["updates"]) - 1) // 8 + 1
    finally:
        learner.close()
