#!/usr/bin/env python
"""What the rollout teacher of ``--distill-teacher rollout`` would label on a trained network
(SPEC §4.5): at the states a checkpoint's last rollout left its training envs in (the
checkpoint holds them, with the players' memories), the teacher's move at every one of the
first ``--envs`` envs, and the share of states where it overrules the network's greedy move
at each minimum gain (``--distill-min-gain``), with the gains' quantiles. The teacher is the
trainer's own (``ppo.search_distillation_targets``), so this is what one update would fit.

    python scripts/teacher_probe.py --checkpoint runs/lr1e3-s0 --envs 512
"""

from __future__ import annotations

import argparse
import json
import sys

from purejaxrl.backend import choose_platforms

choose_platforms()  # before anything imports JAX

import jax  # noqa: E402
import numpy as np  # noqa: E402

from purejaxrl import ppo  # noqa: E402
from purejaxrl.cli.parsing import ArgumentParser, finite_float  # noqa: E402
from purejaxrl.config import (DISTILL_LEAVES, ConfigError, TrainConfig,  # noqa: E402
                              validate_config)
from purejaxrl.output_paths import (OutputPathError, add_overwrite_argument,  # noqa: E402
                                     check_output_file, write_text)  # noqa: E402
from purejaxrl.policy import PolicyError, load_policy  # noqa: E402

DEFAULT_MIN_GAINS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True,
                        help="a run directory (its newest checkpoint) or a checkpoint file")
    parser.add_argument("--envs", type=int, default=512,
                        help="label the first N training envs' states (default 512)")
    parser.add_argument("--rollouts", type=int, default=8,
                        help="the teacher's rollouts per candidate (default 8)")
    parser.add_argument("--leaf", choices=DISTILL_LEAVES, default="value",
                        help="the teacher's objective (--distill-leaf; default value)")
    parser.add_argument("--min-gains", type=finite_float, nargs="+", default=DEFAULT_MIN_GAINS,
                        metavar="G", help="the minimum gains to report the overruled share at")
    parser.add_argument("--seed", type=int, default=0, help="the teacher's key")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    add_overwrite_argument(parser)
    return parser


def probe_config(config: TrainConfig, args, envs: int, available: int) -> TrainConfig:
    """The checkpoint's training config, over the ``available`` envs its runner holds, with
    the rollout teacher on for the first ``envs`` (no minimum gain: every gain is measured,
    the thresholds applied afterwards)."""
    return config.replace(distill_coef=1.0, distill_teacher="rollout",
                          distill_rollouts=args.rollouts, distill_leaf=args.leaf,
                          distill_min_gain=0.0, distill_envs=envs, num_envs=available,
                          num_minibatches=1, num_devices=1)


def summarise(gain: np.ndarray, min_gains) -> dict:
    """The overruled share at each minimum gain and the quantiles of the gains where the
    teacher overrules at all (a candidate wins only by a gain above the minimum, so the share
    at G is the share of states whose gain exceeds G)."""
    overruled = gain[gain > 0]
    return {"states": int(gain.size),
            "overruled": {f"{g:g}": float(np.mean(gain > g)) for g in min_gains},
            "gain_quantiles": ({f"{q:g}": float(np.quantile(overruled, q))
                                for q in (0.1, 0.25, 0.5, 0.75, 0.9)} if overruled.size else {})}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.envs < 1 or args.rollouts < 2:
        print("error: --envs must be >= 1 and --rollouts >= 2", file=sys.stderr)
        return 2
    if any(g < 0 for g in args.min_gains):
        print("error: --min-gains must be >= 0", file=sys.stderr)
        return 2
    try:
        if args.json:
            check_output_file(args.json, "--json", args.overwrite)
        loaded = load_policy(args.checkpoint)
    except (OutputPathError, PolicyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    runner = loaded.checkpoint["runner_state"]
    trained = TrainConfig.from_dict(loaded.checkpoint["config"])
    available = jax.tree.leaves(runner.obs)[0].shape[0]
    envs = min(args.envs, available)
    try:
        config = probe_config(trained, args, envs, available)
        validate_config(config)
        env, _, network, _, _ = ppo.build(config)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"checkpoint {loaded.checkpoint['path']} (update {loaded.checkpoint['update']}); "
          f"the teacher labels {envs} of its {available} envs' states "
          f"({args.rollouts} rollouts, {args.leaf} leaf)")
    targets = jax.jit(lambda runner, key: ppo.search_distillation_targets(
        runner, config, env, network, key))(runner, jax.random.PRNGKey(args.seed))
    gain = np.asarray(targets["gain"], np.float64)
    unscored = ~np.isfinite(gain)  # the greedy move is one the search may not play
    figures = summarise(np.where(unscored, 0.0, gain), args.min_gains)
    figures.update(checkpoint=loaded.checkpoint["path"], update=loaded.checkpoint["update"],
                   rollouts=args.rollouts, leaf=args.leaf,
                   greedy_not_searchable=int(unscored.sum()))
    print(f"min gain  overruled share   ({figures['states']} states; greedy move not "
          f"searchable: {figures['greedy_not_searchable']})")
    for threshold, share in figures["overruled"].items():
        print(f"{threshold:>8}  {share:15.3f}")
    if figures["gain_quantiles"]:
        print("gain where overruled, quantiles 10/25/50/75/90%: " + " / ".join(
            f"{v:.3f}" for v in figures["gain_quantiles"].values()))
    if args.json:
        write_text(args.json, json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
