"""``scripts/teacher_probe.py`` (SPEC §4.5): the overruled share at a minimum gain G is the
share of states whose teacher gain exceeds G (the teacher keeps the greedy move below it), and
bad input is one line and exit 2 before any work."""

import numpy as np

from tests.script_harness import exit_and_stderr, load_script

probe = load_script("teacher_probe")


def test_the_overruled_share_at_a_minimum_gain_counts_the_gains_above_it():
    """Gains 0, 0, 0.05, 0.3 (0 where the teacher agrees with the greedy move): half the
    states are overruled with no minimum, a quarter at 0.1, none at 0.5; the quantiles are
    those of the two overruling gains."""
    figures = probe.summarise(np.array([0.0, 0.0, 0.05, 0.3]), (0.0, 0.1, 0.5))
    assert figures["states"] == 4
    assert figures["overruled"] == {"0": 0.5, "0.1": 0.25, "0.5": 0.0}
    assert figures["gain_quantiles"]["0.5"] == np.quantile([0.05, 0.3], 0.5)
    assert probe.summarise(np.zeros(3), (0.0,))["gain_quantiles"] == {}


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    for args, message in ((["--checkpoint", str(tmp_path / "none")], "error:"),
                          (["--checkpoint", "x", "--rollouts", "1"], "--rollouts"),
                          (["--checkpoint", "x", "--min-gains", "-1"], "--min-gains"),
                          (["--checkpoint", "x", "--leaf", "bogus"], "invalid choice")):
        code, err = exit_and_stderr(probe.main, args, capsys)
        assert code == 2, err
        assert message in err and len(err.strip().splitlines()) == 1
