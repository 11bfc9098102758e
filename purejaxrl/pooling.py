"""Several evaluations of one policy on disjoint board sets, read as one evaluation on all of
their boards (``scripts/pool_evaluations.py``).

A search row costs an hour a board set on a CPU, so its figures are made one set of 64 boards at
a time (``evaluate.py --episodes 64 --seed S``, one JSON per set); what judges the policy is the
figure over all the sets, with its uncertainty. Pooling works from each summary's per-board
``games`` (``evaluation.game_outcomes``: how each game ended, its stage, length and return), so
the stage mean, the wins, the shares reaching each stage and the clear rates are exact over the
pooled games, not means of means; the summary's other figures (programs per game, siphons, the
R9 count) are means weighted by each set's games, its counts are summed. The win rate carries a
Wilson score interval (95%), the interval that stays honest at rates near 0 and small samples.

Boards must differ between the sets: two summaries evaluated with the same env and seed (their
``evaluation`` record, written by ``evaluate.py``) play the same boards, and two with the same
per-board outcomes are one evaluation given twice; both are refused. The policy and the rules
must not: summaries of other checkpoints (update or env steps) or played under other env
options (R9's loop open in one, closed in another; another time limit) are refused. A summary
written before the record existed cannot be checked, and the pooled result says which are
unchecked.
No JAX here.
"""

from __future__ import annotations

import math
from typing import Optional

# z of a two-sided 95% interval.
Z_95 = 1.959963984540054


class PoolError(ValueError):
    """Summaries that cannot be pooled; the message says which and why (one line)."""


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial rate (Wilson 1927): centre
    (p + z^2/2n) / (1 + z^2/n), half-width z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n)."""
    if trials < 1 or not 0 <= successes <= trials:
        raise PoolError(f"a rate needs 0 <= successes <= trials >= 1, got {successes} of "
                        f"{trials}")
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def board_set(summary: dict) -> Optional[tuple]:
    """(env, seed) of the boards a summary was evaluated on, from its ``evaluation`` record;
    None for a summary written before the record existed."""
    record = summary.get("evaluation")
    if not record or record.get("seed") is None:
        return None
    return record.get("env"), record["seed"]


def check_games(name: str, games) -> None:
    """Raise ``PoolError`` unless ``games`` is evaluate.py's per-board record: ``end``,
    ``length`` and ``return`` (and ``stage`` where the env has stages) lists of one length,
    at least one game."""
    fields = [field for field in ("end", "length", "return", "stage")
              if field != "stage" or field in (games if isinstance(games, dict) else {})]
    if not isinstance(games, dict) or not all(isinstance(games.get(f), list) for f in fields) \
            or len({len(games[f]) for f in fields}) != 1 or not games["end"]:
        raise PoolError(f"{name}: its per-board games are not evaluate.py's (lists "
                        f"{', '.join(fields)} of one length, at least one game)")


def check_disjoint(named: list[tuple[str, dict]]) -> list[str]:
    """Raise ``PoolError`` where two of the (name, summary) pairs played the same boards (the
    same env and seed) or are the same evaluation (identical per-board outcomes); return the
    names whose boards could not be checked (no ``evaluation`` record)."""
    seen_boards, seen_games, unchecked = {}, {}, []
    for name, summary in named:
        if "games" not in summary:
            raise PoolError(f"{name}: no per-board games (evaluate.py --json writes them); "
                            "it cannot be pooled")
        check_games(name, summary["games"])
        games = repr(sorted(summary["games"].items()))
        if games in seen_games:
            raise PoolError(f"{name} and {seen_games[games]} hold the same games: one "
                            "evaluation given twice")
        seen_games[games] = name
        boards = board_set(summary)
        if boards is None:
            unchecked.append(name)
        elif boards in seen_boards:
            raise PoolError(f"{name} and {seen_boards[boards]} played the same boards "
                            f"(env {boards[0]}, seed {boards[1]}): pool disjoint board sets")
        else:
            seen_boards[boards] = name
    return unchecked


def _policy_and_rules(summary: dict) -> dict:
    """What must be equal between pooled summaries, of what the summary records: the
    checkpoint's update and env steps and the env options it played under."""
    record = summary.get("evaluation") or {}
    known = {"checkpoint update": record.get("checkpoint_update", _ABSENT),
             "checkpoint env steps": record.get("checkpoint_env_steps", _ABSENT),
             "env options": summary.get("env_options", _ABSENT)}
    return {key: value for key, value in known.items() if value is not _ABSENT}


_ABSENT = object()


def check_one_policy(named: list[tuple[str, dict]]) -> None:
    """Raise ``PoolError`` where two of the (name, summary) pairs were played by another
    checkpoint or under other env options (fields a summary does not record are not
    compared)."""
    first_name, first = named[0]
    reference = _policy_and_rules(first)
    for name, summary in named[1:]:
        for key, value in _policy_and_rules(summary).items():
            if key in reference and value != reference[key]:
                shown = {k: v for k, v in value.items() if reference[key].get(k) != v} \
                    if isinstance(value, dict) and isinstance(reference[key], dict) else value
                raise PoolError(f"{name} and {first_name} differ in their {key} ({name}: "
                                f"{shown}): pool evaluations of one policy under one set of "
                                "rules")


