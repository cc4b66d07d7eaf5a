"""Typed config sections: frozen dataclasses whose fields are one section of ``lamarckian.yml``.

The defaults live only in the YAML: a section class has no default values of its own, so a key added, renamed or
removed in one place and not the other is an error at start-up (and ``tests/config/test_sections.py`` checks
every section class against the YAML). ``Section.defaults(**changes)`` builds one from the packaged defaults, for
library use and tests.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import typing
from typing import Any, ClassVar, Mapping, TypeVar

from ..registry import ALGORITHMS, ENVIRONMENTS, VECTORIZED
from .errors import ConfigError
from .loader import read_config

T = TypeVar("T", bound="Section")


@functools.lru_cache(maxsize=1)
def default_config() -> dict[str, Any]:
    """The packaged defaults, resolved (no files, no edits)."""
    return read_config()[0]


def key_path(section: str, key: str) -> str:
    """``section.key`` (just ``key`` at the top of the configuration)."""
    return f"{section}.{key}" if section else key


def lookup_section(config: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The mapping at the dotted ``key`` (``""``: the whole configuration)."""
    node: Any = config
    for part in key.split(".") if key else ():
        if not isinstance(node, Mapping) or part not in node:
            raise ConfigError(f"the configuration has no section {key}")
        node = node[part]
    if not isinstance(node, Mapping):
        raise ConfigError(f"{key}: expected a mapping, got {type(node).__name__}")
    return node


class Section:
    """A frozen dataclass over the YAML section ``KEY`` (subclasses are ``@dataclasses.dataclass(frozen=True)``).

    ``OTHER_KEYS``: keys of that section that belong to someone else (not fields of this class).
    """

    KEY: ClassVar[str]
    OTHER_KEYS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_mapping(cls: type[T], mapping: Mapping[str, Any]) -> T:
        """The section from its mapping: every field must be there, every other key must be in ``OTHER_KEYS``;
        numbers are converted to the field's type (a YAML ``1`` for a float field)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}      # type: ignore[arg-type]  # sections are dataclasses
        missing = [name for name in fields if name not in mapping]
        if missing:
            raise ConfigError(f"{cls.KEY or 'the configuration'}: missing key(s) "
                              f"{', '.join(key_path(cls.KEY, m) for m in missing)}")
        extra = [key for key in mapping if key not in fields and key not in cls.OTHER_KEYS]
        if extra:
            raise ConfigError(f"{cls.KEY or 'the configuration'}: unknown key(s) "
                              f"{', '.join(key_path(cls.KEY, e) for e in extra)}")
        hints = typing.get_type_hints(cls)
        return cls(**{name: convert_value(mapping[name], hints[name]) for name in fields})

    @classmethod
    def from_config(cls: type[T], config: Mapping[str, Any]) -> T:
        """The section of a whole resolved configuration."""
        return cls.from_mapping(lookup_section(config, cls.KEY))

    @classmethod
    def defaults(cls: type[T], **changes: Any) -> T:
        """The packaged defaults of the section, with ``changes``."""
        return cls.from_mapping({**lookup_section(default_config(), cls.KEY), **changes})


def require(section: Section, **conditions: bool) -> None:
    """ValueError ``key=value: out of range`` for the first condition that does not hold."""
    for name, holds in conditions.items():
        if not holds:
            raise ValueError(f"{key_path(section.KEY, name)}={getattr(section, name)!r}: out of range")


def convert_value(value: Any, hint: Any) -> Any:
    """YAML numbers into the field's numeric type; lists into tuples for tuple fields; the rest as it is."""
    if value is None:
        return None
    options = [h for h in typing.get_args(hint) if h is not type(None)] if typing.get_origin(hint) is typing.Union \
        or type(hint).__name__ == "UnionType" else [hint]
    target = options[0] if len(options) == 1 else None
    if target is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if typing.get_origin(target) is tuple and isinstance(value, (list, tuple)):
        element = typing.get_args(target)[0] if typing.get_args(target) else None
        return tuple(convert_value(item, element) for item in value)
    return value


def _is_device(name: str) -> bool:
    """A torch device name this project places a learner on: cpu, cuda, cuda:N."""
    return re.fullmatch(r"cpu|cuda(:\d+)?", str(name)) is not None


@dataclasses.dataclass(frozen=True)
class RunSettings(Section):
    """The run's own keys at the top of the configuration: its folder and its seed (every random stream of the run
    derives from it: :mod:`lamarckian.rl.seeds`)."""

    KEY = ""
    OTHER_KEYS = ("ray", "rpc", "mdp", "model", "rl", "sample", "train", "evaluator", "ec")

    root: str
    seed: int


