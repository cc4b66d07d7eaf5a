"""What the command-line programs (train.py, evolve.py, evaluate.py) share: one-line usage errors, the run
arguments, process-wide settings, the run directory and starting Ray."""

from __future__ import annotations

import argparse
import errno
import logging
import math
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, NoReturn, Sequence

import yaml

from .config import ConfigError, lookup
from .config.sections import RaySettings, RemoteSettings, RunSettings, SampleSettings, TrainSettings
from .entry import shutdown_ray
from .errors import NoProgress
from .extras import missing_dependency

#: errors that mean the user asked for something that cannot be (a bad key, value, file, missing extra): exit 2
USAGE_ERRORS = (ConfigError, ValueError, TypeError, KeyError, ImportError)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose misuse message is one line (argparse prints the whole usage otherwise); exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def usage_error(prog: str, error: BaseException, culprit: str = "this configuration") -> int:
    """Print ``error`` as one line (a missing optional package: which one and how to install it, ``culprit``
    needing it) and return exit code 2; anything that is not a usage error is raised again."""
    if not isinstance(error, USAGE_ERRORS):
        raise error
    if isinstance(error, ImportError):
        message = missing_dependency(error, culprit)
    else:
        message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2


def configure_process(config: Mapping[str, Any]) -> None:
    """The process-wide settings of a run, set once by the entry point (never by a constructor): torch's CPU
    threads (``train.threads``) and its random stream (``seed``)."""
    import torch

    torch.set_num_threads(learner_threads(config))
    torch.manual_seed(RunSettings.from_config(config).seed)


MAX_AUTO_THREADS = 4     # a small network's update gains nothing from more


def learner_threads(config: Mapping[str, Any]) -> int:
    """``train.threads``, or where it is 0 the cores this process may run on less one per actor that runs on this
    machine (the actors of ``ray.launch`` auto/processes, or of a local Ray; none with ``ray.address`` or remote
    workers), between 1 and :data:`MAX_AUTO_THREADS`: the learner never oversubscribes the cores beside them."""
    threads = TrainSettings.from_config(config).threads
    if threads:
        return threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    elsewhere = RaySettings.from_config(config).address or RemoteSettings.from_config(config).server
    local_actors = 0 if elsewhere else SampleSettings.from_config(config).actors
    return max(1, min(MAX_AUTO_THREADS, cores - local_actors))


def start_ray(ray_config: Mapping[str, Any]) -> bool:
    """``ray.init`` from the ``ray`` section: join ``address`` or start a local Ray (``num_cpus``); nothing in
    local mode (actors are objects of this process). Whether Ray was started.

    Without ``address`` the Ray is this run's own, even where a ``ray start`` or another program's test cluster
    left its address in Ray's temp folder (``ray.init()`` alone would join that one, and refuse ``num_cpus``)."""
    if ray_config.get("local_mode"):
        return False
    import ray

    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
    if ray_config.get("address"):
        options["address"] = ray_config["address"]
    else:
        options["address"] = "local"
        if ray_config.get("num_cpus"):
            options["num_cpus"] = math.ceil(ray_config["num_cpus"])
    # a local Ray turns token authentication on by default and says so at every start: kept on, not announced
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    ray.init(**options)
    return True


def run_arguments(prog: str, doc: str, argv: Sequence[str] | None, profile: bool = False) -> argparse.Namespace:
    """``-c FILE ... -m KEY=VALUE ... [-d | -D] [--debug]`` of train.py and evolve.py (``profile``: also
    ``--profile``)."""
    parser = OneLineParser(prog=prog, description=doc.splitlines()[0])
    parser.add_argument("-c", "--config", nargs="+", action="extend", default=[], metavar="FILE",
                        help="config files merged in order over lamarckian.yml (paths: working directory, then "
                             "config/)")
    parser.add_argument("-m", "--modify", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="edits, value parsed as YAML; an empty value deletes the key")
    parser.add_argument("-d", action="store_true", help="delete the run's checkpoints first (start afresh)")
    parser.add_argument("-D", action="store_true", help="delete the whole run directory first")
    parser.add_argument("--debug", action="store_true",
                        help="autograd anomaly detection and local mode (actors in this process, no Ray)")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved configuration and where each value you set came from, then exit")
    if profile:
        parser.add_argument("--profile", action="store_true",
                            help="print where the run's seconds went, from process start to shutdown")
    return parser.parse_args(argv)


