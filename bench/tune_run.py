"""One population-based training run under Ray Tune, for bench/populations.py, in the peers' own environment.

Reads one JSON argument:

- ``side``: ``ours`` (Tune's ``PopulationBasedTraining`` around our learner as a function trainable: the learner of
  evolve.py, :class:`~lamarckian.ec.worker.PopulationLearner`, trains a member for a round and Tune checkpoints
  its state to disk) or ``rllib`` (Tune's PBT around RLlib's PPO with RLlib's own tuned values for the task);
- ``files``, ``modify``: evolve.py's ``-c`` files and ``-m`` edits (ours: the same base configuration and searched
  ranges as the evolve.py row);
- ``rllib``: the RLlib row's environment id and its tuned values (``training``, ``model``, ``env_runners``);
- ``searched``: ``{key: [lo, hi, log]}`` (our keys; the RLlib row's are mapped by :data:`RLLIB_KEYS`);
- ``metric``: the evaluation mean that is the members' fitness (ours: ``fitness`` or ``win``);
- ``population``, ``interval`` (env steps between reports, Tune's ``perturbation_interval``), ``quantile``,
  ``factors``, ``episodes`` (deterministic evaluation episodes a report), ``threshold``, ``limit`` (seconds since
  this process started), ``seed``, ``cpus`` (the local Ray's CPUs), ``events`` (a JSON-lines file).

Every evaluation is a line of ``events``: ``{"t": seconds since this process started, "member", "fitness",
"env_steps", "round_seconds", "hparams"}``, where ``round_seconds`` is the round's own time (training and
evaluation), so that bench/populations.py can time what passes between a member's rounds (an exploit step: from
the loser's report to its next round with the donor's state). The run ends when a member's evaluation reaches
``threshold`` or ``limit`` passes.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lamarckian.timeline import process_start  # noqa: E402

START = process_start()
#: our searched keys and RLlib's names for them
RLLIB_KEYS = {"train.lr": "lr", "rl.ac.weight_loss.entropy": "entropy_coeff", "rl.ppo.clip": "clip_param"}
_CACHE: dict[str, Any] = {}    # one learner per Tune actor, kept when Tune reuses the actor for another member


def event(path: str, **fields: Any) -> None:
    """Append one JSON line to ``path`` (one short write: lines from several processes do not interleave)."""
    line = json.dumps({"t": round(time.time() - START, 4), **fields}) + "\n"
    with open(path, "a") as file:
        file.write(line)


def domains(searched: dict[str, list[Any]], names: dict[str, str] | None = None) -> dict[str, Any]:
    """Tune's sampling domains for the searched ranges (log-uniform where ``log``)."""
    from ray import tune

    return {(names or {}).get(key, key): (tune.loguniform(lo, hi) if log else tune.uniform(lo, hi))
            for key, (lo, hi, log) in searched.items()}


def our_trainable(job: dict[str, Any]) -> Any:
    """A function trainable: build (or reuse) our learner, load the checkpoint Tune gives (a donor's state after an
    exploit), then train rounds of ``interval`` env steps, each reported with a checkpoint of the learned state.
    Each trial reserves what an evolve.py learner does: its own CPUs and a bundle per sampling actor."""
    import torch
    from ray import tune

    from lamarckian.config import load
    from lamarckian.config.sections import SampleSettings
    from lamarckian.ec.settings import EvolutionSettings
    from lamarckian.ec.space import SearchSpace
    from lamarckian.ec.worker import PopulationLearner

    base = SearchSpace.from_config(load(job["files"], job["modify"], ranges=True)).base
    sample = SampleSettings.from_config(base)
    bundles = [{"CPU": EvolutionSettings.from_config(base).learner_cpus}] + [{"CPU": sample.num_cpus}] * sample.actors

    def train_member(hparams: dict[str, Any]) -> None:
        if "learner" not in _CACHE:
            _CACHE["learner"] = PopulationLearner(base, 0)
        learner, state, cost = _CACHE["learner"], None, 0
        checkpoint = tune.get_checkpoint()
        if checkpoint is not None:
            with checkpoint.as_directory() as folder:
                saved = torch.load(Path(folder) / "state.pt", weights_only=True)
            state, cost = saved["state"], int(saved["env_steps"])
        rounds = 0
        while True:
            report = learner.train({"id": rounds, "hparams": dict(hparams), "state": state,
                                    "seed": job["seed"] + rounds, "scale": 1.0, "weight_noise": 0.0})
            state, cost, rounds = report["state"], cost + int(report["cost"]), rounds + 1
            with tempfile.TemporaryDirectory() as folder:
                torch.save({"state": state, "env_steps": cost}, Path(folder) / "state.pt")
                tune.report({"fitness": float(report["summary"][job["metric"]]), "env_steps": cost,
                             "round_seconds": float(report["seconds"])},
                            checkpoint=tune.Checkpoint.from_directory(folder))

    return tune.with_resources(train_member, tune.PlacementGroupFactory(bundles))


