"""Two evaluations on the same boards, compared board by board (``scripts/compare_evaluations.py``).

Every comparison of two policies in SPEC §4 plays both on the same held-out boards
(``evaluate.py --seed S --episodes N``), so board i is the same game for both and the
difference is measured game by game: the boards that are hard for one are hard for the other,
and the paired difference has a far smaller standard error than the difference of two means
(a few hundredths of a stage on 512 boards, against about 0.1 unpaired). From each summary's
per-board ``games`` (``evaluation.game_outcomes``):

* the judged quantity, the stage reached (the return where the env has no stages): both
  means, the mean of B - A with its standard error and a 95% interval (normal: the mean of
  hundreds of bounded differences), and the boards where B is ahead, behind, or level;
* wins (games that ended ``won``): each side's count, and the discordant boards (won by one
  side alone) with McNemar's exact two-sided p (the binomial test of the discordant split at
  1/2), the test of a difference in win rate that uses only the boards where they differ.

Refused (``PairError``, one line): summaries without per-board games, of another length, or
whose ``evaluation`` records name other boards (another env or seed: their board i is not the
same game), and summaries played under other rules where those decide how a game is judged
(the options of the env's own judgements, HackMatrix's R9 UNDO loop open in one and closed in
the other; another time limit). Other env options (the discount, the acquire macro) belong to
the policies being compared, and are listed.
No JAX here.
"""

from __future__ import annotations

import math
from typing import Optional

from envs.registry import judgements
from purejaxrl.pooling import Z_95, PoolError, board_set, check_games


def judging_options(env_id) -> set[str]:
    """The env options that change how a game is judged: the time limit (a game cut sooner
    ends sooner) and the options of the env's own judgements (``JUDGEMENTS``: HackMatrix's R9
    loop, whose wins are not honest ones). Where one differs, the same board is not the same
    game."""
    names = {"max_episode_steps"}
    if env_id:
        names |= {name for judgement in judgements(env_id) for name, _ in judgement.options}
    return names


class PairError(PoolError):
    """Two summaries that cannot be compared board by board; the message says why."""


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p: twice the binomial(n, 1/2) probability of a split at least
    as uneven as the observed one among the n = ``only_a + only_b`` discordant boards, at most
    1 (1 when there are none)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def _judged(games: dict) -> tuple[str, list]:
    return ("stage", games["stage"]) if "stage" in games else ("return", games["return"])


def check_pairable(a: tuple[str, dict], b: tuple[str, dict]) -> list[str]:
    """Raise ``PairError`` unless the two (name, summary) pairs played the same boards under
    the same judging rules; return notes on what else differs (other env options, a board set
    that could not be checked)."""
    notes = []
    for name, summary in (a, b):
        if "games" not in summary:
            raise PairError(f"{name}: no per-board games (evaluate.py --json writes them); it "
                            "cannot be compared board by board")
        try:
            check_games(name, summary["games"])
        except PoolError as error:
            raise PairError(str(error)) from None
    (name_a, summary_a), (name_b, summary_b) = a, b
    count_a, count_b = len(summary_a["games"]["end"]), len(summary_b["games"]["end"])
    if count_a != count_b:
        raise PairError(f"{name_a} has {count_a} games and {name_b} {count_b}: compare "
                        "evaluations of the same boards (the same --episodes and --seed)")
    if ("stage" in summary_a["games"]) != ("stage" in summary_b["games"]):
        raise PairError(f"one of {name_a} and {name_b} records stages and the other not: "
                        "evaluations of one env are compared")
    boards_a, boards_b = board_set(summary_a), board_set(summary_b)
    if boards_a is not None and boards_b is not None and boards_a != boards_b:
        raise PairError(f"{name_a} played env {boards_a[0]} seed {boards_a[1]} and {name_b} env "
                        f"{boards_b[0]} seed {boards_b[1]}: board i is not the same game")
    unchecked = [name for name, boards in ((name_a, boards_a), (name_b, boards_b))
                 if boards is None]
    if unchecked:
        notes.append(f"boards not checked (no evaluation record): {', '.join(unchecked)}")
    options_a = summary_a.get("env_options") or {}
    options_b = summary_b.get("env_options") or {}
    judging = judging_options((boards_a or boards_b or (None,))[0])
    for option in sorted(judging):
        if option in options_a and option in options_b and options_a[option] != options_b[option]:
            raise PairError(f"{name_a} and {name_b} were judged under other rules ({option}: "
                            f"{options_a[option]!r} against {options_b[option]!r})")
    others = sorted(key for key in set(options_a) & set(options_b)
                    if key not in judging and options_a[key] != options_b[key])
    if others:
        notes.append("the policies differ in env options " + ", ".join(
            f"{key} ({options_a[key]!r} / {options_b[key]!r})" for key in others))
    return notes


def compare(a: tuple[str, dict], b: tuple[str, dict]) -> dict:
    """B against A, board by board (module docstring), from two (name, summary) pairs."""
    notes = check_pairable(a, b)
    (name_a, summary_a), (name_b, summary_b) = a, b
    measure, values_a = _judged(summary_a["games"])
    _, values_b = _judged(summary_b["games"])
    n = len(values_a)
    differences = [float(y) - float(x) for x, y in zip(values_a, values_b)]
    mean = sum(differences) / n
    se = (math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1) / n)
          if n > 1 else float("nan"))
    won_a = [end == "won" for end in summary_a["games"]["end"]]
    won_b = [end == "won" for end in summary_b["games"]["end"]]
    only_a = sum(x and not y for x, y in zip(won_a, won_b))
    only_b = sum(y and not x for x, y in zip(won_a, won_b))
    return {
        "a": name_a, "b": name_b, "boards": n, "measure": measure,
        "mean_a": sum(map(float, values_a)) / n, "mean_b": sum(map(float, values_b)) / n,
        "difference": mean, "difference_se": se,
        "difference_95": [mean - Z_95 * se, mean + Z_95 * se],
        "boards_b_ahead": sum(d > 0 for d in differences),
        "boards_b_behind": sum(d < 0 for d in differences),
        "boards_level": sum(d == 0 for d in differences),
        "wins_a": sum(won_a), "wins_b": sum(won_b),
        "won_by_a_only": only_a, "won_by_b_only": only_b,
        "mcnemar_p": mcnemar_exact_p(only_a, only_b),
        "notes": notes,
    }


def format_comparison(compared: dict, row: Optional[str] = None) -> str:
    """The comparison as a few lines of text."""
    low, high = compared["difference_95"]
    head = f"{compared['b']} against {compared['a']}" + (f" ({row})" if row else "")
    lines = [
        head,
        f"  {compared['boards']} boards, {compared['measure']}: A {compared['mean_a']:.3f}, "
        f"B {compared['mean_b']:.3f}; B - A {compared['difference']:+.3f} (se "
        f"{compared['difference_se']:.3f}, 95% {low:+.3f} to {high:+.3f}); B ahead on "
        f"{compared['boards_b_ahead']}, behind on {compared['boards_b_behind']}, level on "
        f"{compared['boards_level']}",
        f"  wins: A {compared['wins_a']}, B {compared['wins_b']}; won by A alone "
        f"{compared['won_by_a_only']}, by B alone {compared['won_by_b_only']} (McNemar exact "
        f"p = {compared['mcnemar_p']:.3g})",
    ]
    lines += [f"  note: {note}" for note in compared["notes"]]
    return "\n".join(lines)
