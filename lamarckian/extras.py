"""Optional dependencies: a missing one is reported in one line naming the extra that installs it."""

from __future__ import annotations

#: top-level module → the ``pip install 'lamarckian[<extra>]'`` that brings it
EXTRA_OF_MODULE = {"ale_py": "atari", "cv2": "atari", "pettingzoo": "pettingzoo", "pygame": "pettingzoo",
                   "mujoco": "mujoco", "imageio": "mujoco", "mujoco_mjx": "mjx", "jax": "mjx", "av": "video",
                   "wandb": "wandb", "Box2D": "box2d", "chess": "pettingzoo-classic", "rlcard": "pettingzoo-classic",
                   "pymunk": "pettingzoo-butterfly", "mpe2": "pettingzoo", "minigrid": "minigrid", "mo_gymnasium": "mo",
                   "gymnasium_robotics": "robotics", "highway_env": "highway", "deap": None, "ray": None, "zmq": None}
#: gymnasium's environment families (the package of an id's entry point) → the extra that installs what they need
EXTRA_OF_GYM_FAMILY = {"box2d": "box2d", "mujoco": "mujoco"}
#: PettingZoo's environment families (``pettingzoo.<family>.<game>``) → their extra
EXTRA_OF_PETTINGZOO_FAMILY = {"classic": "pettingzoo-classic", "butterfly": "pettingzoo-butterfly",
                              "sisl": "pettingzoo-sisl", "mpe": "pettingzoo", "atari": "atari"}


def missing_dependency(error: ImportError, what: str) -> str:
    """One line for ``error`` raised while building ``what`` (a key or a feature): the missing module and the
    command that installs it."""
    if error.name is None:            # a library's own words on what to install (gymnasium's DependencyNotInstalled)
        return f"{what} needs a package that is not installed: {' '.join(str(error).split())}"
    module = error.name.split(".")[0]
    if module in EXTRA_OF_MODULE and EXTRA_OF_MODULE[module] is None:
        hint = "pip install lamarckian"
    else:
        hint = install_hint(EXTRA_OF_MODULE.get(module), module)
    return f"{what} needs the Python package {module!r}, which is not installed: {hint}"


def install_hint(extra: str | None, module: str) -> str:
    """The command that installs ``extra`` (or, with none, ``module`` itself)."""
    return f"pip install 'lamarckian[{extra}]'" if extra else f"pip install {module}"