@dataclasses.dataclass(frozen=True)
class RaySettings(Section):
    """``ray``: where Ray runs (``address``: a cluster's; else a local one of ``num_cpus``), or ``local_mode``:
    every actor an object of this process (``--debug``); ``launch``: whether a run on this machine starts its
    actors as plain child processes instead (see :meth:`uses_ray`)."""

    KEY = "ray"
    LAUNCHES = ("auto", "processes", "ray")

    address: str | None
    num_cpus: float | None
    local_mode: bool
    launch: str

    def __post_init__(self) -> None:
        if self.launch not in self.LAUNCHES:
            raise ValueError(f"ray.launch={self.launch!r}: one of {', '.join(self.LAUNCHES)}")

    def uses_ray(self, gpus: int = 1) -> bool:
        """Whether train.py's actor fleet starts (or joins) Ray: ``launch: ray``, a cluster ``address``, or the
        Ray ranks of ``train.gpus`` > 1; else (``auto``, ``processes``) the actors are child processes of this
        one, started without Ray. Never in ``local_mode``."""
        if self.local_mode:
            return False
        if self.launch == "processes" and (self.address or gpus > 1):
            raise ValueError(f"ray.launch=processes starts actors on this machine without Ray; "
                             f"{'ray.address=' + repr(self.address) if self.address else f'train.gpus={gpus}'} "
                             "needs Ray (ray.launch: auto or ray)")
        return self.launch == "ray" or bool(self.address) or gpus > 1


@dataclasses.dataclass(frozen=True)
class MDPSettings(Section):
    """``mdp``: which environment (``create``) and what wraps every controller. The environments' own sub-sections
    are open mappings handed to their factories (:func:`lamarckian.mdp.create_mdp`), the documented exception."""

    KEY = "mdp"
    OTHER_KEYS = ("realtime", "resize", "reward", VECTORIZED, "evaluation", *ENVIRONMENTS.names())  # each kind: its own

    create: str
    kwargs: dict[str, Any]
    frame_skip: int
    idle_action: int | None
    idle_reward: float
    hitch: float | None

    def __post_init__(self) -> None:
        require(self, hitch=self.hitch is None or self.hitch > 0)


@dataclasses.dataclass(frozen=True)
class RewardSettings(Section):
    """``mdp.reward``: how a vector reward (one entry per objective) becomes the number the learner maximizes.

    Attributes:
        weights: the weight of each entry (the reward trained on is their weighted sum); None: the reward is a
            number (an environment with a vector reward refuses to start without weights).
    """

    KEY = "mdp.reward"

    weights: tuple[float, ...] | None

    def __post_init__(self) -> None:
        if self.weights is not None and (not self.weights or not all(
                isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) for w in self.weights)):
            raise ValueError(f"mdp.reward.weights={list(self.weights)!r}: expected a list of finite numbers, one per "
                             "entry of the reward")


@dataclasses.dataclass(frozen=True)
class RLSettings(Section):
    """``rl``: the algorithm (a built-in name or ``module:ClassName``, built with ``kwargs``) and what every
    algorithm shares: the discount and GAE λ, and who plays which seat in games (see lamarckian.yml)."""

    KEY = "rl"
    OTHER_KEYS = ("ac", "remote", "opponent", *ALGORITHMS.names())    # each built-in algorithm: its section, if any

    algorithm: str
    kwargs: dict[str, Any]
    discount: float
    gae: float
    swap: bool
    shared_seats: bool
    policies: dict[str, Any]
    policy_mapping: str

    def __post_init__(self) -> None:
        require(self, algorithm=isinstance(self.algorithm, str) and bool(self.algorithm),
                 kwargs=isinstance(self.kwargs, dict), discount=0 <= self.discount <= 1, gae=0 <= self.gae <= 1)


@dataclasses.dataclass(frozen=True)
class TrainSettings(Section):
    """``train``: the learner's optimizer and batch (see lamarckian.yml)."""

    KEY = "train"
    OTHER_KEYS = ("replay",)

    lr: float
    lr_schedule: str
    lr_horizon: float
    grad_clip: float | None
    batch: int
    threads: int
    device: str
    gpus: int
    ranks: int
    rank_gpus: float
    rank_cpus: float
    rank_timeout: float

    def __post_init__(self) -> None:
        require(self, lr=self.lr >= 0, lr_horizon=self.lr_horizon > 0, batch=self.batch >= 1,
                 threads=self.threads >= 0,
                 grad_clip=self.grad_clip is None or self.grad_clip > 0, rank_timeout=self.rank_timeout > 0,
                 ranks=self.ranks >= 1, rank_gpus=self.rank_gpus >= 0, rank_cpus=self.rank_cpus >= 0,
                 device=self.device == "auto" or _is_device(self.device), gpus=self.gpus >= 1)


