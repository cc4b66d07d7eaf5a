"""export.py --onnx: the ONNX graph acts as the torch policy does (normalization included), to 1e-5."""

from __future__ import annotations

import gymnasium
import numpy as np
import onnxruntime
import pytest
import torch

from lamarckian import export
from lamarckian.config import load
from lamarckian.mdp import create_mdp
from lamarckian.model import ActorCritic
from lamarckian.model.export import export_onnx
from lamarckian.record.checkpoint import CHECKPOINT_FORMAT, plain
from lamarckian.rl.algorithms import build_model

CASES = {
    "sac": (["mdp/realtime/pendulum.yml", "rl/sac.yml"], []),
    "ppo clip": (["mdp/gym.yml", "mdp/gym/pendulum.yml"], []),
    "ppo tanh": (["mdp/gym.yml", "mdp/gym/pendulum.yml"], ["model.bound=tanh"]),
    "ppo discrete": (["mdp/gym.yml", "mdp/gym/cartpole.yml"], []),
    "dqn": (["mdp/gym.yml", "mdp/gym/cartpole.yml", "rl/dqn.yml"], []),
}


def trained_looking(files: list[str], changes: list[str]):
    """A configuration and its network with random weights and observation statistics (nothing at identity)."""
    config = load(files, ["rl.opponent.rule=0", *changes])
    model = build_model(create_mdp(config["mdp"], seed=0), config)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
        normalizer = getattr(model, "observation_normalizer", None)
        if normalizer is not None and config["model"]["normalize_observation"]:
            normalizer.mean.copy_(torch.randn(normalizer.mean.shape, generator=generator))
            normalizer.var.copy_(torch.rand(normalizer.var.shape, generator=generator) * 3 + 0.1)
    return config, model


@pytest.mark.parametrize("case", list(CASES))
def test_the_onnx_policy_acts_as_the_torch_policy(case, tmp_path, capsys):
    config, model = trained_looking(*CASES[case])
    checkpoint = tmp_path / "checkpoint-000000000001.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "model": model.state_dict(), "config": plain(config)}, checkpoint)
    assert export.main(["--checkpoint", str(checkpoint), "--onnx", str(tmp_path / "policy.onnx")]) == 0
    assert "max |difference|" in capsys.readouterr().out
    session = onnxruntime.InferenceSession(str(tmp_path / "policy.onnx"), providers=["CPUExecutionProvider"])
    space = model.batcher.space
    space.seed(2)
    observations = model.batcher([space.sample() * 3 for _ in range(100)])     # beyond the bounds too
    action, policy_action = session.run(None, {"observation": observations})
    with torch.no_grad():
        taken = model.act(torch.from_numpy(observations), deterministic=True)[0].numpy()
    expected = np.stack([np.asarray(model.env_action(row)) for row in taken])
    np.testing.assert_allclose(action.reshape(expected.shape), expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(policy_action.reshape(taken.shape), taken, atol=1e-5, rtol=0)


def test_a_snapshot_without_configuration_needs_the_runs_files(tmp_path, capsys):
    config, model = trained_looking(*CASES["sac"])
    snapshot = tmp_path / "checkpoint-000000000002.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "model": model.state_dict()}, snapshot)
    assert export.main(["--checkpoint", str(snapshot), "--onnx", str(tmp_path / "p.onnx")]) == 2
    assert "carries no configuration" in capsys.readouterr().err
    assert export.main(["--checkpoint", str(snapshot), "--onnx", str(tmp_path / "p.onnx"),
                        "-c", "mdp/gym.yml", "mdp/gym/cartpole.yml"]) == 2       # another network
    assert "do not fit the network" in capsys.readouterr().err
    assert export.main(["--checkpoint", str(snapshot), "--onnx", str(tmp_path / "p.onnx"),
                        "-c", "mdp/realtime/pendulum.yml", "rl/sac.yml"]) == 0


def test_a_recurrent_policy_is_refused(tmp_path, capsys):
    config, model = trained_looking(["mdp/gym.yml", "mdp/gym/cartpole.yml", "rl/lstm.yml"], [])
    checkpoint = tmp_path / "checkpoint-000000000001.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "model": model.state_dict(), "config": plain(config)}, checkpoint)
    assert export.main(["--checkpoint", str(checkpoint), "--onnx", str(tmp_path / "p.onnx")]) == 2
    assert "recurrent" in capsys.readouterr().err


@pytest.mark.parametrize("space", [gymnasium.spaces.MultiDiscrete([3, 2], start=[1, 0]),
                                   gymnasium.spaces.Dict({"move": gymnasium.spaces.Discrete(4),
                                                          "aim": gymnasium.spaces.Box(-1, 1, (2,))})],
                         ids=["multidiscrete", "dict"])
def test_a_factorised_policy_exports_its_action_row(space, tmp_path):
    torch.manual_seed(0)
    model = ActorCritic(gymnasium.spaces.Box(-1, 1, (3,), np.float32), space).eval()
    path = export_onnx(model, tmp_path / "policy.onnx")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    observations = np.random.default_rng(0).uniform(-1, 1, (50, 3)).astype(np.float32)
    _, policy_action = session.run(None, {"observation": observations})
    with torch.no_grad():
        taken = model.act(torch.from_numpy(observations), deterministic=True)[0].numpy()
    np.testing.assert_allclose(policy_action, taken, atol=1e-5, rtol=0)
