"""Games that run elsewhere (docs/games.md): ``python -m lamarckian.games secret | serve | check``.

    python -m lamarckian.games secret ~/.lamarckian/game.secret            # a new per-game secret (mode 0600)
    python -m lamarckian.games serve --env CartPole-v1 --latency 10ms --jitter 5ms --secret ~/.lamarckian/game.secret
    python -m lamarckian.games serve --mdp pong --bot 1 ...                 # the server plays seat 1 by its rule
    python -m lamarckian.games check tcp://127.0.0.1:PORT --secret FILE    # conformance of your own server
"""

from __future__ import annotations

import argparse
import ssl
import sys
from pathlib import Path
from typing import Sequence

from ..cli import OneLineParser, usage_error

PROG = "python -m lamarckian.games"


def duration(text: str) -> float:
    """Seconds from ``10ms``, ``0.5s`` or ``2`` (seconds)."""
    value = text.strip().lower()
    scale = 1e-3 if value.endswith("ms") else 1.0
    try:
        seconds = float(value.removesuffix("ms").removesuffix("s")) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (10ms, 0.5s, 2)") from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration is >= 0")
    return seconds


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    secret = commands.add_parser("secret", help="write a new per-game secret file (kept if it exists)")
    secret.add_argument("file", type=Path)

    serve = commands.add_parser("serve", help="serve a gymnasium id or a built-in MDP over the game protocol")
    what = serve.add_mutually_exclusive_group(required=True)
    what.add_argument("--env", help="a gymnasium id (CartPole-v1, Pendulum-v1...)")
    what.add_argument("--mdp", help="a built-in MDP (pong, coins, pettingzoo) or module:ClassName")
    serve.add_argument("-c", "--config", nargs="+", action="extend", default=[], metavar="FILE",
                       help="config files for the MDP's settings (mdp/pong.yml...)")
    serve.add_argument("-m", "--modify", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    serve.add_argument("--secret", type=Path, required=True, help="the per-game secret file (see `secret`)")
    serve.add_argument("--bind", default="tcp://127.0.0.1:0",
                       help="tcp://HOST:PORT to listen on (default: loopback, a free port; printed at start)")
    serve.add_argument("--bot", type=int, nargs="+", default=[], metavar="SEAT",
                       help="seats the server always plays itself by the MDP's rule (hidden from the trainer)")
    serve.add_argument("--pixels", type=int, default=0, metavar="SIDE",
                       help="serve the game's rendered frames (SIDE x SIDE x 3 uint8, typed arrays) as every seat's "
                            "observation: a pixel game (0: its own observations)")
    serve.add_argument("--latency", type=duration, default=0.0, help="delay before every reply (10ms)")
    serve.add_argument("--jitter", type=duration, default=0.0, help="uniform ± variation of the delay (5ms)")
    serve.add_argument("--drop-rate", type=float, default=0.0, help="share of requests never answered")
    serve.add_argument("--garbage-rate", type=float, default=0.0, help="share of replies replaced by random bytes")
    serve.add_argument("--crash-after", type=int, default=0, help="die abruptly after this many steps (0: never)")
    serve.add_argument("--spike-every", type=int, default=0, metavar="N",
                       help="hold every N-th reply --spike longer (0: never)")
    serve.add_argument("--spike", type=duration, default=0.0, help="how long a spiked reply is held (1.5s)")
    serve.add_argument("--workers", type=int, default=1, help="processes sharing the listening socket")
    serve.add_argument("--max-episodes", type=int, default=65536, help="episodes per connection, at most")
    serve.add_argument("--seed", type=int, default=0)
    serve.add_argument("--tls-cert", type=Path, help="serve TLS with this certificate chain (PEM)")
    serve.add_argument("--tls-key", type=Path, help="... and this private key (PEM)")
    serve.add_argument("--address-file", type=Path, help="also write the bound address to this file")

    check = commands.add_parser("check", help="check a game server against the protocol (exit 0, or one line per "
                                              "violation and exit 1)")
    check.add_argument("address", help="tcp://HOST:PORT")
    check.add_argument("--secret", type=Path, required=True)
    check.add_argument("--timeout", type=float, default=10.0, help="seconds one answer may take")
    check.add_argument("--tls", type=Path, help="the CA file of a TLS server")
    check.add_argument("--tls-name", help="the name in the server's certificate (default: the host)")
    return parser.parse_args(argv)


def serve(arguments: argparse.Namespace) -> int:
    from ..config import load
    from ..mdp import MDP, create_mdp
    from ..mdp.images import RenderedObservations
    from . import protocol, server

    modifications = [*arguments.modify, f"mdp.create={arguments.mdp or 'gym'}"]
    if arguments.env:
        modifications.append(f"mdp.gym.id={arguments.env}")
    if arguments.pixels and not arguments.mdp:
        modifications.append("mdp.gym.kwargs.render_mode=rgb_array")      # a gymnasium env renders only if asked
    mdp_config = load(arguments.config, modifications)["mdp"]
    secret = protocol.read_secret(arguments.secret)
    faults = server.Faults(arguments.latency, arguments.jitter, arguments.drop_rate, arguments.garbage_rate,
                           arguments.crash_after, arguments.spike_every, arguments.spike)
    def make(seed: int) -> MDP:
        mdp = create_mdp(mdp_config, seed=seed)
        return RenderedObservations(mdp, arguments.pixels) if arguments.pixels else mdp

    game = server.GameServer(make, secret, bots=arguments.bot,
                             faults=faults, max_episodes=arguments.max_episodes, seed=arguments.seed)
    tls = None
    if arguments.tls_cert or arguments.tls_key:
        if not (arguments.tls_cert and arguments.tls_key):
            raise ValueError("--tls-cert and --tls-key go together")
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(arguments.tls_cert, arguments.tls_key)
    sock = server.listen(arguments.bind)
    address = server.bound_address(sock)
    if arguments.address_file:
        arguments.address_file.write_text(address + "\n")
    print(f"serving {address} ({len(game.specs)} trainer seats, {arguments.workers} worker(s))", flush=True)
    server.run(game, sock, arguments.workers, tls)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    try:
        if arguments.command == "secret":
            from .protocol import write_secret

            write_secret(arguments.file)
            print(f"secret in {arguments.file}")
            return 0
        if arguments.command == "serve":
            return serve(arguments)
        from .check import check

        found = check(arguments.address, arguments.secret, arguments.timeout, arguments.tls, arguments.tls_name)
        for line in found.violations:
            print(line)
        if found.violations:
            return 1
        for line in found.passed:
            print(f"ok  {line}")
        print(f"{arguments.address} conforms: {len(found.passed)} checks passed")
        return 0
    except (ValueError, OSError) as error:
        return usage_error(PROG, error if isinstance(error, ValueError) else ValueError(str(error)), "the game")


if __name__ == "__main__":
    sys.exit(main())
