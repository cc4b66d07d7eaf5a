"""Codec and wire: round trips, zero copy, and every malformed input rejected with ProtocolError."""

from __future__ import annotations

import pickle

import msgpack
import numpy as np
import pytest
import torch

from lamarckian.rpc import ProtocolError, RpcSettings, codec
from lamarckian.rpc.wire import Kind, Wire

SECRET = b"s" * 32


def round_trip(value):
    body, buffers = codec.encode(value)
    frames = [bytearray(buffer) for buffer in buffers]  # as received: separate buffers
    return codec.decode(body, [memoryview(frame) for frame in frames])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint16", "int64", "bool", "complex64", ">f4"])
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3, 4), (5, 0, 2)])
def test_arrays_keep_dtype_shape_and_values(dtype, shape):
    array = (np.arange(int(np.prod(shape))) % 3).astype(dtype).reshape(shape)
    result = round_trip(array)
    assert result.dtype == array.dtype
    assert result.shape == array.shape
    np.testing.assert_array_equal(result, array)


def test_nested_containers_scalars_and_tuples():
    value = {
        "a": [1, 2.5, "x", None, True, b"raw"],
        3: (np.float32(1.5), np.int64(-7), (np.zeros(2), [np.ones((2, 2), np.int16)])),
        "deep": {"deeper": {"array": np.arange(6).reshape(2, 3)}},
    }
    result = round_trip(value)
    assert result["a"] == [1, 2.5, "x", None, True, b"raw"]
    scalar, integer, inner = result[3]
    assert isinstance(result[3], tuple)
    assert isinstance(inner, tuple)
    assert scalar.dtype == np.float32
    assert scalar == 1.5
    assert integer.dtype == np.int64
    assert integer == -7
    np.testing.assert_array_equal(inner[1][0], np.ones((2, 2), np.int16))
    np.testing.assert_array_equal(result["deep"]["deeper"]["array"], np.arange(6).reshape(2, 3))


def test_non_contiguous_arrays_are_sent_as_their_values():
    array = np.arange(24.0).reshape(4, 6)[:, ::2]
    np.testing.assert_array_equal(round_trip(array), array)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool])
def test_torch_tensors_round_trip(dtype):
    tensor = torch.arange(12).reshape(3, 4).to(dtype).t()  # non-contiguous
    result = round_trip({"t": tensor})["t"]
    assert isinstance(result, torch.Tensor)
    assert result.dtype == dtype
    assert result.shape == tensor.shape
    assert torch.equal(result, tensor)


def test_tensor_with_grad_is_sent_detached():
    tensor = torch.ones(3, requires_grad=True) * 2
    assert torch.equal(round_trip(tensor), torch.full((3,), 2.0))


def test_received_arrays_are_views_of_the_frames_no_copy():
    wire = Wire(SECRET, RpcSettings.defaults())
    frames = [bytearray(memoryview(f)) for f in wire.pack(Kind.CALL, 1, {"x": np.arange(100000, dtype=np.float32)})]
    message = wire.unpack(frames)
    array = message.value["x"]
    assert np.shares_memory(array, np.frombuffer(frames[1], np.uint8))
    tensor = Wire(SECRET, RpcSettings.defaults()).unpack(
        [bytearray(memoryview(f)) for f in wire.pack(Kind.CALL, 2, torch.arange(10.0))]).value
    assert tensor.sum().item() == 45.0


def test_a_set_is_refused_at_the_sender():
    with pytest.raises(TypeError, match="cannot send builtins.set"):
        codec.encode({1, 2})


def test_an_object_array_is_refused_at_the_sender():
    with pytest.raises(TypeError, match="numpy.ndarray"):
        codec.encode(np.array([object()], dtype=object))


def test_an_int_beyond_64_bits_is_refused_at_the_sender():
    with pytest.raises(TypeError, match="64 bits"):
        codec.encode(2**70)


