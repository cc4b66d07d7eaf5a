"""Issue 19's acceptance run: remote workers train the real-time Pendulum with SAC.

    python bench/remote.py [--minutes 20] [--workers 3] [--out DIR]

Starts, on this machine, the relay server, ``--workers`` worker processes with distinct keys (no Ray: each blocks the
import), and ``train.py`` with SAC and ``rl.remote.server``; then, while it trains: a worker whose key is not on the
allow-list (it must be refused: exit code 2), a peer with an allowed key that sends garbage frames (it must be
dropped and counted), and one worker killed (SIGKILL) and restarted. Prints the evaluation curve (deterministic
episodes in real time, run by the trainer), the time to the target, the server's counters and the workers' real-time
timeouts, and writes ``remote.png``. The reference is the target itself (−200, Pendulum's usual "solved") and the
wall-clock budget; the workers' achieved env steps per second are printed beside the real-time ideal (20 Hz × envs).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = -200.0
CONFIG = ["-c", "mdp/realtime/pendulum.yml", "rl/sac.yml"]


def python(*arguments: str, log: Path) -> subprocess.Popen:
    stream = open(log, "w")      # noqa: SIM115 - the process owns it until it ends
    return subprocess.Popen([sys.executable, *arguments], stdout=stream, stderr=subprocess.STDOUT)


def worker(address: str, keys: Path, name: str, out: Path) -> subprocess.Popen:
    return python("-m", "lamarckian.remote", "worker", "--server", address, "--key", str(keys / f"{name}.key_secret"),
                  "--server-key", str(keys / "server.key"), *CONFIG, log=out / f"worker-{name}-{time.time():.0f}.log")


def send_garbage(address: str, keys: Path) -> None:
    """An allowed key sending frames that are no message of the protocol."""
    from lamarckian.remote.client import Client

    client = Client(address, keys / "junk.key_secret", keys / "server.key", timeout=5)
    for size in (7, 1000, 100_000):
        client.socket.send_multipart([os.urandom(size), os.urandom(size)])
    time.sleep(1.0)
    client.close()


def evaluations(run: Path) -> list[dict[str, float]]:
    path = run / "evaluations.csv"
    if not path.exists():
        return []
    with open(path) as stream:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(stream)]


def reference_time(out: Path, actors: int, budget: float) -> dict[str, float] | None:
    """The first evaluation at the target of the same training with local Ray actors (None: not reached)."""
    run = out / "reference"
    subprocess.run([sys.executable, "-m", "lamarckian.train", *CONFIG, "-m", f"sample.actors={actors}",
                    "sample.num_cpus=0.5", f"root={run}",
                    "evaluator.progress=false", f"evaluator.terminate=!expr self.fitness >= {TARGET} or self.time >= "
                    f"{budget}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return next((row for row in evaluations(run) if row["fitness"] >= TARGET), None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--reference", action="store_true",
                        help="then train the same SAC with --workers local Ray actors, for the time ratio")
    arguments = parser.parse_args()
    out = arguments.out or Path(tempfile.mkdtemp(prefix="lamarckian-remote-"))
    out.mkdir(parents=True, exist_ok=True)
    keys, allowed = out / "keys", out / "keys" / "workers"
    names = [f"w{i + 1}" for i in range(arguments.workers)]
    subprocess.run([sys.executable, "-m", "lamarckian.remote", "keygen", str(keys), "server", "trainer", "rogue",
                    "junk", *names], check=True, stdout=subprocess.DEVNULL)
    allowed.mkdir()
    for name in (*names, "junk"):
        (allowed / f"{name}.key").write_bytes((keys / f"{name}.key").read_bytes())
    if arguments.port == 0:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            arguments.port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{arguments.port}"
    server = python("-m", "lamarckian.remote", "server", "--bind", address, "--keys", str(allowed),
                    "--secret", str(keys / "server.key_secret"), "--trainer", str(keys / "trainer.key"),
                    log=out / "server.log")
    time.sleep(2.0)
    budget = arguments.minutes * 60
    run = out / "run"
    trainer = python("-m", "lamarckian.train", *CONFIG, "-m", f"rl.remote.server={address}",
                     f"rl.remote.key={keys / 'trainer.key_secret'}", f"rl.remote.server_key={keys / 'server.key'}",
                     f"root={run}", "evaluator.progress=false",
                     f"evaluator.terminate=!expr self.fitness >= {TARGET} or self.time >= {budget}",
                     log=out / "trainer.log")
    workers = {name: worker(address, keys, name, out) for name in names}
    started = time.monotonic()
    events: list[str] = []
    rogue = garbage_sent = killed = restarted = None
    victim = names[len(names) // 2]
    try:
        while trainer.poll() is None:
            time.sleep(1.0)
            now = time.monotonic() - started
            if rogue is None and now > 5:
                rogue = worker(address, keys, "rogue", out)
                events.append(f"{now:.0f} s: a worker with an unknown key started")
            if garbage_sent is None and now > 10:
                send_garbage(address, keys)
                garbage_sent = now
                events.append(f"{now:.0f} s: an allowed key sent 3 garbage messages")
            if killed is None and now > 30:
                workers[victim].send_signal(signal.SIGKILL)
                killed = now
                events.append(f"{now:.0f} s: worker {victim} killed (SIGKILL)")
            if killed is not None and restarted is None and now > killed + 10:
                workers[victim] = worker(address, keys, victim, out)
                restarted = now
                events.append(f"{now:.0f} s: worker {victim} restarted")
            if now > budget + 300:
                trainer.terminate()
                events.append("the trainer overran its budget: stopped")
    finally:
        for process in (*workers.values(), *( [rogue] if rogue is not None else [])):
            if process.poll() is None:
                process.terminate()
        for process in workers.values():
            process.wait(30)
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    total = time.monotonic() - started
    rows = evaluations(run)
    stats_lines = [line for line in (out / "server.log").read_text().splitlines()
                   if line.startswith("server statistics: ")]
    stats = json.loads(stats_lines[-1].split(": ", 1)[1]) if stats_lines else {}
    print(f"# Remote workers, real-time Pendulum-v1 at 20 Hz, SAC ({arguments.workers} workers, this machine, "
          f"{time.strftime('%Y-%m-%d %H:%M')})")
    for line in events:
        print(f"  {line}")
    print(f"  rogue worker exit code: {rogue.returncode if rogue is not None else 'not started'} (2: refused)")
    print("  evaluations (deterministic, real time): time s | env steps | fitness | timeouts per episode")
    for row in rows:
        print(f"    {row['time']:7.0f} | {row['cost']:9.0f} | {row['fitness']:8.1f} | "
              f"{row.get('timeouts', float('nan')):.2f}")
    reached = next((row for row in rows if row["fitness"] >= TARGET), None)
    print(f"  target {TARGET:.0f}: " + (f"reached at {reached['time']:.0f} s of training ({reached['cost']:.0f} env "
                                        f"steps), budget {budget:.0f} s" if reached else "NOT reached"))
    print(f"  server: refused {stats.get('refused', 0)}, garbage {stats.get('garbage', 0)}, dropped workers "
          f"{stats.get('dropped_workers', 0)}, ignored {stats.get('ignored', 0)}, rate-limited "
          f"{stats.get('rate_limited', 0)}, overflow {stats.get('overflow', 0)}, received {stats.get('received', 0)}, "
          f"delivered {stats.get('delivered', 0)}")
    for name, record in sorted(stats.get("workers", {}).items()):
        rate = record["steps"] / total
        print(f"    {name}: {record['segments']} segments, {record['steps']} env steps ({rate:.1f}/s; real time ideal "
              f"{20 * 4:.0f}/s), imports {record['imports']}")
    print(f"  trainer exit code {trainer.returncode}; logs in {out}")
    restarted_log = sorted(out.glob(f"worker-{victim}-*.log"))[-1].read_text() if restarted else ""
    checks = {f"evaluation reached {TARGET:.0f}": reached is not None,
              "the unknown key was refused (exit code 2)": rogue is not None and rogue.returncode == 2,
              "the garbage sender was dropped and counted": stats.get("garbage", 0) >= 1
              and stats.get("dropped_workers", 0) >= 1,
              "no worker imported Ray": all("ray" not in record["imports"]
                                             for record in stats.get("workers", {}).values()),
              f"{victim} came back after its kill": "connected to" in restarted_log,
              "the trainer ended by itself": trainer.returncode == 0}
    for name, holds in checks.items():
        print(f"  {'ok  ' if holds else 'FAIL'} {name}")
    if arguments.reference and reached:
        reference = reference_time(out, arguments.workers, budget)
        print(f"  reference, {arguments.workers} Ray actors × 4 real-time envs, the same SAC: " +
              (f"reached at {reference['time']:.0f} s ({reference['cost']:.0f} env steps); remote / Ray time "
               f"{reached['time'] / reference['time']:.2f}" if reference else "NOT reached"))
    if rows:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(6, 3.5))
        axis.plot([r["time"] / 60 for r in rows], [r["fitness"] for r in rows], marker="o")
        axis.axhline(TARGET, color="grey", linestyle="--", label=f"target {TARGET:.0f}")
        if killed is not None:
            axis.axvspan(killed / 60, (restarted or killed) / 60, color="red", alpha=0.2, label=f"{victim} down")
        axis.set_xlabel("training time (min)")
        axis.set_ylabel("deterministic evaluation return")
        axis.set_title(f"Real-time Pendulum, SAC, {arguments.workers} remote workers")
        axis.legend()
        figure.tight_layout()
        figure.savefig(out / "remote.png", dpi=100)
        print(f"  plot: {out / 'remote.png'}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
