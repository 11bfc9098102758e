"""Where the time of one HackMatrix env step goes: each sub-system jitted and vmapped on its
own over the same batch of mid-game states, timed after compile (median of repeats), with its
compile time. Sub-systems that ``sparse_update`` gates are timed with every lane enabled (the
dense cost) and, for generation, with no lane enabled (what a step that needs none pays).

    python scripts/profile_step.py --num-envs 2048
"""

import argparse
import statistics
import sys
import time

from purejaxrl.backend import choose_platforms, describe_backend
from purejaxrl.cli.parsing import ArgumentParser

choose_platforms()  # before anything imports JAX

import jax
import jax.numpy as jnp

from envs.hackmatrix.core import enemies, game, generation, programs, rewards

from envs.hackmatrix import observation
from envs.hackmatrix.env import HackMatrix


def mid_game_states(env, params, num_envs, warmup_steps, seed):
    """States after ``warmup_steps`` random valid actions (enemies on the board)."""
    keys = jax.random.split(jax.random.PRNGKey(seed), num_envs)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)

    def one(carry, key):
        obs, state = carry
        k_act, k_step = jax.random.split(key)
        action = jax.random.categorical(k_act, jnp.where(obs.action_mask, 0.0, -1e9))
        obs, state, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(k_step, num_envs), state, action, params)
        return (obs, state), None

    warm_up = jax.jit(lambda c: jax.lax.scan(one, c, jax.random.split(keys[0], warmup_steps)))
    (obs, state), _ = warm_up((obs, state))
    return obs, state


def measure(name, fn, args, repeats):
    jitted = jax.jit(jax.vmap(fn))
    t0 = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - start)
    return name, compile_s, statistics.median(times)


def main(argv=None):
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, default=2048)
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.num_envs < 1 or args.repeats < 1 or args.warmup_steps < 0:
        parser.error("--num-envs and --repeats must be positive, --warmup-steps >= 0")
    print(describe_backend(), file=sys.stderr)
    env = HackMatrix()
    params = env.default_params
    obs, state = mid_game_states(env, params, args.num_envs, args.warmup_steps, args.seed)
    n = args.num_envs
    keys = jax.random.split(jax.random.PRNGKey(args.seed + 1), n)
    # A valid action per env (the first in the mask) and a direction per env.
    actions = jnp.argmax(obs.action_mask, axis=-1).astype(jnp.int32)
    directions = jnp.zeros(n, jnp.int32)
    all_programs = jnp.zeros(n, jnp.int32)
    rows = [
        measure("env.step (all sub-systems, auto-reset)", lambda k, s, a: env.step(k, s, a, params),
                (keys, state, actions), args.repeats),
        measure("  game.step_game (rules only)", lambda s, a, k: game.step_game(s, a, k),
                (state, actions, keys), args.repeats),
        measure("  enemy turn (every lane)", lambda s, k: enemies.run_enemy_turn(s, k, True),
                (state, keys), args.repeats),
        measure("  direction action", game.direction_action, (state, directions), args.repeats),
        measure("  observation + mask", observation.build_observation, (state,), args.repeats),
        measure("  exit-distance BFS", rewards.player_exit_distance, (state,), args.repeats),
        measure("  siphon + quality (dense)",
                lambda s: (game.siphon_action(s), rewards.siphon_quality(s)),
                (state,), args.repeats),
        measure("  programs (dense, PUSH)", lambda s, p, k: programs.apply_program(s, p, k),
                (state, all_programs, keys), args.repeats),
        measure("  stage generation (every lane)",
                lambda s, k: generation.initialize_stage(s, k, True),
                (state, keys), args.repeats),
        measure("  stage generation (no lane)",
                lambda s, k: generation.initialize_stage(s, k, False),
                (state, keys), args.repeats),
    ]
    print(f"{n} envs, states after {args.warmup_steps} random steps, median of {args.repeats}")
    print(f"{'sub-system':42s} {'compile s':>9s} {'ms/batch':>9s} {'us/env':>8s}")
    for name, compile_s, seconds in rows:
        print(f"{name:42s} {compile_s:9.2f} {seconds * 1e3:9.2f} {seconds * 1e6 / n:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
