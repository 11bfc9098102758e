#!/usr/bin/env python
"""What a distillation teacher would label on a trained network (SPEC §4.5): at the states a
checkpoint's last rollout left its training envs in (the checkpoint holds them, with the
players' memories), the teacher's labels at every one of the first ``--envs`` envs. The
teacher is the trainer's own (``ppo.search_distillation_targets``), so this is what one
update would fit.

* ``--teacher rollout`` (default; ``--distill-teacher rollout``): the share of states where
  its move overrules the network's greedy move at each minimum gain (``--distill-min-gain``),
  with the gains' quantiles.
* ``--teacher tree`` (Gumbel MuZero, ``--simulations`` x ``--worlds`` fair worlds, the
  checkpoint's network as prior): how the teacher's improved policy shares its mass among the
  env's action groups against the network's policy, over all states and where a siphon would
  acquire a program (``acquisition_in_reach``), and the KL from the target to the policy:
  does the teacher raise or lower what the economy needs?

    python scripts/teacher_probe.py --checkpoint runs/lr1e3-s0 --envs 512
    python scripts/teacher_probe.py --checkpoint runs/lr1e3-s0 --teacher tree --raw-values
"""

from __future__ import annotations

import argparse
import json
import sys

from purejaxrl.backend import choose_platforms

choose_platforms()  # before anything imports JAX

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from purejaxrl import ppo  # noqa: E402
from purejaxrl.cli.parsing import ArgumentParser, finite_float  # noqa: E402
from purejaxrl.config import (DISTILL_LEAVES, DISTILL_TEACHERS, ConfigError,  # noqa: E402
                              TrainConfig, validate_config)
from purejaxrl.expert_iteration import policy_loss  # noqa: E402
from purejaxrl.networks import apply_step, masked_log_probs  # noqa: E402
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
    parser.add_argument("--teacher", choices=DISTILL_TEACHERS, default="rollout",
                        help="rollout (the overruled shares, default) or tree (the group "
                             "shares of Gumbel MuZero's improved policy against the network's)")
    parser.add_argument("--rollouts", type=int, default=8,
                        help="the rollout teacher's rollouts per candidate (default 8)")
    parser.add_argument("--simulations", type=int, default=16,
                        help="the tree teacher's simulations per world (default 16)")
    parser.add_argument("--worlds", type=int, default=4,
                        help="the tree teacher's re-drawn worlds per state (default 4)")
    parser.add_argument("--raw-values", action="store_true",
                        help="the tree teacher's raw Q-values (--distill-raw-values)")
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
    the teacher on for the first ``envs``: the rollout teacher with no minimum gain (every
    gain is measured, the thresholds applied afterwards), or the tree teacher's improved
    policy at every state, its prior and critic the checkpoint's network."""
    config = config.replace(distill_coef=1.0, distill_leaf=args.leaf, distill_envs=envs,
                            num_envs=available, num_minibatches=1, num_devices=1)
    if args.teacher == "rollout":
        return config.replace(distill_teacher="rollout", distill_rollouts=args.rollouts,
                              distill_min_gain=0.0)
    return config.replace(distill_teacher="tree", distill_simulations=args.simulations,
                          distill_worlds=args.worlds, distill_raw_values=args.raw_values,
                          distill_target="policy", distill_where="always",
                          distill_prior_mix=0.0, distill_frozen_teacher=False,
                          distill_replay=0, distill_value_coef=0.0)


def summarise(gain: np.ndarray, min_gains) -> dict:
    """The overruled share at each minimum gain and the quantiles of the gains where the
    teacher overrules at all (a candidate wins only by a gain above the minimum, so the share
    at G is the share of states whose gain exceeds G)."""
    overruled = gain[gain > 0]
    return {"states": int(gain.size),
            "overruled": {f"{g:g}": float(np.mean(gain > g)) for g in min_gains},
            "gain_quantiles": ({f"{q:g}": float(np.quantile(overruled, q))
                                for q in (0.1, 0.25, 0.5, 0.75, 0.9)} if overruled.size else {})}


