#!/usr/bin/env python
"""A small copy of a checkpoint: the network, optimiser and statistics as they are, and the
rollout state of only the first ``--envs`` envs (a checkpoint of 16384 envs is hundreds of MB,
almost all of it the envs' game states). The copy is a checkpoint like any other for
``evaluate.py``, ``watch_agent.py``, the search rows and ``train_purejaxrl.py --resume COPY
--weights-only`` (a new run from the weights, its batch from its own flags). Nothing is
overwritten: OUT must not exist or be empty.

    python scripts/trim_checkpoint.py runs/long-s0 runs/long-s0-small --envs 128
"""

from __future__ import annotations

import argparse
import os
import sys

from purejaxrl.backend import choose_platforms

choose_platforms()  # before anything imports JAX

from purejaxrl.checkpoint import (CheckpointError, checkpoint_path,  # noqa: E402
                                  load_checkpoint, trim_checkpoint, write_checkpoint_file)
from purejaxrl.cli.parsing import ArgumentParser  # noqa: E402
from purejaxrl.output_paths import OutputPathError, prepare_directory  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="a run directory (its newest checkpoint) or a checkpoint "
                                       "file; a multi-seed run: one seed's directory")
    parser.add_argument("out", help="the directory to write the copy to (new or empty)")
    parser.add_argument("--envs", type=int, default=128,
                        help="the envs whose rollout state is kept (default 128)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if os.path.exists(args.out) and (not os.path.isdir(args.out) or os.listdir(args.out)):
        print(f"error: {args.out} exists and is not an empty directory: nothing is "
              "overwritten", file=sys.stderr)
        return 2
    parent = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(parent):
        print(f"error: the directory {parent} does not exist", file=sys.stderr)
        return 2
    try:
        # Takes new files (OUT if it is there, else where it will be): known before the load.
        if os.path.isdir(args.out):
            prepare_directory(args.out, "OUT")
        else:
            prepare_directory(parent, f"OUT {args.out}: its directory")
    except OutputPathError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        checkpoint = load_checkpoint(args.source)
        data, record = trim_checkpoint(checkpoint, args.envs)
        os.makedirs(args.out, exist_ok=True)
        path = checkpoint_path(args.out, record["update"])
        write_checkpoint_file(path, data)
    except CheckpointError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    before = os.path.getsize(checkpoint["path"])
    print(f"{checkpoint['path']} ({before / 1e6:.1f} MB, {record['trimmed_from']['num_envs']} "
          f"envs) -> {path} ({len(data) / 1e6:.1f} MB, {args.envs} envs; update "
          f"{record['update']}, {record['env_steps']:,} env steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
