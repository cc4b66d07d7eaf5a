"""The flat layout's import paths keep working for one release, each with a DeprecationWarning naming the new path,
and give the very objects of the new one (a class pickled under an old path, as in an old checkpoint, loads)."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

import pytest

from lamarckian.rl.selfplay.pool import PoolSettings


def fresh_import(old: str):
    """Import a flat-layout path as a first import would (only the alias entry is dropped: the modules it names
    stay the ones every other test uses)."""
    sys.modules.pop(old, None)
    return importlib.import_module(old)


@pytest.mark.parametrize("old, new", [("lamarckian.rl.learner", "lamarckian.rl.fleet.learner"),
                                      ("lamarckian.rl.vec_learner", "lamarckian.rl.vec.learner"),
                                      ("lamarckian.rl.ppo", "lamarckian.rl.algorithms.ppo"),
                                      ("lamarckian.rl.results", "lamarckian.rating.results")])
def test_an_old_module_path_is_the_new_module(old, new):
    with pytest.warns(DeprecationWarning):
        module = fresh_import(old)
    assert module is importlib.import_module(new)


def test_an_old_module_path_says_where_the_module_is_now():
    with pytest.warns(DeprecationWarning, match="lamarckian.rl.offpolicy is deprecated: import "
                                                "lamarckian.rl.fleet.replay_learner"):
        fresh_import("lamarckian.rl.offpolicy")


@pytest.mark.parametrize("name, new", [("Learner", "lamarckian.rl.fleet.learner"),
                                       ("Actor", "lamarckian.rl.fleet.actor"), ("PPO", "lamarckian.rl.algorithms.ppo")])
def test_an_old_package_name_is_the_class_it_was(name, new):
    import lamarckian.rl

    with pytest.warns(DeprecationWarning, match=f"import it from {new}"):
        found = getattr(lamarckian.rl, name)
    assert found is getattr(importlib.import_module(new), name)


def test_an_object_pickled_under_an_old_module_path_loads():
    settings = PoolSettings.defaults()
    old = pickle.dumps(settings, protocol=0).replace(b"lamarckian.rl.selfplay.pool", b"lamarckian.rl.pool")
    with pytest.warns(DeprecationWarning):
        assert pickle.loads(old) == settings


def test_the_new_paths_warn_of_nothing():
    code = "import lamarckian.rl.fleet.actor, lamarckian.rl.vec.learner, lamarckian.rl.algorithms, lamarckian.train"
    completed = subprocess.run([sys.executable, "-W", "error:lamarckian:DeprecationWarning", "-c", code],
                               capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-2000:]
