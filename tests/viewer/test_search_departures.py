"""scripts/search_departures.py: where a search row's moves differ from its network's greedy
moves, counted on the row's own games re-simulated on the evaluation's keys, with the
network's memory carried along them as the search's prior had it."""

import json

import pytest

from scripts import search_departures


@pytest.fixture(scope="module")
def rows(tiny_checkpoint, recorded_random_games, tmp_path_factory):
    """An evaluation file with two rows played through ``search.play_boards`` (a search row's
    loop): the tiny network's own greedy moves, and random moves, both on HackMatrix under the
    network's options."""
    import jax
    from purejaxrl import search
    from purejaxrl.evaluation import game_outcomes, network_policy
    from purejaxrl.policy import env_options_of, load_policy
    policy = load_policy(tiny_checkpoint)
    env, env_params = policy.built[:2]
    seed, boards, steps = 3, 4, 20
    played = jax.device_get(jax.jit(lambda k: search.play_boards(
        env, env_params, network_policy(env, policy.network, policy.params, True), k, boards,
        steps, 2, record_actions=True))(jax.random.PRNGKey(seed)))
    record = {"env": "hackmatrix", "episodes": boards, "checkpoint_update": 0}
    made = {
        "greedy": {"games": game_outcomes(played), "env_options": env_options_of(policy.config),
                   "loop": "boards", "evaluation": dict(record, seed=seed)},
        "random": {"games": recorded_random_games["games"],
                   "env_options": env_options_of(recorded_random_games["config"]),
                   "loop": "boards",
                   "evaluation": dict(record, seed=recorded_random_games["seed"])}}
    path = tmp_path_factory.mktemp("departures") / "eval.json"
    path.write_text(json.dumps(made))
    return path, made


def test_the_networks_own_greedy_games_depart_nowhere_and_random_ones_do(
        rows, tiny_checkpoint, tmp_path, capsys):
    """A row whose moves are the network's greedy moves departs at no state (the memory the
    script carries is the one the moves were chosen with); random moves depart at some. Every
    state is counted once, in the stage it was played in."""
    path, made = rows
    out = tmp_path / "greedy.json"
    assert search_departures.main([str(path), "--row", "greedy", "--checkpoint",
                                   tiny_checkpoint, "--json", str(out)]) == 0
    greedy = json.loads(out.read_text())
    lengths = made["greedy"]["games"]["length"]
    assert greedy["states"] == sum(lengths) > 0 and greedy["departures"] == 0
    assert "departs from the network's greedy move at 0 (0.00%)" in capsys.readouterr().out
    out = tmp_path / "random.json"
    assert search_departures.main([str(path), "--row", "random", "--checkpoint",
                                   tiny_checkpoint, "--json", str(out)]) == 0
    randomly = json.loads(out.read_text())
    assert randomly["states"] == sum(made["random"]["games"]["length"])
    assert 0 < randomly["departures"] <= randomly["states"]
    assert sum(row["states"] for row in randomly["per_stage"].values()) == randomly["states"]
    assert sum(randomly["departures_per_game"]) == randomly["departures"]
    assert sum(randomly["played_instead_of_greedy"].values()) == randomly["departures"]
    assert (randomly["won_games"]["departures"] + randomly["other_games"]["departures"]
            == randomly["departures"])


def test_another_networks_update_is_refused(rows, tiny_checkpoint, tmp_path, capsys):
    """The departures of a network the search did not use say nothing: a row whose evaluation
    names another update is refused with one line (exit 2)."""
    path, made = rows
    other = dict(made)
    other["greedy"] = dict(made["greedy"],
                           evaluation=dict(made["greedy"]["evaluation"], checkpoint_update=7))
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps(other))
    assert search_departures.main([str(bad), "--row", "greedy", "--checkpoint",
                                   tiny_checkpoint]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the row's search used the network of update 7")
    assert len(err.strip().splitlines()) == 1


def test_action_kinds_name_the_moves_the_siphon_each_program_and_the_macro():
    from envs.hackmatrix.core.constants import N_ACTIONS, PROGRAM_ACTION_OFFSET, PROGRAM_NAMES
    assert search_departures.action_kind(0) == "direction"
    assert search_departures.action_kind(4) == "siphon"
    assert search_departures.action_kind(PROGRAM_ACTION_OFFSET) == PROGRAM_NAMES[0].upper()
    assert search_departures.action_kind(N_ACTIONS) == "ACQUIRE (macro)"


def test_departures_are_counted_below_each_confidence_threshold():
    """A state counts as unsure below a threshold when the network gave its own greedy move
    less than that probability; each threshold's states and departures are exactly those
    (hand-made: 4 states of one game, two of them departures, at probabilities 0.4, 0.8, 0.96
    and 0.9995: the last departure is sure at every threshold; the padding after the game's end
    is never counted)."""
    import numpy as np
    found = {"played": np.array([[0, 1, 2, 3, -1]]), "greedy": np.array([[0, 2, 2, 1, 0]]),
             "stage": np.ones((1, 5), int),
             "confidence": np.array([[0.4, 0.8, 0.96, 0.9995, 0.1]])}
    counts = search_departures.tally(found, [{"end": "died"}])
    assert counts["states"] == 4 and counts["departures"] == 2
    assert counts["below_confidence"] == {
        "0.5": {"states": 1, "departures": 0}, "0.7": {"states": 1, "departures": 0},
        "0.9": {"states": 2, "departures": 1}, "0.95": {"states": 2, "departures": 1},
        "0.99": {"states": 3, "departures": 1}, "0.999": {"states": 3, "departures": 1}}
    assert "0.999:" in search_departures.format_report(counts)
