"""Optional dependencies: a missing one is reported in one line naming the extra that installs it."""

from __future__ import annotations

#: top-level module → the ``pip install 'lamarckian[<extra>]'`` that brings it
EXTRA_OF_MODULE = {"ale_py": "atari", "cv2": "atari", "pettingzoo": "pettingzoo", "pygame": "pettingzoo",
                   "mujoco": "mujoco", "imageio": "mujoco", "mujoco_mjx": "mjx", "jax": "mjx", "av": "video",
                   "wandb": "wandb", "deap": None, "ray": None, "zmq": None}


def missing_dependency(error: ImportError, what: str) -> str:
    """One line for ``error`` raised while building ``what`` (a key or a feature): the missing module and the
    command that installs it."""
    module = (error.name or str(error)).split(".")[0]
    if module in EXTRA_OF_MODULE and EXTRA_OF_MODULE[module] is None:
        hint = "pip install lamarckian"
    elif module in EXTRA_OF_MODULE:
        hint = f"pip install 'lamarckian[{EXTRA_OF_MODULE[module]}]'"
    else:
        hint = f"pip install {module}"
    return f"{what} needs the Python package {module!r}, which is not installed: {hint}"
