#!/usr/bin/env python
"""``python train.py ...``: the same program as ``python -m lamarckian.train`` (see ``--help``)."""

import sys

from lamarckian.train import main

if __name__ == "__main__":
    sys.exit(main())
