#!/usr/bin/env python
"""Compare policies on the same seeds: ``python scripts/evaluate.py --help``. The command line is
purejaxrl/cli/evaluate.py (also installed as ``hackmatrix-evaluate``)."""

import sys

from purejaxrl.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
