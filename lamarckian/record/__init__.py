"""Records of a run: checkpoints (atomic), TensorBoard scalars, the terminal progress display, status.json."""

from .checkpoint import Checkpoints, atomic_write, plain
from .progress import Progress, SinceLine, StepRate, format_number
from .status import StatusFile, read_status
from .table import CsvLog, read_rows
from .tensorboard import Scalars

__all__ = ["Checkpoints", "CsvLog", "Progress", "Scalars", "SinceLine", "StatusFile", "StepRate", "atomic_write",
           "format_number", "plain", "read_rows", "read_status"]
