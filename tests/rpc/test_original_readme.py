"""The original Lamarckian README's RPC examples, calls verbatim (its ``create_actors()`` made concrete), through
its import paths; with its keyword arguments they run too, ignored with one warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lamarckian.util.rpc import All, Any, Gather
from lamarckian.util.rpc.wrap import all, any, gather  # noqa: F401 - the original Lamarckian's decorator path

from .peers import SeedActor


def create_actors():
    return [SeedActor(index) for index in range(3)]


def test_the_seed_readme_rpc_examples_run_as_written():
    actors = create_actors()
    blob = np.arange(8, dtype=np.float32)
    opponents = [1, 2, 3, 4, 5]
    with warnings.catch_warnings():
        warnings.simplefilter("error")                         # the original Lamarckian's plain calls raise no warning
        rpc_all = All(actors)
        rpc_all('set_blob', blob)  # to sync blob among all actors
        rpc_any = Any(actors)
        describe = rpc_any('describe')  # get description from any of the actors
        evaluate_results = rpc_any.map(('evaluate', opponent) for opponent in opponents)
        assert describe["actor"] in (0, 1, 2)
        assert [r[0]["fitness"] for r in evaluate_results] == [1.0, 2.0, 3.0, 4.0, 5.0]
        rpc_gather = Gather(rpc_all)
        stopper = rpc_gather.gathering('gather')  # gather the results of actor.gather()
        cost, tensors, results, iteration = rpc_gather()
        assert cost == 16
        assert np.array_equal(tensors["blob"], blob)
        assert iteration >= 1
        assert results[0]["fitness"] == 1.0
        stopper.close()                                        # its way to stop (contextlib.closing)
        rpc_gather.close()
        rpc_any.close()


def test_the_seeds_keyword_arguments_are_ignored_with_one_warning():
    actors = create_actors()
    with pytest.warns(UserWarning, match="config, progress are ignored"):
        everyone = All(actors, config={"rpc": {"ports": [30000, 31000]}}, progress=True)
    with pytest.warns(UserWarning, match="Gather: the original Lamarckian's keyword arguments config are ignored"):
        gatherer = Gather(everyone, config={})
    with gatherer.gathering("gather"):
        assert gatherer()[0] == 16
    gatherer.close()
