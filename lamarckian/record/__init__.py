"""Records of a run: checkpoints (atomic), TensorBoard scalars, the terminal progress display."""

from .checkpoint import Checkpoints, atomic_write
from .progress import Progress, format_number
from .tensorboard import Scalars

__all__ = ["Checkpoints", "Progress", "Scalars", "atomic_write", "format_number"]
