"""A population learner in local mode (actors in this process): one individual's rounds, its learned state
carried through the RPC codec between them (Lamarckian write-back)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from lamarckian.config import load
from lamarckian.ec.space import SearchSpace
from lamarckian.ec.worker import PopulationLearner
from lamarckian.model import to_blob
from lamarckian.rpc.codec import decode, encode


def through_the_wire(value):
    """What the engine receives: encoded by msgpack (no pickle), decoded as views of the received buffers."""
    body, buffers = encode(value)
    return decode(body, [memoryview(bytes(b)) for b in buffers])


@pytest.fixture
def learner():
    config = load(["mdp/gym.yml"], ["ray.local_mode=true", "sample.actors=1", "sample.envs=4",
                                    "sample.truncation=16", "train.batch=128", "sample.eval=3",
                                    "rl.ppo.epochs=4", "rl.ppo.minibatches=4", "sample.sync=false",
                                    "ec.train.stopper=self.iteration >= 2", "train.lr=[1e-4,1e-2]"], ranges=True)
    worker = PopulationLearner(SearchSpace.from_config(config).base, 0)
    yield worker
    worker.close()


def test_rounds_continue_from_the_written_back_state(learner):
    first = through_the_wire(learner.train({"id": 7, "hparams": {"train.lr": 0.003}, "state": None, "seed": 7}))
    assert first["id"] == 7
    assert first["iterations"] == 2
    assert first["cost"] >= 256
    assert first["summary"]["episodes"] == 3
    assert len(first["episodes"]) == 3
    steps = [s["step"].item() for s in first["state"]["optimizer"]["state"].values()]
    assert steps
    assert all(step == 2 * 4 * 4 for step in steps)  # 2 iterations × 4 epochs × 4 minibatches
    assert first["state"]["lr"] == pytest.approx(0.003)

    second = learner.train({"id": 8, "hparams": {"train.lr": 0.0005}, "state": first["state"], "seed": 8})
    steps = [s["step"].item() for s in second["state"]["optimizer"]["state"].values()]
    assert all(step == 4 * 4 * 4 for step in steps)  # Adam's moments continued, not restarted
    assert learner.learner.stale_steps.dropped >= 1  # steps begun under the previous round's network are dropped
    assert second["state"]["lr"] == pytest.approx(0.0005)  # the child's own (explored) learning rate
    assert second["state"]["cost"] == first["state"]["cost"] + second["cost"]  # the lineage's env steps add up
    # the network the learner trained is the one it reported
    np.testing.assert_array_equal(to_blob(learner.learner.model), _blob_of(learner, second["state"]["model"]))


def test_weight_noise_perturbs_the_inherited_weights(learner):
    first = through_the_wire(learner.train({"id": 1, "hparams": {"train.lr": 0.0}, "state": None, "seed": 1}))
    inherited = _parameters(learner, first["state"]["model"])
    learner.base = {**learner.base, "ec": {**learner.base["ec"], "train": {"stopper": "self.iteration >= 1"}}}
    noisy = learner.train({"id": 2, "hparams": {"train.lr": 0.0}, "state": first["state"], "seed": 2,
                           "weight_noise": 0.05})
    difference = _parameters(learner, noisy["state"]["model"]) - inherited
    assert 0.045 < np.std(difference) < 0.055  # lr 0: only the noise (std 0.05) moved the weights
    assert np.count_nonzero(difference) >= difference.size * 0.99


def _model(worker: PopulationLearner, model_state: dict) -> torch.nn.Module:
    scratch = copy.deepcopy(worker.learner.model)
    scratch.load_state_dict({k: torch.as_tensor(v).clone() for k, v in model_state.items()})
    return scratch


def _blob_of(worker: PopulationLearner, model_state: dict) -> np.ndarray:
    return to_blob(_model(worker, model_state))


def _parameters(worker: PopulationLearner, model_state: dict) -> np.ndarray:
    """The trainable parameters only (normalizer statistics move even at lr 0)."""
    return torch.cat([p.detach().reshape(-1) for p in _model(worker, model_state).parameters()]).numpy()


def test_other_mdp_settings_rebuild_environments_in_place_other_spaces_restart_actors():
    config = load(["mdp/pong.yml"], ["ray.local_mode=true", "sample.actors=1", "sample.envs=2",
                                     "sample.truncation=16", "train.batch=64", "sample.eval=2",
                                     "ec.train.stopper=self.iteration >= 1", "mdp.idle_reward=[0.0,0.05]",
                                     "mdp.pong.max_steps=300"], ranges=True)
    worker = PopulationLearner(SearchSpace.from_config(config).base, 0)
    try:
        worker.train({"id": 0, "hparams": {"mdp.idle_reward": 0.0}, "state": None, "seed": 0})
        actors = list(worker.learner.fleet.actors)
        worker.train({"id": 1, "hparams": {"mdp.idle_reward": 0.04, "mdp.pong.paddle_half": 0.2}, "state": None,
                      "seed": 1})
        assert worker.learner.fleet.actors == actors  # the same actor process, its environments rebuilt
        assert actors[0].sampler.mdp_config["idle_reward"] == 0.04
        assert actors[0].sampler.mdps[0].settings.paddle_half == 0.2
        with pytest.raises(ValueError, match="spaces"):
            actors[0].set_mdp({**actors[0].sampler.mdp_config, "create": "coins"})
        worker.train({"id": 2, "hparams": {"mdp.create": "coins"}, "state": None, "seed": 2})
        assert worker.learner.fleet.actors[0] is not actors[0]  # other spaces: fresh actors
    finally:
        worker.close()
