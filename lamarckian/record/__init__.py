"""Records of a run: checkpoints (atomic), TensorBoard scalars, the terminal progress display."""

from .checkpoint import Checkpoints, atomic_write, plain
from .progress import Progress, format_number
from .table import CsvLog, read_rows
from .tensorboard import Scalars

__all__ = ["Checkpoints", "CsvLog", "Progress", "Scalars", "atomic_write", "format_number", "plain", "read_rows"]