def group_shares(policy: np.ndarray, target: np.ndarray, matrix: np.ndarray, names,
                 where: np.ndarray | None) -> dict:
    """Each action group's mean share of the network's ``policy`` and of the teacher's
    ``target`` (f32[N, A] each; ``matrix`` f32[A, G] marks the groups ``names``), over all
    states and, with ``where`` (bool[N]), over the states where it holds; ``None`` where no
    state is counted. ``other`` is the mass on actions outside every group."""
    def shares(probs):  # the groups' mean mass, and the mass no group holds
        mass = (probs @ matrix).mean(0)
        return {**dict(zip(names, map(float, mass))), "other": float(1.0 - mass.sum())}

    def over(rows):
        if not rows.any():
            return None
        return {"states": int(rows.sum()), "policy": shares(policy[rows]),
                "target": shares(target[rows])}
    every = np.ones(policy.shape[0], bool)
    return {"all": over(every), "acquire": None if where is None else over(where)}


def tree_figures(runner, config, env, network, key) -> dict:
    """The tree teacher's targets at the labelled states, against the network's policy
    there (from the player's memory for a GRU): the KL from target to policy and the group
    shares of both."""
    def label(runner, key):
        targets = ppo.search_distillation_targets(runner, config, env, network, key)
        count = targets["target"].shape[0]
        _, logits, _ = apply_step(network, runner.params, targets.get("hidden"),
                                  targets["obs"], jnp.zeros(count, jnp.bool_))
        _, fit = policy_loss(network, runner.params, targets["obs"], targets["target"],
                             targets["mask"], targets.get("hidden"))
        hooks = env.search_hooks
        acquire = (jax.vmap(hooks.acquisition_in_reach)(targets["obs"])
                   if hasattr(hooks, "acquisition_in_reach") else None)
        return (jnp.exp(masked_log_probs(logits, targets["mask"])), targets["target"],
                fit["kl"], acquire)
    policy, target, kl_mean, acquire = jax.jit(label)(runner, key)
    matrix = env.action_group_matrix()
    names = [name for name, _ in env.action_groups] if matrix is not None else ["all"]
    matrix = np.ones((policy.shape[1], 1), np.float32) if matrix is None else np.asarray(matrix)
    return {"kl_mean": float(kl_mean),
            "groups": group_shares(np.asarray(policy, np.float64),
                                   np.asarray(target, np.float64), matrix, names,
                                   None if acquire is None else np.asarray(acquire))}


def print_tree_figures(figures: dict) -> None:
    print(f"KL from the teacher's target to the policy: {figures['kl_mean']:.4f} nats (mean)")
    for where, title in (("all", "every labelled state"),
                         ("acquire", "where a siphon would acquire a program")):
        shares = figures["groups"][where]
        if shares is None:
            print(f"{title}: no state")
            continue
        print(f"{title} ({shares['states']} states)   network   teacher")
        for name in shares["policy"]:
            label = "no group" if name == "other" else name
            print(f"  {label:<12} {shares['policy'][name]:18.4f} {shares['target'][name]:9.4f}")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.envs < 1 or args.rollouts < 2:
        print("error: --envs must be >= 1 and --rollouts >= 2", file=sys.stderr)
        return 2
    if args.simulations < 1 or args.worlds < 1:
        print("error: --simulations and --worlds must be >= 1", file=sys.stderr)
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
    if args.teacher == "tree":
        # The checkpoint's own network teaches, whatever teacher its run kept.
        runner = runner.replace(teacher=None)
        print(f"checkpoint {loaded.checkpoint['path']} (update {loaded.checkpoint['update']}); "
              f"the tree teacher labels {envs} of its {available} envs' states "
              f"({args.simulations} simulations x {args.worlds} worlds, {args.leaf} leaf, "
              f"{'raw' if args.raw_values else 'normalised'} Q)")
        figures = tree_figures(runner, config, env, network, jax.random.PRNGKey(args.seed))
        figures.update(checkpoint=loaded.checkpoint["path"],
                       update=loaded.checkpoint["update"], teacher="tree",
                       simulations=args.simulations, worlds=args.worlds, leaf=args.leaf,
                       raw_values=args.raw_values, states=envs)
        print_tree_figures(figures)
        if args.json:
            write_text(args.json, json.dumps(figures, indent=2))
        return 0
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
