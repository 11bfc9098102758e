#!/usr/bin/env python
"""Train masked PPO on HackMatrix (or the toy corridor): ``python scripts/train_purejaxrl.py
--help``. The command line is purejaxrl/cli/train.py (also installed as ``hackmatrix-train``)."""

import sys

from purejaxrl.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
