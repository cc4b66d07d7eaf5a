"""One run of a peer library (stable-baselines3 or sbx) for bench/peers.py, in the peers' own environment.

Reads one JSON argument: ``library`` (sb3 | sbx), ``algorithm`` (PPO | SAC | DQN), ``env``, ``hyper`` (the
rl-baselines3-zoo values; ``"lin_<x>"`` is a linear schedule from x to 0, ``normalize`` wraps the environments in
VecNormalize as the zoo does, ``env_wrapper`` is a ``module:Class`` wrapping each environment, as the zoo's
key of that name, ``policy_kwargs.activation_fn`` is a name: relu | tanh), ``seed``, ``threshold``,
``eval_steps``, ``timesteps`` (the zoo's ``n_timesteps``: the budget, over which exploration and learning rates are
scheduled), ``episodes``, ``limit`` (seconds). Trains until a deterministic evaluation of ``episodes`` episodes,
every ``eval_steps`` env steps, reaches ``threshold``, or ``limit`` seconds pass since the process started; a null
``threshold`` trains the whole budget and evaluates the final weights too.

The evaluation point is ours (bench/peers.py): right after the update on the data the credited env steps include.
The library's callback is asked at the start of each rollout, after ``train()`` on the one before (PPO: a whole
rollout; SAC and DQN: every ``train_freq`` env steps), so the weights judged at ``steps`` have learned from all of
them. (Asked from ``_on_step``, as before 2026-11-29, PPO's weights were one rollout behind their credited steps.)

Prints one JSON line: ``reached``
(seconds from process start, the interpreter's own start included, to the end of that evaluation; null if not
reached), ``steps``, ``learn`` (seconds from process start to ``learn()``), ``curve`` ([env steps, mean return]).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lamarckian.timeline import process_start  # noqa: E402  (stdlib only: the peers' environment needs no more)

START = process_start()


def schedules(hyper: dict[str, Any], library: str) -> dict[str, Any]:
    """The zoo's ``lin_<x>`` strings as linear schedules (sbx takes the initial value: its optax optimizers are built
    with a constant rate)."""
    converted = {}
    for key, value in hyper.items():
        if isinstance(value, str) and value.startswith("lin_"):
            initial = float(value[4:])
            converted[key] = initial if library == "sbx" else (lambda progress, initial=initial: progress * initial)
        else:
            converted[key] = value
    return converted


def activation(name: str, library: str) -> Any:
    """``relu`` or ``tanh`` as the library's activation: a torch module class (sb3) or a JAX function (sbx)."""
    if library == "sbx":
        import jax

        return getattr(jax.nn, name)
    import torch

    return {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[name]


def wrapper_class(spec: str | None) -> Any:
    """The zoo's ``env_wrapper`` (``module:Class``, e.g. MiniGrid's ``FlatObsWrapper``: SB3 takes no text
    observation) as the class, or None."""
    if spec is None:
        return None
    import importlib

    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def main() -> None:
    job = json.loads(sys.argv[1])
    import gymnasium
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    if job["library"] == "sbx":
        import sbx as library
    else:
        import stable_baselines3 as library
    hyper = schedules(dict(job["hyper"]), job["library"])
    if "activation_fn" in hyper.get("policy_kwargs", {}):      # a name in JSON: the library's function
        hyper["policy_kwargs"] = {**hyper["policy_kwargs"],
                                  "activation_fn": activation(hyper["policy_kwargs"]["activation_fn"], job["library"])}
    n_envs, normalize = hyper.pop("n_envs", 1), hyper.pop("normalize", False)
    wrapper = wrapper_class(hyper.pop("env_wrapper", None))
    env = make_vec_env(job["env"], n_envs=n_envs, seed=job["seed"], wrapper_class=wrapper)
    evaluation_env: Any = gymnasium.make(job["env"]) if wrapper is None else wrapper(gymnasium.make(job["env"]))
    if normalize:
        env = VecNormalize(env, gamma=hyper.get("gamma", 0.99))
        evaluation_env = VecNormalize(make_vec_env(job["env"], n_envs=1, seed=job["seed"] + 1000,
                                                   wrapper_class=wrapper), training=False, norm_reward=False)
    model = getattr(library, job["algorithm"])("MlpPolicy", env, seed=job["seed"], verbose=0, **hyper)
    curve: list[list[float]] = []
    reached: list[float] = []
    learn = time.time() - START

    class Watch(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next_evaluation = job["eval_steps"]

        def _on_rollout_start(self) -> None:        # train() on every env step counted so far is done
            if self.num_timesteps >= self.next_evaluation:
                while self.next_evaluation <= self.num_timesteps:
                    self.next_evaluation += job["eval_steps"]
                if normalize:
                    evaluation_env.obs_rms = env.obs_rms
                mean = float(evaluate_policy(model, evaluation_env, n_eval_episodes=job["episodes"],
                                             deterministic=True)[0])
                curve.append([self.num_timesteps, mean])
                if job["threshold"] is not None and mean >= job["threshold"]:
                    reached.append(time.time() - START)

        def _on_step(self) -> bool:                  # the run ends at the first step after the crossing
            return not reached and time.time() - START < job["limit"]

    model.learn(total_timesteps=job["timesteps"], callback=Watch())
    if job["threshold"] is None:                     # a fixed budget: the final weights are judged too
        if normalize:
            evaluation_env.obs_rms = env.obs_rms
        curve.append([model.num_timesteps, float(evaluate_policy(model, evaluation_env, n_eval_episodes=job["episodes"],
                                                                 deterministic=True)[0])])
    print(json.dumps({"reached": reached[0] if reached else None, "steps": curve[-1][0] if reached else None,
                      "learn": learn, "curve": curve}))


if __name__ == "__main__":
    main()
