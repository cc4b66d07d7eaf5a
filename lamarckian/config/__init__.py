"""The configuration layer: defaults in ``lamarckian.yml``, ``-c`` files, ``-m`` edits, safe expressions."""

from .checked import load, load_with_sources
from .errors import ConfigError
from .expression import Expression, ExpressionError
from .loader import CONFIG_DIR, DEFAULTS, lookup, refuse_ignored
from .per_device import per_device

__all__ = ["CONFIG_DIR", "DEFAULTS", "ConfigError", "Expression", "ExpressionError", "load", "load_with_sources",
           "lookup", "per_device", "refuse_ignored"]
