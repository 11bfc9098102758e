#!/usr/bin/env python
"""Convert pickle checkpoints (checkpoint_<update>.pkl, the format before issue 27) into the
current format (checkpoint_<update>.msgpack), which holds plain data only.

    python scripts/convert_checkpoint.py --i-trust-this-file-and-allow-code-execution PATH ...

Opening a pickle file RUNS WHATEVER CODE IT CARRIES: a crafted .pkl can do anything your user
can. Convert only files whose origin you trust (your own runs); the flag says so, and without it
nothing is opened. This is the only place in the repository that unpickles.

PATH is a .pkl checkpoint, or a run directory (every checkpoint_<update>.pkl in it and in its
seed-<s> directories). Each converted checkpoint is written beside its source, checked by
loading it back through the safe loader (it must fit this code's runner state), and never
written over an existing file; the .pkl stays (delete it yourself). Exit 0 when every file was
converted, 1 when one failed, 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys

from purejaxrl.backend import choose_platforms
from purejaxrl.cli.parsing import ArgumentParser

choose_platforms()  # before anything imports JAX

from purejaxrl.checkpoint import (CHECKPOINT_FORMAT, TRUST_FLAG, CheckpointError,  # noqa: E402
                                  checkpoint_path, checkpoint_record, encode_checkpoint,
                                  list_legacy_checkpoints, parse_checkpoint, seed_directories,
                                  write_checkpoint_file)
from purejaxrl.config import ConfigError, TrainConfig  # noqa: E402

LEGACY_VERSION = 1


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="checkpoint_<update>.pkl file or run directory")
    parser.add_argument(TRUST_FLAG, dest="trusted", action="store_true",
                        help="required: unpickling runs the file's code")
    return parser


def legacy_files(path: str) -> list[tuple[int, str]]:
    """(update, .pkl path) to convert for a command-line PATH."""
    if not os.path.isdir(path):
        name = os.path.basename(path)
        if not (name.startswith("checkpoint_") and name.endswith(".pkl")):
            raise CheckpointError(f"{path}: not a checkpoint_<update>.pkl file")
        if not os.path.isfile(path):
            raise CheckpointError(f"checkpoint not found: {path}")
        return [(int(name[len("checkpoint_"):-len(".pkl")]), path)]
    found = list_legacy_checkpoints(path)
    for _, seed_dir in seed_directories(path):
        found += list_legacy_checkpoints(seed_dir)
    if not found:
        raise CheckpointError(f"no checkpoint_<update>.pkl files in {path}")
    return found


def convert(source: str, update: int) -> str:
    """Unpickle ``source`` (runs its code), write the checkpoint beside it and return its
    path. Raises CheckpointError."""
    target = checkpoint_path(os.path.dirname(source), update)
    if os.path.exists(target):
        raise CheckpointError(f"{target} exists already; not written over (delete it to "
                              "convert again)")
    try:
        with open(source, "rb") as handle:
            payload = pickle.load(handle)
    except Exception as error:  # whatever the file's code raised
        raise CheckpointError(f"cannot unpickle {source}: {type(error).__name__}: "
                              f"{error}") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT \
            or payload.get("format_version") != LEGACY_VERSION:
        raise CheckpointError(f"{source} is not a pickle checkpoint of this trainer (format "
                              f"{CHECKPOINT_FORMAT} version {LEGACY_VERSION})")
    missing = [key for key in ("runner_state", "config", "update", "env_steps")
               if key not in payload]
    if missing:
        raise CheckpointError(f"{source} lacks {', '.join(missing)}")
    try:
        # A field the checkpoint predates takes the value of its time (FIELDS_ADDED_LATER).
        config = TrainConfig.from_dict(payload["config"]).to_dict()
    except (ConfigError, TypeError, KeyError) as error:
        raise CheckpointError(f"{source}: its config is not this code's: {error}") from None
    record = checkpoint_record(
        config=config, update=payload["update"], env_steps=payload["env_steps"],
        run_name=payload.get("run_name") or os.path.basename(os.path.dirname(source)),
        wandb_run_id=payload.get("wandb_run_id"),
        elapsed_seconds=payload.get("elapsed_seconds", 0.0),
        num_processes=payload.get("num_processes", 1),
        env_version=payload.get("env_version"),
        converted_from={"file": os.path.basename(source), "format_version": LEGACY_VERSION,
                        "versions": payload.get("versions"),
                        "saved_at": payload.get("saved_at")})
    data = encode_checkpoint(payload["runner_state"], record)
    parse_checkpoint(data, target)  # what any load will check, before anything is written
    write_checkpoint_file(target, data)
    return target


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if not args.trusted:
        print(f"error: converting unpickles the file, which runs any code it carries; pass "
              f"{TRUST_FLAG} if you trust where it came from (nothing was opened)",
              file=sys.stderr)
        return 2
    failed = False
    for path in args.paths:
        try:
            files = legacy_files(path)
        except CheckpointError as error:
            print(f"error: {error}", file=sys.stderr)
            failed = True
            continue
        for update, source in files:
            try:
                print(f"converted {source} -> {convert(source, update)}")
            except CheckpointError as error:
                print(f"error: {error}", file=sys.stderr)
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
