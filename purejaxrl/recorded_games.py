"""Games an evaluation recorded (``evaluate.py --json --record-actions``): one row's games read
back to be re-simulated on the keys the evaluation played them with (``game_keys``), by
``watch_agent.py --evaluation`` (drawn) and ``program_timeline.py`` (read). JAX is imported
only to make the keys: a file is checked before anything compiles."""

from __future__ import annotations

import json

# The loop that played a row, which decides its games' keys: a search row's boards
# (``search.play_boards``: keys folded from the board and the step), or every other row's
# episodes (``evaluation.play_episodes``: one key chain split over all the envs at each step).
BOARDS = "boards"
EPISODES = "episodes"
LOOPS = (BOARDS, EPISODES)


class RecordedGamesError(Exception):
    """A file, row or choice that gives no games; ``code`` is the exit status (2: a usage
    error, 1: nothing matched)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def load_row_games(path: str, row: str, *, ended: str | None = None, count: int | None = None,
                   first: int | None = None) -> dict:
    """Row ``row`` of the evaluation file ``path`` as games to re-simulate: its env, its
    ``env_options``, the evaluation's ``seed``, ``boards`` (how many it played: the keys
    depend on it), the ``loop`` that played them (``LOOPS``; a row that does not say is a
    search row's, the only rows recorded before network rows were) and ``games``, per game
    the ``board``, its ``actions``, ``length`` and ``end`` (``evaluation.END_CAUSES``) as the
    evaluation says. ``ended``: only the games that
    ended so, the first ``count`` of them (default 1); else the first ``first`` boards (default
    all)."""
    try:
        with open(path, encoding="utf-8") as handle:
            results = json.load(handle)
    except (OSError, ValueError) as error:
        raise RecordedGamesError(f"cannot read evaluation {path}: {error}", 1) from None
    if not isinstance(results, dict) or row not in results:
        rows = ", ".join(results) if isinstance(results, dict) else "none"
        raise RecordedGamesError(f"{path} has no row {row!r} (rows: {rows})")
    summary = results[row]
    if not isinstance(summary, dict) or not isinstance(summary.get("games", {}), dict):
        raise RecordedGamesError(f"row {row!r} of {path} is not an evaluation row (evaluate.py "
                                 "--json writes them)")
    games, made = summary.get("games", {}), summary.get("evaluation")
    if "actions" not in games or made is None or "env_options" not in summary:
        raise RecordedGamesError(f"row {row!r} of {path} kept no actions: evaluate it with "
                                 "--record-actions (and --json)")
    recorded = [games.get(name) for name in ("actions", "length", "end")]
    if not all(isinstance(values, list) for values in recorded) \
            or len({len(values) for values in recorded}) != 1 \
            or not isinstance(made, dict) or not isinstance(made.get("seed"), int):
        raise RecordedGamesError(f"row {row!r} of {path} is malformed: its games' actions, "
                                 "lengths and ends must be lists of one length, and its "
                                 "evaluation record must name the seed")
    loop = summary.get("loop", BOARDS)
    if loop not in LOOPS:
        raise RecordedGamesError(f"row {row!r} of {path} was played by an unknown loop "
                                 f"{loop!r} (known: {', '.join(LOOPS)})")
    boards = list(range(len(games["actions"])))
    matching = None if ended is None else [b for b in boards if games["end"][b] == ended]
    if ended is not None:
        if not matching:
            raise RecordedGamesError(f"no game of row {row!r} ended {ended!r}", 1)
        boards = matching[:count or 1]
    elif first is not None:
        boards = boards[:first]
    return {"env": made.get("env"), "env_options": summary["env_options"],
            "seed": made["seed"], "boards": len(games["actions"]), "loop": loop,
            "games": [{"board": b, "actions": games["actions"][b],
                       "length": games["length"][b], "end": games["end"][b]} for b in boards],
            "matching": matching}


def game_keys(loop: str, seed: int, num_boards: int, boards, steps: int):
    """The keys the evaluation of ``num_boards`` boards from ``PRNGKey(seed)`` played
    ``boards`` (ints) with, by its ``loop`` (``LOOPS``): reset keys [G], and for steps
    0..``steps``-1 the policy keys [G, steps] and the keys ``step_env`` got [G, steps]."""
    import jax
    import jax.numpy as jnp
    from purejaxrl import evaluation, search
    key, boards = jax.random.PRNGKey(seed), jnp.asarray(boards, jnp.int32)
    if loop == EPISODES:
        return jax.jit(evaluation.episode_keys, static_argnums=(1, 3))(key, num_boards,
                                                                       boards, steps)
    if loop != BOARDS:
        raise ValueError(f"unknown loop {loop!r}")
    board_keys, act_root, step_root = search.board_key_roots(key, num_boards)
    t = jnp.arange(steps)
    per_step = jax.vmap(jax.vmap(search.board_step_key, (None, None, 0)), (None, 0, None))
    env_keys = jax.vmap(jax.vmap(search.board_env_step_key, (None, None, 0)),
                        (None, 0, None))(step_root, boards, t)
    return board_keys[boards], per_step(act_root, boards, t), env_keys


def replay_inputs(recorded: dict):
    """What re-simulating every game of ``recorded`` (``load_row_games``') takes, in its board
    order: reset keys [G], the keys ``step_env`` got [G, T] and the actions [G, T] (-1 after a
    game's last; T the longest game's length)."""
    import numpy as np
    games = recorded["games"]
    length = max(len(game["actions"]) for game in games)
    actions = np.full((len(games), length), -1, np.int32)
    for index, game in enumerate(games):
        actions[index, :len(game["actions"])] = game["actions"]
    reset_keys, _, env_keys = game_keys(recorded["loop"], recorded["seed"], recorded["boards"],
                                        [game["board"] for game in games], length)
    return reset_keys, env_keys, actions


def check_ends(games: list, won, died) -> None:
    """Raise RecordedGamesError where a re-simulated game (``won``, ``died``: per game, at its
    last step) did not end as its evaluation says (won, died, or neither: cut by a limit)."""
    for index, game in enumerate(games):
        end = "won" if won[index] else "died" if died[index] else None
        said = game["end"]
        if end != (said if said in ("won", "died") else None):
            raise RecordedGamesError(f"board {game['board']} re-simulated ended "
                                     f"{end or 'alive'}; the evaluation says {said!r}", 1)


def load_row_env(path: str, row: str, env_id: str, why: str):
    """Row ``row`` of the evaluation file ``path`` (``load_row_games``) with the env its games
    were played in: (recorded, trainer env, env params). A row of an env other than
    ``env_id`` is refused (``why``: what only that env has)."""
    from purejaxrl import ppo
    from purejaxrl.policy import config_for_options
    recorded = load_row_games(path, row)
    if recorded["env"] != env_id:
        raise RecordedGamesError(f"row {row!r} is of env {recorded['env']!r}: {why}")
    env, env_params = ppo.make_env(config_for_options(recorded["env_options"], env_id))
    return recorded, env, env_params


def resimulate_row(args, env_id: str, why: str, resimulate, errors: tuple = ()):
    """The shared start of the scripts that re-simulate one recorded row (``args.evaluation``,
    ``args.row``, ``args.json``, ``args.overwrite``): refuse an output file that would be lost,
    load the row's games and env (``load_row_env``), run ``resimulate(recorded, env,
    env_params)`` (a dict with per-game ``won`` and ``died`` among its values) and check that
    every game ended as recorded (``check_ends``). Returns (recorded, found), or the exit code
    after one ``error:`` line on stderr (a RecordedGamesError or one of ``errors``, which carry
    ``code``)."""
    import sys
    from purejaxrl.output_paths import refuse_output_file
    if refuse_output_file(args.json, "--json", args.overwrite,
                          inputs=[("the evaluation", args.evaluation)]):
        return 2
    try:
        recorded, env, env_params = load_row_env(args.evaluation, args.row, env_id, why)
        found = resimulate(recorded, env, env_params)
        check_ends(recorded["games"], found["won"], found["died"])
    except (RecordedGamesError, *errors) as error:
        print(f"error: {error}", file=sys.stderr)
        return error.code
    return recorded, found
