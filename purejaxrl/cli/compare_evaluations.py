"""Compare two evaluations of the same boards, board by board: ``python
scripts/compare_evaluations.py A.json[:ROW] B.json[:ROW] [--json OUT]``. Each input is an
``evaluate.py --json`` file, optionally with one of its rows after a colon; without rows, every
row the two files share is compared with itself (``checkpoint-greedy`` of run A against
``checkpoint-greedy`` of run B, ...). Prints B - A in stage (with its standard error and 95%
interval) and in wins (with McNemar's exact p), ``purejaxrl/pairing.py``. Evaluations of other
boards or under other judging rules are refused. Nothing runs on a device."""

from __future__ import annotations

import argparse
import json
import os
import sys

from purejaxrl.backend import choose_platforms
from purejaxrl.cli.parsing import ArgumentParser

choose_platforms()  # before anything imports JAX

from purejaxrl.cli.pool_evaluations import load  # noqa: E402
from purejaxrl.output_paths import (OutputPathError, add_overwrite_argument,  # noqa: E402
                                     check_output_file, write_text)  # noqa: E402
from purejaxrl.pairing import compare, format_comparison  # noqa: E402
from purejaxrl.pooling import PoolError  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        description="Compare two evaluate.py --json results of the same boards board by board: "
                    "B - A in stage (standard error, 95%% interval) and in wins (McNemar)")
    parser.add_argument("a", metavar="A.json[:ROW]", help="the reference evaluation")
    parser.add_argument("b", metavar="B.json[:ROW]", help="the evaluation compared with it")
    parser.add_argument("--json", metavar="PATH", help="also write the comparisons as JSON")
    add_overwrite_argument(parser)
    return parser


def split_input(text: str) -> tuple[str, str | None]:
    """(path, row or None): a path that exists is whole; otherwise the part after its last
    colon is a row."""
    if os.path.exists(text) or ":" not in text:
        return text, None
    path, row = text.rsplit(":", 1)
    return path, row or None


def chosen_rows(path: str, results: dict, row: str | None) -> list[str]:
    if row is None:
        return list(results)
    if row not in results:
        raise PoolError(f"{path} has no row {row!r} (it holds: {', '.join(results)})")
    return [row]


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        (path_a, row_a), (path_b, row_b) = split_input(args.a), split_input(args.b)
        if args.json:
            check_output_file(args.json, "--json", args.overwrite)
            if any(os.path.abspath(args.json) == os.path.abspath(p) for p in (path_a, path_b)):
                raise PoolError(f"--json {args.json} is one of the inputs; it would be "
                                "overwritten")
        results_a, results_b = load(path_a), load(path_b)
        rows_a = chosen_rows(path_a, results_a, row_a)
        rows_b = chosen_rows(path_b, results_b, row_b)
        if (row_a is None) != (row_b is None):
            raise PoolError("name a row on both inputs (A.json:ROW B.json:ROW) or on neither "
                            "(every row the two share)")
        if row_a is None:
            pairs = [(row, row) for row in rows_a if row in rows_b]
            if not pairs:
                raise PoolError(f"{path_a} and {path_b} share no row; name one on each "
                                "(A.json:ROW B.json:ROW)")
        else:
            pairs = [(rows_a[0], rows_b[0])]
        compared = []
        for first, second in pairs:
            result = compare((f"{os.path.basename(path_a)}:{first}", results_a[first]),
                             (f"{os.path.basename(path_b)}:{second}", results_b[second]))
            compared.append(result)
    except (PoolError, OutputPathError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n\n".join(format_comparison(result) for result in compared))
    if args.json:
        write_text(args.json, json.dumps(compared, indent=2))
    return 0
