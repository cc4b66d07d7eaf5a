"""The one run loop: evaluation at the end of every run, capped evaluation episodes, one checkpoint format (today's
and the files written before it), resume of everything a run shows, Ctrl-C, process-wide settings."""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lamarckian.cli import configure_process
from lamarckian.config import load
from lamarckian.config.sections import EvaluatorSettings
from lamarckian.record import Checkpoints
from lamarckian.record.checkpoint import CHECKPOINT_FORMAT, upgrade_checkpoint
from lamarckian.rl.fleet.learner import Learner
from lamarckian.rl.loop import TrainingLoop
from lamarckian.rl.ondevice.learner import OnDeviceLearner
from lamarckian.train import main as train_main

DATA = Path(__file__).resolve().parents[1] / "data"
SUMO = ["mdp.vec.num_envs.cpu=4", "mdp.vec.horizon=8", "evaluator.progress=false", "evaluator.episodes=0",
        "rl.opponent.pool.add=self.iterations_since_add >= 2", "rl.opponent.pool.games_to_check=0", "model.hidden=[16]"]
FLEET = ["mdp.create=gym", "sample.envs=2", "sample.truncation=16", "train.batch=64", "sample.actors=1",
         "evaluator.progress=false", "evaluator.episodes=2", "model.hidden=[16]", "ray.local_mode=true"]


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as stream:
        return list(csv.DictReader(stream))


def test_a_run_ends_with_an_evaluation_of_its_final_weights(tmp_path):
    """The issue's CartPole command: a run that stops on env steps long before ``evaluator.interval`` evaluates its
    final weights (before: only the untrained policy at 0 s was ever evaluated)."""
    code = train_main(["-c", "mdp/gym.yml", "mdp/gym/cartpole.yml", "rl/ppo.yml", "--debug", "-m",
                       f"root={tmp_path}", "evaluator.progress=false", "evaluator.episodes=4", "evaluator.share=0",
                       "evaluator.terminate=self.cost>12000"])
    assert code == 0
    evaluations = rows(tmp_path / "evaluations.csv")
    newest = Checkpoints(tmp_path / "checkpoints").load_newest()[1]
    assert len(evaluations) == 2
    assert int(evaluations[0]["iteration"]) == 1      # at 0 s, and at the end
    assert int(evaluations[-1]["cost"]) == newest["cost"] > 12000
    assert newest["evaluations"][-1]["cost"] == newest["cost"]
    assert newest["format"] == CHECKPOINT_FORMAT


def test_evaluation_episodes_a_policy_never_ends_are_capped(tmp_path, capsys):
    """CliffWalking-v1 has no time limit and a random policy rarely reaches the goal: evaluation used to hang."""
    code = train_main(["-c", "mdp/gym.yml", "--debug", "-m", "mdp.gym.id=CliffWalking-v1", f"root={tmp_path}",
                       "evaluator.progress=false", "evaluator.episodes=2", "evaluator.max_steps=150",
                       "evaluator.share=0", "sample.envs=2", "train.batch=128",
                       "evaluator.terminate=self.iteration >= 2"])
    assert code == 0
    evaluations = rows(tmp_path / "evaluations.csv")
    assert len(evaluations) == 2
    assert all(float(row["length"]) <= 150 for row in evaluations)
    assert float(evaluations[-1]["capped"]) > 0
    assert "cut at evaluator.max_steps" in capsys.readouterr().err


