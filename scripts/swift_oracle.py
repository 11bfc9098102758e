#!/usr/bin/env python
"""Build the Swift original's headless binary (the parity oracle) from its source tree, cache it,
and print the line that points the Swift-backed checks at it.

    python scripts/swift_oracle.py /path/to/hack-matrix
    # -> HACKMATRIX_BINARY=/home/you/.cache/hackmatrix-swift/<hash>/HackMatrix

    # build (or reuse), then run a command with HACKMATRIX_BINARY set (its exit status is ours):
    python scripts/swift_oracle.py /path/to/hack-matrix -- python -m pytest tests/parity -q

The source is a checkout or export of the public ``charleseff/hack-matrix`` repository (SPEC.md
"Verified against the Swift binary" names the commit checked). Nothing of it is copied into this
repository: ``swift build -c release`` runs with its scratch directory inside the cache, so the
source tree is only read. The cache key is a SHA-256 of the Swift toolchain version, Package.swift
and every .swift file the package builds, so an edited source or another toolchain builds anew and
an unchanged one is reused (``--force`` rebuilds anyway). The built binary must answer the
protocol's ``getActionSpace`` before its path is printed.

stdout carries only the ``HACKMATRIX_BINARY=...`` line; progress and errors go to stderr. Exit
status: 0 success, 1 build or smoke-check failure, 2 bad input (no toolchain, not a HackMatrix
source tree); with a command after ``--``, that command's status once the binary is ready.
"""

import argparse
import os
import subprocess
import sys

from purejaxrl.backend import choose_platforms

# Importing the package starts JAX (gymnax does at import), which this script does not use: the
# choice keeps libtpu from starting where there is no TPU, and the command after -- inherits it.
choose_platforms()

from envs.hackmatrix.swift_io.swift_build import (BINARY_ENV_VAR, DEFAULT_CACHE_DIR, OracleError,
                                                  log, oracle)
from purejaxrl.cli.parsing import ArgumentParser


def main(argv=None) -> int:
    parser = ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s [options] SWIFT_SOURCE_DIR [-- COMMAND ...]")
    parser.add_argument("source", metavar="SWIFT_SOURCE_DIR",
                        help="the hack-matrix source tree (contains Package.swift)")
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE_DIR,
                        help=f"where built binaries are kept (default {DEFAULT_CACHE_DIR})")
    parser.add_argument("--swift", default=None, help="the swift driver (default: swift on PATH)")
    parser.add_argument("--force", action="store_true",
                        help="rebuild even if a cached build exists")
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first "--" is the command to run with the binary set.
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    try:
        binary = oracle(args.source, cache_dir=args.cache_dir, swift=args.swift, force=args.force)
    except OracleError as exc:
        log(f"error: {exc}")
        return exc.status
    print(f"{BINARY_ENV_VAR}={binary}", flush=True)
    if not command:
        return 0
    log(f"running: {' '.join(command)}")
    try:
        return subprocess.run(command, env=dict(os.environ, **{BINARY_ENV_VAR: binary})).returncode
    except OSError as exc:
        log(f"error: cannot run {command[0]}: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
