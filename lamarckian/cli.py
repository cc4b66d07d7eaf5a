"""What the command-line programs (train.py, evaluate.py) share: one-line usage errors and starting Ray."""

from __future__ import annotations

import argparse
import logging
from typing import Any, Mapping


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose misuse message is one line (argparse prints the whole usage otherwise); exit 2."""

    def error(self, message: str) -> None:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def start_ray(ray_config: Mapping[str, Any]) -> bool:
    """``ray.init`` from the ``ray`` section: join ``address`` or start a local Ray (``num_cpus``); nothing in
    local mode (actors are objects of this process). Whether Ray was started."""
    if ray_config.get("local_mode"):
        return False
    import ray

    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
    if ray_config.get("address"):
        options["address"] = ray_config["address"]
    elif ray_config.get("num_cpus"):
        options["num_cpus"] = ray_config["num_cpus"]
    ray.init(**options)
    return True
