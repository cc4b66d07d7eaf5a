"""Evolution over learners: PBT, NSGA-II and tournament ensembles; hyper-parameter spaces from ``[lo, hi]``.

Names are imported on first use (PEP 562), so that evolve.py can read the settings (:mod:`.settings`, :mod:`.space`)
and start its learners' fork server before torch is imported.
"""

from ..lazy import lazy_exports

_WHERE = {"Dimension": "space", "Evolution": "engine", "Individual": "individual", "SearchSpace": "space",
          "build_algorithm": "engine"}

__all__ = sorted(_WHERE)
__getattr__ = lazy_exports(__name__, _WHERE)
