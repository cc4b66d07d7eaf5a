"""The fleet's supervisor on its own: a death report for an actor the fleet no longer holds replaces nothing."""

from __future__ import annotations

import logging

from lamarckian import rpc
from lamarckian.config import load
from lamarckian.config.sections import SampleSettings
from lamarckian.rl.fleet.supervisor import ActorFleet


def test_a_dead_actor_the_fleet_no_longer_holds_is_logged_and_nothing_is_replaced(caplog):
    config = load(["mdp/gym.yml"], [])
    fleet = ActorFleet(lambda index: (), SampleSettings.from_config(config), local=True, launch="processes",
                       rpc_settings=rpc.RpcSettings.from_config(config))
    fleet.actors = ["first", "second"]
    with caplog.at_level(logging.WARNING):
        fleet.replace(rpc.ActorDiedError("Actor7", None, "gone"))
    assert fleet.actors == ["first", "second"]
    assert "Actor7" in caplog.text
