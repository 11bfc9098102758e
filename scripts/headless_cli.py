#!/usr/bin/env python
"""HackMatrix headless JSON protocol server (the Swift CLI's protocol, backed by JAX).

    python scripts/headless_cli.py [--seed N] [--compilation-cache DIR] [--headless-cli] [--debug]

Same as ``python -m envs.hackmatrix.swift_io.protocol``; see envs/hackmatrix/swift_io/protocol.py.
"""

import sys

from envs.hackmatrix.swift_io.protocol import main

if __name__ == "__main__":
    sys.exit(main())