def pool(named: list[tuple[str, dict]]) -> dict:
    """One summary over the games of every (name, summary) pair (``evaluate.py --json``
    summaries of one policy, one per board set): ``episodes``; ``stage_mean``, ``win_rate``,
    ``death_rate``, ``length_mean`` and ``return_mean`` over the pooled games; ``wins`` and
    ``win_interval`` (Wilson, 95%); for an env with stages ``stage_reached`` (share of games
    reaching each stage after the first, and won) and ``clear_rates`` (per stage: games
    clearing it / games reaching it); every other float a summary holds, weighted by its
    games; every int, summed; ``sets``, one line per input (name, seed, episodes, stage mean,
    wins); ``unchecked``, the inputs whose boards could not be checked."""
    if not named:
        raise PoolError("nothing to pool")
    unchecked = check_disjoint(named)
    check_one_policy(named)
    ends = [end for _, s in named for end in s["games"]["end"]]
    episodes = len(ends)
    wins = ends.count("won")
    pooled = {"episodes": episodes, "wins": wins, "win_rate": wins / episodes,
              "win_interval": list(wilson_interval(wins, episodes)),
              "death_rate": ends.count("died") / episodes,
              "length_mean": _mean(named, "length"), "return_mean": _mean(named, "return")}
    staged = all("stage" in s["games"] for _, s in named)
    if staged:
        stages = [stage for _, s in named for stage in s["games"]["stage"]]
        pooled["stage_mean"] = sum(stages) / episodes
        top = max(stages)
        pooled["stage_reached"] = {str(k): sum(stage >= k for stage in stages) / episodes
                                   for k in range(2, top + 1)}
        pooled["stage_reached"]["won"] = wins / episodes
        pooled["clear_rates"] = {}
        for k in range(1, top + 1):
            reached = sum(stage >= k for stage in stages)
            cleared = sum(stage > k or (stage == k and end == "won")
                          for stage, end in zip(stages, ends))
            pooled["clear_rates"][str(k)] = cleared / reached if reached else None
    summaries = [s for _, s in named]
    for key in summaries[0]:
        if key in pooled or not all(key in s for s in summaries):
            continue
        values = [s[key] for s in summaries]
        if all(isinstance(v, bool) for v in values):
            continue
        if all(isinstance(v, int) for v in values):
            pooled[key] = sum(values)
        elif all(isinstance(v, (int, float)) for v in values):
            pooled[key] = sum(v * len(s["games"]["end"]) for v, s in zip(values, summaries)) \
                / episodes
    pooled["sets"] = [{"name": name, "seed": (board_set(s) or (None, None))[1],
                       "episodes": len(s["games"]["end"]),
                       "stage_mean": (sum(s["games"]["stage"]) / len(s["games"]["end"])
                                      if staged else None),
                       "wins": s["games"]["end"].count("won")} for name, s in named]
    pooled["unchecked"] = unchecked
    return pooled


def _mean(named: list[tuple[str, dict]], field: str) -> float:
    values = [value for _, s in named for value in s["games"][field]]
    return sum(values) / len(values)


def format_pooled(row: str, pooled: dict) -> str:
    """A pooled row as text: one line per board set, the pooled line with the win interval,
    then the shares reaching each stage and the clear rates."""
    staged = "stage_mean" in pooled
    lines = [f"{row}: {len(pooled['sets'])} board sets, {pooled['episodes']} games"]
    for line in pooled["sets"]:
        seed = "seed ?" if line["seed"] is None else f"seed {line['seed']}"
        stage = f"stage {line['stage_mean']:.2f}, " if staged else ""
        lines.append(f"  {line['name']} ({seed}): {line['episodes']} games, {stage}"
                     f"{line['wins']} wins")
    low, high = pooled["win_interval"]
    stage = f"stage {pooled['stage_mean']:.2f}, " if staged else ""
    lines.append(f"  pooled: {stage}{pooled['wins']} wins in {pooled['episodes']} "
                 f"({pooled['win_rate']:.1%}; 95% interval {low:.1%} to {high:.1%}), "
                 f"deaths {pooled['death_rate']:.1%}, length {pooled['length_mean']:.0f}")
    if staged:
        reach = " / ".join(f"{share:.1%}" for k, share in pooled["stage_reached"].items()
                           if k != "won")
        clears = " / ".join("-" if rate is None else f"{rate:.0%}"
                            for rate in pooled["clear_rates"].values())
        lines.append(f"  reach stages 2..{len(pooled['stage_reached'])}: {reach}")
        lines.append(f"  clear rates, stages 1..{len(pooled['clear_rates'])}: {clears}")
    if pooled["unchecked"]:
        lines.append("  boards not checked for overlap (no evaluation record, written before "
                     f"it existed): {', '.join(pooled['unchecked'])}")
    return "\n".join(lines)
