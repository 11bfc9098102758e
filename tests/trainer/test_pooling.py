"""Pooling evaluations on disjoint board sets (``purejaxrl/pooling.py``,
``scripts/pool_evaluations.py``): exact figures over the pooled games, the win rate's Wilson
interval, and refusal of board sets that overlap. Pure Python: no JAX compile."""

import json

import pytest

from purejaxrl.cli.pool_evaluations import main as pool_main
from purejaxrl.pooling import PoolError, pool, wilson_interval


def summary(ends, stages, seed=None, programs=0.0, invalid=0):
    """An evaluate.py --json summary of len(ends) games (only what pooling reads)."""
    n = len(ends)
    row = {"episodes": n, "stage_mean": sum(stages) / n, "programs_per_episode": programs,
           "invalid_actions": invalid,
           "games": {"end": list(ends), "stage": list(stages), "length": [10] * n,
                     "return": [1.0] * n}}
    if seed is not None:
        row["evaluation"] = {"env": "hackmatrix", "seed": seed, "episodes": n}
    return row


def test_the_wilson_interval_matches_its_published_values():
    """Wilson score interval, 95%: 0 of 10 -> [0, 0.2775]; 5 of 10 -> [0.2366, 0.7634]
    (Newcombe 1998, table I); it stays inside [0, 1] and is refused for impossible counts."""
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=5e-5)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=5e-5)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0) and wilson_interval(0, 10)[0] == 0
    with pytest.raises(PoolError):
        wilson_interval(3, 2)


def test_pooled_figures_are_those_of_all_the_games_together():
    """Two sets: stage mean, wins and deaths over the 6 games; the share reaching stage k is
    the games with stage >= k; a stage is cleared by moving past it or winning on it, and its
    clear rate is over the games that reached it; floats are weighted by each set's games,
    counts summed."""
    first = summary(["won", "died"], [3, 2], seed=1, programs=1.0, invalid=1)
    second = summary(["died", "died", "truncated", "died"], [1, 2, 3, 3], seed=2,
                     programs=4.0, invalid=2)
    pooled = pool([("a", first), ("b", second)])
    assert pooled["episodes"] == 6 and pooled["wins"] == 1
    assert pooled["stage_mean"] == pytest.approx(14 / 6)
    assert pooled["death_rate"] == pytest.approx(4 / 6)
    assert pooled["stage_reached"] == pytest.approx({"2": 5 / 6, "3": 3 / 6, "won": 1 / 6})
    # stage 1: 6 reach, 5 move on; stage 2: 5 reach, 3 move on; stage 3: 3 reach, 1 won.
    assert pooled["clear_rates"] == pytest.approx({"1": 5 / 6, "2": 3 / 5, "3": 1 / 3})
    assert pooled["programs_per_episode"] == pytest.approx((2 * 1.0 + 4 * 4.0) / 6)
    assert pooled["invalid_actions"] == 3
    assert pooled["win_interval"] == pytest.approx(list(wilson_interval(1, 6)))
    assert [s["seed"] for s in pooled["sets"]] == [1, 2] and pooled["unchecked"] == []


def test_overlapping_board_sets_are_refused():
    """The same env and seed play the same boards; identical per-board games are one
    evaluation given twice; a summary without per-board games cannot be pooled. A summary
    without its evaluation record is pooled and named as unchecked."""
    with pytest.raises(PoolError, match="same boards"):
        pool([("a", summary(["won"], [3], seed=7)), ("b", summary(["died"], [1], seed=7))])
    with pytest.raises(PoolError, match="same games"):
        pool([("a", summary(["won"], [3])), ("b", summary(["won"], [3]))])
    with pytest.raises(PoolError, match="no per-board games"):
        pool([("a", {"episodes": 1})])
    pooled = pool([("a", summary(["won"], [3], seed=7)), ("old", summary(["died"], [1]))])
    assert pooled["unchecked"] == ["old"]


def test_per_board_games_that_are_not_evaluate_pys_are_refused():
    """Pooling reads each game's end, length, return (and stage): a summary whose games are no
    such lists of one length, or hold no game, is one ``PoolError`` (until stop 81 a
    KeyError, AttributeError or division by zero)."""
    good = summary(["won"], [3], seed=1)
    for games in (3, {"end": ["won"]}, dict(good["games"], length=[10, 10]),
                  {"end": [], "stage": [], "length": [], "return": []}):
        with pytest.raises(PoolError, match="not evaluate.py's"):
            pool([("a", good), ("b", dict(summary(["died"], [2], seed=2), games=games))])


def test_evaluations_of_another_checkpoint_or_other_rules_are_refused():
    """Sets of one policy under one set of rules pool; a set played with R9's loop open beside
    one played with it closed (wins the loop bought in an "honest" rate), or by another
    checkpoint update, is refused naming the field; fields a set does not record are not
    compared."""
    def played(seed, update=190, **options):
        row = summary(["won", "died"], [8, seed], seed=seed)
        row["evaluation"].update(checkpoint_update=update, checkpoint_env_steps=update * 10)
        row["env_options"] = {"close_undo_exploit": True, "max_episode_steps": 2000, **options}
        return row
    assert pool([("a", played(1)), ("b", played(2))])["episodes"] == 4
    with pytest.raises(PoolError, match=r"env options.*close_undo_exploit': False"):
        pool([("a", played(1)), ("b", played(2, close_undo_exploit=False))])
    with pytest.raises(PoolError, match="checkpoint update"):
        pool([("a", played(1)), ("b", played(2, update=400))])
    older = summary(["died"], [2], seed=3)  # written before rows recorded their options
    assert pool([("a", played(1)), ("c", older)])["episodes"] == 3


def test_the_command_pools_the_shared_rows_and_refuses_bad_input_in_one_line(tmp_path,
                                                                              capsys):
    """Every row the inputs share is pooled (text and --json); an unreadable input, a file
    that is not an evaluation, a row missing from an input, and an output that is one of the
    inputs (even with --overwrite) or an existing output are each one ``error:`` line and exit
    2, with nothing written."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"search-16": summary(["won", "died"], [8, 5], seed=1)}))
    b.write_text(json.dumps({"search-16": summary(["died"], [4], seed=2)}))
    out = tmp_path / "pooled.json"
    assert pool_main([str(a), str(b), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "1 wins in 3 (33.3%; 95% interval" in text and "stage 5.67" in text
    assert json.loads(out.read_text())["search-16"]["episodes"] == 3
    (tmp_path / "not.json").write_text("[1, 2]")
    for argv, message in ((["missing.json"], "cannot read"),
                          ([str(tmp_path / "not.json")], "not an evaluate.py --json file"),
                          ([str(a), "--row", "greedy"], "row 'greedy' is not in every input"),
                          ([str(a), str(b), "--json", str(out)], "already exists"),
                          ([str(a), str(b), "--json", str(a), "--overwrite"],
                           "is one of the inputs")):
        assert pool_main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and message in err
    assert json.loads(a.read_text())["search-16"]["episodes"] == 2