def rllib_trainable(job: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """RLlib's PPO (the class Tune runs) and its configuration with the searched keys as Tune domains."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    spec = job["rllib"]
    runners = dict(spec["env_runners"])
    if spec.get("mean_std_filter"):          # observations normalized by running statistics, as RLlib's example
        from ray.rllib.connectors.env_to_module import MeanStdFilter

        runners["env_to_module_connector"] = lambda env, spaces, device: MeanStdFilter()
    config = (PPOConfig().environment(spec["env"])
              .env_runners(**runners)
              .training(**spec["training"])
              .rl_module(model_config=DefaultModelConfig(**spec["model"]))
              .evaluation(evaluation_interval=1, evaluation_duration=job["episodes"],
                          evaluation_duration_unit="episodes", evaluation_num_env_runners=0,
                          evaluation_config=PPOConfig.overrides(explore=False))
              .reporting(min_sample_timesteps_per_iteration=job["interval"])
              .debugging(seed=job["seed"]))
    return "PPO", {**config.to_dict(), **domains(job["searched"], RLLIB_KEYS)}


def main() -> None:
    job = json.loads(sys.argv[1])
    import ray
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    ray.init(address="local", num_cpus=job["cpus"], include_dashboard=False, log_to_driver=False)
    rllib = job["side"] == "rllib"
    metric = "evaluation/env_runners/episode_return_mean" if rllib else "fitness"
    time_attr = "num_env_steps_sampled_lifetime" if rllib else "env_steps"
    mutations = domains(job["searched"], RLLIB_KEYS if rllib else None)
    scheduler = PopulationBasedTraining(time_attr=time_attr, metric=metric, mode="max",
                                        perturbation_interval=job["interval"], hyperparam_mutations=mutations,
                                        quantile_fraction=job["quantile"], resample_probability=0.0,
                                        perturbation_factors=tuple(job["factors"]))
    random.seed(job["seed"])            # Tune's PBT draws its donors and factors from Python's random module
    if rllib:
        trainable, space = rllib_trainable(job)
    else:
        trainable, space = our_trainable(job), domains(job["searched"])

    def fitness(result: dict[str, Any]) -> float:
        value: Any = result
        for part in metric.split("/"):
            value = value.get(part, {}) if isinstance(value, dict) else {}
        return float(value) if isinstance(value, (int, float)) else float("nan")

    class Reached(tune.Stopper):
        """Ends every trial once a member's evaluation reaches the threshold or the time limit passes; writes
        each evaluation to the events file as it arrives."""

        def __init__(self) -> None:
            self.done = False

        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            value = fitness(result)
            hparams = {key: result["config"].get(RLLIB_KEYS[key] if rllib else key) for key in job["searched"]}
            event(job["events"], member=trial_id, fitness=value, env_steps=int(result.get(time_attr, 0)),
                  round_seconds=float(result.get("round_seconds", result.get("time_this_iter_s", 0.0))),
                  hparams=hparams)
            self.done = self.done or value >= job["threshold"]
            return self.done

        def stop_all(self) -> bool:
            return self.done or time.time() - START >= job["limit"]

    with tempfile.TemporaryDirectory() as storage:
        tuner = tune.Tuner(trainable, param_space=space,
                           tune_config=tune.TuneConfig(scheduler=scheduler, num_samples=job["population"],
                                                       reuse_actors=not rllib),
                           run_config=tune.RunConfig(stop=Reached(), storage_path=storage, verbose=0,
                                                     checkpoint_config=tune.CheckpointConfig(num_to_keep=job["population"])))
        tuner.fit()
    ray.shutdown()


if __name__ == "__main__":
    main()
