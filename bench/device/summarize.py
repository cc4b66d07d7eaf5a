"""The rows for docs/benchmarks.md from what a device run (bench/device/run.sh) brought back: the device, the date,
each figure with its target and the command that measured it, then every step's estimate, time and outcome and the
compile times. Whoever holds the GPU pastes these rows; nothing is copied by hand.

    python bench/device/summarize.py OUT_DIR                   # markdown from OUT_DIR/figures.json
    python bench/device/summarize.py OUT_DIR --collect WORK    # (run.sh, after each step) first merge what the
                                                               # steps left in WORK into OUT_DIR/figures.json

Reads only JSON and text the run wrote; a figure whose step did not run is left out (its step says why).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

# the JSON files the steps write into WORK, by the key they get in figures.json
STEP_FILES = ("env", "physics", "compile", "selfplay", "population", "multigpu", "versus", "atari")
# which step (as named in steps.tsv) measured each group of figures: its command goes beside them
STEP_OF = {"physics": "physics", "tests": "gpu tests", "selfplay": "self-play training and rating",
           "population": "population throughput", "multigpu": "data-parallel ranks", "video": "video",
           "versus": "population against one learner", "atari": "atari"}
TEST_COUNTS = re.compile(r"(\d+) (passed|failed|skipped|deselected|errors?)")


def test_counts(log: Path) -> dict[str, int]:
    """``{"passed": n, "skipped": m, ...}`` from pytest's last summary line in ``log`` (empty if there is none)."""
    lines = [line for line in log.read_text().splitlines() if TEST_COUNTS.search(line)] if log.exists() else []
    return {word: int(count) for count, word in TEST_COUNTS.findall(lines[-1])} if lines else {}


def collect(work: Path, out: Path) -> dict:
    """Merge the steps' files in ``work`` (and the GIF in ``out``) into ``out/figures.json``; returns it."""
    figures: dict = {}
    for name in STEP_FILES:
        path = work / f"{name}.json"
        if path.exists():
            figures[name] = json.loads(path.read_text())
    if counts := test_counts(work / "gpu_tests.log"):
        figures["tests"] = counts
    if (work / "steps.tsv").exists():
        with open(work / "steps.tsv", newline="") as stream:
            figures["steps"] = list(csv.DictReader(stream, delimiter="\t"))
    if (out / "match.gif").exists():
        figures["video"] = {"file": "match.gif", "bytes": (out / "match.gif").stat().st_size}
    (out / "figures.json").write_text(json.dumps(figures, indent=1))
    return figures


def figure_rows(figures: dict) -> list[tuple[str, str, str, str]]:
    """``(group, figure, value, target)`` for every figure measured."""
    rows = []
    if physics := figures.get("physics"):
        row = physics["rows"][0]
        envs = f"{row['envs']:,} envs, {physics['backend']} on {physics['device']}"
        rows.append(("physics", f"Ant Sumo physics env-steps/s, {envs}", f"{row['physics_env_steps_per_s']:,.0f}",
                     "≥ 900,000"))
        if "bare_mjx_env_steps_per_s" in row:
            rows.append(("physics", "bare vmapped `mjx.step`, same envs (reference)",
                         f"{row['bare_mjx_env_steps_per_s']:,.0f}", ""))
            rows.append(("physics", "ours ÷ bare `mjx.step`", f"{row['ratio_to_bare_mjx']:.2f}", "≥ 0.95"))
        rows.append(("physics", "× CPU MuJoCo (reference in the same run)", f"{row['speedup_vs_cpu_mujoco']:.1f}", ""))
    if tests := figures.get("tests"):
        rows.append(("tests", "gpu-marked tests", ", ".join(f"{n} {word}" for word, n in tests.items()),
                     "all passed"))
    if selfplay := figures.get("selfplay"):
        final = selfplay["final"]
        seconds = selfplay["minutes"] * 60
        rows.append(("selfplay", f"self-play training of {seconds:.0f} s: env steps (iterations)",
                     f"{final['env_steps']:,} ({final['iteration']})", ""))
        rows.append(("selfplay", f"final policy against the initial one, {final['episodes']:.0f} deterministic games: "
                                 "score (wins/draws/losses)",
                     f"{final['initial/score']:.3f} ({final['initial/wins']:.0f}/{final['initial/draws']:.0f}/"
                     f"{final['initial/losses']:.0f})", "> 0.5"))
        rows.append(("selfplay", "the initial policy in the same seats (reference)",
                     f"{final['reference/initial/score']:.3f}", ""))
        if rating := selfplay.get("rating"):
            rows.append(("selfplay", f"Elo over {rating['snapshots']} snapshots: Spearman with training time",
                         f"{rating['spearman']:.3f}", "> 0"))
            rows.append(("selfplay", "final snapshot's Elo above the initial policy",
                         f"{rating['final_elo_above_initial']:+.0f}", "> 0"))
    if population := figures.get("population"):
        rows.append(("population", f"population of {population['members']} ÷ one learner, {population['envs']:,} "
                                   f"envs (agent-steps/s {population['population']:,.0f} / "
                                   f"{population['single']:,.0f})", f"{population['ratio']:.2f}", "≥ 0.7"))
    if multigpu := figures.get("multigpu"):
        rows.append(("multigpu", f"{multigpu['ranks']} data-parallel ranks sharing the GPU ÷ 1 rank, "
                                 f"{multigpu['envs']:,} envs (agent-steps/s {multigpu['many']:,.0f} / "
                                 f"{multigpu['one']:,.0f})", f"{multigpu['ratio']:.2f}", "runs"))
    if versus := figures.get("versus"):
        rows.append(("versus", f"population's best member ({versus['best_member']}) − single learner, "
                               f"{versus['minutes']:g} min each: Elo", f"{versus['best_minus_single']:+.0f}", "> 0"))
    if atari := figures.get("atari"):
        when = (f"{atari['reached_steps']:,.0f} env steps, {atari['reached_seconds']:.0f} s" if atari["reached_steps"]
                is not None else f"not reached in {atari['seconds']:.0f} s ({atari['env_steps']:,.0f} env steps)")
        rows.append(("atari", f"PPO from pixels on {atari['game']}: evaluation score {atari['threshold']:g} reached "
                              f"at", when, f"{atari['threshold']:g} within the budget"))
        rows.append(("atari", f"best evaluation score (random policy {atari['random']:.1f})", f"{atari['best']:.1f}",
                     ""))
    if video := figures.get("video"):
        rows.append(("video", "GIF of the final policy against the initial one",
                     f"{video['file']} ({video['bytes'] / 1024:,.0f} KiB)", ""))
    return rows


