#!/usr/bin/env python
"""What a checkpoint holds, without loading its arrays: the run, the env and its rules version,
the update and env steps against the run's budget, the hours trained, the code that trained it
(the commit of every sitting; the run whose weights a ``--weights-only`` run started from), the
configuration where it differs from this code's defaults, and the package versions. Works for a
checkpoint of another code version (its metadata only is read and checked; a pickle is refused
unopened).

    python scripts/checkpoint_info.py runs/stagecount-default-long-s0
    python scripts/checkpoint_info.py runs/x/checkpoint_400.msgpack --json info.json
"""

from __future__ import annotations

import argparse
import json
import sys

from purejaxrl.backend import choose_platforms

choose_platforms()  # before anything imports JAX

from purejaxrl.checkpoint import CheckpointError, read_metadata  # noqa: E402
from purejaxrl.cli.parsing import ArgumentParser  # noqa: E402
from purejaxrl.config import ConfigError, TrainConfig, config_differences  # noqa: E402
from purejaxrl.output_paths import (OutputPathError, add_overwrite_argument,  # noqa: E402
                                    check_output_file, write_text)
from purejaxrl.ppo import config_for_env  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="a checkpoint file, or a run directory (its newest "
                                           "checkpoint); a multi-seed run: one seed's directory")
    parser.add_argument("--json", metavar="PATH",
                        help="also write the metadata as JSON (every field, as saved)")
    add_overwrite_argument(parser)
    return parser


def sittings_text(sittings: list, update: int) -> str:
    """``updates 0-239: abc1234; 240-400: def5678`` (a sitting ends where the next begins)."""
    if not sittings:
        return "not recorded (saved before stop 81)"
    ends = [sitting["from_update"] for sitting in sittings[1:]] + [update]
    return "; ".join(f"updates {sitting['from_update'] + 1}-{end}: "
                     f"{sitting['commit'] or 'outside a git checkout'}"
                     for sitting, end in zip(sittings, ends))


def describe(record: dict) -> list[str]:
    config = record["config"]
    try:
        saved = TrainConfig.from_dict(config)
        differences = config_differences(config_for_env(saved.env), saved)
        budget = saved.num_updates
    except (ConfigError, TypeError, KeyError, ValueError) as error:
        differences, budget = [f"(this code cannot read its config: {error})"], None
    versions = record.get("versions") or {}
    lines = [
        f"checkpoint    {record['path']}",
        f"run           {record['run_name']}",
        f"env           {config.get('env', 'hackmatrix')} (rules version "
        f"{record.get('env_version')})",
        f"update        {record['update']}" + (f" of {budget}" if budget else "")
        + f" ({record['env_steps']:,} env steps)",
        f"trained       {record['elapsed_seconds'] / 3600:.2f} h over "
        f"{record['num_processes']} process(es); saved {record.get('saved_at', '?')}",
        f"code          {sittings_text(record.get('sittings', []), record['update'])}",
    ]
    origin = record.get("weights_from")
    if origin:
        lines.append(f"weights from  {origin['run_name']} ({origin['file']}, update "
                     f"{origin['update']}; "
                     f"{sittings_text(origin['sittings'], origin['update'])})")
    if record.get("trimmed_from"):
        lines.append(f"trimmed from  {record['trimmed_from']['num_envs']} envs "
                     f"({record['trimmed_from']['file']})")
    lines.append("config        " + ("the main command's defaults" if not differences else
                                     "differs from the main command's defaults (this code's "
                                     "!= its) in " + "; ".join(differences)))
    lines.append("versions      " + ", ".join(f"{name} {version}"
                                              for name, version in versions.items()))
    return lines


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.json:
            check_output_file(args.json, "--json", args.overwrite)
        record = read_metadata(args.checkpoint)
    except (CheckpointError, OutputPathError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(describe(record)))
    if args.json:
        write_text(args.json, json.dumps(record, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
