"""Pool evaluations on disjoint board sets: ``python scripts/pool_evaluations.py A.json B.json
[--row NAME] [--json OUT]``. Each input is an ``evaluate.py --json`` file; every row the inputs
share (or ``--row``) is pooled over their games (``purejaxrl/pooling.py``): the stage and win
rate over all the boards with the win rate's 95% interval, the share reaching each stage and
the clear rates, one line per board set beside it. Inputs that played the same boards are
refused. Nothing runs on a device (the output check's module imports JAX, after
``choose_platforms``, as every command line here)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from purejaxrl.backend import choose_platforms
from purejaxrl.cli.parsing import ArgumentParser

choose_platforms()  # before anything imports JAX

from purejaxrl.output_paths import (OutputPathError, add_overwrite_argument,  # noqa: E402
                                     check_output_file, write_text)  # noqa: E402
from purejaxrl.pooling import PoolError, format_pooled, pool  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        description="Pool evaluate.py --json results of one policy on disjoint board sets into "
                    "one figure per row, with the win rate's 95%% interval (Wilson)")
    parser.add_argument("inputs", nargs="+", metavar="JSON",
                        help="evaluate.py --json files, one per board set")
    parser.add_argument("--row", action="append", metavar="NAME",
                        help="pool only this row (repeat for several; default: every row all "
                             "the inputs hold)")
    parser.add_argument("--json", metavar="PATH", help="also write the pooled rows as JSON")
    add_overwrite_argument(parser)
    return parser


def load(path: str) -> dict:
    """{row: summary} of an evaluate.py --json file; ``PoolError`` for anything else."""
    try:
        with open(path, encoding="utf-8") as handle:
            results = json.load(handle)
    except OSError as error:
        raise PoolError(f"{path}: cannot read ({error.strerror or error})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise PoolError(f"{path}: not JSON ({error})") from None
    if (not isinstance(results, dict) or not results
            or not all(isinstance(s, dict) and "episodes" in s for s in results.values())):
        raise PoolError(f"{path}: not an evaluate.py --json file (rows of summaries)")
    return results


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.json:
            check_output_file(args.json, "--json", args.overwrite)
            if any(os.path.abspath(args.json) == os.path.abspath(p) for p in args.inputs):
                raise PoolError(f"--json {args.json} is one of the inputs; it would be "
                                "overwritten")
        files = [(path, load(path)) for path in args.inputs]
        shared = [row for row in files[0][1] if all(row in results for _, results in files)]
        rows = args.row or shared
        missing = [row for row in rows if row not in shared]
        if missing:
            raise PoolError(f"row {missing[0]!r} is not in every input (rows all hold: "
                            f"{', '.join(shared) or 'none'})")
        if not rows:
            raise PoolError("the inputs share no row")
        pooled = {row: pool([(os.path.basename(path), results[row]) for path, results in files])
                  for row in rows}
    except (PoolError, OutputPathError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n\n".join(format_pooled(row, summary) for row, summary in pooled.items()))
    if args.json:
        write_text(args.json, json.dumps(pooled, indent=2))
    return 0
