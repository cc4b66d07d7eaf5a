"""What a slow link costs remote workers: train.py (SAC, the real-time Pendulum, ``rl.remote.server``) fed by workers
whose link to the relay server has 0, +5 or +50 ms each way, in env steps per second the trainer learned from (the
real-time ideal: 20 Hz × 4 environments a worker) and its evaluation.

On this machine: the relay server, ``--workers`` worker processes (``python -m lamarckian.remote worker``) that reach
it through a userspace delaying proxy (bench/hostlib/delay.py: every chunk, both ways, ``delay`` seconds late, in
order; this kernel has no ``netem``), and the trainer, connected to the server directly. Real time keeps the workers'
CPU use the same at every delay (a worker sampling flat out would take the 2 cores from the trainer, and the delay,
which makes it wait for acknowledgements, would then speed the trainer up). Each delay gets a fresh
server, workers and trainer for ``--seconds`` of training; the delays alternate, ``--repeats`` times. The 0 ms row
goes through the same proxy (only the added delay differs).

    python bench/remote_delay.py [--seconds 90] [--workers 2] [--repeats 2] [--delays 0 5 50]
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostlib.delay import DelayProxy  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[1]
CONFIG = ["-c", "mdp/realtime/pendulum.yml", "rl/sac.yml"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def one_run(delay: float, seconds: float, workers: int, folder: Path) -> tuple[float, float]:
    """(env steps per second of training, the last deterministic evaluation) with workers ``delay`` s away."""
    folder.mkdir(parents=True)
    keys, allowed = folder / "keys", folder / "keys" / "workers"
    names = [f"w{index}" for index in range(workers)]
    subprocess.run([sys.executable, "-m", "lamarckian.remote", "keygen", str(keys), "server", "trainer", *names],
                   check=True, stdout=subprocess.DEVNULL)
    allowed.mkdir()
    for name in names:
        (allowed / f"{name}.key").write_bytes((keys / f"{name}.key").read_bytes())
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    processes: list[subprocess.Popen] = []

    def start(name: str, *arguments: str) -> subprocess.Popen:
        log = open(folder / f"{name}.log", "w")      # noqa: SIM115 - the process owns it until it ends
        process = subprocess.Popen([sys.executable, *arguments], stdout=log, stderr=subprocess.STDOUT, cwd=REPOSITORY)
        processes.append(process)
        return process

    start("server", "-m", "lamarckian.remote", "server", "--bind", address, "--keys", str(allowed), "--secret",
          str(keys / "server.key_secret"), "--trainer", str(keys / "trainer.key"))
    proxy = DelayProxy(("127.0.0.1", port), delay)
    run = folder / "run"
    try:
        trainer = start("trainer", "train.py", *CONFIG, "-m", f"rl.remote.server={address}",
                        f"rl.remote.key={keys / 'trainer.key_secret'}", f"rl.remote.server_key={keys / 'server.key'}",
                        f"root={run}", "evaluator.progress=false", f"evaluator.terminate=self.time >= {seconds}")
        for name in names:
            start(name, "-m", "lamarckian.remote", "worker", "--server", f"tcp://127.0.0.1:{proxy.port}", "--key",
                  str(keys / f"{name}.key_secret"), *CONFIG)
        code = trainer.wait(timeout=seconds + 600)
    finally:
        for process in processes[::-1]:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        proxy.close()
    if code != 0:
        raise SystemExit(f"train.py exited {code}: {(folder / 'trainer.log').read_text(errors='replace')[-3000:]}")
    with open(run / "evaluations.csv") as stream:
        rows = list(csv.DictReader(stream))
    last = rows[-1]
    return float(last["cost"]) / float(last["time"]), float(last["fitness"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=90.0, help="of training per run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--delays", type=float, nargs="+", default=[0.0, 5.0, 50.0], metavar="MS",
                        help="added to each direction of the workers' link")
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="remote-delay-"))
    results: dict[float, list[tuple[float, float]]] = {delay: [] for delay in options.delays}
    for repeat in range(options.repeats):
        for delay in options.delays:
            result = one_run(delay / 1000, options.seconds, options.workers, root / f"{delay:g}ms-{repeat}")
            results[delay].append(result)
            print(f"+{delay:g} ms each way, run {repeat + 1}: {result[0]:.0f} env steps/s, evaluation {result[1]:.0f}",
                  flush=True)
    base = statistics.median(rate for rate, _ in results[options.delays[0]])
    print(f"\ntrain.py SAC real-time Pendulum-v1 (20 Hz) from {options.workers} remote workers, "
          f"{options.seconds:.0f} s a run - {time.strftime('%Y-%m-%d')} - "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, median of {options.repeats}")
    print("| workers' link | env steps/s (each run) | median | vs +0 ms | evaluation at the end (each run) |")
    print("|---|---|---|---|---|")
    for delay, runs in results.items():
        rate = statistics.median(r for r, _ in runs)
        print(f"| +{delay:g} ms each way | {' / '.join(f'{r:.0f}' for r, _ in runs)} | {rate:.0f} | "
              f"{rate / base:.2f}x | {' / '.join(f'{f:.0f}' for _, f in runs)} |")


if __name__ == "__main__":
    main()
