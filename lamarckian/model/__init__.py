"""Networks, the flat weight blob and normalizers.

Names are imported on first use (PEP 562), so that :mod:`lamarckian.model.observation` (numpy only) serves a
deployment worker that runs an exported ONNX policy without torch.
"""

from importlib import import_module
from typing import Any

_WHERE = {"ActorCritic": "network", "ModelSettings": "network", "ObservationBatcher": "observation",
          "RunningNormalizer": "normalizer", "blob_size": "blob", "load_blob": "blob", "to_blob": "blob"}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_WHERE[name]}", __name__), name)
