#!/usr/bin/env python
"""When did a game see a program, when did it own it, and how did it end? Re-simulates every
game of one row of an ``evaluate.py --json --record-actions`` file (any row's: a network's, a
baseline's, a search's) on the evaluation's own keys, and reads from each state what the
player saw: the first stage on which a block showing the program stood unsiphoned on the
board while the player did not own it, and the first stage on which the player owned it.
Every game must end as, and when, the evaluation says (else one error line, exit 1).

    python scripts/program_timeline.py searched.json --row search-16-ppo-value --program reset

The table crosses the stage of first ownership (never, 1..8) with how the games ended, and
counts the games that saw the program on the board and never took it: where a search or a
network wins through one program (SPEC §4.5: RESET), whether the boards offered it, and
whether the player took it when they did.
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

from envs.hackmatrix.core.constants import PROGRAM_NAMES  # noqa: E402
from envs.hackmatrix.observation import CH_BLOCK_PROGRAM_TYPE, CH_BLOCK_SIPHONED  # noqa: E402
from purejaxrl.evaluation import END_CAUSES  # noqa: E402
from purejaxrl.output_paths import add_overwrite_argument, write_text  # noqa: E402
from purejaxrl.recorded_games import replay_inputs, resimulate_row  # noqa: E402

NEVER = "never"


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("evaluation", help="an evaluate.py --json file made with --record-actions")
    parser.add_argument("--row", required=True, help="the row whose games to read")
    parser.add_argument("--program", default="reset", choices=PROGRAM_NAMES,
                        help="the program to follow (default reset)")
    parser.add_argument("--json", metavar="PATH", help="also write every game's timeline")
    add_overwrite_argument(parser)
    return parser


def timelines(env, env_params, recorded: dict, program: int, plan_actions) -> dict:
    """Per game (board order of ``games``): i32 first stage the program was seen unowned on
    the board and first stage it was owned (0: never), the steps it was on offer (seen unowned)
    and how many of those played a plan action (``plan_actions``, bool[A]: HackMatrix's acquire
    macro), and the stage, won and died flags of the game's last step; all boards
    re-simulated together, each from its recorded actions on its own keys (``recorded``:
    ``recorded_games.load_row_games``')."""
    reset_keys, env_keys, actions = replay_inputs(recorded)
    plans = jnp.asarray(plan_actions, bool)

    def one(reset_key, step_keys, moves):
        state = env.reset(reset_key, env_params)[1]

        def step(carry, inputs):
            state, seen, owned, offered, planned, end = carry
            step_key, action = inputs
            obs = env.observe(state)
            shown = (obs.grid[..., CH_BLOCK_PROGRAM_TYPE + program] > 0) & (
                obs.grid[..., CH_BLOCK_SIPHONED] == 0)
            has = obs.programs[program] > 0
            on_offer = (action >= 0) & jnp.any(shown) & ~has
            offered = offered + on_offer
            planned = planned + (on_offer & plans[jnp.maximum(action, 0)])
            seen = jnp.where((seen == 0) & jnp.any(shown) & ~has, state.stage, seen)
            owned = jnp.where((owned == 0) & has, state.stage, owned)
            _, next_state, _, _, info = env.step_env(step_key, state, jnp.maximum(action, 0),
                                                     env_params)
            playing = action >= 0
            end = jax.tree.map(lambda new, old: jnp.where(playing, new, old),
                               (info["stage"], info["won"], info["died"]), end)
            state = jax.tree.map(lambda new, old: jnp.where(playing, new, old), next_state,
                                 state)
            return (state, seen, owned, offered, planned, end), None

        zero = jnp.int32(0)
        start = (state, zero, zero, zero, zero, (zero, jnp.bool_(False), jnp.bool_(False)))
        (_, seen, owned, offered, planned, (stage, won, died)), _ = jax.lax.scan(
            step, start, (step_keys, moves))
        return dict(seen=seen, owned=owned, offered=offered, planned=planned, stage=stage,
                    won=won, died=died)

    return jax.device_get(jax.jit(jax.vmap(one))(reset_keys, env_keys, jnp.asarray(actions)))


def format_table(rows: list, program: str) -> str:
    ends = [end for end in END_CAUSES if any(row["end"] == end for row in rows)]
    owned_at = [NEVER] + sorted({row["owned"] for row in rows if row["owned"] != NEVER})
    lines = [f"{len(rows)} games; {program.upper()} first owned on stage (rows) by how the game "
             "ended (columns)",
             "owned".ljust(8) + "".join(end.rjust(11) for end in ends) + "games".rjust(8)]
    for stage in owned_at:
        counts = [sum(row["owned"] == stage and row["end"] == end for row in rows)
                  for end in ends]
        lines.append(str(stage).ljust(8) + "".join(str(c).rjust(11) for c in counts)
                     + str(sum(counts)).rjust(8))
    never_seen = [row for row in rows if row["seen"] == NEVER and row["owned"] == NEVER]
    passed = [row for row in rows if row["seen"] != NEVER and row["owned"] == NEVER]
    lines.append(f"never on the board while unowned, never owned: {len(never_seen)} games "
                 f"(ended on stages {sorted(row['stage'] for row in never_seen)})")
    lines.append(f"seen on the board and never owned: {len(passed)} games, on offer "
                 f"{sum(row['offered'] for row in passed)} steps, a plan action played on "
                 f"{sum(row['planned'] for row in passed)} of them: "
                 + ", ".join(f"board {row['board']} (seen on stage {row['seen']}, ended "
                             f"{row['end']} on {row['stage']}; {row['planned']} of "
                             f"{row['offered']})" for row in passed))
    return "\n".join(lines)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    outcome = resimulate_row(
        args, "hackmatrix", "only HackMatrix games have programs",
        lambda recorded, env, env_params: timelines(
            env.env, env_params, recorded, PROGRAM_NAMES.index(args.program),
            env.search_hooks.plan_actions(env.env)))
    if isinstance(outcome, int):
        return outcome
    recorded, found = outcome
    rows = [{"board": game["board"], "end": game["end"],
             "stage": int(found["stage"][index]),
             "seen": int(found["seen"][index]) or NEVER,
             "owned": int(found["owned"][index]) or NEVER,
             "offered": int(found["offered"][index]), "planned": int(found["planned"][index])}
            for index, game in enumerate(recorded["games"])]
    print(format_table(rows, args.program))
    if args.json:
        write_text(args.json, json.dumps({"evaluation": args.evaluation, "row": args.row,
                                          "program": args.program, "games": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
