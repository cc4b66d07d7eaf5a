"""Every environment a user can bring, through the generic configs: each trains for a small budget or is refused in
one line. No traceback, no stall, no illegal move.

The environments are gymnasium's registry (the newest version of every name, with the extras installed here; the
Arcade's ``ALE/<Game>-v5`` ids through ``mdp/gym/atari.yml``, leaving out the same games' legacy ``-v4`` ids, the
rest through ``mdp/gym.yml``) and PettingZoo's own
lists (classic, butterfly, sisl, and mpe2's) through ``mdp/pettingzoo.yml``, exactly as docs/environments.md shows;
``--families ecosystems``: every id that MiniGrid, MO-Gymnasium, Gymnasium-Robotics and highway-env register
(:data:`ECOSYSTEMS`), each as ``mdp.gym.id=package:Id``.
Each runs ``train.py`` once in a subprocess for ``--budget`` env steps (one actor, 4 environments, batches of 512
steps, 2 evaluation episodes of at most 1,000 steps) within ``--limit`` seconds, and is classed:

- ``trains``: it ended at the budget; its env steps per second of training and its last evaluation line;
- ``refused``: exit code 2 and one line a user can act on (a missing extra, an unsupported space...);
- ``its own failure``: the environment raised while it was made, in its own package's code (a simulator that
  needs something this machine lacks): its traceback, then one line naming the environment and the package;
- ``broken``: a traceback, a stall (``the run cannot progress``, or no end within the limit), or an illegal move
  (PettingZoo's illegal-move text on the console, or an ``illegal`` objective above 0).

    python bench/sweep.py [--families gym atari pettingzoo ecosystems] [--budget 2048] [--limit 180] [--only REGEX]
                          [--write docs/environments.md]

``--write`` replaces the table between the markers ``<!-- NAME: begin -->`` and ``<!-- NAME: end -->`` in that file
(``--markers NAME``, ``sweep`` unless given).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable, NamedTuple

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from lamarckian.record import read_rows  # noqa: E402

OWN_FAILURE = "lamarckian.errors.EnvironmentFailed:"       # an environment raised while made: in its own package
ILLEGAL_TEXT = "contains a mask of all legal moves"       # PettingZoo's words when an illegal move is played
PETTINGZOO_FAMILIES = (("pettingzoo.classic.all_modules", "classic_environments", "pettingzoo.classic."),
                       ("pettingzoo.butterfly.all_modules", "butterfly_environments", "pettingzoo.butterfly."),
                       ("pettingzoo.sisl.all_modules", "sisl_environments", "pettingzoo.sisl."),
                       ("mpe2.all_modules", "mpe_environments", "mpe2."))
#: other ecosystems' packages, whose ids exist once they are imported (``mdp.gym.id=package:Id``)
ECOSYSTEMS = ("minigrid", "mo_gymnasium", "gymnasium_robotics", "highway_env")
BUDGET_KEYS = ("sample.actors=1", "sample.envs=4", "sample.truncation=64", "train.batch=512", "evaluator.episodes=2",
               "evaluator.max_steps=1000", "evaluator.progress=false", "evaluator.tensorboard=false", "seed=0")


class Environment(NamedTuple):
    family: str
    name: str
    arguments: tuple[str, ...]      # the -c files and -m edits that pick it


class Outcome(NamedTuple):
    kind: str                       # trains | refused | its own failure | broken
    rate: float                     # env steps per second of training (trains)
    text: str                       # the evaluation line, or the reason


def newest_versions(ids: Iterable[str]) -> list[str]:
    """The newest version of every name among ``ids`` (``Name-vN``), sorted."""
    newest: dict[str, tuple[int, str]] = {}
    for env_id in ids:
        found = re.match(r"(.*)-v(\d+)$", env_id)
        name, version = (found.group(1), int(found.group(2))) if found else (env_id, 0)
        if name not in newest or version > newest[name][0]:
            newest[name] = (version, env_id)
    return sorted(env_id for _, env_id in newest.values())


def gym_environments(atari: bool) -> list[Environment]:
    """The newest version of every registered name: ``ALE/…`` ids (``atari``) or every other one (the other
    ecosystems' packages are not imported here: :func:`ecosystem_environments`)."""
    import gymnasium

    try:
        import ale_py

        gymnasium.register_envs(ale_py)
    except ImportError:
        pass
    newest = newest_versions(gymnasium.registry)
    arcade = {env_id for env_id in newest if "ale_py" in str(gymnasium.registry[env_id].entry_point)}
    legacy = {env_id for env_id in arcade if not env_id.startswith("ALE/")}    # the same games' v4 ids, left out
    ids = [env_id for env_id in newest if (env_id in arcade) == atari and env_id not in legacy]
    if atari:
        return [Environment("atari", env_id, ("-c", "mdp/gym/atari.yml", "-m", f"mdp.gym.id={env_id}"))
                for env_id in ids]
    return [Environment("gym", env_id, ("-c", "mdp/gym.yml", "-m", f"mdp.gym.id={env_id}")) for env_id in ids]


def reward_entries(env_id: str) -> int:
    """Entries of ``env_id``'s vector reward (its ``reward_space``, MO-Gymnasium's way); 0 for a number reward or an
    environment that cannot be made here (its run then shows why)."""
    import gymnasium

    try:
        env = gymnasium.make(env_id)
    except Exception:                  # noqa: BLE001 - the environment's own failure: its run reports it
        return 0
    shape = getattr(getattr(env.unwrapped, "reward_space", None), "shape", None)
    env.close()
    return int(shape[0]) if shape is not None and len(shape) == 1 and shape[0] > 1 else 0


def ecosystem_environments() -> list[Environment]:
    """Every id whose entry point lies in a package of :data:`ECOSYSTEMS` (the newest version of each name),
    named ``package:Id`` as a user names it; a vector reward gets ``mdp.reward.weights`` of ones, as its refusal
    tells a user to set. A package that is not installed is one row (its refusal)."""
    import gymnasium

    found = []
    for package in ECOSYSTEMS:
        try:
            importlib.import_module(package)
        except ImportError:
            found.append(Environment(package, f"{package}:*", ("-c", "mdp/gym.yml", "-m",
                                                                  f"mdp.gym.id={package}:Any-v0")))
            continue
        own = [env_id for env_id, spec in gymnasium.registry.items()
               if str(spec.entry_point).split(":")[0].split(".")[0] == package]
        for env_id in newest_versions(own):
            entries = reward_entries(env_id)
            weights = (f"mdp.reward.weights=[{','.join(['1'] * entries)}]",) if entries else ()
            found.append(Environment(package, f"{package}:{env_id}", ("-c", "mdp/gym.yml", "-m",
                                                                      f"mdp.gym.id={package}:{env_id}", *weights)))
    return found


def pettingzoo_environments() -> list[Environment]:
    """Every module of PettingZoo's own lists (a family whose list cannot be imported is one refused row)."""
    found = []
    for module, attribute, prefix in PETTINGZOO_FAMILIES:
        try:
            listed = getattr(importlib.import_module(module), attribute)
        except ImportError as error:
            found.append(Environment("pettingzoo", prefix.rstrip("."), ("-c", "mdp/pettingzoo.yml", "-m",
                                                                        f"mdp.pettingzoo.module={prefix}missing")))
            print(f"# {module}: {error}", file=sys.stderr)
            continue
        for key in listed:
            name = prefix + key.split("/")[-1]
            found.append(Environment("pettingzoo", name, ("-c", "mdp/pettingzoo.yml", "-m",
                                                          f"mdp.pettingzoo.module={name}")))
    return found


def traceback_outcome(lines: list[str]) -> Outcome:
    """A run that printed a traceback: the environment's own failure (its closing line), or broken."""
    if OWN_FAILURE in lines[-1]:
        return Outcome("its own failure", float("nan"), lines[-1].split(OWN_FAILURE, 1)[1].strip()[:200])
    last = next((line for line in reversed(lines) if re.match(r"^\w[\w.]*(Error|Exception)\b", line)), lines[-1])
    return Outcome("broken", float("nan"), f"traceback: {last.strip()[:160]}")


def failure(completed: subprocess.CompletedProcess | None) -> Outcome | None:
    """Why a run did not train (None: it ended at its budget)."""
    if completed is None:
        return Outcome("broken", float("nan"), "no end within the limit (a stall, or far too slow)")
    errors = completed.stderr
    lines = [line for line in errors.splitlines() if line.strip()] or [f"exit {completed.returncode}"]
    if "Traceback (most recent call last)" in errors:
        return traceback_outcome(lines)
    if ILLEGAL_TEXT in errors:
        return Outcome("broken", float("nan"), f"illegal moves played ({errors.count(ILLEGAL_TEXT)} warnings)")
    if completed.returncode == 2:
        return Outcome("refused", float("nan"), lines[-1].split("error: ", 1)[-1][:200])
    if completed.returncode != 0:
        return Outcome("broken", float("nan"), lines[-1][:200])
    return None


def classify(completed: subprocess.CompletedProcess | None, root: Path) -> Outcome:
    """What one run showed (None: it did not end within the limit)."""
    failed = failure(completed)
    if failed is not None:
        return failed
    assert completed is not None
    rows = read_rows(root / "evaluations.csv") if (root / "evaluations.csv").is_file() else []
    if rows and float(rows[-1].get("illegal", 0) or 0) > 0:
        return Outcome("broken", float("nan"), f"illegal moves in evaluation ({rows[-1]['illegal']})")
    rate = rows[-1]["cost_now"] / max(1e-9, rows[-1]["time"] - rows[-1]["evaluating"]) if rows else float("nan")
    done = next((line for line in reversed(completed.stderr.splitlines()) if line.startswith("done:")), "")
    evaluation = done.split("; ", 1)[-1] if "; " in done else (done or "finished")
    return Outcome("trains", rate, evaluation[:160])


def run(environment: Environment, budget: int, limit: float) -> Outcome:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "run"
        command = [sys.executable, str(REPOSITORY / "train.py"), *environment.arguments, *BUDGET_KEYS,
                   f"root={root}", f"evaluator.terminate=self.cost >= {budget}", f"sample.stall={limit / 3:g}", "-D"]
        try:
            completed = subprocess.run(command, capture_output=True, text=True, timeout=limit, cwd=REPOSITORY)
        except subprocess.TimeoutExpired:
            completed = None
        return classify(completed, root)


def table(results: list[tuple[Environment, Outcome]], heading: str) -> str:
    counts = collections.Counter(outcome.kind for _, outcome in results)
    own = counts["its own failure"]
    lines = [heading, "", f"{counts['trains']} train, {counts['refused']} refused in one line, "
             + (f"{own} fail in their own package's code while made (its traceback, then one line naming it), "
                if own else "") + f"{counts['broken']} broken.", "",
             "| environment | outcome | env steps/s | evaluation, or the reason |", "|---|---|---|---|"]
    for environment, outcome in results:
        rate = "" if outcome.rate != outcome.rate else f"{outcome.rate:,.0f}"
        lines.append(f"| `{environment.name}` | {outcome.kind} | {rate} | {outcome.text.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["gym", "atari", "pettingzoo"],
                        choices=["gym", "atari", "pettingzoo", "ecosystems"])
    parser.add_argument("--budget", type=int, default=2048, help="env steps each environment trains for")
    parser.add_argument("--limit", type=float, default=180.0, help="seconds a run may take in all")
    parser.add_argument("--only", help="a regular expression the environments' names must match")
    parser.add_argument("--write", type=Path, help="put the table between the sweep's markers in this file")
    parser.add_argument("--markers", default="sweep", help="the markers' name (<!-- NAME: begin --> ... end)")
    arguments = parser.parse_args()
    environments = []
    for family in arguments.families:
        environments += (pettingzoo_environments() if family == "pettingzoo" else ecosystem_environments()
                         if family == "ecosystems" else gym_environments(family == "atari"))
    if arguments.only:
        environments = [e for e in environments if re.search(arguments.only, e.name)]
    results = []
    for environment in environments:
        started = time.monotonic()
        outcome = run(environment, arguments.budget, arguments.limit)
        results.append((environment, outcome))
        print(f"{environment.name}: {outcome.kind} ({time.monotonic() - started:.0f} s) {outcome.text}", flush=True)
    heading = (f"Swept {time.strftime('%Y-%m-%d')} on {platform.node()} ({platform.machine()}, Python "
               f"{platform.python_version()}): `python bench/sweep.py --families {' '.join(arguments.families)} "
               f"--budget {arguments.budget} --limit {arguments.limit:g}`" + (f" --only '{arguments.only}'"
                                                                            if arguments.only else ""))
    text = table(results, heading)
    print(text)
    if arguments.write:
        begin, end = f"<!-- {arguments.markers}: begin -->", f"<!-- {arguments.markers}: end -->"
        document = arguments.write.read_text()
        if begin not in document or end not in document:
            raise SystemExit(f"{arguments.write} has no {begin} … {end} markers")
        before, rest = document.split(begin, 1)
        arguments.write.write_text(before + begin + "\n" + text + end + rest.split(end, 1)[1])


if __name__ == "__main__":
    main()
