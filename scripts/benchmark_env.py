"""Env-only throughput of HackMatrix: jit + vmap + lax.scan of uniformly random valid actions
with auto-reset. Prints compile time (trace+lower and XLA compile separately) and steady-state
env steps per second (median and spread of repeated timed runs after a warm-up), and appends
one JSON line per configuration to --ledger (the measurement is purejaxrl/env_throughput.py).

    python scripts/benchmark_env.py --num-envs 1 256 2048 8192 --num-steps 128
"""

import argparse
import json
import os
import sys

from purejaxrl.backend import choose_platforms, describe_backend

choose_platforms()  # before anything imports JAX

from envs.hackmatrix import SHAPING_MODES
from purejaxrl.cli.parsing import ArgumentParser, finite_float
from purejaxrl.env_throughput import bench
from purejaxrl.output_paths import refuse_ledger_file


def main(argv=None):
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 256, 2048, 8192])
    parser.add_argument("--num-steps", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ledger", default="benchmarks/env_results.jsonl",
                        help="JSON lines file to append to ('' to skip)")
    parser.add_argument("--reward-shaping", choices=SHAPING_MODES, default="swift")
    parser.add_argument("--undo-pays-once", action="store_true",
                        help="measure the step with the training option's reward ledger")
    parser.add_argument("--program-potential", type=finite_float, default=0.0, metavar="C",
                        help="measure the step with the program-ownership shaping (SPEC §1.5)")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.num_envs) or args.num_steps < 1 or args.repeats < 1:
        parser.error("--num-envs, --num-steps and --repeats must be positive")
    if not args.program_potential >= 0:
        parser.error("--program-potential must be >= 0")
    if refuse_ledger_file(args.ledger):  # written at the end: refused before any measurement
        return 2
    print(describe_backend(), file=sys.stderr)
    rows = []
    print(f"{'envs':>6} {'steps':>5} {'lower s':>8} {'compile s':>9} {'steps/s (median)':>17} "
          f"{'min..max':>19} {'us/step':>8} {'RSS MB':>7}")
    for n in args.num_envs:
        env_options = {"reward_shaping": args.reward_shaping, "undo_pays_once": args.undo_pays_once,
                       "program_potential": args.program_potential}
        row = bench(n, args.num_steps, args.repeats, args.seed, env_options)
        rows.append(row)
        print(f"{n:>6} {args.num_steps:>5} {row['trace_lower_s']:>8.2f} {row['compile_s']:>9.2f} "
              f"{row['sps_median']:>17,.0f} {row['sps_min']:>9,.0f}..{row['sps_max']:<9,.0f} "
              f"{row['us_per_env_step']:>8.2f} {row['peak_host_rss_mb']:>7.0f}", flush=True)
        if row["invalid_actions"] or row["overflow_episodes"] or row["nan_reward"]:
            print(f"  WARNING: invalid={row['invalid_actions']} "
                  f"overflow={row['overflow_episodes']} "
                  f"nan={row['nan_reward']}", file=sys.stderr)
    if args.ledger:
        os.makedirs(os.path.dirname(os.path.abspath(args.ledger)), exist_ok=True)
        with open(args.ledger, "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        print(f"appended {len(rows)} rows to {args.ledger}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
