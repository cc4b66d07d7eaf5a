"""Turn Python values into one msgpack body plus raw buffers, and back, without copying arrays.

Supported: None, bool, int (64-bit), float, str, bytes, lists, tuples, dicts (any msgpack key),
numpy arrays and scalars of numeric dtypes, CPU torch tensors (bfloat16 included). Arrays travel as
separate buffers that the transport sends with ``copy=False``; decoding wraps received frames with
``numpy.frombuffer`` (no copy). Anything else raises ``TypeError``: nothing is pickled, and a received pickle
(extension type :data:`EXT_PICKLE`, which older peers could send) is refused as malformed.
"""

from __future__ import annotations

import math
import sys
import warnings
from typing import Any, Sequence

import msgpack
import numpy as np

from .errors import ProtocolError

EXT_NDARRAY = 1
EXT_TENSOR = 2
EXT_TUPLE = 3
EXT_SCALAR = 4
EXT_PICKLE = 5

#: dtype kinds that can be rebuilt from raw bytes safely (no object pointers, no structured records).
SAFE_DTYPE_KINDS = frozenset("biufc")
MAX_DIMS = 32


def _torch():
    """The torch module if it is already imported by the program, else None (never imports it)."""
    return sys.modules.get("torch")


class Encoder:
    """Encodes values one at a time (reusable, one thread); collects the buffers that travel as separate frames."""

    def __init__(self) -> None:
        self.buffers: list[memoryview] = []
        self._packer = msgpack.Packer(default=self._default, strict_types=True, use_bin_type=True)

    def encode(self, value: Any) -> bytes:
        """Return the msgpack body; ``self.buffers`` (a new list per call) holds the array buffers it references
        by index."""
        self.buffers = []
        return self._pack(self._packer, value)

    def _pack(self, packer: msgpack.Packer, value: Any) -> bytes:
        try:
            return packer.pack(value)
        except OverflowError as error:
            packer.reset()
            raise TypeError(f"cannot send integer outside 64 bits: {error}") from None
        except Exception:
            packer.reset()
            raise

    def _nested(self, value: Any) -> bytes:
        """A value inside an extension (a tuple's items): packed by a fresh packer, buffers shared."""
        return self._pack(msgpack.Packer(default=self._default, strict_types=True, use_bin_type=True), value)

    def _buffer(self, array: np.ndarray) -> int:
        self.buffers.append(memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8)))  # type: ignore[arg-type]
        return len(self.buffers) - 1

    def _default(self, value: Any) -> Any:  # noqa: PLR0911 - one return per payload type
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in SAFE_DTYPE_KINDS:
                return self._fallback(value)
            index = self._buffer(value)
            return msgpack.ExtType(EXT_NDARRAY, msgpack.packb([index, value.dtype.str, list(value.shape)]))
        if isinstance(value, tuple):
            return msgpack.ExtType(EXT_TUPLE, self._nested(list(value)))
        if isinstance(value, np.generic) and value.dtype.kind in SAFE_DTYPE_KINDS:
            return msgpack.ExtType(EXT_SCALAR, msgpack.packb([value.dtype.str, value.tobytes()]))
        torch = _torch()
        if torch is not None and isinstance(value, torch.Tensor):
            return self._tensor(torch, value)
        base: Any
        for base in (bool, int, float, str, bytes, list, dict):
            if isinstance(value, base):  # a subclass (IntEnum, OrderedDict...) travels as its base type
                return base(value)
        return self._fallback(value)

    def _tensor(self, torch: Any, tensor: Any) -> msgpack.ExtType:
        if tensor.device.type != "cpu":
            raise TypeError(f"only CPU tensors can be sent; got one on {tensor.device} (call .cpu() first)")
        tensor = tensor.detach().contiguous()
        dtype_name = str(tensor.dtype).removeprefix("torch.")
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.view(torch.int16)
        index = self._buffer(tensor.numpy())
        return msgpack.ExtType(EXT_TENSOR, msgpack.packb([index, dtype_name, list(tensor.shape)]))

    def _fallback(self, value: Any) -> msgpack.ExtType:
        raise TypeError(
            f"cannot send {type(value).__module__}.{type(value).__qualname__}: send arrays, numbers, strings and "
            "containers (nothing is pickled)"
        )


