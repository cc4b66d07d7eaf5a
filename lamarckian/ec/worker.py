"""A learner process of evolve.py: trains whichever individual it is given for one round and reports back.

It keeps its sampling actors between rounds (a new individual's weights are sent to them). An individual with other
``mdp`` settings has the actors rebuild their environments in place; one that changes the ``model`` or ``sample``
sections, ``rl.swap`` or ``rl.opponent.rule`` (or the players' spaces) gets fresh actors.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import socket
import time
from typing import Any, Mapping

import numpy as np
import torch

from .. import rpc
from ..cli import configure_process
from ..config import Expression
from ..config.sections import EvaluatorSettings, OpponentSettings, RLSettings, SampleSettings
from ..model import to_blob
from ..remote.fleet import connect
from ..rl.algorithms.ppo_settings import held_by_state
from ..rl.evaluator import Evaluator
from ..rl.fleet.factory import fleet_learner
from ..rl.fleet.learner import Learner
from ..rl.loop import Trainer, TrainingLoop
from .settings import RoundSettings
from .space import with_values

#: config sections the sampling actors are built from (besides ``mdp``): a change restarts them.
ACTOR_SECTIONS = ("model", "sample")


def _set_lr(learner: Learner, value: Any) -> None:
    learner.set_lr(float(value))


#: searched settings that a trained state holds too (the fields PPOSettings declares so), each with how a learner
#: takes the individual's value once its (donor's) state is loaded: the state's learning rate is where the donor's
#: schedule stood, and an update rule (a user's own as well) restores it with the optimizer
HELD_BY_STATE = {key: {"lr": _set_lr}[name] for key, name in held_by_state().items()}   # a new one: its setter


def round_config(base: Mapping[str, Any], hparams: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The learner's config for one individual: the base with its hyper-parameters and seed; no periodic
    evaluation, no files, no terminal display (the engine records everything)."""
    config = with_values(base, hparams)
    config["seed"] = int(seed)
    config["evaluator"] = {**config["evaluator"], "episodes": 0, "terminate": None, "tensorboard": False,
                           "progress": False}
    return config


def actor_fingerprint(config: Mapping[str, Any]) -> str:
    return json.dumps([{k: config[k] for k in ACTOR_SECTIONS}, RLSettings.from_config(config).swap,
                       OpponentSettings.from_config(config).rule], sort_keys=True, default=str)


