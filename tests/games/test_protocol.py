"""The protocol's pieces: spaces as plain data, typed arrays, refusal of anything malformed."""

from __future__ import annotations

import gymnasium
import msgpack
import numpy as np
import pytest

from lamarckian.games import protocol
from lamarckian.games.protocol import ProtocolViolation

SPACES = [
    gymnasium.spaces.Box(-np.inf, np.inf, (4,), np.float32),
    gymnasium.spaces.Box(0, 255, (8, 8, 3), np.uint8),
    gymnasium.spaces.Box(np.array([-1.0, -2.0]), np.array([1.0, 2.0]), dtype=np.float64),
    gymnasium.spaces.Discrete(5, start=-2),
    gymnasium.spaces.MultiDiscrete([3, 4]),
    gymnasium.spaces.MultiBinary(6),
    gymnasium.spaces.Dict({"image": gymnasium.spaces.Box(0, 1, (2, 2)), "mask": gymnasium.spaces.MultiBinary(3)}),
    gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(32), gymnasium.spaces.Discrete(11),
                            gymnasium.spaces.Discrete(2))),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda space: type(space).__name__)
def test_a_space_survives_its_description(space):
    rebuilt = protocol.build_space(msgpack.unpackb(msgpack.packb(protocol.describe_space(space))))
    assert rebuilt == space


def test_a_tuple_observation_is_conformed_part_by_part():
    space = gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(32), gymnasium.spaces.Box(-1, 1, (2,), np.float32)))
    value = protocol.conform([14, [0.5, -0.5]], space, "observation")
    assert space.contains(value)


def test_a_tuple_observation_with_a_missing_part_is_named():
    space = gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(32), gymnasium.spaces.Discrete(2)))
    with pytest.raises(ProtocolViolation, match=r"observation: expected a list of 2 parts"):
        protocol.conform([14], space, "observation")


def test_arrays_travel_with_their_dtype_and_shape():
    array = np.arange(6, dtype=np.int16).reshape(2, 3)
    message = protocol.unpack(protocol.pack({"type": "x", "a": array})[protocol.HEADER.size:])
    assert message["a"].dtype == np.int16
    assert message["a"].shape == (2, 3)
    assert (message["a"] == array).all()


@pytest.mark.parametrize("payload", [
    msgpack.packb(["float32", [3], b"\0" * 8]),            # 8 bytes for 3 floats
    msgpack.packb(["object", [1], b"\0" * 8]),             # not a numeric dtype
    msgpack.packb(["float32", [-1], b""]),                 # a negative size
    b"\xc1",                                               # not msgpack
])
def test_a_malformed_array_is_a_violation(payload):
    body = msgpack.packb({"type": "x", "a": msgpack.ExtType(protocol.EXT_ARRAY, payload)})
    with pytest.raises(ProtocolViolation):
        protocol.unpack(body)


def test_an_unknown_extension_such_as_a_pickle_is_refused():
    body = msgpack.packb({"type": "x", "a": msgpack.ExtType(5, b"\x80\x05N.")})
    with pytest.raises(ProtocolViolation, match="extension type 5"):
        protocol.unpack(body)


def test_an_observation_that_does_not_fit_its_space_is_named():
    space = gymnasium.spaces.Box(-1, 1, (4,), np.float32)
    message = {"players": [{"observation": [0.0, 1.0], "reward": 0.0, "done": False}]}
    with pytest.raises(ProtocolViolation, match=r"players\[0\].observation: shape \(2,\)"):
        protocol.seat_states(message, [space], "observation")


def test_a_discrete_action_outside_its_range_is_refused():
    with pytest.raises(ProtocolViolation, match="outside"):
        protocol.conform(7, gymnasium.spaces.Discrete(3), "actions[0]")


def test_proofs_of_the_two_roles_differ():
    secret, first, second = b"s" * 16, b"a" * 32, b"b" * 32
    assert protocol.proof(secret, b"client", first, second) != protocol.proof(secret, b"server", first, second)


def test_a_short_secret_file_is_refused_naming_it(tmp_path):
    file = tmp_path / "short.secret"
    file.write_text("abc")
    with pytest.raises(ValueError, match="short.secret: 3 bytes"):
        protocol.read_secret(file)


def test_a_written_secret_is_private(tmp_path):
    protocol.write_secret(tmp_path / "new.secret")
    assert (tmp_path / "new.secret").stat().st_mode & 0o777 == 0o600
