#!/usr/bin/env python
"""``python train.py ...``: the same program as ``python -m lamarckian.train`` (see ``--help``)."""

import sys

from lamarckian.entry import train

if __name__ == "__main__":
    sys.exit(train())