class Decoder:
    """Decodes one body against the received buffers, validating everything the sender claims."""

    def __init__(self, buffers: Sequence[memoryview]) -> None:
        self.buffers = buffers

    def decode(self, body: bytes | memoryview) -> Any:
        try:
            return msgpack.unpackb(body, ext_hook=self._ext, strict_map_key=False, use_list=True, raw=False)
        except ProtocolError:
            raise
        except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as error:
            raise ProtocolError("malformed", f"{type(error).__name__}: {error}") from None

    def _array(self, data: bytes) -> np.ndarray:
        index, dtype_str, shape = msgpack.unpackb(data)
        if not (isinstance(index, int) and 0 <= index < len(self.buffers)):
            raise ProtocolError("malformed", f"array refers to buffer {index!r} of {len(self.buffers)}")
        dtype = np.dtype(dtype_str)
        if dtype.kind not in SAFE_DTYPE_KINDS or dtype.fields is not None:
            raise ProtocolError("malformed", f"dtype {dtype_str!r} is not allowed")
        if not (isinstance(shape, list) and len(shape) <= MAX_DIMS
                and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise ProtocolError("malformed", f"bad shape {shape!r}")
        buffer = self.buffers[index]
        count = math.prod(shape)
        if count * dtype.itemsize != buffer.nbytes:
            raise ProtocolError("malformed", f"shape {shape} of {dtype_str} does not match {buffer.nbytes} bytes")
        return np.frombuffer(buffer, dtype=dtype, count=count).reshape(shape)

    def _ext(self, code: int, data: bytes) -> Any:
        if code == EXT_NDARRAY:
            return self._array(data)
        if code == EXT_TENSOR:
            return self._tensor(data)
        if code == EXT_TUPLE:
            return tuple(self.decode(data))
        if code == EXT_SCALAR:
            dtype_str, raw = msgpack.unpackb(data)
            dtype = np.dtype(dtype_str)
            if dtype.kind not in SAFE_DTYPE_KINDS or dtype.itemsize != len(raw):
                raise ProtocolError("malformed", f"bad scalar of dtype {dtype_str!r}")
            return np.frombuffer(raw, dtype=dtype)[0]
        raise ProtocolError("malformed", f"unknown or disallowed extension type {code}")

    def _tensor(self, data: bytes) -> Any:
        import torch  # a tensor arrived, so the sender uses torch; importing it here is expected

        index, dtype_name, shape = msgpack.unpackb(data)
        dtype = getattr(torch, str(dtype_name), None)
        if not isinstance(dtype, torch.dtype):
            raise ProtocolError("malformed", f"unknown torch dtype {dtype_name!r}")
        carrier = torch.int16 if dtype == torch.bfloat16 else dtype
        numpy_dtype = torch.empty((), dtype=carrier).numpy().dtype
        array = self._array(msgpack.packb([index, numpy_dtype.str, shape]))
        with warnings.catch_warnings():   # a read-only view of the received frame (docs/rpc.md), as arrays are
            warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
            tensor = torch.from_numpy(array)
        return tensor.view(torch.bfloat16) if dtype == torch.bfloat16 else tensor


def encode(value: Any) -> tuple[bytes, list[memoryview]]:
    """Encode ``value`` into ``(body, buffers)``; arrays are referenced, not copied."""
    encoder = Encoder()
    return encoder.encode(value), encoder.buffers


def decode(body: bytes | memoryview, buffers: Sequence[memoryview]) -> Any:
    """Inverse of :func:`encode`; raises :class:`ProtocolError` ("malformed") on anything inconsistent."""
    return Decoder(buffers).decode(body)
