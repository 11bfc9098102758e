#!/usr/bin/env python
"""Behaviour-cloning probe of the network encoders (no RL): how well can each encoder represent
the scripted heuristic (shoot what is in line, else walk the BFS path to the exit)?

Collects the heuristic's (observation, action) pairs on training boards and on held-out boards,
trains each encoder's actor by cross-entropy on the masked logits for a fixed number of steps,
and prints held-out accuracy. An encoder that cannot imitate "walk to the exit" from data will
not discover it from a reward either.

    python scripts/probe_encoders.py --encoders flat egocentric --steps 3000
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from purejaxrl.backend import choose_platforms
from purejaxrl.cli.parsing import ArgumentParser, finite_float

choose_platforms()  # before anything imports JAX

import jax
import jax.numpy as jnp
import numpy as np
import optax

from envs.hackmatrix.baselines import heuristic_policy
from envs.hackmatrix.core.constants import N_ACTIONS, N_DIRECTIONS
from purejaxrl import ppo
from purejaxrl.config import TrainConfig
from purejaxrl.networks import greedy_masked, masked_log_probs
from purejaxrl.output_paths import add_overwrite_argument, refuse_output_file, write_text


def build_parser():
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoders", nargs="+", default=["flat", "egocentric"])
    parser.add_argument("--envs", type=int, default=512)
    parser.add_argument("--collect-steps", type=int, default=256,
                        help="heuristic steps per env for the training set")
    parser.add_argument("--steps", type=int, default=3000, help="SGD steps per encoder")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--lr", type=finite_float, default=1e-3)
    parser.add_argument("--hidden-width", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results here")
    add_overwrite_argument(parser)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if refuse_output_file(args.json, "--json", args.overwrite):
        return 2
    env, env_params = ppo.make_env(TrainConfig())

    @jax.jit
    def collect(key):
        reset_key, loop_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, args.envs), env_params)

        def step(carry, key):
            obs, state = carry
            act_key, step_key = jax.random.split(key)
            actions = jax.vmap(heuristic_policy)(
                jax.random.split(act_key, args.envs), obs, state)
            next_obs, next_state, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(step_key, args.envs), state, actions, env_params)
            return (next_obs, next_state), (obs, actions)

        _, (observations, actions) = jax.lax.scan(
            step, (obs, state), jax.random.split(loop_key, args.collect_steps))
        flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
        return jax.tree.map(flat, observations), flat(actions)

    start = time.perf_counter()
    train_obs, train_actions = collect(jax.random.PRNGKey(args.seed))
    test_obs, test_actions = collect(jax.random.PRNGKey(args.seed + 10_000))
    size = int(train_actions.shape[0])
    print(f"collected {size:,} training and {int(test_actions.shape[0]):,} held-out heuristic "
          f"steps in {time.perf_counter() - start:.0f}s; action histogram "
          f"{np.bincount(np.asarray(train_actions), minlength=N_ACTIONS)[:6].tolist()} (0-5)")

    results = {}
    for encoder in args.encoders:
        # Behaviour cloning of single observations: the feed-forward network.
        config = TrainConfig(encoder=encoder, hidden_width=args.hidden_width, recurrent_core="none")
        network = ppo.make_network(config, env)
        params = network.init(jax.random.PRNGKey(args.seed),
                              jax.tree.map(lambda x: x[0], train_obs))
        optimizer = optax.adam(args.lr)
        opt_state = optimizer.init(params)

        def loss_fn(params, obs, actions):
            logits, _ = network.apply(params, obs)
            log_probs = masked_log_probs(logits, obs.action_mask)
            return -jnp.mean(jnp.take_along_axis(log_probs, actions[:, None], axis=-1))

        @jax.jit
        def train_steps(params, opt_state, key):
            def one(carry, key):
                params, opt_state = carry
                index = jax.random.randint(key, (args.batch,), 0, size)
                batch = jax.tree.map(lambda x: x[index], train_obs)
                loss, grads = jax.value_and_grad(loss_fn)(params, batch, train_actions[index])
                updates, opt_state = optimizer.update(grads, opt_state)
                return (optax.apply_updates(params, updates), opt_state), loss
            (params, opt_state), losses = jax.lax.scan(one, (params, opt_state),
                                                       jax.random.split(key, args.steps))
            return params, opt_state, losses

        @jax.jit
        def accuracy(params, obs, actions):
            logits, _ = network.apply(params, obs)
            chosen = greedy_masked(logits, obs.action_mask)
            moves = actions < N_DIRECTIONS
            return (jnp.mean(chosen == actions),
                    jnp.sum((chosen == actions) & moves) / jnp.maximum(jnp.sum(moves), 1))

        start = time.perf_counter()
        params, opt_state, losses = train_steps(params, opt_state, jax.random.PRNGKey(1))
        seconds = time.perf_counter() - start
        train_acc, _ = accuracy(params, train_obs, train_actions)
        test_acc, test_dir_acc = accuracy(params, test_obs, test_actions)
        results[encoder] = {"train_accuracy": float(train_acc), "test_accuracy": float(test_acc),
                            "test_direction_accuracy": float(test_dir_acc),
                            "final_loss": float(np.mean(np.asarray(losses)[-100:])),
                            "seconds": seconds}
        print(f"{encoder:>12}: held-out accuracy {float(test_acc):.3f} (direction actions "
              f"{float(test_dir_acc):.3f}), train {float(train_acc):.3f}, loss "
              f"{results[encoder]['final_loss']:.3f}, {seconds:.0f}s incl. compile")
    if args.json:
        write_text(args.json, json.dumps({"args": vars(args), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
