"""The configuration layer: defaults in ``lamarckian.yml``, ``-c`` files, ``-m`` edits, safe expressions."""

from .errors import ConfigError
from .expression import Expression, ExpressionError
from .loader import CONFIG_DIR, DEFAULTS, load, lookup
from .per_device import per_device

__all__ = ["CONFIG_DIR", "DEFAULTS", "ConfigError", "Expression", "ExpressionError", "load", "lookup", "per_device"]
