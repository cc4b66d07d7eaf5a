"""PPO's settings (IMPALA's and A3C's too): torch-free, so ``load()`` checks them before any process starts."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Mapping

from ...config import lookup, per_device
from ...config.sections import RLSettings, TrainSettings, convert_value, default_config

LR_SCHEDULES = ("constant", "linear", "adaptive")
OBJECTIVES = ("clip", "vtrace")


def _from(key: str, *, per_member: bool = False, held_by_state: bool = False) -> Any:
    """A settings field read from config ``key``. ``per_member``: a vectorized population's members may each have
    their own value (evolve.py may search it there); ``held_by_state``: a trained state holds it too (the optimizer's
    learning rate), so a learner given an individual's value after loading a donor's state sets it again."""
    return dataclasses.field(metadata={"key": key, "per_member": per_member, "held_by_state": held_by_state})


@dataclasses.dataclass(frozen=True)
class PPOSettings:
    """PPO hyper-parameters (from ``rl``, ``rl.ppo`` and ``train``; see lamarckian.yml, the only place with
    defaults: :meth:`defaults` reads them). Each field names its config key, and says whether the members of a
    vectorized population may differ in it: the one declaration :func:`member_keys` and evolve.py read."""

    discount: float = _from("rl.discount", per_member=True)
    gae: float = _from("rl.gae", per_member=True)
    clip: float = _from("rl.ppo.clip", per_member=True)
    clip_value: float | None = _from("rl.ppo.clip_value")
    epochs: int = _from("rl.ppo.epochs")
    minibatches: int = _from("rl.ppo.minibatches")          # or one count per device type
    normalize_advantage: bool = _from("rl.ppo.normalize_advantage")
    critic: float = _from("rl.ac.weight_loss.critic", per_member=True)
    entropy: float = _from("rl.ac.weight_loss.entropy", per_member=True)
    lr: float = _from("train.lr", per_member=True, held_by_state=True)
    lr_schedule: str = _from("train.lr_schedule")
    lr_horizon: float = _from("train.lr_horizon")
    kl_target: float = _from("rl.ppo.kl_target", per_member=True)
    grad_clip: float | None = _from("train.grad_clip")
    rho: float = _from("rl.ppo.rho")
    max_staleness: int = _from("rl.ppo.max_staleness")
    objective: str = _from("rl.ppo.objective")

    def __post_init__(self) -> None:
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"train.lr_schedule={self.lr_schedule!r}: expected one of {LR_SCHEDULES}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"rl.ppo.objective={self.objective!r}: expected one of {OBJECTIVES}")
        holds = {"epochs": self.epochs >= 1, "minibatches": self.minibatches >= 1, "clip": self.clip > 0,
                 "clip_value": self.clip_value is None or self.clip_value > 0, "critic": self.critic >= 0,
                 "entropy": self.entropy >= 0, "lr": self.lr >= 0, "lr_horizon": self.lr_horizon > 0,
                 "kl_target": self.kl_target >= 0, "grad_clip": self.grad_clip is None or self.grad_clip > 0,
                 "rho": self.rho > 0, "max_staleness": self.max_staleness >= 0}
        fields = {field.name: field for field in dataclasses.fields(self)}
        for name, held in holds.items():
            if not held:
                raise ValueError(f"{fields[name].metadata['key']}={getattr(self, name)!r}: out of range")

    @classmethod
    def from_config(cls, config: Mapping[str, Any], device_type: str = "cpu") -> "PPOSettings":
        """Each field from its key (``rl``, ``rl.ppo``, ``rl.ac.weight_loss``, ``train``), after the typed ``rl`` and
        ``train`` sections have checked theirs; ``rl.ppo.minibatches`` may give one count per device type."""
        RLSettings.from_config(config), TrainSettings.from_config(config)          # their checks, their errors
        hints = typing.get_type_hints(cls)
        values = {field.name: lookup(config, field.metadata["key"]) for field in dataclasses.fields(cls)}
        values["minibatches"] = per_device(values["minibatches"], device_type, "rl.ppo.minibatches")
        return cls(**{name: convert_value(value, hints[name]) for name, value in values.items()})

    @classmethod
    def defaults(cls, device_type: str = "cpu", **changes: Any) -> "PPOSettings":
        """The packaged defaults with ``changes``."""
        return dataclasses.replace(cls.from_config(default_config(), device_type), **changes)


def member_keys() -> dict[str, str]:
    """The :class:`PPOSettings` fields a vectorized population's members may each have their own value of, by
    config key (``{"train.lr": "lr", ...}``)."""
    return {f.metadata["key"]: f.name for f in dataclasses.fields(PPOSettings) if f.metadata["per_member"]}


def held_by_state() -> dict[str, str]:
    """The :class:`PPOSettings` fields a trained state holds too, by config key (``{"train.lr": "lr"}``)."""
    return {f.metadata["key"]: f.name for f in dataclasses.fields(PPOSettings) if f.metadata["held_by_state"]}
