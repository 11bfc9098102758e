#!/usr/bin/env python
"""HackMatrix headless JSON protocol server (the Swift CLI's protocol, backed by JAX).

    python scripts/headless_cli.py [--seed N] [--compile-cache-dir DIR] [--headless-cli] [--debug]

Same as ``python -m envs.hackmatrix.swift_io.protocol``; see envs/hackmatrix/swift_io/protocol.py.
"""

import os
import sys

# One game per step: the CPU is fastest (protocol.main makes the same choice, too late where the
# package import, which starts JAX, came first). Before the import below, so libtpu never starts.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from envs.hackmatrix.swift_io.protocol import main

if __name__ == "__main__":
    sys.exit(main())
