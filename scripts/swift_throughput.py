#!/usr/bin/env python
"""Throughput of the oracle path (issue 14): steps per second of the Swift binary through the
headless protocol next to this project's protocol server (and the in-process game the parity
harness uses), measured in one run on the same machine.

    python scripts/swift_throughput.py --binary $HACKMATRIX_BINARY --steps 2000 --repeats 5

Each engine plays the same client loop: getValidActions, then a step with a uniformly random
valid action (numpy, seeded), and a reset when the episode is done; a repeat times --steps such
steps after a warm-up (our server compiles its step during the warm-up; the persistent XLA cache
makes later runs start faster). Printed: the median and range of steps/s over --repeats and the
load average before and after, since a shared machine moves these figures. --ledger appends one
JSON line per engine.
"""

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before JAX is imported

import numpy as np

from envs.hackmatrix.swift_io.engines import (InProcessEngine, ProtocolEngine,
                                              own_server_command)
from envs.hackmatrix.swift_io.protocol import enable_server_compile_cache
from envs.hackmatrix.swift_io.swift_build import add_binary_option, binary_label, check_binary
from purejaxrl.cli.parsing import ArgumentParser
from purejaxrl.output_paths import refuse_ledger_file
from purejaxrl.provenance import git_commit


def client_loop(engine, steps: int, rng) -> float:
    """Seconds for ``steps`` (getValidActions + step) round trips, resetting on done."""
    started = time.perf_counter()
    valid = engine.valid_actions()
    for _ in range(steps):
        if not valid:
            engine.reset()
            valid = engine.valid_actions()
        if engine.step(int(rng.choice(valid))).done:
            engine.reset()
        valid = engine.valid_actions()
    return time.perf_counter() - started


def measure(engine, *, steps: int, repeats: int, warmup: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    engine.reset()
    client_loop(engine, warmup, rng)
    rates = [steps / client_loop(engine, steps, rng) for _ in range(repeats)]
    return {"sps_median": round(statistics.median(rates), 1), "sps_min": round(min(rates), 1),
            "sps_max": round(max(rates), 1), "steps": steps, "repeats": repeats}


def main(argv=None) -> int:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_binary_option(parser)
    parser.add_argument("--steps", type=int, default=2000, help="steps per timed repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=200, help="untimed steps first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ledger", default=None, help="append JSON lines here")
    parser.add_argument("--label", default="")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.repeats < 1:
        parser.error("--steps and --repeats must be positive")
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    check_binary(parser, args.binary)
    if refuse_ledger_file(args.ledger):  # written at the end: refused before any engine runs
        return 2
    enable_server_compile_cache()
    load_before = os.getloadavg()
    rows = []
    engines = (("swift binary, protocol", lambda: ProtocolEngine([args.binary, "--headless-cli"])),
               ("our server, protocol", lambda: ProtocolEngine(own_server_command(args.seed))),
               ("our game, in process", lambda: InProcessEngine(seed=args.seed)))
    for name, make in engines:
        with make() as engine:
            row = measure(engine, steps=args.steps, repeats=args.repeats, warmup=args.warmup,
                          seed=args.seed)
        rows.append({"engine": name, **row})
        print(f"{name:<24} {row['sps_median']:>9.1f} steps/s (median of {args.repeats}; "
              f"{row['sps_min']:.1f}..{row['sps_max']:.1f})", flush=True)
    load_after = os.getloadavg()
    swift, server = rows[0]["sps_median"], rows[1]["sps_median"]
    print(f"Swift / our server: {swift / server:.1f}x; load average (1/5/15 min) before "
          f"{' '.join(f'{x:.2f}' for x in load_before)}, after "
          f"{' '.join(f'{x:.2f}' for x in load_after)} on {os.cpu_count()} cores")
    if args.ledger:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        os.makedirs(os.path.dirname(os.path.abspath(args.ledger)), exist_ok=True)
        with open(args.ledger, "a") as f:
            for row in rows:
                f.write(json.dumps({"benchmark": "oracle_throughput", **row, "label": args.label,
                                    "binary": binary_label(args.binary),
                                    "load_before": load_before, "load_after": load_after,
                                    "cpu_count": os.cpu_count(), "commit": git_commit() or "",
                                    "time": stamp}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