def test_a_budget_in_steps_shortens_the_evaluations_once_training_episodes_show_their_length(tmp_path):
    """``evaluator.steps=100`` on CartPole: the final evaluation plays as many episodes as 100 decisions hold at the
    length of the evaluation before (the deterministic policy's episodes)."""
    code = train_main(["-c", "mdp/gym.yml", "--debug", "-m", f"root={tmp_path}", "evaluator.progress=false",
                       "evaluator.episodes=20", "evaluator.steps=100", "sample.envs=2", "train.batch=128",
                       "evaluator.terminate=self.iteration >= 2"])
    evaluations = rows(tmp_path / "evaluations.csv")
    assert code == 0
    assert float(evaluations[-1]["episodes"]) == max(1, 100 // float(evaluations[-2]["length"]))


@pytest.mark.parametrize("trainer, changes, file", [(OnDeviceLearner, SUMO, "format1_vec_learner.pt"),
                                                    (Learner, FLEET, "format1_learner.pt")])
def test_checkpoints_written_before_the_format_existed_load(trainer, changes, file):
    """Files written by the code of 2026-11-26 (commit 9931213, before the one loop) resume in today's trainers."""
    files = ["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"] if trainer is OnDeviceLearner else ["mdp/gym.yml"]
    state = torch.load(DATA / file, map_location="cpu", weights_only=True)
    assert "format" not in state
    learner = trainer(load(files, changes))
    loop = TrainingLoop(learner)
    loop.load_state_dict(upgrade_checkpoint(state, file))
    assert (learner.iteration, learner.cost) == (int(state["iteration"]), int(state["cost"]))
    assert learner.iteration > 0
    for name, tensor in learner.model.state_dict().items():
        assert torch.equal(tensor, state["model"][name]), name
    assert learner.update_rule.lr == pytest.approx(state["lr"])
    assert learner.evaluator.history == []
    if trainer is OnDeviceLearner:
        assert len(learner.pool) == len(state["pool"]["snapshots"]) >= 2
        learner.step()                                     # and training goes on from there
        assert learner.iteration == int(state["iteration"]) + 1
    learner.close()


def test_a_newer_format_is_refused_with_the_file_named():
    with pytest.raises(ValueError, match=r"run/checkpoint-1.pt: checkpoint format 99 is newer"):
        upgrade_checkpoint({"format": 99}, "run/checkpoint-1.pt")


def test_resume_restores_what_the_run_shows(tmp_path):
    """Running scores, pool statistics, lr and optimizer, the evaluation history and every random stream continue."""
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], [*SUMO, "evaluator.episodes=2", "evaluator.interval=0",
                                                               "rl.opponent.pool.games_to_check=0",
                                                               "mdp.vec.initial_share=0.5"])
    learner = OnDeviceLearner(config)
    loop = TrainingLoop(learner, tmp_path)
    loop.run(stop=lambda trainer: trainer.iteration >= 3)
    learner.record(np.array([[3, 1, 0]] * learner.opponents.count, np.float32), np.array([6.0, 2.0, 40.0], np.float32))
    learner.update_rule.set_lr(1.234e-4)
    loop.save()
    expected = (torch.rand(4), learner.update_rule.generator.get_state(), learner.generator.get_state())
    resumed = OnDeviceLearner(config)
    assert TrainingLoop(resumed, tmp_path).resume() is not None
    assert resumed.training == learner.training
    assert resumed.training["return"] == 3.0
    assert resumed.win_rate_against_initial() == learner.win_rate_against_initial() == pytest.approx(3.5 / 4)
    assert resumed.update_rule.lr == pytest.approx(1.234e-4)
    assert resumed.evaluator.history == learner.evaluator.history
    assert len(resumed.evaluator.history) == 3
    assert resumed.evaluator.latest == learner.evaluator.latest
    assert [s.games for s in resumed.pool.snapshots.values()] == [s.games for s in learner.pool.snapshots.values()]
    assert torch.equal(torch.rand(4), expected[0])             # the process's stream continues where it was saved
    assert torch.equal(resumed.update_rule.generator.get_state(), expected[1])
    assert torch.equal(resumed.generator.get_state(), expected[2])
    learner.close()
    resumed.close()


def test_ctrl_c_saves_a_checkpoint_and_goes_on(tmp_path):
    learner = OnDeviceLearner(load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], SUMO))

    def interrupt(trainer) -> bool:
        if trainer.iteration == 2:
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        TrainingLoop(learner, tmp_path).run(stop=interrupt)
    assert Checkpoints(tmp_path / "checkpoints").load_newest()[1]["iteration"] == 2
    learner.close()


def test_in_process_actors_leave_the_learners_process_settings_alone():
    """``--debug`` runs the actors as objects of the learner's process: they must not reset its threads or seed."""
    config = load(["mdp/gym.yml"], [*FLEET, "train.threads=2", "sample.actors=2"])
    threads = torch.get_num_threads()
    try:
        configure_process(config)
        expected = torch.rand(3)
        configure_process(config)
        learner = Learner(config)
        learner.start_actors()
        try:
            assert torch.get_num_threads() == 2
            assert len(learner.fleet.actors) == 2
            assert torch.equal(torch.rand(3), expected)       # building the model and the actors drew nothing
        finally:
            learner.close()
    finally:
        torch.set_num_threads(threads)


def test_wandb_logs_the_same_scalars_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    learner = OnDeviceLearner(load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"],
                                   [*SUMO, "evaluator.wandb=lamarckian-test"]))
    TrainingLoop(learner, tmp_path).run(stop=lambda trainer: trainer.iteration >= 2)
    learner.close()
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    assert list(runs[0].glob("*.wandb"))
    log = next(runs[0].glob("*.wandb")).read_bytes()   # wandb's record log: the tags are stored verbatim
    assert all(tag in log for tag in (b"loss/policy", b"train/win_initial", b"pool/size", b"entropy"))


