#!/usr/bin/env python
"""Learning benchmark: train K seeds of a configuration for a fixed budget, evaluate every seed
on the same held-out boards (greedy and sampled) next to the random and heuristic policies,
append the rows to benchmarks/learning/ledger.jsonl and draw the learning curve (PNG).

    python scripts/learn_bench.py --tier smoke                      # a few minutes, 1 seed
    python scripts/learn_bench.py --tier standard --label defaults  # 20M x 3 seeds, 2048 envs
    python scripts/learn_bench.py --tier full --label defaults      # 50M x 3 seeds
    python scripts/learn_bench.py --tier standard --label gamma995 -- --gamma 0.995
    python scripts/learn_bench.py --tier standard --vmap-seeds      # 3 seeds in one program
    python scripts/learn_bench.py --overview                        # the ledger in one table
    python scripts/learn_bench.py --overview --by-stage             # where each loses its games

Flags after ``--`` are training flags of scripts/train_purejaxrl.py (same defaults); the tier
sets --total-timesteps (unless given there) and --num-envs 2048 (unless given). Every seed is
reported, never the best alone; the table ends with the median over seeds and the baselines.

Any env of the registry: ``-- --env CartPole-v1`` trains with that env's defaults (PureJaxRL's
configs; the tier ``reference``, its default for such an env, keeps their budget too) and
judges by the mean return instead of the stage (an env without stages), with the random policy
as its baseline:

    python scripts/learn_bench.py --label cartpole -- --env CartPole-v1

Its rows go to benchmarks/learning/reference.jsonl (HackMatrix's to ledger.jsonl).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

# The training command line comes first: importing it chooses JAX's platform
# (purejaxrl/backend.py choose_platforms) before anything imports JAX. Its flags, defaults and
# config derivation are the benchmark's, so a benchmarked configuration is exactly what
# scripts/train_purejaxrl.py runs.
from purejaxrl.cli import train as train_purejaxrl
from purejaxrl.cli.parsing import ArgumentParser

import jax
from purejaxrl.checkpoint import CheckpointError
from purejaxrl import ppo
from purejaxrl.config import ConfigError, TrainConfig, validate_config, validate_run_options
from purejaxrl.learning_benchmark import (DEFAULT_EVAL_EPISODES, DEFAULT_NUM_ENVS, LEDGER,
                                          REFERENCE_LEDGER, TIERS, check_ledger, check_plot,
                                          check_training_seeds, finished_rows, ledger_overview,
                                          ledger_stage_overview,
                                          read_jsonl, run)
from purejaxrl.output_paths import add_overwrite_argument, check_directory_creatable
from purejaxrl.train import train


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=tuple(TIERS), default=None,
                        help="; ".join(f"{name}: {tier.what}" for name, tier in TIERS.items()))
    parser.add_argument("--label", default=None, help="name of this configuration in the ledger "
                        "and of its runs (default: the tier)")
    parser.add_argument("--seeds", type=int, nargs="+",
                        help="training seeds (default: 0..K-1 for the tier's K)")
    parser.add_argument("--vmap-seeds", action="store_true",
                        help="train the seeds (consecutive) together in one compiled program "
                             "(the trainer's --num-seeds) instead of one after another")
    parser.add_argument("--resume", action="store_true",
                        help="continue this label's benchmark: seeds already in the ledger are "
                             "kept, a stopped training run continues from its checkpoint")
    parser.add_argument("--eval-episodes", type=int, default=DEFAULT_EVAL_EPISODES,
                        help="held-out boards per policy (default 512)")
    parser.add_argument("--ledger", default=None,
                        help=f"JSONL ledger to append to (default: {LEDGER} for HackMatrix, "
                             f"{REFERENCE_LEDGER} for the tier reference)")
    parser.add_argument("--no-ledger", action="store_true", help="do not append to the ledger")
    parser.add_argument("--plot", help="learning-curve PNG (default: beside the ledger, "
                        "<label>.png); an existing file is refused unless --overwrite, or it "
                        "is the default curve of a label resumed (--resume) with rows in the "
                        "ledger")
    add_overwrite_argument(parser)
    parser.add_argument("--checkpoint-dir", default="checkpoints",
                        help="where each seed's run directory goes")
    parser.add_argument("--overview", action="store_true",
                        help="train nothing: print every configuration of the ledger (of --tier "
                             "alone if given) in one table, every seed's greedy stage, honest "
                             "wins, medians and what a seed cost, the baselines beside them")
    parser.add_argument("--by-stage", action="store_true",
                        help="with --overview: each configuration's greedy clear rate of every "
                             "stage (median over its seeds) instead, where it loses its games")
    parser.add_argument("train_flags", nargs=argparse.REMAINDER,
                        help="-- followed by training flags of train_purejaxrl.py")
    return parser


def print_overview(args, train_flags: list[str]) -> int:
    ledger = args.ledger or (REFERENCE_LEDGER if args.tier == "reference" else LEDGER)
    if train_flags or args.resume or args.seeds is not None or args.label is not None:
        print("error: --overview prints a ledger; it takes only --tier and --ledger",
              file=sys.stderr)
        return 2
    if not os.path.isfile(ledger):
        print(f"error: no ledger at {ledger}", file=sys.stderr)
        return 2
    try:
        rows = read_jsonl(ledger)
    except (ValueError, UnicodeDecodeError) as error:
        print(f"error: {ledger} is not a JSONL ledger ({error})", file=sys.stderr)
        return 2
    print(f"{ledger}:")
    print((ledger_stage_overview if args.by_stage else ledger_overview)(rows, args.tier))
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    train_flags = args.train_flags[1:] if args.train_flags[:1] == ["--"] else args.train_flags
    if args.overview:
        return print_overview(args, train_flags)
    if args.by_stage:
        print("error: --by-stage is a form of --overview", file=sys.stderr)
        return 2
    train_parser = train_purejaxrl.build_parser()
    try:
        train_args = train_parser.parse_args(train_flags)
        env_defaults = ppo.defaults_for_env(train_args.env or TrainConfig().env)
        own_budget = "total_timesteps" in env_defaults
        if args.tier is None:
            args.tier = "reference" if own_budget else "smoke"
        if args.tier == "reference" and not own_budget:
            raise ConfigError(f"--tier reference: {train_args.env or TrainConfig().env} has no "
                              "published budget; use smoke, standard or full")
        tier = TIERS[args.tier]
        seeds = args.seeds if args.seeds is not None else list(range(tier.num_seeds))
        label = args.label or args.tier
        if args.eval_episodes < 1:
            raise ConfigError(f"--eval-episodes must be >= 1, got {args.eval_episodes}")
        repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
        if repeated:
            # The second training of a seed would find the first one's run directory, after
            # hours of work.
            raise ConfigError(f"--seeds names seed(s) {', '.join(map(str, repeated))} more "
                              f"than once, got {seeds}")
        check_training_seeds(seeds)
        if args.vmap_seeds and seeds != list(range(seeds[0], seeds[0] + len(seeds))):
            raise ConfigError(f"--vmap-seeds trains consecutive seeds, got {seeds}")
        if not label or "/" in label:
            raise ConfigError(f"--label must be a plain name, got {label!r}")
        if train_args.num_seeds is not None:
            raise ConfigError("the seeds are --seeds (with --vmap-seeds to train them in one "
                              "program); --num-seeds is not a benchmark flag")
        if train_args.resume:
            raise ConfigError("the training flag --resume is not a benchmark flag: "
                              "learn_bench.py --resume continues a benchmark")
        for flag in ("stop_after_updates", "stop_after_minutes"):
            if getattr(train_args, flag) is not None:
                raise ConfigError(f"the training flag --{flag.replace('_', '-')} is not a "
                                  "benchmark flag: a tier's budget is fixed (stop a benchmark "
                                  "with Ctrl-C and continue it with learn_bench.py --resume)")
        if train_args.total_timesteps is None and tier.total_timesteps is not None:
            train_args.total_timesteps = tier.total_timesteps
        if train_args.num_envs is None and "num_envs" not in env_defaults:
            train_args.num_envs = DEFAULT_NUM_ENVS  # HackMatrix's; a gymnax env's is its own
        train_args.no_wandb = True
        train_args.checkpoint_dir = args.checkpoint_dir
        options = train_purejaxrl.run_options_from_args(train_args)
        validate_run_options(options)  # before the baselines are evaluated
        config = train_purejaxrl.config_from_args(train_args, None, jax.device_count(),
                                                  env_defaults=env_defaults)
        validate_config(config)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SystemExit as exit_:  # argparse of the training flags
        return int(exit_.code or 2)

    if args.ledger is None:
        args.ledger = REFERENCE_LEDGER if args.tier == "reference" else LEDGER
    ledger = None if args.no_ledger else args.ledger
    default_plot = os.path.join(os.path.dirname(args.ledger) or ".", f"{label}.png")
    plot = args.plot or default_plot
    try:
        # The run directories go there: found unwritable now, not after the baselines' games.
        check_directory_creatable(args.checkpoint_dir, "--checkpoint-dir")
        if ledger:
            check_ledger(ledger)
            if os.path.realpath(plot) == os.path.realpath(ledger):
                raise ConfigError(f"--plot {plot} is the ledger")
        # A resumed label's curve at its default path is redrawn as seeds are added (its
        # baselines reach the ledger before the first seed trains, and an interrupted seed
        # leaves its curve so far); any other existing file may be another label's (or
        # tier's) curve or no curve at all, which this benchmark cannot tell.
        own_curve = bool(ledger and args.resume
                         and os.path.realpath(plot) == os.path.realpath(default_plot)
                         and finished_rows(ledger, label, args.tier))
        check_plot(plot, f"--plot {plot}" if args.plot else f"the curve {plot} (--plot)",
                   args.overwrite or own_curve)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    command = "python scripts/learn_bench.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    try:
        outcome = run(config, seeds, label, args.tier, command, options, args.eval_episodes,
                      ledger, plot, lambda c, o, checkpoint: train(c, o, checkpoint=checkpoint),
                      vmap_seeds=args.vmap_seeds, resume=args.resume)
    except ConfigError as error:  # e.g. resuming a run of other flags
        print(f"error: {error}", file=sys.stderr)
        return 2
    except CheckpointError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"\n{label} ({args.tier}): {config.total_timesteps:,} env steps per seed, "
          f"{args.eval_episodes} held-out boards per policy")
    print(outcome["table"])
    if ledger:
        count = outcome["appended"]
        rows = f"{count} row{'s' if count != 1 else ''}" if count else "no row"
        print(f"{rows} appended to {ledger}" + (f"; curve {plot}" if outcome["drawn"] else ""))
    if outcome.get("diverged"):  # a seed whose training diverged is not recorded
        print(f"error: {outcome.get('diverged')}", file=sys.stderr)
        return 1
    if outcome["stop_signal"] is not None:
        return 128 + outcome["stop_signal"]
    return 0


if __name__ == "__main__":
    sys.exit(main())