def test_a_received_pickle_is_refused():
    body = msgpack.packb(msgpack.ExtType(codec.EXT_PICKLE, pickle.dumps({1, 2})))
    with pytest.raises(ProtocolError, match="disallowed extension type 5"):
        codec.decode(body, [])


def test_the_pickle_serializer_is_a_configuration_error():
    with pytest.raises(ValueError, match="rpc.serializer.*no pickle serializer"):
        RpcSettings.defaults(serializer="pickle")


@pytest.mark.parametrize(
    "ext, buffers, match",
    [
        ((codec.EXT_NDARRAY, [3, "<f4", [1]]), [], "buffer 3"),
        ((codec.EXT_NDARRAY, [0, "|O", [1]]), [b"12345678"], "not allowed"),
        ((codec.EXT_NDARRAY, [0, "<f4", [3]]), [b"1234"], "does not match"),
        ((codec.EXT_NDARRAY, [0, "<f4", [-1]]), [b"1234"], "bad shape"),
        ((codec.EXT_NDARRAY, [0, "<f4", [2**40, 2**40]]), [b"1234"], "does not match"),
        ((codec.EXT_NDARRAY, [0, "V8", [1]]), [b"12345678"], "not allowed"),
        ((codec.EXT_TENSOR, [0, "nonsense", [1]]), [b"1234"], "unknown torch dtype"),
        ((codec.EXT_SCALAR, ["<f8", b"123"]), [], "bad scalar"),
        ((99, None), [], "unknown or disallowed"),
    ],
)
def test_lying_headers_are_malformed(ext, buffers, match):
    code, payload = ext
    body = msgpack.packb(msgpack.ExtType(code, msgpack.packb(payload)))
    with pytest.raises(ProtocolError, match=match) as info:
        codec.decode(body, [memoryview(b) for b in buffers])
    assert info.value.reason == "malformed"


def test_wire_rejects_tampering_version_size_and_truncation():
    wire = Wire(SECRET, RpcSettings.defaults(max_message_bytes=1 << 20))
    frames = [bytes(memoryview(f)) for f in wire.pack(Kind.CALL, 7, ["f", [np.ones(20000)], {}])]
    assert wire.unpack(frames).request_id == 7
    tampered = list(frames)
    tampered[1] = bytes([tampered[1][0] ^ 1]) + tampered[1][1:]
    with pytest.raises(ProtocolError) as info:
        wire.unpack(tampered)
    assert info.value.reason == "unauthenticated"
    with pytest.raises(ProtocolError) as info:
        Wire(b"x" * 32, RpcSettings.defaults()).unpack(frames)
    assert info.value.reason == "unauthenticated"
    old = [frames[0][:2] + bytes([0]) + frames[0][3:], *frames[1:]]
    assert pytest.raises(ProtocolError, wire.unpack, old).value.reason == "version"
    assert pytest.raises(ProtocolError, wire.unpack, frames[:-1]).value.reason == "malformed"
    assert pytest.raises(ProtocolError, wire.unpack, frames[:1]).value.reason == "malformed"
    huge = [frames[0], b"\x00" * (1 << 20), frames[-1]]
    assert pytest.raises(ProtocolError, wire.unpack, huge).value.reason == "oversize"


@pytest.mark.parametrize("bulk_mac", ["aes-gmac", "hmac-sha256"])
def test_large_frames_are_authenticated_with_either_bulk_mac(bulk_mac):
    wire = Wire(SECRET, RpcSettings.defaults(bulk_mac=bulk_mac))
    frames = [bytearray(memoryview(f)) for f in wire.pack(Kind.REPLY, 1, np.ones(1 << 18, np.float32))]
    assert wire.unpack(frames).value.sum() == 1 << 18
    frames[1][12345] ^= 1  # one flipped bit deep inside the megabyte
    assert pytest.raises(ProtocolError, wire.unpack, frames).value.reason == "unauthenticated"