def test_missing_wandb_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)
    code = train_main(["-c", "mdp/vec/ant_sumo.yml", "-m", *SUMO, f"root={tmp_path}/run", "evaluator.wandb=x"])
    error = capsys.readouterr().err
    assert code == 2
    assert "pip install 'lamarckian[wandb]'" in error
    assert len(error.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_missing_optional_package_is_one_line_naming_it(tmp_path):
    """gymnasium's MuJoCo tasks import imageio; without it ``-m mdp.gym.id=HalfCheetah-v5`` printed a traceback."""
    import subprocess

    code = ("import sys; sys.modules['imageio'] = None; from lamarckian.train import main; "
            "sys.exit(main(sys.argv[1:]))")
    completed = subprocess.run([sys.executable, "-c", code, "-c", "mdp/gym.yml", "-m", "mdp.gym.id=HalfCheetah-v5",
                                f"root={tmp_path}/run"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert completed.stderr.strip() == ("train.py: error: mdp.gym.id=HalfCheetah-v5 needs the Python package "
                                        "'imageio', which is not installed: pip install 'lamarckian[mujoco]'")


def test_a_csv_log_deleted_under_it_starts_again_with_a_header(tmp_path):
    from lamarckian.record.table import CsvLog, read_rows

    path = tmp_path / "evaluations.csv"
    CsvLog(path).write({"time": 1.0, "cost": 10})
    log = CsvLog(path)                      # opened on the old file (train.py -D then deletes the run directory)
    path.unlink()
    log.write({"time": 2.0, "evaluating": 0.5, "cost": 20})
    assert read_rows(path) == [{"time": 2.0, "evaluating": 0.5, "cost": 20.0}]


def test_the_stop_rule_names_env_steps_too():
    from lamarckian.rl.evaluator import Evaluator

    evaluator = Evaluator(EvaluatorSettings.defaults(terminate="self.env_steps >= 100 and self.cost >= 100"))
    assert evaluator.should_stop(100, 1, 1.0, {})


def test_profile_prints_where_the_seconds_went(tmp_path, capsys):
    code = train_main(["-c", "mdp/gym.yml", "--debug", "--profile", "-m", f"root={tmp_path}",
                       "evaluator.progress=false", "evaluator.episodes=1", "sample.envs=2", "train.batch=128",
                       "evaluator.terminate=self.iteration >= 1"])
    table = capsys.readouterr().err.split("moment")[-1].splitlines()[1:]
    seconds = [float(line[40:].split()[0]) for line in table]
    moments = [line[:40].strip() for line in table]
    assert code == 0
    assert {"first env step (the earliest actor)", "first update", "shutdown (actors, Ray)"} <= set(moments)
    assert seconds == sorted(seconds)


def test_the_status_line_counts_lost_episodes_by_cause_most_first():
    from lamarckian.rl.loop import lost_field

    stats = {"env/lost_timeout": 12.0, "env/lost_disconnected": 500.0, "env/lost_error": 0.0, "env/lost": 512.0}
    assert lost_field(stats) == {"lost": "512: disconnected 500, timeout 12"}


def test_lost_evaluation_episodes_are_left_out_and_counted_not_called_cut():
    from lamarckian.rating.results import EpisodeResult
    from lamarckian.rl.evaluator import summarize

    summary = summarize([EpisodeResult(fitness=51.0, lost=True), EpisodeResult(fitness=500.0)])
    assert summary["fitness"] == 500.0
    assert summary["lost"] == 1.0
    assert "capped" not in summary


def test_the_done_line_names_the_evaluation_the_stop_rule_acted_on_and_the_final_one(tmp_path, capsys):
    code = train_main(["-c", "mdp/gym.yml", "--debug", "-m", f"root={tmp_path}", "evaluator.episodes=2",
                       "sample.envs=2", "train.batch=128",
                       "evaluator.terminate=self.episodes > 0 and self.iteration >= 3"])
    done = [line for line in capsys.readouterr().err.splitlines() if line.startswith("done: ")]
    assert code == 0
    assert "(on the eval of iter 1 @ " in done[0]
    assert "; the final weights: fitness " in done[0]


def test_each_line_counts_the_updates_since_the_line_above_it(tmp_path, capsys):
    code = train_main(["-c", "mdp/gym.yml", "--debug", "-m", f"root={tmp_path}", "evaluator.episodes=2",
                       "sample.envs=2", "train.batch=128", "evaluator.terminate=self.iteration >= 6"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("iter ")]
    shown = [tuple(int(n) for n in re.match(r"iter (\d+) \(\+(\d+)\)", line).groups()) for line in lines]
    assert code == 0
    assert len(shown) >= 2
    assert [now - before for (before, _), (now, _) in zip(shown, shown[1:])] == [grown for _, grown in shown[1:]]


def test_the_status_line_says_how_many_env_steps_were_dropped_as_stale(tmp_path, capsys):
    code = train_main(["-c", "mdp/gym.yml", "--debug", "-m", f"root={tmp_path}", "evaluator.episodes=2",
                       "sample.envs=2", "train.batch=128", "evaluator.terminate=self.iteration >= 2"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("iter ")]
    assert code == 0
    assert re.search(r"\| dropped \d+ of [\d.k]+ steps \|", lines[-1])