def owned(value: Any) -> Any:
    """A deep copy whose tensors and arrays own their memory (received ones are views of network buffers)."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {k: owned(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(owned(v) for v in value)
    return value


class RoundStopper:
    """``ec.train.stopper`` over counters since the round started, divided by the round's ``scale``:
    ``self.cost`` (env steps), ``self.iteration``, ``self.time`` (s), ``self.plateau`` (iterations since the
    training fitness last improved) and ``self.training.<mean>``."""

    def __init__(self, source: str, learner: Trainer, scale: float) -> None:
        self.rule = Expression(source)
        self.scale = max(float(scale), 1e-9)
        self.cost, self.iteration, self.started = learner.cost, learner.iteration, time.monotonic()
        self.best, self.since_best = -math.inf, 0

    def __call__(self, learner: Trainer) -> bool:
        fitness = learner.training.get("fitness", math.nan)
        if not math.isnan(fitness) and fitness > self.best:
            self.best, self.since_best = fitness, 0
        else:
            self.since_best += 1
        names = {"cost": (learner.cost - self.cost) / self.scale,
                 "iteration": (learner.iteration - self.iteration) / self.scale,
                 "time": (time.monotonic() - self.started) / self.scale, "plateau": self.since_best,
                 "training": dict(learner.training)}
        return bool(self.rule.evaluate({"self": names}))


@rpc.any
class PopulationLearner:
    """Trains individuals round by round with its own fleet of ``sample.actors`` actors.

    Args:
        config: the run's base configuration (search ranges replaced by values).
        index: this learner's number (for records).
        own_process: alone in its process: it sets the process-wide torch settings (see ``configure_process``).
    """

    def __init__(self, config: Mapping[str, Any], index: int, *, own_process: bool = True) -> None:
        if own_process:                      # a Ray actor (not an object of evolve.py's process: --debug)
            configure_process(config)
        self.base = config
        self.index = index
        self.learner: Learner | None = None
        self.fingerprint = ""

    def _learner_for(self, config: dict[str, Any]) -> Learner:
        fingerprint = actor_fingerprint(config)
        learner = self.learner
        if learner is not None and fingerprint == self.fingerprint:
            mdp_changed = config["mdp"] != learner.config["mdp"]
            learner.configure(config)
            if not mdp_changed or not learner.fleet.started:
                return learner
            try:
                learner.fleet.call_all(lambda: learner.fleet.everyone("set_mdp", config["mdp"]))
                return learner
            except rpc.RemoteError as error:  # other spaces (ValueError): the actors' networks no longer fit
                if error.type_name != "builtins.ValueError":
                    raise
        if learner is not None:
            learner.close()
        self.learner, self.fingerprint = fleet_learner(config, connect), fingerprint
        return self.learner

    def train(self, task: Mapping[str, Any]) -> dict[str, Any]:
        """One round for the individual ``task`` (see :meth:`Individual.task`): load its state, train until the
        stopper holds, evaluate ``sample.eval`` episodes. Returns the learned state and the scores."""
        config = round_config(self.base, task["hparams"], task["seed"])
        learner = self._learner_for(config)
        if task.get("state") is not None:
            version = learner.version
            learner.load_state_dict(owned(task["state"]))
            learner.version = version
            for key, apply in HELD_BY_STATE.items():
                if key in task["hparams"]:
                    apply(learner, task["hparams"][key])
        if task.get("weight_noise"):
            generator = torch.Generator().manual_seed(int(task["id"]))
            with torch.no_grad():
                for parameter in learner.model.parameters():
                    parameter.add_(torch.randn(parameter.shape, generator=generator) * float(task["weight_noise"]))
        if task.get("opponents"):
            learner.play_against(member_blobs(learner.model, task["opponents"]))
        learner.publish()
        started, cost, iterations = time.monotonic(), learner.cost, learner.iteration
        stopper = RoundStopper(RoundSettings.from_config(config).stopper, learner, task.get("scale", 1.0))
        TrainingLoop(learner, announce=False).run(stop=stopper)
        evaluator = Evaluator(dataclasses.replace(EvaluatorSettings.from_config(config), interval=0.0,
                                                  episodes=SampleSettings.from_config(config).eval, terminate=None))
        fleet = learner.fleet
        evaluator.plan(learner.training.get("length", math.nan))
        summary = fleet.call_all(lambda: evaluator.evaluate(fleet.everyone)) if evaluator.episodes else {}
        state = learner.state_dict()
        if "opponents" in task:
            state["pool"] = None  # population self-play: the pool is the population, not the individual's
        return {"id": task["id"], "state": state, "summary": summary,
                "episodes": [r.fitness for r in evaluator.results], "training": dict(learner.training),
                "cost": learner.cost - cost, "iterations": learner.iteration - iterations,
                "seconds": time.monotonic() - started, "learner": self.index, "node": node_name()}

    def close(self) -> None:
        if self.learner is not None:
            self.learner.close()
            self.learner = None


def member_blobs(template: torch.nn.Module, states: Mapping[int, Mapping[str, torch.Tensor]]) -> dict[int, np.ndarray]:
    """Weight blobs of other members, received as model state dicts (id → state), through a copy of ``template``."""
    scratch = copy.deepcopy(template)
    blobs = {}
    for member_id, model_state in states.items():
        scratch.load_state_dict(owned(model_state))
        blobs[int(member_id)] = to_blob(scratch)
    return blobs


def node_name() -> str:
    """The Ray node id this process runs on (the host name outside Ray)."""
    try:
        import ray

        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except ImportError:
        pass
    return socket.gethostname()
