#!/usr/bin/env python
"""Long differential parity run: the in-process JAX env against a headless-protocol server.

    python scripts/parity_diff.py --trajectories 200 --steps 300 --seed 0
    python scripts/parity_diff.py --binary path/to/HackMatrix      # the Swift build

Random valid actions are played in lockstep on both engines and every reply is compared
(observation, valid actions, reward and breakdown, done, info, internal state); the first
divergence is printed with the board and both values, and the exit status is 1.

Without --binary the candidate is this project's server started with the same --seed, so the
two share the JAX key stream and must agree exactly (trajectories start with reset). With
--binary the candidate is ``BINARY --headless-cli``, whose randomness is its own: Swift then
drives (its own resets) and the in-process mirror of ``oracle.OracleLockstep`` must
reproduce every reply, matching or adopting Swift's random draws (scripts/swift_soak.py is the
long soak with more starts and policies).
"""

import argparse
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before JAX is imported

import numpy as np

from envs.hackmatrix.swift_io.divergence import OracleDivergence
from envs.hackmatrix.swift_io.engines import (InProcessEngine, ProtocolEngine,
                                              own_server_command)
from envs.hackmatrix.swift_io.lockstep import lockstep
from envs.hackmatrix.swift_io.oracle import OracleLockstep
from envs.hackmatrix.swift_io.protocol import enable_server_compile_cache
from envs.hackmatrix.swift_io.swift_build import add_binary_option, check_binary
from purejaxrl.cli.parsing import ArgumentParser


def against_swift(binary: str, *, trajectories: int, steps: int, seed: int):
    """(divergence report or None, steps compared) of random play driven by the Swift binary."""
    rng = np.random.default_rng(seed)
    compared = 0
    with ProtocolEngine([binary, "--headless-cli"]) as swift:
        oracle = OracleLockstep(swift, seed=seed)
        for trajectory in range(trajectories):
            try:
                oracle.reset()
                valid = swift.valid_actions()
                for _ in range(steps):
                    reply = oracle.step(int(rng.choice(valid)))
                    compared += 1
                    valid = reply.valid
                    if reply.done:
                        break
            except OracleDivergence as divergence:
                return f"trajectory {trajectory}: {divergence.report()}", compared
    return None, compared


def main(argv=None) -> int:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trajectories", type=int, default=50)
    parser.add_argument("--steps", type=int, default=200, help="maximum steps per trajectory")
    parser.add_argument("--seed", type=int, default=0, help="key stream and action choice seed")
    add_binary_option(parser, from_environment=False)  # without it: our own server
    args = parser.parse_args(argv)
    check_binary(parser, args.binary, required=False)
    enable_server_compile_cache()
    started = time.time()
    if args.binary:
        report, compared = against_swift(args.binary, trajectories=args.trajectories,
                                         steps=args.steps, seed=args.seed)
        against = f"{args.binary} --headless-cli"
    else:
        command = own_server_command(args.seed)
        with ProtocolEngine(command) as candidate:
            divergence, compared = lockstep(InProcessEngine(seed=args.seed), candidate,
                                            trajectories=args.trajectories, steps=args.steps,
                                            seed=args.seed)
        report = divergence.report() if divergence else None
        against = " ".join(command)
    print(f"{compared} steps compared in {time.time() - started:.1f} s against {against}")
    if report is not None:
        print(report)
        return 1
    print("no divergence")
    return 0


if __name__ == "__main__":
    sys.exit(main())
