"""Policies per role (``rl.policies``): asymmetric games whose seats differ (predators and prey, teams of other
bodies) train one policy per role, as RLlib's multi-agent API does with a policy per id and a mapping function.

:class:`Roles` says which policy plays each seat (``rl.policy_mapping``) and what each policy's configuration is (the
``model`` section with the policy's changes). Every seat plays its role's current policy and learns; each policy has
its own network (members of one :class:`~lamarckian.model.PolicySet`, so one weight blob carries them all), its own
optimizer and update, its own lanes and forward passes in the actors, and its own evaluation means
(``fitness_<policy>``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from ..config.sections import RLSettings
from ..mdp import MDP
from ..model import ModelSettings
from ..registry import is_plugin, load_plugin

PREFIX = "prefix"


def seat_prefix(name: str, seat: int) -> str:
    """The default mapping: a seat's name up to its last ``_`` (``adversary_0`` → ``adversary``)."""
    return name.rsplit("_", 1)[0] if "_" in name else name


@dataclasses.dataclass(frozen=True)
class Roles:
    """Which policy plays which seat.

    Attributes:
        names: the policies in ``rl.policies`` order (their order in the weight blob and the checkpoints).
        of_seat: the policy of each seat.
        changes: each policy's changes to the ``model`` section.
    """

    names: tuple[str, ...]
    of_seat: tuple[str, ...]
    changes: Mapping[str, Mapping[str, Any]]

    def seats_of(self, name: str) -> list[int]:
        """The seats policy ``name`` plays."""
        return [seat for seat, policy in enumerate(self.of_seat) if policy == name]

    def config_of(self, config: Mapping[str, Any], name: str) -> dict[str, Any]:
        """The run configuration as policy ``name`` sees it: its ``model`` changes applied."""
        return {**config, "model": {**config["model"], **self.changes[name]}}


def mapping_of(spec: str) -> Callable[[str, int], str]:
    """The function ``rl.policy_mapping`` names: ``prefix``, or a user's ``module:function``."""
    if spec == PREFIX:
        return seat_prefix
    if is_plugin(spec):
        return load_plugin(spec, "rl.policy_mapping")
    raise ValueError(f"rl.policy_mapping={spec!r}: expected {PREFIX!r} or module:function")


def roles_of(mdp: MDP, config: Mapping[str, Any]) -> Roles | None:
    """The roles of ``mdp``'s seats under ``rl.policies`` (None: one policy for every seat). ValueError naming the
    seat, the policy or the key at fault: a seat mapped to no policy, a policy without seats, seats of one policy
    with different spaces, a policy change that is not a ``model`` key."""
    rl = RLSettings.from_config(config)
    if not rl.policies:
        return inferred_roles(mdp, rl.policy_mapping)
    names = tuple(str(name) for name in rl.policies)
    model_keys = set(config["model"])
    changes: dict[str, Mapping[str, Any]] = {}
    for name in names:
        change = rl.policies[name] or {}
        if not isinstance(change, Mapping):
            raise ValueError(f"rl.policies.{name}: expected a mapping of model keys, got {change!r}")
        unknown = sorted(set(change) - model_keys)
        if unknown:
            raise ValueError(f"rl.policies.{name}: {', '.join(unknown)} are not model keys "
                             f"({', '.join(sorted(model_keys))})")
        changes[name] = dict(change)
    mapping = mapping_of(rl.policy_mapping)
    of_seat = tuple(str(mapping(seat_name, seat)) for seat, seat_name in enumerate(mdp.seat_names()))
    for seat, (seat_name, policy) in enumerate(zip(mdp.seat_names(), of_seat)):
        if policy not in names:
            raise ValueError(f"rl.policy_mapping={rl.policy_mapping}: seat {seat} ({seat_name}) maps to policy "
                             f"{policy!r}, which rl.policies does not name ({', '.join(names)})")
    roles = Roles(names, of_seat, changes)
    specs = mdp.describe()
    for name in names:
        seats = roles.seats_of(name)
        if not seats:
            raise ValueError(f"rl.policies.{name}: no seat of the game maps to it (seats: "
                             f"{', '.join(f'{n} → {p}' for n, p in zip(mdp.seat_names(), of_seat))})")
        odd = [seat for seat in seats if specs[seat] != specs[seats[0]]]
        if odd:
            raise ValueError(f"rl.policies.{name}: seats {seats[0]} and {odd[0]} have different observation or "
                             "action spaces; one policy plays seats of one kind (map them to two policies)")
        ModelSettings.from_config(roles.config_of(config, name))      # its model section is valid
    return roles


def inferred_roles(mdp: MDP, policy_mapping: str) -> Roles | None:
    """Without ``rl.policies``: None where every seat has the same spaces (one policy plays them all); else a
    policy per group of ``rl.policy_mapping`` (``adversary_0..2`` → ``adversary``) where each group's seats share
    their spaces, else (under the default ``prefix``) a policy per kind of seat, named after its first seat's
    group. ValueError naming ``rl.policies`` where a user's mapping groups seats of different kinds."""
    specs, seat_names = mdp.describe(), mdp.seat_names()
    if all(spec == specs[0] for spec in specs):
        return None
    mapping = mapping_of(policy_mapping)
    of_seat = [str(mapping(name, seat)) for seat, name in enumerate(seat_names)]
    mixed = [seat for seat in range(len(specs)) if specs[seat] != specs[of_seat.index(of_seat[seat])]]
    if mixed and policy_mapping != PREFIX:
        seat = mixed[0]
        raise ValueError(f"rl.policies: the game's seats differ (seat {seat}, {seat_names[seat]}, is not of the "
                         f"kind of the other seats rl.policy_mapping={policy_mapping} maps to {of_seat[seat]!r}); "
                         "name a policy per kind of seat in rl.policies")
    if mixed:                                     # a policy per kind of seat: its first seat's group names it
        first_of_kind = [specs.index(spec) for spec in specs]
        base = {first: of_seat[first] for first in set(first_of_kind)}
        clashing = {name for name in base.values() if list(base.values()).count(name) > 1}
        of_seat = [f"{base[first]}_{first}" if base[first] in clashing else base[first] for first in first_of_kind]
    names = tuple(dict.fromkeys(of_seat))
    return Roles(names, tuple(of_seat), {name: {} for name in names})


def refuse_policies(config: Mapping[str, Any], program: str) -> None:
    """ValueError when ``config`` trains a policy per role and ``program`` plays one policy in every seat (its
    tournaments, videos and exports take one network)."""
    names = list(RLSettings.from_config(config).policies)
    if names:
        raise ValueError(f"{program} plays one policy in every seat; rl.policies names {len(names)} "
                         f"({', '.join(map(str, names))}): rate and export them with bench/predator_prey.py's way "
                         "(a PolicySet checkpoint) instead")
