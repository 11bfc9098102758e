"""Comparing two evaluations of the same boards board by board (``purejaxrl/pairing.py``,
``scripts/compare_evaluations.py``): the paired stage difference and its standard error on
hand-computed games, McNemar's exact p against its binomial values, and refusal of
evaluations whose board i is not the same game (other boards, other judging rules). Pure
Python: no JAX compile."""

import json

import pytest

from purejaxrl.cli.compare_evaluations import main as compare_main
from purejaxrl.pairing import PairError, compare, mcnemar_exact_p


def summary(ends, stages, seed=1, **env_options):
    """An evaluate.py --json summary of len(ends) games (what pairing reads)."""
    n = len(ends)
    return {"episodes": n, "games": {"end": list(ends), "stage": list(stages),
                                     "length": [10] * n, "return": [1.0] * n},
            "evaluation": {"env": "hackmatrix", "seed": seed, "episodes": n},
            "env_options": {"close_undo_exploit": True, "max_episode_steps": None,
                            "gamma": 0.99, **env_options}}


def test_the_paired_difference_and_its_standard_error_are_those_of_the_boards():
    """Stages A 1 2 3 4 and B 2 2 5 4: differences 1 0 2 0, mean 0.75, sample standard
    deviation sqrt(2.75 / 3), standard error that over sqrt(4); B ahead on 2 boards, level on
    2; the 95% interval is the mean +- 1.96 standard errors."""
    a = summary(["died", "died", "died", "won"], [1, 2, 3, 4])
    b = summary(["died", "died", "won", "won"], [2, 2, 5, 4])
    result = compare(("a", a), ("b", b))
    se = (2.75 / 3) ** 0.5 / 2
    assert result["measure"] == "stage" and result["boards"] == 4
    assert (result["mean_a"], result["mean_b"]) == pytest.approx((2.5, 3.25))
    assert result["difference"] == pytest.approx(0.75)
    assert result["difference_se"] == pytest.approx(se)
    assert result["difference_95"] == pytest.approx([0.75 - 1.959964 * se, 0.75 + 1.959964 * se])
    assert (result["boards_b_ahead"], result["boards_b_behind"], result["boards_level"]) == (
        2, 0, 2)
    # Board 4 is won by both; board 3 by B alone.
    assert (result["wins_a"], result["wins_b"]) == (1, 2)
    assert (result["won_by_a_only"], result["won_by_b_only"]) == (0, 1)
    assert result["mcnemar_p"] == pytest.approx(1.0)


def test_mcnemar_exact_p_is_the_two_sided_binomial_test_of_the_discordant_split():
    """0 against 5 discordant boards: 2 x (1/2)^5 = 0.0625; 1 against 9: 2 x (1 + 10) / 1024;
    an even split and no discordant board give 1."""
    assert mcnemar_exact_p(0, 5) == pytest.approx(0.0625)
    assert mcnemar_exact_p(9, 1) == pytest.approx(22 / 1024)
    assert mcnemar_exact_p(3, 3) == 1.0 and mcnemar_exact_p(0, 0) == 1.0


def test_evaluations_whose_boards_are_not_the_same_games_are_refused():
    """Another seed or another number of games: board i is another game. R9's loop open in
    one and closed in the other, or another time limit: the same board is judged by other
    rules. No per-board games: nothing to pair. Another discount is the policies' own and
    is only noted."""
    a = summary(["died", "won"], [2, 8])
    with pytest.raises(PairError, match="seed 1 .* seed 2"):
        compare(("a", a), ("b", summary(["died", "won"], [2, 8], seed=2)))
    with pytest.raises(PairError, match="2 games and .* 3"):
        compare(("a", a), ("b", summary(["died"] * 3, [1, 1, 1])))
    with pytest.raises(PairError, match="close_undo_exploit"):
        compare(("a", a), ("b", summary(["died", "won"], [2, 8], close_undo_exploit=False)))
    with pytest.raises(PairError, match="max_episode_steps"):
        compare(("a", a), ("b", summary(["died", "won"], [2, 8], max_episode_steps=500)))
    with pytest.raises(PairError, match="no per-board games"):
        compare(("a", a), ("b", {"episodes": 2}))
    noted = compare(("a", a), ("b", summary(["won", "won"], [8, 8], gamma=0.999)))
    assert noted["notes"] == ["the policies differ in env options gamma (0.99 / 0.999)"]


def test_the_command_compares_every_shared_row_or_the_named_ones(tmp_path, capsys):
    """Without rows every row the two files share is compared with itself; with A:ROW B:ROW
    the named ones (two rows of one file too); --json writes the comparisons; a missing row,
    a row named on one side only and an output that is an input are refused with one line."""
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"checkpoint-greedy": summary(["died", "died"], [1, 2]),
                                 "search-16": summary(["won", "died"], [8, 3])}))
    second.write_text(json.dumps({"checkpoint-greedy": summary(["died", "won"], [3, 8])}))
    out = tmp_path / "compared.json"
    assert compare_main([str(first), str(second), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "b.json:checkpoint-greedy against a.json:checkpoint-greedy" in printed
    assert "B - A +4.000" in printed
    [row] = json.loads(out.read_text())
    assert row["difference"] == pytest.approx(4.0) and row["won_by_b_only"] == 1
    assert compare_main([f"{first}:checkpoint-greedy", f"{first}:search-16"]) == 0
    assert "a.json:search-16 against a.json:checkpoint-greedy" in capsys.readouterr().out
    for argv, message in (
            ([f"{first}:nothing", f"{second}:checkpoint-greedy"], "has no row 'nothing'"),
            ([f"{first}:search-16", str(second)], "on both inputs"),
            ([str(first), str(second), "--json", str(first), "--overwrite"],
             "is one of the inputs")):
        capsys.readouterr()
        assert compare_main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and message in err[0], err
