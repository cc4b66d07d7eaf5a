"""Data-parallel PPO on 2 gloo ranks (real processes, real torch.distributed on loopback) takes the update one process
takes on the whole batch; a rank that dies ends the other with an error; torchrun trains Ant Sumo on 2 ranks and one
process resumes the run."""

from __future__ import annotations

import copy
import datetime
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from lamarckian.model import ActorCritic, ModelSettings
from lamarckian.rl.algorithms.ppo import PPO, PPOSettings
from lamarckian.rl.distributed import Ranks, owned_samples
from lamarckian.rl.segment import Segment

REPOSITORY = Path(__file__).resolve().parents[2]
STEPS, LANES, RANKS = 16, 8, 2
SETTINGS = dict(epochs=2, minibatches=4, lr=3e-3, normalize_advantage=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def model_and_batch(action_space: gymnasium.Space) -> tuple[ActorCritic, Segment]:
    """A seeded model (observation and value normalizers on) and a fixed rollout ``[STEPS, LANES]`` of its own
    actions, random rewards and episode ends."""
    torch.manual_seed(0)
    space = gymnasium.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    model = ActorCritic(space, action_space, ModelSettings.defaults(hidden=(16,), normalize_observation=True,
                                                                   normalize_value=True))
    random = np.random.default_rng(0)
    observations = (random.normal(size=(STEPS, LANES, 3)) * 3 + 1).astype(np.float32)
    actions, log_probs, values = model.act(torch.from_numpy(observations.reshape(-1, 3)),
                                           generator=torch.Generator().manual_seed(0))
    shape = (STEPS, LANES)
    segment = Segment(observations=observations, actions=actions.numpy().reshape(*shape, *actions.shape[1:]),
                      log_probs=log_probs.numpy().reshape(shape),
                      values=np.concatenate([values.numpy().reshape(shape), np.zeros((1, LANES), np.float32)]),
                      rewards=random.normal(size=shape).astype(np.float32), dones=random.random(shape) < 0.1,
                      truncated=np.zeros(shape, bool), final_values=np.zeros(shape, np.float32), version=0)
    return model, segment


def lanes_of(segment: Segment, rank: int) -> Segment:
    """Rank ``rank``'s lanes of the rollout."""
    width = LANES // RANKS
    part = slice(rank * width, (rank + 1) * width)
    fields = {name: getattr(segment, name)[:, part] for name in
              ("observations", "actions", "log_probs", "values", "rewards", "dones", "truncated", "final_values")}
    return Segment(**fields, version=segment.version)


def one_rank(rank: int, port: int, action_space: gymnasium.Space, results: dict) -> None:
    ranks = Ranks(rank, RANKS)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=RANKS)
    try:
        model, segment = model_and_batch(action_space)
        stats = PPO(model, PPOSettings.defaults(**SETTINGS), seed=5, ranks=ranks).update(
            [lanes_of(segment, rank)], 0, 0)
        results[rank] = ({k: v.clone() for k, v in model.state_dict().items()}, stats)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("action_space", [gymnasium.spaces.Discrete(3), gymnasium.spaces.Box(-1, 1, (2,), np.float32)])
def test_two_ranks_take_the_update_one_process_takes_on_the_whole_batch(action_space):
    model, segment = model_and_batch(action_space)
    alone = copy.deepcopy(model)
    expected = PPO(alone, PPOSettings.defaults(**SETTINGS), seed=5).update([segment], 0, 0)
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(one_rank, args=(free_port(), action_space, results), nprocs=RANKS, join=True)
        results = dict(results)
    for rank in range(RANKS):
        state, stats = results[rank]
        worst = max(float((state[name] - value).abs().max()) for name, value in alone.state_dict().items())
        assert worst <= 1e-5, (rank, worst)
        for key in ("loss/policy", "loss/value", "kl", "clip_fraction", "grad_norm", "samples"):
            assert stats[key] == pytest.approx(expected[key], rel=1e-4, abs=1e-6), key
    moved = max(float((alone.state_dict()[n] - v).abs().max()) for n, v in model.state_dict().items())
    assert moved > 1e-3                                           # the update did something to compare


def test_a_global_sample_belongs_to_the_rank_holding_its_lane():
    ranks = [Ranks(rank, 2) for rank in range(2)]
    everything = torch.arange(3 * 8)                              # 3 steps × 8 lanes, 4 lanes a rank
    owners = [owned_samples(everything, 4, r) for r in ranks]
    assert owners[0][0].tolist() == [True] * 4 + [False] * 4 + [True] * 4 + [False] * 4 + [True] * 4 + [False] * 4
    assert owners[1][1][owners[1][0]].tolist() == list(range(12))   # every local sample exactly once, in order


