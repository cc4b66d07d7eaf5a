"""Faults on purpose: a job runs while processes, nodes, disks and links fail on a timetable; what it survived and
what it lost is printed and written (docs/reliability.md).

    python bench/chaos.py --scenarios train --minutes 30 --baseline     # a soak: Pong self-play, 30 min, beside
                                                                         # the same run without faults
    python bench/chaos.py --minutes 5                                    # every scenario on one host, 5 minutes in
                                                                         # all (CI)
    python bench/chaos.py --scenarios hosts --minutes 5                  # 3 hosts of their own (root)

Scenarios (intervals are the soak's; shorter runs scale them down with the minutes, no faster than the first):
  train   train.py Pong self-play: an actor SIGKILLed every 20 s, one hung (SIGSTOP past rpc.timeout) every 5 min,
          the driver SIGKILLed and the same command restarted every 10 min (it must resume)
  evolve  evolve.py PBT, 8 individuals, on a local 3-raylet ray.cluster_utils.Cluster: a worker node removed and
          re-added every 5 min, a learner SIGKILLed every 2 min, the driver killed and restarted once, the run's
          disk (a tmpfs) filled once, then freed and the run restarted
  relay   the remote relay with 3 workers and a trainer: the server killed and restarted every 5 min, a worker
          killed every minute (restarted 5 s later), the workers' link stalled through a loopback proxy every 5 min
  hosts   evolve.py PBT (4 individuals) and train.py on a Ray cluster of 3 hosts of their own (network namespaces,
          bench/hostlib; root only): a worker host's link cut for 2-15 s every 2 min, slowed to 100 Mbit/s for 30 s
          every 5 min, every process of a worker host SIGKILLed every 10 min and its Ray node started again 1 min
          later

Every process a job starts carries LAMARCKIAN_CHAOS_RUN; this harness is their subreaper, so processes that
outlive their parents are found (orphans) and none may be left at the end. Linux only; the full disk needs root
(without it, evolve runs without that fault).
The exit code is 0 only when every check held.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
ROLLBACK_MARGIN = 1.25     # a restart may lose one checkpoint interval of env steps (x the rate's noise)
sys.path.insert(0, str(REPOSITORY))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from chaoslib import procs, report  # noqa: E402
from chaoslib.hosts import OnHosts  # noqa: E402
from chaoslib.scenarios import SCENARIOS as ON_ONE_HOST  # noqa: E402
from chaoslib.scenarios import Scenario  # noqa: E402

SCENARIOS: dict[str, type[Scenario]] = {**ON_ONE_HOST, OnHosts.name: OnHosts}
from chaoslib.schedule import Log, Watch  # noqa: E402


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="+", default=list(ON_ONE_HOST), choices=list(SCENARIOS),
                        help="default: every scenario on one host (hosts, as root, only when named)")
    parser.add_argument("--minutes", type=float, default=5.0, help="in all, split evenly over the scenarios")
    parser.add_argument("--out", type=Path, help="where the runs and logs go (default: a new folder in /tmp)")
    parser.add_argument("--baseline", action="store_true",
                        help="also run each scenario without faults, at the same time (the result to compare)")
    parser.add_argument("--report", action="store_true", help="only write the report of the runs already in --out")
    parser.add_argument("--no-faults", action="store_true", help=argparse.SUPPRESS)   # the baseline's own process
    parser.add_argument("--seed", type=int, default=0, help="which targets the faults pick")
    return parser.parse_args(argv)


def run_scenario(scenario: Scenario, seconds: float, faults: bool) -> dict[str, Any]:
    """Start it, inject its faults (or none) for ``seconds``, stop it; the measurements and checks."""
    watch = Watch(scenario.folder, scenario.run_id, scenario.status, scenario.own_pids)
    scenario.watch = watch
    started = time.monotonic()
    try:
        scenario.start()
        watch.event("started", seconds=round(time.monotonic() - started, 1))
        watch.run(scenario.faults(seconds) if faults else [], seconds, between=scenario.upkeep)
        watch.event("stopping")
        result = scenario.stop()
    finally:
        scenario.close()
    time.sleep(3.0)
    procs.reap(scenario.own_pids())
    leftover = procs.marked(scenario.run_id)
    return {**result, "seconds": round(watch.now(), 1),
            "leftover": [f"{p.pid} {p.state} {p.cmdline[:80]}" for p in leftover],
            "zombies": sum(p.state == "Z" for p in leftover)}


def summarize(scenario: str, folder: Path, baseline: Path | None) -> tuple[dict[str, Any], list[str]]:
    """The figures of one scenario's run (and its baseline's) and the checks that failed."""
    events, samples = Log(folder / "events.jsonl").read(), Log(folder / "samples.jsonl").read()
    result = json.loads((folder / "result.json").read_text())
    curve, series = report.progress(samples), report.memory(samples)
    warm_up = min(300.0, result["seconds"] / 3)
    kinds = sorted({e["kind"] for e in events if e["kind"] not in ("started", "stopping") and "hit" in e})
    rate = report.undisturbed_rate(samples, [e["t"] for e in events if e["kind"] in kinds], warm_up=30.0)
    rate_source = "between faults"
    if not rate > 0 and baseline is not None:            # too few reports between faults: the run beside it
        rate = report.steady_rate(report.progress(Log(baseline / "samples.jsonl").read()), warm_up)
        rate_source = "of the run without faults"
    measured = rate > 0                                   # a rate without faults: the rollback can be judged
    if not measured:                                      # nor a baseline: the whole run, its faults included
        rate = report.steady_rate(curve, warm_up=0.0)
        rate_source = "over the whole run, faults included (too few reports between faults)"
    lost = report.time_lost(events, curve, rate, result["seconds"], kinds) if rate == rate and rate > 0 else {}
    figures: dict[str, Any] = {
        "scenario": scenario, "seconds": result["seconds"], "rate": rate, "rate_source": rate_source,
        "faults": {k: {"injected": sum(e["kind"] == k and e.get("hit", False) for e in events),
                       "skipped": sum(e["kind"] == k and not e.get("hit", False) for e in events),
                       "survived": report.survived(events, curve, k, result["seconds"])[0],
                       "too_late": report.survived(events, curve, k, result["seconds"])[1],
                       "time_lost": report.spread(lost.get(k, []))} for k in kinds},
        "steps_lost": result.get("steps_lost", []), "result": result.get("result"),
        "rss_slope_mb_per_hour": report.slope_per_hour(series, 1, warm_up),
        "fd_slope_per_hour": report.slope_per_hour(series, 2, warm_up),
        "by_kind": report.by_kind(samples, warm_up),
        "leftover": result["leftover"], "zombies": result["zombies"],
        "restarts": result.get("restarts", {}), "unexpected_exits": result.get("unexpected_exits", []),
        "checks": result.get("checks", {}),
    }
    if baseline is not None and (baseline / "result.json").exists():
        figures["baseline_result"] = json.loads((baseline / "result.json").read_text()).get("result")
    rolled_back = rollback_in_intervals(result, rate)
    figures["steps_lost_in_checkpoint_intervals"] = round(rolled_back, 2) if rolled_back == rolled_back else None
    failed = [name for name, ok in result.get("checks", {}).items() if not ok]
    failed += [f"{job} exit {code}: {result['last_lines'].get(job, '')}"
               for job, code in result.get("exit_codes", {}).items() if code not in (0, 130)]
    failed += [f"{row['injected'] - row['survived']} of {row['injected']} '{kind}' faults not survived"
               for kind, row in figures["faults"].items() if row["survived"] + row["too_late"] < row["injected"]]
    if not rate > 0:
        failed.append("the job made no measurable progress (no env steps between its reports)")
    figures["rollback_checked"] = measured     # a rate with the faults' losses in it overstates the rollback
    if measured and rolled_back > ROLLBACK_MARGIN:
        failed.append(f"a restart rolled back {rolled_back:.2f} checkpoint intervals of env steps")
    if result["leftover"]:
        failed.append(f"{len(result['leftover'])} processes left after the end")
    if result.get("unexpected_exits"):
        failed.append(f"the job exited by itself: {result['unexpected_exits']}")
    return figures, failed


def rollback_in_intervals(result: dict[str, Any], rate: float) -> float:
    """The most env steps a driver restart rolled back, in checkpoint intervals of work at ``rate`` env steps/s;
    0 without a restart that lost steps, nan where no rate could be measured (the job made no progress)."""
    lost = max(result.get("steps_lost") or [0.0])
    if lost == 0:
        return 0.0
    return lost / (result["checkpoint_interval"] * rate) if rate > 0 else float("nan")


def run_all(args: argparse.Namespace, out: Path) -> None:
    """Run each scenario in turn for its share of the minutes (and the baseline twin beside them)."""
    seconds = args.minutes * 60.0 / len(args.scenarios)
    procs.become_subreaper()
    twin = None
    if args.baseline:
        twin = subprocess.Popen([sys.executable, __file__, "--no-faults", "--minutes", str(args.minutes),
                                 "--out", str(out / "baseline"), "--seed", str(args.seed), "--scenarios",
                                 *args.scenarios], stdout=open(out / "baseline.log", "ab"), stderr=subprocess.STDOUT)
    rng = random.Random(args.seed)
    try:
        for name in args.scenarios:
            run_id = f"{name}-{uuid.uuid4().hex[:8]}"
            os.environ[procs.MARKER] = run_id                      # what this harness starts (a Ray cluster) too
            scenario = SCENARIOS[name](out / name, run_id, rng, seconds)
            print(f"chaos: {name} for {seconds / 60:.1f} min{' without faults' if args.no_faults else ''}, in "
                  f"{out / name}", file=sys.stderr, flush=True)
            result = run_scenario(scenario, seconds, not args.no_faults)
            (out / name / "result.json").write_text(json.dumps(result, indent=1))
            del os.environ[procs.MARKER]
        if twin is not None:
            twin.wait()
    finally:
        if twin is not None and twin.poll() is None:          # interrupted: the baseline stops too
            twin.send_signal(signal.SIGINT)
            twin.wait()


def write_report(out: Path, scenarios: list[str]) -> int:
    """``report.md``, each scenario's ``figures.json`` and ``memory.png`` from the logs in ``out`` (beside the
    baseline's, where ``out/baseline`` has them); prints the tables and every failed check. The exit code."""
    tables, failures = [], []
    for name in scenarios:
        baseline = out / "baseline" / name
        baseline = baseline if (baseline / "result.json").exists() else None
        figures, failed = summarize(name, out / name, baseline)
        (out / name / "figures.json").write_text(json.dumps(figures, indent=1))
        series = {"with faults": report.memory(Log(out / name / "samples.jsonl").read())}
        if baseline is not None:
            series["without faults"] = report.memory(Log(baseline / "samples.jsonl").read())
        report.plot_memory(series, out / name / "memory.png", f"{name}: memory and open files")
        tables.append(report.markdown(figures))
        failures += [f"{name}: {line}" for line in failed]
    (out / "report.md").write_text("\n\n".join(tables) + "\n")
    print("\n\n".join(tables))
    for line in failures:
        print(f"FAILED {line}", file=sys.stderr)
    print(f"chaos: {'every check held' if not failures else f'{len(failures)} checks failed'}; runs and logs in "
          f"{out}", file=sys.stderr)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)     # Ctrl-C ends it even when started in the background
    out = args.out or Path(f"/tmp/chaos-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    if not args.report:
        run_all(args, out)
    if args.no_faults:
        return 0
    return write_report(out, args.scenarios)


if __name__ == "__main__":
    sys.exit(main())
