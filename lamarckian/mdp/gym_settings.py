"""The ``mdp.gym`` keys as a typed section (torch-free and gymnasium-free: ``load()`` checks them before anything
starts; the wrappers and the registering function are imported only where an environment is made)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..config.sections import Section, require
from ..registry import is_plugin


@dataclasses.dataclass(frozen=True)
class Wrapper:
    """One entry of ``mdp.gym.wrappers``: the ``module:Class`` of a ``gymnasium.Wrapper`` and its keyword
    arguments (the environment is its first argument)."""

    spec: str
    kwargs: tuple[tuple[str, Any], ...]

    @staticmethod
    def parse(entry: Any, key: str) -> Wrapper:
        """``module:Class`` or ``{class: module:Class, kwargs: {...}}`` (ValueError naming ``key`` otherwise)."""
        if is_plugin(entry):
            return Wrapper(entry, ())
        if isinstance(entry, dict) and is_plugin(entry.get("class")) and set(entry) <= {"class", "kwargs"} \
                and isinstance(entry.get("kwargs") or {}, dict):
            return Wrapper(entry["class"], tuple((entry.get("kwargs") or {}).items()))
        raise ValueError(f"{key}={entry!r}: expected module:Class or {{class: module:Class, kwargs: {{...}}}}")


@dataclasses.dataclass(frozen=True)
class GymSettings(Section):
    """The ``mdp.gym`` keys (``mdp.create: gym``).

    Attributes:
        id: the gymnasium id (``package:Id`` imports ``package`` first, as ``gymnasium.make`` does).
        kwargs: keyword arguments of ``gymnasium.make``.
        preprocess: null, or ``atari``: the standard Atari preprocessing of ``mdp.gym.atari``.
        frame_stack: observations stacked (1: none).
        observe: only these entries of a 1-D Box observation (null: all).
        register: ``module:function`` called (without arguments) before ``gymnasium.make``, for a package that
            registers its ids by a function (MinAtar's ``register_envs``); or a ``module`` imported for its
            registrations.
        wrappers: applied in order after ``gymnasium.make`` (and the Atari preprocessing), before ``observe`` and
            the frame stack: ``module:Class`` or ``{class: module:Class, kwargs: {...}}`` each.
        text: text parts of observations (gymnasium ``Text``, MiniGrid's ``mission``): their words counted in this
            many buckets (a word's bucket: its CRC-32 modulo ``text``); 0 leaves them out.
    """

    KEY = "mdp.gym"
    OTHER_KEYS = ("atari",)

    id: str
    kwargs: dict[str, Any]
    preprocess: str | None
    frame_stack: int
    observe: tuple[int, ...] | None
    register: str | None
    wrappers: tuple[Any, ...]
    text: int

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"mdp.gym.id={self.id!r}: expected a gymnasium id")
        if not isinstance(self.kwargs, dict):
            raise ValueError(f"mdp.gym.kwargs={self.kwargs!r}: expected a mapping of keyword arguments")
        if self.preprocess not in (None, "atari"):
            raise ValueError(f"mdp.gym.preprocess={self.preprocess!r}: expected null or 'atari'")
        if self.register is not None and (not isinstance(self.register, str) or not self.register.strip(":")):
            raise ValueError(f"mdp.gym.register={self.register!r}: expected module:function or a module")
        if not isinstance(self.wrappers, tuple):
            raise ValueError(f"mdp.gym.wrappers={self.wrappers!r}: expected a list")
        for index, entry in enumerate(self.wrappers):
            Wrapper.parse(entry, f"mdp.gym.wrappers[{index}]")
        require(self, frame_stack=isinstance(self.frame_stack, int) and self.frame_stack >= 1,
                text=isinstance(self.text, int) and not isinstance(self.text, bool) and self.text >= 0)

    def parsed_wrappers(self) -> list[Wrapper]:
        """:attr:`wrappers`, each parsed."""
        return [Wrapper.parse(entry, f"mdp.gym.wrappers[{index}]") for index, entry in enumerate(self.wrappers)]
