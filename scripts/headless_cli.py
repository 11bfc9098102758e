#!/usr/bin/env python
"""HackMatrix headless JSON protocol server (the Swift CLI's protocol, backed by JAX).

    python scripts/headless_cli.py [--seed N] [--compilation-cache DIR] [--headless-cli] [--debug]

Same as ``python -m envs.hackmatrix.protocol``; see envs/hackmatrix/protocol.py.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from envs.hackmatrix.protocol import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
