"""evolve.py PBT of 4 across 3 hosts against the same on 1 host with the same CPUs, in rounds per minute.

Both clusters are made by bench/hostlib (root): 3 hosts (network namespaces on a bridge, a Ray node in each, offering
1, 2 and 2 CPUs) or 1 host offering 5. The same ``evolve.py`` run goes on each (CartPole PPO, ``ec.population=4``,
one actor per learner, ``train.lr`` searched) for ``--seconds`` of evolution; the rate is the rounds (lineage rows)
after each member's first, over the time between the first such row and the last: the steady state, without Ray's
start. Every host is on the same machine, so the two share its cores: what differs is only where processes live and
what crosses the bridge (Ray's object transfers, our links between nodes, tagged, and the relays). Runs alternate
the two clusters, ``--repeats`` each.

    python bench/pbt_hosts.py [--seconds 150] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostlib.netns import Hosts, why_unavailable  # noqa: E402
from hostlib.ray_nodes import RayNodes  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[1]
CONFIG = ["mdp/gym.yml", "mdp/gym/cartpole.yml", "ec/ea/pbt.yml", "ec/wrap/mdp.yml"]
POPULATION = 4
CLUSTERS = {"3 hosts (1 + 2 + 2 CPUs)": [1, 2, 2], "1 host (5 CPUs)": [5]}


def rounds_per_minute(lineage: Path) -> tuple[float, int]:
    """Rounds per minute after each member's first round, and how many rounds the run made in all."""
    rows = [json.loads(line) for line in lineage.read_text().splitlines() if line.strip()] if lineage.exists() else []
    times = sorted(row["time"] for row in rows)
    if len(times) <= POPULATION + 1:
        return 0.0, len(times)
    steady = times[POPULATION - 1:]
    return (len(steady) - 1) / (steady[-1] - steady[0]) * 60, len(times)


def one_run(cpus: list[float], seconds: float, folder: Path) -> tuple[float, int, str]:
    """One evolve.py run on a new cluster: (rounds per minute, rounds, where its learners' rounds ran)."""
    log, run = folder / "evolve.log", folder / "run"
    with Hosts(len(cpus)) as hosts, RayNodes(hosts, folder / "nodes", cpus=cpus) as nodes:
        nodes.start()
        evolve = hosts.popen(hosts[0], [sys.executable, str(REPOSITORY / "evolve.py"), "-c", *CONFIG, "-m",
                                        f"root={run}", f"ray.address={nodes.address}", "ray.launch=ray",
                                        f"ec.population={POPULATION}", "sample.actors=1", "train.lr=[0.0001,0.003]",
                                        f"ec.stop=self.time >= {seconds}", "evaluator.progress=false"],
                             log=log, cwd=folder, env=nodes.environment())
        code = evolve.wait(timeout=seconds + 600)
    if code != 0:
        raise SystemExit(f"evolve.py exited {code}:\n{log.read_text(errors='replace')[-3000:]}")
    rate, rounds = rounds_per_minute(run / "lineage.jsonl")
    rows = [json.loads(line) for line in (run / "lineage.jsonl").read_text().splitlines() if line.strip()]
    nodes_used = len({row["node"] for row in rows})
    return rate, rounds, f"{nodes_used} node{'s' if nodes_used > 1 else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=150.0, help="of evolution per run (ec.stop)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each cluster, alternating")
    options = parser.parse_args()
    if why_unavailable() is not None:
        raise SystemExit(f"bench/pbt_hosts.py: {why_unavailable()}")
    root = Path(tempfile.mkdtemp(prefix="pbt-hosts-"))
    results: dict[str, list[tuple[float, int, str]]] = {name: [] for name in CLUSTERS}
    for repeat in range(options.repeats):
        for name, cpus in CLUSTERS.items():
            started = time.monotonic()
            result = one_run(cpus, options.seconds, root / f"{len(cpus)}-{repeat}")
            results[name].append(result)
            print(f"{name}, run {repeat + 1}: {result[0]:.1f} rounds/min ({result[1]} rounds, on {result[2]}; "
                  f"{time.monotonic() - started:.0f} s with the cluster's start)", flush=True)
    medians = {name: statistics.median(rate for rate, _, _ in runs) for name, runs in results.items()}
    spread, single = medians[next(iter(CLUSTERS))], medians[list(CLUSTERS)[1]]
    print(f"\nevolve.py PBT of {POPULATION}, CartPole PPO, {options.seconds:.0f} s of evolution a run - "
          f"{time.strftime('%Y-%m-%d')} - {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"median of {options.repeats}")
    print("| cluster | rounds per minute (each run) | median |")
    print("|---|---|---|")
    for name, runs in results.items():
        print(f"| {name} | {' / '.join(f'{rate:.1f}' for rate, _, _ in runs)} | {medians[name]:.1f} |")
    print(f"3 hosts / 1 host: {spread / single:.2f}x the rounds per minute")


if __name__ == "__main__":
    main()
