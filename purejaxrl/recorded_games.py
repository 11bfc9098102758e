"""Games an evaluation recorded (``evaluate.py --json --record-actions``, a search row's): one
row's games read back to be re-simulated on the evaluation's own keys
(``search.board_episode_keys``), by ``watch_agent.py --evaluation`` (drawn) and
``program_timeline.py`` (read). No JAX here: a file is checked before anything compiles."""

from __future__ import annotations

import json


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
    depend on it) and ``games``, per game the ``board``, its ``actions``, ``length`` and
    ``end`` (``evaluation.END_CAUSES``) as the evaluation says. ``ended``: only the games that
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
    games, made = summary.get("games", {}), summary.get("evaluation")
    if "actions" not in games or made is None or "env_options" not in summary:
        raise RecordedGamesError(f"row {row!r} of {path} kept no actions: evaluate it with "
                                 "--record-actions (and --json)")
    boards = list(range(len(games["actions"])))
    matching = None if ended is None else [b for b in boards if games["end"][b] == ended]
    if ended is not None:
        if not matching:
            raise RecordedGamesError(f"no game of row {row!r} ended {ended!r}", 1)
        boards = matching[:count or 1]
    elif first is not None:
        boards = boards[:first]
    return {"env": made.get("env"), "env_options": summary["env_options"],
            "seed": made["seed"], "boards": len(games["actions"]),
            "games": [{"board": b, "actions": games["actions"][b],
                       "length": games["length"][b], "end": games["end"][b]} for b in boards],
            "matching": matching}