def print_config(config: Mapping[str, Any], sources: Any) -> None:
    """The resolved configuration as YAML, then each key a file, a tuned section or ``-m`` set, with its origin
    (``--print-config``): the precedence at a glance."""
    print(yaml.safe_dump(dict(config), sort_keys=False), end="")
    print("# set by (the last one wins: -c files in order < the task's tuned.<rl.algorithm> < -m):")
    for key, origin in sorted(sources.by_key.items()):
        try:
            value = lookup(config, key)
        except KeyError:                  # another algorithm's tuned section, or a deleted key
            continue
        if not isinstance(value, dict):
            print(f"#   {key} = {value!r}: {origin}")


def prepare_run(root: Path, config: dict[str, Any], delete_checkpoints: bool, delete_all: bool,
                checkpoints: str = "checkpoints") -> None:
    """Apply -d (the ``checkpoints`` folder) / -D (everything), create the run directory, keep the resolved
    config in it."""
    if delete_all and root.exists():
        shutil.rmtree(root)
    elif delete_checkpoints and (root / checkpoints).exists():
        shutil.rmtree(root / checkpoints)
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yml").write_text(yaml.safe_dump(config, sort_keys=False))


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)    # what a full disk (or quota) raises
EXIT_DISK_FULL = 1


def _quiet_when_disk_full(arguments: threading.ExceptHookArgs) -> None:
    """A background writer (TensorBoard's) that hits a full disk dies without a traceback: the main thread meets
    the same error at its next write and reports it in one line."""
    if isinstance(arguments.exc_value, OSError) and arguments.exc_value.errno in DISK_FULL:
        logging.getLogger(__name__).debug("%s: %s", arguments.thread, arguments.exc_value)
        return
    threading.__excepthook__(arguments)


def run_job(run: Callable[[], Any], save: Callable[[], Any] | None, close: Callable[[], None], saved: str) -> int:
    """Run the job to its end: Ctrl-C saves it (``save``; None: ``run`` saves on its own, as the training loop
    does) and exits with code 130; a run that cannot progress (:class:`~lamarckian.errors.NoProgress`) stops with one
    line and code 1; a full disk stops it with one line and code :data:`EXIT_DISK_FULL` (checkpoints
    are written whole or not at all, so the newest on disk is intact); the job and a Ray this program started are
    always closed. The exit code."""
    previous_hook, threading.excepthook = threading.excepthook, _quiet_when_disk_full
    try:
        _run_and_close(run, save, close, saved)
    except KeyboardInterrupt:
        return 130
    except NoProgress as error:
        print(f"{Path(sys.argv[0]).name}: error: the run cannot progress: {error}; the newest {saved} on disk is "
              "intact", file=sys.stderr)
        return 1
    except OSError as error:
        if error.errno not in DISK_FULL:
            raise
        print(f"{Path(sys.argv[0]).name}: error: the disk is full ({error.filename or error.strerror}); the run "
              f"stopped and its newest {saved} on disk is intact: free space and run the same command to resume",
              file=sys.stderr)
        return EXIT_DISK_FULL
    finally:
        threading.excepthook = previous_hook
    return 0


def _run_and_close(run: Callable[[], Any], save: Callable[[], Any] | None, close: Callable[[], None],
                   saved: str) -> None:
    """``run()``; on Ctrl-C ``save()`` (if given) and KeyboardInterrupt goes on; ``close()`` and a Ray this program
    started shut down whatever happened."""
    try:
        run()
    except KeyboardInterrupt:
        if save is not None:
            save()
            print(f"interrupted; {saved} saved", file=sys.stderr)
        raise
    finally:
        try:
            close()
        finally:
            shutdown_ray()
