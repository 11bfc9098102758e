#!/usr/bin/env python
"""Long differential parity run: the in-process JAX env against a headless-protocol server.

    python scripts/parity_diff.py --trajectories 200 --steps 300 --seed 0
    python scripts/parity_diff.py --binary path/to/HackMatrix      # the Swift build

Random valid actions are played in lockstep on both engines and every reply is compared
(observation, valid actions, reward and breakdown, done, info, internal state); the first
divergence is printed with the board and both values, and the exit status is 1.

Without --binary the candidate is this project's server started with the same --seed, so the
two share the JAX key stream and must agree exactly (trajectories start with reset). With
--binary the candidate is started as ``BINARY --headless-cli``; its randomness is its own, so
each trajectory starts from the reference's board sent to both with setState, and a divergence
right after a random draw (spawn cell, enemy order, WARP, POLY) is expected rather than a bug.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before JAX is imported

from envs.hackmatrix.parity_client import (InProcessEngine, ProtocolEngine,  # noqa: E402
                                           lockstep, own_server_command)
from envs.hackmatrix.protocol import enable_compilation_cache  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trajectories", type=int, default=50)
    parser.add_argument("--steps", type=int, default=200, help="maximum steps per trajectory")
    parser.add_argument("--seed", type=int, default=0, help="key stream and action choice seed")
    parser.add_argument("--binary", default=None,
                        help="protocol executable to compare with (default: our own server)")
    args = parser.parse_args(argv)
    enable_compilation_cache()
    command = [args.binary, "--headless-cli"] if args.binary else own_server_command(args.seed)
    sync = "setstate" if args.binary else "reset"
    reference = InProcessEngine(seed=args.seed)
    started = time.time()
    with ProtocolEngine(command) as candidate:
        divergence, compared = lockstep(
            reference, candidate, trajectories=args.trajectories, steps=args.steps,
            seed=args.seed, sync=sync)
    elapsed = time.time() - started
    print(f"{compared} steps compared in {elapsed:.1f} s against {' '.join(command)}")
    if divergence is not None:
        print(divergence.report())
        return 1
    print("no divergence")
    return 0


if __name__ == "__main__":
    sys.exit(main())
