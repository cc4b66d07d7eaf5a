"""A3C's learner: applies the actors' gradients (:func:`.a3c.segment_gradient`) as they arrive and broadcasts the
weights."""

from __future__ import annotations

import math
import time
from typing import Any, Mapping

import numpy as np
import torch
from torch import nn

from ...config.sections import TrainSettings
from ...model import to_blob
from ...rating.results import EpisodeResult
from ..algorithms.ppo_settings import PPOSettings
from ..evaluator import summarize
from .learner import Learner


class A3CLearner(Learner):
    """Applies the actors' gradients (``rl.algorithm: a3c``) with Adam at ``train.lr``, clipped at
    ``train.grad_clip``; an iteration applies the gradients that have arrived (at least one) and broadcasts."""

    def build_update(self, config: Mapping[str, Any]) -> None:
        train = TrainSettings.from_config(config)
        self.parameters = list(self.model.parameters())
        self.optimizer = torch.optim.Adam(self.parameters, lr=train.lr)
        self.grad_clip = train.grad_clip
        self.staleness_limit = PPOSettings.from_config(config).max_staleness
        self.stale = self.malformed = 0

    @property
    def lr(self) -> float:
        """The learning rate now."""
        return float(self.optimizer.param_groups[0]["lr"])

    @property
    def size(self) -> int:
        """The length of a gradient: the network's parameters, flat."""
        return sum(p.numel() for p in self.parameters)

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    @property
    def max_staleness(self) -> int:
        return self.staleness_limit

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "lr": self.lr,
                **self.counters()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.set_lr(float(state["lr"]))
        self.load_counters(state)

    def _apply(self, gradient: np.ndarray) -> float:
        """One optimizer step along ``gradient``; the gradient's norm before clipping."""
        flat = torch.from_numpy(gradient).to(self.parameters[0].device)
        offset = 0
        for parameter in self.parameters:
            count = parameter.numel()
            parameter.grad = flat[offset:offset + count].view_as(parameter).clone()
            offset += count
        norm = nn.utils.clip_grad_norm_(self.parameters, self.grad_clip if self.grad_clip is not None else math.inf)
        self.optimizer.step()
        return float(norm)

    def _receive(self, timeout: float | None) -> dict[str, Any] | None:
        """The next gradient message (None: nothing within ``timeout``, or an actor died and was replaced)."""
        try:
            message = self.fleet.next_message(timeout)
        except TimeoutError:
            self.fleet.poll()
            return None
        if message is None:               # a progress report, or a dead actor replaced
            return None
        gradient = message.get("gradient") if isinstance(message, Mapping) else None
        if not isinstance(gradient, np.ndarray) or gradient.shape != (self.size,) or gradient.dtype != np.float32 \
                or not np.isfinite(gradient).all():
            self.malformed += 1          # a broken actor's report: counted, never applied
            return None
        return message

    def step(self) -> dict[str, float]:
        """Apply every gradient that has arrived (waiting for the first), broadcast the weights."""
        started = time.monotonic()
        steps, applied = 0, 0
        norms: list[float] = []
        results: list[EpisodeResult] = []
        lags: list[int] = []
        self.fleet.poll()                  # replacements that Ray has started join now
        for _ in range(self.segments_per_poll):
            lost_all = not self.fleet.actors and self.fleet.remote is None     # every actor waits for Ray
            waiting = 1.0 if lost_all else None          # then look for a replacement every second
            message = self._receive(0.001 if applied else waiting)
            if message is None:
                if applied:
                    break
                continue
            steps += int(message["steps"])
            results.extend(EpisodeResult.from_wire(r) for r in message["results"])
            lag = self.version - int(message["version"])
            if lag > self.staleness_limit:
                self.stale += 1
                continue
            norms.append(self._apply(message["gradient"]))
            lags.append(lag)
            applied += 1
            self.version += 1
        self.iteration += 1
        self.cost += steps
        blob = to_blob(self.model)
        self.fleet.call_all(lambda: self.fleet.everyone.broadcast("set_weights", self.version, blob))
        if results:
            self.training = summarize(results)
        elapsed = max(1e-9, time.monotonic() - started)
        return {"gradients": float(applied), "grad_norm": float(np.mean(norms)) if norms else 0.0,
                "staleness": float(np.mean(lags)) if lags else 0.0, "staleness_max": float(max(lags, default=0)),
                "dropped": float(self.stale), "malformed": float(self.malformed),
                "replaced": float(self.fleet.replaced), "fps/overall": steps / elapsed}

    def status(self, stats: Mapping[str, float]) -> dict[str, str]:
        fields = {"return": f"{self.training.get('return', math.nan):.3g}",
                  "stale": f"{stats.get('staleness', 0.0):.2f}/{stats.get('staleness_max', 0.0):.0f}",
                  "dropped": str(self.stale)}
        if self.evaluator.latest.get("episodes"):
            fields["eval"] = f"{self.evaluator.latest['fitness']:.3g}"
        return fields
