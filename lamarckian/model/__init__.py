"""Networks, the flat weight blob and normalizers.

Names are imported on first use (PEP 562), so that :mod:`lamarckian.model.observation` (numpy only) serves a
deployment worker that runs an exported ONNX policy without torch.
"""

from ..lazy import lazy_exports

_WHERE = {"ActorCritic": "network", "ModelSettings": "network", "ObservationBatcher": "observation",
          "PolicySet": "policy_set", "RunningNormalizer": "normalizer", "blob_size": "blob", "load_blob": "blob",
          "to_blob": "blob"}

__all__ = sorted(_WHERE)
__getattr__ = lazy_exports(__name__, _WHERE)
