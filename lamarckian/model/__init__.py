"""Networks, the flat weight blob and normalizers."""

from .blob import blob_size, load_blob, to_blob
from .network import ActorCritic, ModelSettings
from .normalizer import RunningNormalizer
from .observation import ObservationBatcher

__all__ = ["ActorCritic", "ModelSettings", "ObservationBatcher", "RunningNormalizer", "blob_size", "load_blob",
           "to_blob"]
