"""Search spaces from [lo, hi] config values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lamarckian.config import ConfigError, load
from lamarckian.ec import Dimension, SearchSpace


def space_of(*modifications: str) -> SearchSpace:
    return SearchSpace.from_config(load([], list(modifications), ranges=True))


def test_ranges_become_dimensions_typed_by_the_default():
    space = space_of("rl.ac.weight_loss.critic=[0,1]", "train.lr=[1e-5,1e-1]", "rl.ppo.epochs=[1,8]",
                     "ec.log=[train.lr]")
    by_key = {d.key: d for d in space}
    assert set(by_key) == {"rl.ac.weight_loss.critic", "train.lr", "rl.ppo.epochs"}
    assert by_key["rl.ppo.epochs"].integer
    assert not by_key["train.lr"].integer
    assert by_key["train.lr"].log
    assert not by_key["rl.ac.weight_loss.critic"].log
    # the base config is valid as it stands: each range replaced by its midpoint (geometric for log)
    assert space.base["train.lr" .split(".")[0]]["lr"] == pytest.approx(1e-3)
    assert space.base["rl"]["ppo"]["epochs"] in (4, 5)
    assert space.base["rl"]["ac"]["weight_loss"]["critic"] == pytest.approx(0.5)


def test_samples_stay_in_range_and_log_scale_spreads_orders_of_magnitude():
    space = space_of("train.lr=[1e-5,1e-1]", "ec.log=[train.lr]", "rl.ppo.epochs=[1,8]")
    random = np.random.default_rng(0)
    samples = [space.sample(random) for _ in range(4000)]
    lrs = np.array([s["train.lr"] for s in samples])
    assert lrs.min() >= 1e-5
    assert lrs.max() <= 1e-1
    decades = np.histogram(np.log10(lrs), bins=[-5, -4, -3, -2, -1])[0]
    assert decades.min() > 800  # about 1000 per decade: uniform in log space
    epochs = {s["rl.ppo.epochs"] for s in samples}
    assert epochs == set(range(1, 9))
    assert all(isinstance(e, int) for e in epochs)


def test_unit_round_trip_and_clipping():
    dimension = Dimension("train.lr", 1e-4, 1e-2, log=True)
    assert dimension.to_unit(1e-3) == pytest.approx(0.5)
    assert dimension.from_unit(0.5) == pytest.approx(1e-3)
    assert dimension.clip(5.0) == 1e-2
    assert dimension.from_unit(-3) == pytest.approx(1e-4)
    assert Dimension("rl.ppo.epochs", 1, 8, integer=True).clip(4.6) == 5


@pytest.mark.parametrize("modifications, message", [
    (["ec.population=[2,8]"], "only keys under"),
    (["seed=[0,10]"], "only keys under"),
    (["ec.log=[train.lr]"], "not searched"),
    (["train.lr=[0,0.01]", "ec.log=[train.lr]"], "reaches 0"),
    (["train.lr=[0.1,0.01]"], "empty"),
])
def test_bad_spaces_are_one_line_errors(modifications, message):
    with pytest.raises(ConfigError, match=message):
        space_of(*modifications)


def test_apply_sets_dotted_keys_on_a_copy():
    space = space_of("train.lr=[0,0.01]")
    config = space.apply({"train.lr": 0.002})
    assert config["train"]["lr"] == 0.002
    assert space.base["train"]["lr"] == pytest.approx(0.005)
    assert not math.isnan(config["rl"]["discount"])
