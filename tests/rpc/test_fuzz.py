"""Property-based fuzzing of the decoder: whatever arrives, the only failure is ProtocolError."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamarckian.rpc import ProtocolError, RpcSettings
from lamarckian.rpc.wire import PREFIX_BYTES, Kind, Wire

SECRET = b"f" * 32
WIRE = Wire(SECRET, RpcSettings.defaults(max_message_bytes=1 << 16))
FUZZ = settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decodes_or_rejects(frames) -> None:
    try:
        WIRE.unpack(frames)
    except ProtocolError as error:
        assert error.reason in {"malformed", "unauthenticated", "oversize", "version"}


@FUZZ
@given(st.lists(st.binary(max_size=300), min_size=0, max_size=6))
def test_random_frames_never_crash_the_decoder(frames):
    _decodes_or_rejects(frames)


msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=20)
    | st.binary(max_size=40),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=5) | st.integers(-(2**63), 2**63 - 1), children, max_size=5),
    max_leaves=20,
)
array_like = st.lists(  # [buffer index, dtype, shape] with plausible and absurd fields
    st.one_of(st.integers(-2, 4), st.sampled_from(["<f4", "|b1", "|O", "V8", "float32", "bfloat16", "<c16", "x"]),
              st.lists(st.integers(-3, 2**40), max_size=4), st.binary(max_size=9)),
    max_size=4,
)
ext_payloads = st.builds(
    lambda code, payload: msgpack.ExtType(code, payload),
    st.one_of(st.integers(0, 127), st.integers(1, 5)),
    st.one_of(st.binary(max_size=40), msgpack_values.map(msgpack.packb), array_like.map(msgpack.packb)),
)


@FUZZ
@given(
    body=st.recursive(msgpack_values | ext_payloads, lambda c: st.lists(c, max_size=4), max_leaves=12),
    buffers=st.lists(st.binary(max_size=64), max_size=3),
    kind=st.integers(0, 255),
)
@pytest.mark.slow
def test_authentic_but_hostile_bodies_never_crash_the_decoder(body, buffers, kind):
    """Signed with the right key (a peer holding the secret, or a bug): the decoder itself is fuzzed."""
    header_body = msgpack.packb(body, use_bin_type=True)
    nonce = WIRE.signer.nonce()
    import struct

    header = struct.pack(">2sBBQ16s", b"LK", 1, kind, 1, nonce) + header_body
    assert len(header) >= PREFIX_BYTES
    views = [memoryview(b) for b in buffers]
    tag = WIRE.signer.tag(header, nonce, views)
    _decodes_or_rejects([header, *buffers, tag])


def test_a_good_message_still_decodes_after_fuzzing():
    frames = WIRE.pack(Kind.CALL, 5, ["method", [1, 2], {"k": "v"}])
    assert WIRE.unpack(frames).value == ["method", [1, 2], {"k": "v"}]
