"""Evolution over learners: PBT, NSGA-II and tournament ensembles; hyper-parameter spaces from ``[lo, hi]``."""

from .engine import Evolution, build_algorithm
from .individual import Individual
from .space import Dimension, SearchSpace

__all__ = ["Dimension", "Evolution", "Individual", "SearchSpace", "build_algorithm"]
