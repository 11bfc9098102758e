"""Expert iteration from a trained checkpoint (SPEC §4.5): the network is the prior of a Gumbel
MuZero search that plays self-play games with the env as its model, and is fitted to the
search's improved policy, iteration after iteration, for a wall-clock budget.

    python scripts/expert_iteration.py --checkpoint runs/gamma995-s0 --out runs/ei-s0 --minutes 30
    python scripts/evaluate.py --checkpoint runs/ei-s0 --episodes 512 --seed 20261123 \\
        --close-undo-exploit --policies checkpoint-greedy,checkpoint-sampled

The output directory gets a checkpoint in the trainer's format (the source's runner state with
the fitted parameters: ``evaluate.py`` and ``watch_agent.py`` play it; continue with PPO through
``train_purejaxrl.py --resume <out> --weights-only``) and ``expert_iteration.jsonl``, one line
per iteration. The search is the fair one by default (hidden fields re-drawn per world).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from purejaxrl.backend import choose_platforms, describe_backend
from purejaxrl.cli.parsing import ArgumentParser, finite_float

choose_platforms()  # before anything imports JAX

METRICS_FILE = "expert_iteration.jsonl"


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True,
                        help="the trained network to start from: checkpoint file or run directory")
    parser.add_argument("--out", required=True, help="a new directory for the results")
    parser.add_argument("--minutes", type=finite_float, default=30.0,
                        help="wall-clock budget, compilation excluded (default 30)")
    parser.add_argument("--stop-after-iterations", type=int, metavar="N",
                        help="stop after N iterations even if time is left")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-interval-minutes", type=finite_float, default=5.0)
    search = parser.add_argument_group("search (the teacher)")
    search.add_argument("--simulations", type=int, default=16,
                        help="simulations per world and move (default 16)")
    search.add_argument("--worlds", type=int, default=1,
                        help="worlds searched per move (default 1)")
    search.add_argument("--information", choices=("fair", "perfect"), default="fair",
                        help="fair (default): hidden fields re-drawn; perfect: the true state")
    search.add_argument("--value-scale", type=finite_float, default=0.1,
                        help="weight of the search's normalised Q-values against the prior "
                        "logits in its move and target (mctx's value_scale, default 0.1)")
    search.add_argument("--leaf", choices=("exit", "rollout", "zero"), default="exit",
                        help="leaf value (default exit, as in evaluate.py's search rows)")
    fit = parser.add_argument_group("self-play and fit")
    fit.add_argument("--num-envs", type=int, default=64, help="self-play lanes (default 64)")
    fit.add_argument("--num-steps", type=int, default=16,
                     help="moves per lane and iteration (default 16)")
    fit.add_argument("--epochs", type=int, default=4)
    fit.add_argument("--minibatch-size", type=int, default=256)
    fit.add_argument("--lr", type=finite_float, default=1e-4)
    fit.add_argument("--replay-iterations", type=int, default=4,
                     help="fit the targets of this many latest iterations (default 4)")
    return parser


def arguments_error(args) -> str | None:
    """The first bad option, found before any work; None if all are fine."""
    if not args.minutes > 0:
        return f"--minutes must be > 0, got {args.minutes}"
    if args.stop_after_iterations is not None and args.stop_after_iterations < 1:
        return f"--stop-after-iterations must be >= 1, got {args.stop_after_iterations}"
    if not args.save_interval_minutes > 0:
        return f"--save-interval-minutes must be > 0, got {args.save_interval_minutes}"
    for name in ("simulations", "worlds", "num_envs", "num_steps", "epochs", "minibatch_size",
                 "replay_iterations"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}"
    if args.minibatch_size > args.num_envs * args.num_steps:
        return (f"--minibatch-size {args.minibatch_size} is larger than one iteration's moves "
                f"(--num-envs x --num-steps = {args.num_envs * args.num_steps})")
    if not args.lr > 0:
        return f"--lr must be > 0, got {args.lr}"
    if not args.value_scale > 0:
        return f"--value-scale must be > 0, got {args.value_scale}"
    if not os.path.exists(args.checkpoint):
        return f"--checkpoint {args.checkpoint} does not exist"
    if os.path.isfile(args.out) or (os.path.isdir(args.out) and os.listdir(args.out)):
        return f"--out {args.out} already exists and is not empty: choose a new directory"
    return None


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    error = arguments_error(args)
    if error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    import jax
    import numpy as np
    from purejaxrl import expert_iteration as ei
    from purejaxrl.checkpoint import CheckpointError, save_checkpoint
    from purejaxrl.policy import PolicyError, load_policy
    from purejaxrl.search import SearchSettings, make_search_teacher, network_prior

    print(describe_backend(), file=sys.stderr)
    try:
        policy = load_policy(args.checkpoint)
    except PolicyError as failure:
        print(f"error: {failure}", file=sys.stderr)
        return failure.code
    config, checkpoint = policy.config, policy.checkpoint
    env, env_params, network = policy.built[:3]
    if config.recurrent_core != "none":
        print("error: expert iteration needs a feed-forward network (the search's prior); the "
              f"checkpoint's has a {config.recurrent_core} core", file=sys.stderr)
        return 2
    hooks = env.search_hooks
    if hooks is None:
        print(f"error: expert iteration needs an env with search hooks (hackmatrix); "
              f"{config.env} has none", file=sys.stderr)
        return 2
    settings = ei.ExpertIterationSettings(
        num_envs=args.num_envs, num_steps=args.num_steps, epochs=args.epochs,
        minibatch_size=args.minibatch_size, lr=args.lr,
        replay_iterations=args.replay_iterations)
    search_settings = SearchSettings(num_simulations=args.simulations, num_worlds=args.worlds,
                                     gamma=hooks.DEFAULT_GAMMA, value_scale=args.value_scale)
    search_hooks = hooks.make_hooks(env.env, fair=args.information == "fair", leaf=args.leaf)

    def teacher_for(params):
        return make_search_teacher(settings=search_settings,
                                   prior_fn=network_prior(network, params), **search_hooks)

    os.makedirs(args.out, exist_ok=True)
    params = policy.params
    optimizer = ei.make_optimizer(settings)
    opt_state = optimizer.init(params)
    key = jax.random.PRNGKey(args.seed)
    reset_key, loop_key = jax.random.split(key)
    carry = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(reset_key, settings.num_envs), env_params)
    self_play = jax.jit(ei.make_self_play(env, env_params, teacher_for, settings.num_steps))
    fit_step = jax.jit(ei.make_fit_step(network, optimizer))

    start = time.perf_counter()
    self_play = self_play.lower(params, carry, loop_key).compile()
    compile_s = time.perf_counter() - start
    print(f"compiled the self-play ({args.simulations} simulations x {args.worlds} world(s), "
          f"{settings.num_envs} lanes x {settings.num_steps} moves) in {compile_s:.1f}s",
          flush=True)

    def save(elapsed: float) -> str:
        runner = checkpoint["runner_state"].replace(params=params)
        return save_checkpoint(args.out, runner_state=runner, config=checkpoint["config"],
                               update=checkpoint["update"], env_steps=checkpoint["env_steps"],
                               run_name=os.path.basename(os.path.abspath(args.out)),
                               wandb_run_id=None, elapsed_seconds=elapsed, keep=1)

    rng = np.random.default_rng(args.seed)
    replay = []
    metrics_path = os.path.join(args.out, METRICS_FILE)
    budget_s = args.minutes * 60
    run_start = last_save = time.perf_counter()
    iteration = 0
    fit_compile_s = None
    with open(metrics_path, "a", encoding="utf-8") as metrics_file:
        while True:
            iteration_start = time.perf_counter()
            carry, moves = self_play(params, carry, jax.random.fold_in(loop_key, iteration))
            moves = jax.device_get(moves)
            play_s = time.perf_counter() - iteration_start
            replay = (replay + [ei.flatten_moves(moves)])[-settings.replay_iterations:]
            data = jax.tree.map(lambda *parts: np.concatenate(parts), *replay)
            fit_start = time.perf_counter()
            fitted = []
            for batch in ei.minibatches(data, settings.minibatch_size, settings.epochs, rng):
                if fit_compile_s is None:
                    compiled_start = time.perf_counter()
                    fit_step = fit_step.lower(params, opt_state, batch).compile()
                    fit_compile_s = time.perf_counter() - compiled_start
                params, opt_state, step_metrics = fit_step(params, opt_state, batch)
                fitted.append(step_metrics)
            fit_metrics = {name: float(np.mean([m[name] for m in jax.device_get(fitted)]))
                           for name in fitted[0]}
            iteration += 1
            now = time.perf_counter()
            record = {"iteration": iteration, "elapsed_s": now - run_start, "play_s": play_s,
                      "fit_s": now - fit_start, "moves": iteration * settings.num_envs
                      * settings.num_steps, "samples_fitted": len(data["target"]),
                      "compile_s": compile_s, "fit_compile_s": fit_compile_s,
                      **ei.self_play_summary(moves), **fit_metrics}
            metrics_file.write(json.dumps(record) + "\n")
            metrics_file.flush()
            print(f"iteration {iteration} | {record['elapsed_s']:.0f}s | moves {record['moves']:,}"
                  f" | self-play episodes {record['episodes']} stage "
                  f"{record['episode_stage']:.2f} | loss {record['loss']:.3f} kl "
                  f"{record['kl']:.3f}", flush=True)
            out_of_time = now - run_start >= budget_s
            done = out_of_time or iteration == args.stop_after_iterations
            if done or now - last_save >= args.save_interval_minutes * 60:
                try:
                    path = save(now - run_start)
                except CheckpointError as failure:
                    print(f"error: {failure}", file=sys.stderr)
                    return 1
                last_save = now
                print(f"saved {path}", flush=True)
            if done:
                break
    print(f"{iteration} iterations, {record['moves']:,} searched moves in "
          f"{record['elapsed_s']:.0f}s (compile {compile_s:.0f}s + {fit_compile_s:.0f}s apart)")
    return 0
