#!/usr/bin/env python
"""How fair were the fair search's worlds? Re-simulates every game of one row of an
``evaluate.py --json --record-actions`` file on the evaluation's own keys and, at every state a
move was played from, draws ``--worlds`` worlds as the fair search does
(``determinize.redraw_hidden`` with ``--attempts`` proposals), counting each world's level:
0, everything hidden re-drawn; 1, all but the hidden cryptogs' cells (the observation's action
mask pinned one, and every hidden cryptog kept its true cell); 2, nothing (no re-draw kept the
observation: the world was the true state). Every game must end as, and when, the evaluation
says (else one error line, exit 1).

    python scripts/world_levels.py searched.json --row search-64-ppo-value

The draws are this script's own (``--seed``), not the search's, so the shares estimate how
often the search's worlds fell back on the states its games visited (SPEC §4.5).
"""

from __future__ import annotations

import argparse
import json
import sys

from purejaxrl.backend import choose_platforms
from purejaxrl.cli.parsing import ArgumentParser

choose_platforms()  # before anything imports JAX

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from envs.hackmatrix import determinize  # noqa: E402
from purejaxrl.output_paths import add_overwrite_argument, write_text  # noqa: E402
from purejaxrl.recorded_games import replay_inputs, resimulate_row  # noqa: E402


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("evaluation", help="an evaluate.py --json file made with --record-actions")
    parser.add_argument("--row", required=True, help="the row whose games to read")
    parser.add_argument("--worlds", type=positive, default=4,
                        help="worlds drawn at every state (default 4, the search's default)")
    parser.add_argument("--attempts", type=positive, default=determinize.DEFAULT_ATTEMPTS,
                        help="proposals per level (default %(default)s, the search's)")
    parser.add_argument("--seed", type=int, default=0, help="of this script's world draws")
    parser.add_argument("--json", metavar="PATH", help="also write the counts per game")
    add_overwrite_argument(parser)
    return parser


def world_levels(env, env_params, recorded: dict, worlds: int, attempts: int, seed: int):
    """Per game (board order): i32[3] worlds of each level over the states a move was played
    from, and the won and died flags of its last step; all boards re-simulated together."""
    reset_keys, env_keys, actions = replay_inputs(recorded)
    draw = jax.vmap(lambda k, s: determinize.redraw_hidden(k, s, attempts)[1], (0, None))

    def one(reset_key, step_keys, moves, game_key):
        state = env.reset(reset_key, env_params)[1]

        def step(carry, inputs):
            state, counts, end = carry
            step_key, action, t = inputs
            playing = action >= 0
            levels = draw(jax.random.split(jax.random.fold_in(game_key, t), worlds), state)
            counts = counts + playing * jnp.bincount(levels, length=len(determinize.LEVELS))
            _, next_state, _, _, info = env.step_env(step_key, state, jnp.maximum(action, 0),
                                                     env_params)
            end = jax.tree.map(lambda new, old: jnp.where(playing, new, old),
                               (info["won"], info["died"]), end)
            state = jax.tree.map(lambda new, old: jnp.where(playing, new, old), next_state,
                                 state)
            return (state, counts, end), None

        start = (state, jnp.zeros(len(determinize.LEVELS), jnp.int32),
                 (jnp.bool_(False), jnp.bool_(False)))
        steps = jnp.arange(moves.shape[0])
        (_, counts, (won, died)), _ = jax.lax.scan(step, start, (step_keys, moves, steps))
        return dict(counts=counts, won=won, died=died)

    game_keys = jax.random.split(jax.random.PRNGKey(seed), len(recorded["games"]))
    return jax.device_get(jax.jit(jax.vmap(one))(reset_keys, env_keys, jnp.asarray(actions),
                                                 game_keys))


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    outcome = resimulate_row(
        args, "hackmatrix", "only HackMatrix has fair worlds",
        lambda recorded, env, env_params: world_levels(
            env.env, env_params, recorded, args.worlds, args.attempts, args.seed))
    if isinstance(outcome, int):
        return outcome
    recorded, found = outcome
    counts = np.asarray(found["counts"])
    total = counts.sum(axis=0)
    fell_back = (counts[:, 1:].sum(axis=1) > 0)
    print(f"{len(counts)} games, {int(total.sum()) // args.worlds} states, {args.worlds} worlds "
          f"each, {args.attempts} proposals per level")
    for level, (name, count) in enumerate(zip(determinize.LEVELS, total)):
        print(f"level {level} ({name}): {int(count)} worlds ({count / max(total.sum(), 1):.3%})")
    print(f"games with a world of level 1 or 2: {int(fell_back.sum())}")
    if args.json:
        games = [{"board": game["board"], "levels": counts[index].tolist()}
                 for index, game in enumerate(recorded["games"])]
        write_text(args.json, json.dumps({"evaluation": args.evaluation, "row": args.row,
                                          "worlds": args.worlds, "attempts": args.attempts,
                                          "seed": args.seed, "games": games}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
