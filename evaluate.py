#!/usr/bin/env python
"""``python evaluate.py ...``: the same program as ``python -m lamarckian.evaluate`` (see ``--help``)."""

import sys

from lamarckian.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