def markdown(figures: dict) -> str:
    """The device line, the figure rows, the steps' budget table and the compile times."""
    env = figures.get("env", {})
    gpu = env.get("driver") and env.get("gpu")     # nvidia-smi answered
    device = gpu or "CPU (no GPU: a dry run)"
    date = env.get("date", "")
    commands = {step["name"]: step["command"] for step in figures.get("steps", [])}
    lines = [f"Device run of {date}: {device}" + (f" ({env['memory']}, driver {env['driver']})" if gpu else "")
             + f"; torch {env.get('torch', '?')} (CUDA {env.get('torch_cuda', '?')}), JAX {env.get('jax', '?')} "
             f"({', '.join(env.get('jax_devices', []))}), MuJoCo {env.get('mujoco', '?')}.", "",
             "| date | device | figure | value | target | command |", "|---|---|---|---|---|---|"]
    shown = set()       # a group's command goes beside its first figure only
    for group, figure, value, target in figure_rows(figures):
        command = commands.get(STEP_OF[group], "") if group not in shown else ""
        shown.add(group)
        lines.append(f"| {date} | {device} | {figure} | {value} | {target} | " + (f"`{command}` |" if command else
                                                                                   "″ |"))
    lines += ["", "| step | estimate (s) | took (s) | outcome |", "|---|---|---|---|"]
    for step in figures.get("steps", []):
        outcome = step["status"] + (f": {step['note']}" if step.get("note") else "")
        lines.append(f"| {step['step']}. {step['name']} | {step['estimate_s']} | {step['took_s']} | {outcome} |")
    total = sum(int(step["took_s"]) for step in figures.get("steps", []))
    lines.append(f"\nSteps took {total} s in all.")
    if compile_ := figures.get("compile"):
        sizes = ", ".join(f"{envs} envs {seconds:.1f} s" for envs, seconds in compile_["seconds"].items())
        lines.append(f"Precompiled ({compile_['backend']} on {compile_['device']}, in the background): {sizes}.")
    first = {name: seconds for name, seconds in figures.get("physics", {}).get("first_call_seconds", {}).items()
             if seconds >= 0.1}          # CPU MuJoCo's first calls compile nothing
    if first:
        lines.append("Physics first calls (compile or cache load): "
                     + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in first.items()) + ".")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder a device run wrote ($OUT)")
    parser.add_argument("--collect", type=Path, metavar="WORK", help="first merge WORK's step files into "
                                                                      "OUT/figures.json")
    args = parser.parse_args()
    if args.collect is not None:
        figures = collect(args.collect, args.out)
    elif (args.out / "figures.json").exists():
        figures = json.loads((args.out / "figures.json").read_text())
    else:
        print(f"summarize.py: error: {args.out / 'figures.json'}: not found (is {args.out} a device run's "
              "$OUT?)", file=sys.stderr)
        sys.exit(2)
    sys.stdout.write(markdown(figures))


if __name__ == "__main__":
    main()
