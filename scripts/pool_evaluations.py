#!/usr/bin/env python
"""Pool evaluations of one policy on disjoint board sets: ``python scripts/pool_evaluations.py
--help``. The command line is purejaxrl/cli/pool_evaluations.py."""

import sys

from purejaxrl.cli.pool_evaluations import main

if __name__ == "__main__":
    sys.exit(main())
