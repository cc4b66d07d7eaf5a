"""Rollout workers over the internet: ``python -m lamarckian.remote keygen | server | worker`` (docs/remote.md).

    python -m lamarckian.remote keygen keys server trainer alice bob     # key pairs: keys/NAME.key(_secret)
    python -m lamarckian.remote server --bind tcp://0.0.0.0:5555 --keys keys   # workers: every NAME.key but
                                                                              # server.key and trainer.key
    python -m lamarckian.remote worker --server tcp://HOST:5555 --key alice.key_secret \\
        -c mdp/realtime/pendulum.yml rl/sac.yml [--onnx policy.onnx]          # server.key beside alice.key_secret
    python train.py -c mdp/realtime/pendulum.yml rl/sac.yml -m rl.remote.server=tcp://HOST:5555 \\
        rl.remote.key=keys/trainer.key_secret rl.remote.server_key=keys/server.key
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import logging
import os
import signal
import sys
import threading
import zlib
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..cli import OneLineParser, usage_error


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="python -m lamarckian.remote", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    keygen = commands.add_parser("keygen", help="write CurveZMQ key pairs")
    keygen.add_argument("folder", type=Path)
    keygen.add_argument("names", nargs="+", metavar="NAME")

    server = commands.add_parser("server", help="relay weights to workers and segments to the trainer")
    server.add_argument("--bind", required=True, help="tcp://ADDRESS:PORT to listen on")
    server.add_argument("--keys", type=Path, required=True,
                        help="folder of the workers' public NAME.key files (delete one to revoke it)")
    server.add_argument("--secret", type=Path, help="this server's key pair (default: KEYS/server.key_secret)")
    server.add_argument("--trainer", type=Path, help="the trainer's public key (default: KEYS/trainer.key)")
    server.add_argument("--queue", type=int, default=256, help="segments waiting for the trainer, at most")
    server.add_argument("--queue-mb", type=float, default=256.0, help="their size in MiB, at most")
    server.add_argument("--rate", type=float, default=20.0, help="segments per second one worker may deliver")
    server.add_argument("--burst", type=float, default=40.0, help="segments one worker may deliver at once")
    server.add_argument("--max-message-mb", type=float, default=32.0, help="larger messages are dropped")
    server.add_argument("--ban", type=float, default=300.0,
                        help="seconds a worker that breaks the protocol is refused")

    worker = commands.add_parser("worker", help="run environments and the policy, send segments")
    worker.add_argument("--server", required=True, help="tcp://HOST:PORT of the server")
    worker.add_argument("--key", type=Path, required=True, help="this worker's NAME.key_secret")
    worker.add_argument("--server-key", type=Path, help="the server's public key (default: server.key beside --key)")
    worker.add_argument("-c", "--config", nargs="+", action="extend", default=[], metavar="FILE")
    worker.add_argument("-m", "--modify", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    worker.add_argument("--onnx", type=Path, help="act with this exported policy (no torch) instead of the trainer's")
    worker.add_argument("--index", type=int, help="seeds the environments (default: from the key)")
    worker.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the server")
    return parser.parse_args(argv)


def keygen_command(arguments: argparse.Namespace) -> int:
    from .keys import keygen

    for name in arguments.names:
        public, secret = keygen(arguments.folder, name)
        print(f"{public}  (public: give it to the server's --keys folder, or to the workers for server.key)\n"
              f"{secret}  (secret: stays on {name}'s machine)")
    return 0


def server_command(arguments: argparse.Namespace) -> int:
    from .keys import AllowList, load_pair, load_public
    from .server import RemoteServer, ServerSettings

    settings = ServerSettings(queue=arguments.queue, queue_bytes=int(arguments.queue_mb * 2**20), rate=arguments.rate,
                              burst=arguments.burst, max_message_bytes=int(arguments.max_message_mb * 2**20),
                              ban=arguments.ban)
    pair = load_pair(arguments.secret or arguments.keys / "server.key_secret")
    trainer = load_public(arguments.trainer or arguments.keys / "trainer.key")
    allow = AllowList(arguments.keys, exclude=(pair[0], trainer))
    server = RemoteServer(arguments.bind, allow, pair, trainer, settings)
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    print(f"serving on {server.endpoint}: {len(allow.names)} worker keys in {arguments.keys}", file=sys.stderr,
          flush=True)
    try:
        server.serve()
    except KeyboardInterrupt:
        pass
    finally:
        print(f"server statistics: {json.dumps(server.statistics())}", file=sys.stderr)
        server.close()
    return 0


@contextlib.contextmanager
def blocked_imports(*names: str) -> Iterator[None]:
    """Make ``import NAME`` fail for the modules not imported yet (a worker never imports Ray, nor torch with an
    exported policy: asserted, since reaching for them fails); undone afterwards."""
    blocked = [name for name in names if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None        # type: ignore[assignment]
    try:
        yield
    finally:
        for name in blocked:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]


def worker_command(arguments: argparse.Namespace) -> int:
    with blocked_imports("ray", *(("torch",) if arguments.onnx is not None else ())):
        return run_worker(arguments)


def run_worker(arguments: argparse.Namespace) -> int:
    from ..config import load
    from .client import Client, KeyRefused
    from .worker import OnnxRollout, Worker

    config = load(arguments.config, arguments.modify)
    client = Client(arguments.server, arguments.key, arguments.server_key or arguments.key.parent / "server.key",
                    arguments.timeout)
    index = arguments.index if arguments.index is not None else zlib.crc32(client.public_key) % 100_000
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    worker = Worker(client, onnx=arguments.onnx is not None)
    source: Any = None
    try:
        worker.hello()
        print(f"worker {worker.name}: connected to {arguments.server}", file=sys.stderr, flush=True)
        extras = None
        if arguments.onnx is not None:
            source = OnnxRollout(config, index, arguments.onnx)
        else:
            from ..rl.fleet.actor import Actor

            version, blob, first_extras = worker.first_weights(stop)
            source = Actor(config, index, blob, version)
            worker.version = version

            def extras(values: dict[str, Any]) -> None:
                if "epsilon" in values:
                    source.set_exploration(float(values["epsilon"]))

            extras(first_extras)
        worker.run(source, stop, extras)
    except KeyRefused as error:
        print(f"python -m lamarckian.remote worker: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        exit_after(CLOSE_SECONDS)
    finally:
        if source is not None:
            source.close()
        client.close()
    return 0


CLOSE_SECONDS = 20.0     # a Ctrl-C'd worker's closing, at most


def exit_after(seconds: float) -> None:
    """A Ctrl-C'd worker closes its environments and connection within ``seconds``, or it prints where every thread
    is (what hung) and exits with 130 anyway: a user's Ctrl-C always ends it."""

    def give_up() -> None:
        print(f"python -m lamarckian.remote worker: closing took over {seconds:g} s; exiting", file=sys.stderr)
        faulthandler.dump_traceback(all_threads=True)
        os._exit(130)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    commands = {"keygen": keygen_command, "server": server_command, "worker": worker_command}
    try:
        return commands[arguments.command](arguments)
    except Exception as error:  # noqa: BLE001 - usage_error re-raises what is not a usage error
        return usage_error(f"python -m lamarckian.remote {arguments.command}", error)


if __name__ == "__main__":
    sys.exit(main())