@dataclasses.dataclass(frozen=True)
class SampleSettings(Section):
    """``sample``: the actor fleet (actors, environments per actor, segment length, back-pressure, CPUs each, the
    longest a waiting request is held for a bigger batch in seconds, the seconds without an iteration after which
    the console says what the run waits for, and a run in which not one env step finished then stops)."""

    KEY = "sample"

    actors: int
    num_cpus: float
    envs: int
    truncation: int
    credits: int
    sync: bool
    eval: int
    batch_wait: float | None
    stall: float

    def __post_init__(self) -> None:
        require(self, actors=self.actors >= 1, num_cpus=self.num_cpus >= 0, envs=self.envs >= 1,
                 truncation=self.truncation >= 1, credits=self.credits >= 1, eval=self.eval >= 0,
                 batch_wait=self.batch_wait is None or self.batch_wait > 0, stall=self.stall > 0)


@dataclasses.dataclass(frozen=True)
class CheckpointSettings(Section):
    """``evaluator.checkpoint``: seconds between checkpoints, how many are kept."""

    KEY = "evaluator.checkpoint"

    interval: float
    keep: int

    def __post_init__(self) -> None:
        require(self, interval=self.interval >= 0, keep=self.keep >= 1)


@dataclasses.dataclass(frozen=True)
class EvaluatorSettings(Section):
    """``evaluator``: evaluation cadence and size, the stop rule, what a run records (``checkpoint`` is
    :class:`CheckpointSettings`)."""

    KEY = "evaluator"
    OTHER_KEYS = ("checkpoint",)

    interval: float
    interval_steps: int
    share: float
    beside: bool
    episodes: int
    opponent: str
    steps: int
    max_steps: int
    terminate: str | None
    tensorboard: bool
    progress: bool
    wandb: str | None

    def __post_init__(self) -> None:
        require(self, interval=self.interval >= 0, interval_steps=self.interval_steps >= 0,
                 share=0 <= self.share <= 1, episodes=self.episodes >= 0, steps=self.steps >= 0,
                 max_steps=self.max_steps >= 0)


@dataclasses.dataclass(frozen=True)
class OpponentSettings(Section):
    """``rl.opponent``: who plays the other seats in training games (``pool`` is the pool's own section)."""

    KEY = "rl.opponent"
    OTHER_KEYS = ("pool",)

    rule: float
    deterministic: float

    def __post_init__(self) -> None:
        require(self, rule=0 <= self.rule <= 1, deterministic=0 <= self.deterministic <= 1)


@dataclasses.dataclass(frozen=True)
class RemoteSettings(Section):
    """``rl.remote``: train from internet rollout workers through ``python -m lamarckian.remote server``."""

    KEY = "rl.remote"

    server: str | None
    key: str | None
    server_key: str | None
    timeout: float
    publish: float
    batch: int

    def __post_init__(self) -> None:
        require(self, timeout=self.timeout > 0, publish=self.publish >= 0, batch=self.batch >= 1)
        if self.server is None:
            return
        if not str(self.server).startswith("tcp://"):
            raise ValueError(f"rl.remote.server={self.server!r}: expected tcp://HOST:PORT")
        missing = [name for name in ("key", "server_key") if not getattr(self, name)]
        if missing:
            raise ValueError(f"rl.remote.server is set: give {' and '.join(f'rl.remote.{m}' for m in missing)} "
                             "(the trainer's NAME.key_secret and the server's public .key; docs/remote.md)")


#: the sections of this layer, built (and so checked) by ``load()``
RUN_SECTIONS = (RunSettings, RaySettings, MDPSettings, RewardSettings, RLSettings, TrainSettings, SampleSettings,
                EvaluatorSettings, CheckpointSettings, OpponentSettings, RemoteSettings)


def check_sections(config: Mapping[str, Any], sources: Any) -> None:
    """Build every section of :data:`RUN_SECTIONS` from ``config``, those of every built-in algorithm, and those of
    the environment kind the run chooses (the registries name them: ``rl.dqn``, ``rl.ppo``, ``mdp.game`` for game...;
    all torch-free; the other kinds' modules are not imported): a value out of range is a ConfigError naming the key
    and the file (or ``-m``) that set it, before any process starts."""
    algorithms = dict.fromkeys(cls for name in ALGORITHMS.names() for cls in ALGORITHMS.sections(name))
    for cls in (*RUN_SECTIONS, *algorithms, *ENVIRONMENTS.sections((config.get("mdp") or {}).get("create"))):
        try:
            cls.from_config(config)
        except ValueError as error:
            key = str(error).split("=", 1)[0]
            raise ConfigError(f"{error} (from {sources.of(key)})") from None
