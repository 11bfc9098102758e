#!/usr/bin/env python
"""Compare two evaluations on the same boards, board by board: ``python
scripts/compare_evaluations.py --help``. The command line is
purejaxrl/cli/compare_evaluations.py."""

import sys

from purejaxrl.cli.compare_evaluations import main

if __name__ == "__main__":
    sys.exit(main())