def rank_that_may_die(rank: int, port: int, outcome: dict) -> None:
    """Rank 1 dies right after joining; rank 0 goes into an update's collectives."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=RANKS,
                            timeout=datetime.timedelta(seconds=60))
    if rank == 1:
        os._exit(1)
    model, segment = model_and_batch(gymnasium.spaces.Discrete(3))
    started = time.monotonic()
    try:
        PPO(model, PPOSettings.defaults(**SETTINGS), ranks=Ranks(0, RANKS)).update([lanes_of(segment, 0)], 0, 0)
    except Exception as error:  # noqa: BLE001 - what the collective raises is the point
        outcome["error"] = f"{type(error).__name__}: {error}"
    outcome["seconds"] = time.monotonic() - started


def test_a_rank_that_dies_ends_the_others_with_an_error_not_a_hang():
    """Rank 1 exits right after joining; rank 0, in an update's collectives, gets an error (not a hang) well within
    the group's timeout."""
    spawn = mp.get_context("spawn")
    with spawn.Manager() as manager:
        outcome = manager.dict()
        port = free_port()
        processes = [spawn.Process(target=rank_that_may_die, args=(rank, port, outcome)) for rank in range(RANKS)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=120)
        alive = [process for process in processes if process.is_alive()]
        for process in alive:
            process.kill()
        outcome = dict(outcome)
    assert not alive
    assert processes[1].exitcode == 1
    assert re.match(r"RankLostError: rank 0 of 2: a (sum|broadcast) over the ranks failed: another rank died",
                    outcome["error"]), outcome
    assert outcome["seconds"] < 60, outcome


@pytest.mark.slow
def test_two_ranks_train_ant_sumo_checkpoint_and_resume_on_one(tmp_path):
    """torchrun, 2 ranks × 8 environments on CPU MuJoCo: 3 iterations of 16 environments' steps, one checkpoint
    (written by rank 0 alone); the same run resumed by one process with all 16 environments goes on from it."""
    common = ["-c", "mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml", "-m", f"root={tmp_path / 'run'}",
              "mdp.vec.num_envs.cpu=16", "mdp.vec.horizon=8", "mdp.vec.workers=1", "model.hidden=[32]",
              "evaluator.episodes=2", "evaluator.progress=false"]
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          str(REPOSITORY / "train.py"), *common, "evaluator.terminate=self.iteration >= 3", "-D"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stderr.count("training: 2 ranks × 8 on cpu") == 1                    # one status writer
    checkpoints = sorted((tmp_path / "run" / "checkpoints").glob("checkpoint-*.pt"))
    assert [path.name for path in checkpoints] == ["checkpoint-000000000003.pt"]
    state = torch.load(checkpoints[0], weights_only=True)
    assert state["iteration"] == 3
    assert state["cost"] == 3 * 8 * 16
    one = subprocess.run([sys.executable, str(REPOSITORY / "train.py"), *common,
                          "evaluator.terminate=self.iteration >= 5"], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert one.returncode == 0, one.stderr[-3000:]
    assert "resuming from" in one.stderr
    assert "checkpoint-000000000003.pt" in one.stderr
    state = torch.load(tmp_path / "run" / "checkpoints" / "checkpoint-000000000005.pt", weights_only=True)
    assert state["cost"] == 3 * 8 * 16 + 2 * 8 * 16


@pytest.mark.slow
def test_train_ranks_on_ray_train_one_learner_and_torchrun_resumes(tmp_path):
    """train.ranks=2 where Ray is installed: 2 Ray actors form the group (rank 0 on its node's address, a free
    port); the checkpoint rank 0 writes is resumed by 2 torchrun ranks."""
    common = ["-c", "mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml", "-m", f"root={tmp_path / 'run'}",
              "mdp.vec.num_envs.cpu=16", "mdp.vec.horizon=8", "mdp.vec.workers=1", "model.hidden=[32]",
              "evaluator.episodes=2", "evaluator.progress=false"]
    on_ray = subprocess.run([sys.executable, str(REPOSITORY / "train.py"), *common, "train.ranks=2",
                             "train.rank_gpus=0", "ray.num_cpus=2", "evaluator.terminate=self.iteration >= 3", "-D"],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    assert "training on 2 Ray ranks" in on_ray.stderr
    assert "vs initial" in on_ray.stderr
    state = torch.load(tmp_path / "run" / "checkpoints" / "checkpoint-000000000003.pt", weights_only=True)
    assert state["cost"] == 3 * 8 * 16
    resumed = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                              str(REPOSITORY / "train.py"), *common, "evaluator.terminate=self.iteration >= 4"],
                             capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr, resumed.stderr[-3000:]
    checkpoint = torch.load(tmp_path / "run" / "checkpoints" / "checkpoint-000000000004.pt", weights_only=True)
    assert checkpoint["cost"] == 4 * 8 * 16


@pytest.mark.slow
def test_the_fleet_learner_update_on_two_ranks_keeps_the_replicas_equal(ray_local, tmp_path):
    """train.gpus=2 (CPU processes here): rank 1 is a Ray actor; after training its replica equals the learner's
    network, and the run learns on as usual."""
    from lamarckian.config import load
    from lamarckian.model import to_blob
    from lamarckian.rl.fleet.learner import Learner
    from lamarckian.rl.loop import TrainingLoop

    config = load(["mdp/gym.yml"], [f"root={tmp_path}", "train.gpus=2", "train.device=cpu", "sample.actors=1",
                                    "sample.num_cpus=0.5", "sample.envs=4", "train.batch=512", "evaluator.episodes=0",
                                    "evaluator.progress=false", "evaluator.terminate=self.iteration >= 4"])
    learner = Learner(config)
    try:
        TrainingLoop(learner, tmp_path).run()
        assert learner.update_group is not None
        assert learner.iteration == 4
        replica = learner.update_group.weights()[0]
        assert np.array_equal(replica, to_blob(learner.model))
        assert not np.array_equal(replica, to_blob(Learner(config).model))          # and it did train
    finally:
        learner.close()
