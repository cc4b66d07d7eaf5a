"""A deliberately broken game server for the conformance checker's tests: the reference server with one flaw
(``LAMARCKIAN_TEST_FLAW``): ``swap_ids`` answers with the wrong episode id, ``silent`` never reports an error,
``impostor`` cannot prove the secret, ``big_endian`` sends typed arrays in big-endian byte order, ``ignore_close``
keeps closed episodes, ``truncated_not_done`` says truncated without done at a time limit, ``duplicate_reset``
restarts a running id, ``drop_second`` neither answers nor refuses a second request of a busy episode,
``no_auth_limit`` waits forever for a handshake, ``small_ids`` keeps 32 bits of an id, ``long_observation`` sends every
observation one number longer than its space. Run as
``python -m tests.games.broken_server serve ...``."""

from __future__ import annotations

import os
import sys

import msgpack
import numpy as np

from lamarckian.games import __main__ as cli
from lamarckian.games import peer, protocol, server

FLAW = os.environ.get("LAMARCKIAN_TEST_FLAW", "")
reply = server.GameServer._reply
seat = server.GameServer._seat
dispatch = server.GameServer.dispatch
reset_problem = server.GameServer._reset_problem


def swapped_reply(self, writer, message):
    reply(self, writer, {**message, "episode": message["episode"] + 1})


def impostor_proof(secret, role, first, second):
    return b"\0" * 32 if role == b"server" else protocol.proof(secret, role, first, second)


if FLAW == "swap_ids":
    server.GameServer._reply = swapped_reply
elif FLAW == "silent":
    server.GameServer._refuse = lambda self, writer, number, reason: None
elif FLAW == "impostor":
    peer.protocol = type(sys)("impostor_protocol")
    peer.protocol.__dict__.update(vars(protocol))
    peer.protocol.proof = impostor_proof
elif FLAW == "big_endian":
    def big_endian_seat(controller):
        entry = seat(controller)
        array = np.asarray(entry["observation"], np.float32)
        entry["observation"] = msgpack.ExtType(protocol.EXT_ARRAY, msgpack.packb(
            ["float32", list(array.shape), array.astype(">f4").tobytes()], use_bin_type=True))
        return entry

    server.GameServer._seat = staticmethod(big_endian_seat)
elif FLAW == "ignore_close":
    server.GameServer.dispatch = lambda self, message, peer: None if message.get("type") == "close" else \
        dispatch(self, message, peer)
elif FLAW == "truncated_not_done":
    def undone_seat(controller):
        entry = seat(controller)
        if entry["truncated"]:
            entry["done"] = False
            entry.pop("result", None)
        return entry

    server.GameServer._seat = staticmethod(undone_seat)
elif FLAW == "duplicate_reset":
    server.GameServer._reset_problem = lambda self, message, number, episodes: reset_problem(
        self, message, number, {n: e for n, e in episodes.items() if n != number})
elif FLAW == "drop_second":
    def dropping_dispatch(self, message, peer):
        served = peer.episodes.get(message.get("episode")) if message.get("type") == "step" else None
        if served is None or not served.busy:
            dispatch(self, message, peer)

    server.GameServer.dispatch = dropping_dispatch
elif FLAW == "no_auth_limit":
    peer.HANDSHAKE_TIMEOUT = 1e9
elif FLAW == "small_ids":
    server.GameServer._reply = lambda self, writer, message: reply(
        self, writer, {**message, "episode": message["episode"] & 0xFFFFFFFF})
elif FLAW == "long_observation":
    def long_seat(controller):
        entry = seat(controller)
        entry["observation"] = [*np.asarray(entry["observation"], np.float32).ravel().tolist(), 0.0]
        return entry

    server.GameServer._seat = staticmethod(long_seat)
else:
    raise SystemExit(f"LAMARCKIAN_TEST_FLAW={FLAW!r}: not a flaw of this module's docstring")

if __name__ == "__main__":
    sys.exit(cli.main())
