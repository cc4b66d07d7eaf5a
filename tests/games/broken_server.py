"""A deliberately broken game server for the conformance checker's tests: the reference server with one flaw
(``LAMARCKIAN_TEST_FLAW``): ``swap_ids`` answers with the wrong episode id, ``silent`` never reports an error,
``impostor`` cannot prove the secret. Run as ``python -m tests.games.broken_server serve ...``."""

from __future__ import annotations

import os
import sys

from lamarckian.games import __main__ as cli
from lamarckian.games import peer, protocol, server

FLAW = os.environ.get("LAMARCKIAN_TEST_FLAW", "")
reply = server.GameServer._reply


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
else:
    raise SystemExit(f"LAMARCKIAN_TEST_FLAW={FLAW!r}: expected swap_ids, silent or impostor")

if __name__ == "__main__":
    sys.exit(cli.main())
