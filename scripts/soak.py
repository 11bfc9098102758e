"""Long random-valid-action soak of the HackMatrix environment (vmapped, auto-reset), checking
the invariants of tests/test_soak.py on every step and printing how often each action and
program fired.

    python scripts/soak.py --num-envs 1024 --num-steps 1000     # ~10^6 env steps
"""

import argparse
import json
import sys
import time

from purejaxrl.backend import choose_platforms, describe_backend
from purejaxrl.cli.parsing import ArgumentParser

choose_platforms()  # before anything imports JAX

from envs.hackmatrix.core.constants import DIR_NAMES, PROGRAM_NAMES
from envs.hackmatrix.soak import run_soak
from purejaxrl.output_paths import add_overwrite_argument, refuse_output_file, write_text

INVARIANTS = ("invalid_actions", "hp_out_of_range", "max_overflow", "non_finite",
              "obs_out_of_range", "data_invariant_violations", "off_board_entities")


def main(argv=None):
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--num-steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the report to this file")
    add_overwrite_argument(parser)
    args = parser.parse_args(argv)
    if args.num_envs < 1 or args.num_steps < 1:
        parser.error("--num-envs and --num-steps must be positive")
    if refuse_output_file(args.json, "--json", args.overwrite):
        return 2
    print(describe_backend(), file=sys.stderr)
    start = time.perf_counter()
    report = run_soak(args.num_envs, args.num_steps, args.seed)
    report["seconds"] = round(time.perf_counter() - start, 1)
    names = [f"move/shoot {d}" for d in DIR_NAMES] + ["siphon"] + [p.upper() for p in PROGRAM_NAMES]
    print(f"{report['steps']:,} env steps, {report['episodes']:,} episodes "
          f"(mean length {report['steps'] / max(report['episodes'], 1):.1f}), "
          f"{report['stage_completions']:,} stage completions, {report['wins']} wins, "
          f"{report['deaths']:,} deaths, max stage {report['max_stage']}, "
          f"max enemies {report['max_enemies']}, max transmissions {report['max_transmissions']}, "
          f"{report['seconds']} s")
    print("actions fired:")
    for name, count in zip(names, report["action_counts"]):
        print(f"  {name:18s} {count:>10,}")
    failed = [k for k in INVARIANTS if report[k]]
    if report["max_breakdown_error"] >= 1e-3:
        failed.append("max_breakdown_error")
    for key in INVARIANTS + ("max_breakdown_error",):
        print(f"{key:28s} {report[key]}")
    if args.json:
        write_text(args.json, json.dumps(report, indent=1))
    if failed:
        print("FAILED invariants: " + ", ".join(failed), file=sys.stderr)
        return 1
    print("all invariants held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
