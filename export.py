#!/usr/bin/env python
"""``python export.py ...``: the same program as ``python -m lamarckian.export`` (see ``--help``)."""

import sys

from lamarckian.export import main

if __name__ == "__main__":
    sys.exit(main())
