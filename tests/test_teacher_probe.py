"""``scripts/teacher_probe.py`` (SPEC §4.5): the overruled share at a minimum gain G is the
share of states whose teacher gain exceeds G (the teacher keeps the greedy move below it); the
tree teacher's group shares are each group's mean mass under the network and under the
target, over all states and over the acquiring ones; bad input is one line and exit 2 before
any work."""

import numpy as np
import pytest

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


def test_group_shares_are_each_groups_mean_mass_over_the_states_counted():
    """Three actions in two groups (moves 0-1, siphon 2), two states: the policy puts 0.2 and
    0.6 on the siphon, the target 0.5 and 0.0; over both states the siphon's share is their
    mean (0.4 against 0.25), over the acquiring state alone its own (0.6 against 0.0); without a
    siphon group its mass is ``other``; a selection that holds nowhere counts no state."""
    policy = np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]])
    target = np.array([[0.25, 0.25, 0.5], [1.0, 0.0, 0.0]])
    matrix = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    shares = probe.group_shares(policy, target, matrix, ["move", "siphon"],
                                np.array([False, True]))
    assert shares["all"]["states"] == 2
    assert np.isclose(shares["all"]["policy"]["siphon"], 0.4)
    assert np.isclose(shares["all"]["target"]["siphon"], 0.25)
    assert np.isclose(shares["all"]["target"]["move"], 0.75)
    assert np.isclose(shares["all"]["policy"]["other"], 0.0)
    outside = probe.group_shares(policy, target, matrix[:, :1], ["move"], None)  # no siphon group
    assert np.isclose(outside["all"]["policy"]["other"], 0.4)
    assert shares["acquire"]["states"] == 1
    assert np.isclose(shares["acquire"]["policy"]["siphon"], 0.6)
    assert np.isclose(shares["acquire"]["target"]["siphon"], 0.0)
    assert probe.group_shares(policy, target, matrix, ["move", "siphon"],
                              np.zeros(2, bool))["acquire"] is None
    assert probe.group_shares(policy, target, matrix, ["move", "siphon"], None)["acquire"] is None


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    for args, message in ((["--checkpoint", str(tmp_path / "none")], "error:"),
                          (["--checkpoint", "x", "--rollouts", "1"], "--rollouts"),
                          (["--checkpoint", "x", "--min-gains", "-1"], "--min-gains"),
                          (["--checkpoint", "x", "--leaf", "bogus"], "invalid choice"),
                          (["--checkpoint", "x", "--teacher", "tree", "--simulations", "0"],
                           "--simulations"),
                          (["--checkpoint", "x", "--teacher", "bogus"], "invalid choice")):
        code, err = exit_and_stderr(probe.main, args, capsys)
        assert code == 2, err
        assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_the_tree_teacher_probe_runs_the_trainers_teacher_on_a_checkpoint(tmp_path, capsys):
    """On a checkpoint (a GRU at initialisation, 4 envs), ``--teacher tree`` labels every
    env's state and reports shares that are distributions: each side's groups, the mass
    outside them included, sum to 1 over every state, and the KL is not negative."""
    import json

    from purejaxrl.config import TrainConfig
    from tests.initial_checkpoint import save_initial_checkpoint
    config = TrainConfig(num_envs=4, num_steps=8, total_timesteps=32, num_minibatches=1,
                         update_epochs=1, hidden_width=8, hidden_depth=1, core_width=8,
                         max_episode_steps=20)
    run_dir = save_initial_checkpoint(config, str(tmp_path / "run"), "run")
    out = tmp_path / "probe.json"
    assert probe.main(["--checkpoint", run_dir, "--teacher", "tree", "--simulations", "2",
                       "--worlds", "1", "--leaf", "game", "--envs", "8",
                       "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["states"] == 4 and figures["groups"]["all"]["states"] == 4
    for side in ("policy", "target"):
        shares = figures["groups"]["all"][side]
        assert set(shares) == {"direction", "siphon", "program", "other"}
        assert abs(sum(shares.values()) - 1.0) < 1e-5 and min(shares.values()) > -1e-6
    assert figures["kl_mean"] >= -1e-6
    assert "every labelled state (4 states)" in capsys.readouterr().out
