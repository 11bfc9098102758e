#!/usr/bin/env python
"""Expert iteration from a trained checkpoint: ``python scripts/expert_iteration.py --help``.
The command line is purejaxrl/cli/expert_iteration.py."""

import sys

from purejaxrl.cli.expert_iteration import main

if __name__ == "__main__":
    sys.exit(main())
