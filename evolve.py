#!/usr/bin/env python
"""``python evolve.py ...``: the same program as ``python -m lamarckian.evolve`` (see ``--help``)."""

import sys

from lamarckian.entry import evolve

if __name__ == "__main__":
    sys.exit(evolve())
