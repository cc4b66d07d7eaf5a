"""The flat weight blob: every parameter and floating buffer of a module in one contiguous float32 array.

One array is one zero-copy RPC frame; its layout is the module's ``state_dict`` order.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import nn


def _tensors(module: nn.Module) -> list[torch.Tensor]:
    return [t for t in module.state_dict(keep_vars=True).values() if t.is_floating_point()]


def blob_size(module: nn.Module) -> int:
    """Number of float32 values in the module's blob."""
    return sum(t.numel() for t in _tensors(module))


def to_blob(module: nn.Module) -> np.ndarray:
    """A new ``(blob_size,)`` float32 array holding the module's parameters and floating buffers."""
    with torch.no_grad():
        return torch.cat([t.detach().reshape(-1).float().cpu() for t in _tensors(module)]).numpy()


def load_blob(module: nn.Module, blob: np.ndarray) -> None:
    """Copy a blob made by :func:`to_blob` from a module of the same architecture into ``module``."""
    array = np.asarray(blob, dtype=np.float32)
    with warnings.catch_warnings():      # a received blob is a read-only view; it is only read from here
        warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
        flat = torch.as_tensor(array)
    expected = blob_size(module)
    if flat.ndim != 1 or flat.numel() != expected:
        raise ValueError(f"weight blob has {flat.numel()} values, the model needs {expected} (another architecture?)")
    offset = 0
    with torch.no_grad():
        for tensor in _tensors(module):
            count = tensor.numel()
            tensor.copy_(flat[offset:offset + count].view_as(tensor))
            offset += count
