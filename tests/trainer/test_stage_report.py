"""Evaluation's per-stage report (purejaxrl/evaluation.py ``stage_report``), on hand-made
per-game results and on HackMatrix games played by the heuristic."""

import jax
import numpy as np
import pytest

from envs import registry
from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.evaluation import (END_CAUSES, end_causes, format_stage_report, game_outcomes,
                                  play_episodes, stage_report)

STAGE_BINS = 4  # stages 0..3


def hand_made_results():
    """Four games: one dies on stage 1, one is cut by the time limit on stage 2, one dies on
    stage 3 with 2 credits left, one wins on stage 3 (the last stage here)."""
    steps = np.zeros((4, STAGE_BINS), np.int32)
    steps[0, 1] = 5
    steps[1, 1:3] = (4, 10)
    steps[2, 1:4] = (3, 3, 8)
    steps[3, 1:4] = (2, 2, 2)
    programs = np.zeros_like(steps)
    programs[3, 3] = 2
    return {"stage": np.array([1, 2, 3, 3]), "won": np.array([0, 0, 0, 1], bool),
            "died": np.array([1, 0, 1, 0], bool), "truncated": np.array([0, 1, 0, 0], bool),
            "invalid": np.zeros(4, bool), "finished": np.ones(4, bool),
            "stage_steps": steps, "stage_programs": programs,
            "end_credits": np.array([0, 1, 2, 7]), "length": np.array([5, 14, 14, 6]),
            "episode_return": np.array([0.5, 1.25, -1.0, 9.0], np.float32)}


def test_every_game_has_exactly_one_end_cause():
    causes = end_causes(hand_made_results())
    assert set(causes) == set(END_CAUSES)
    assert np.all(sum(flags.astype(int) for flags in causes.values()) == 1)


def test_game_outcomes_list_each_board_in_order_with_its_one_end_cause():
    """The JSON's per-board list: game i's end cause, length, return and stage, in the
    evaluation's board order (so two rows compare board by board)."""
    games = game_outcomes(hand_made_results())
    assert games == {"end": ["died", "truncated", "died", "won"], "length": [5, 14, 14, 6],
                     "return": [0.5, 1.25, -1.0, 9.0], "stage": [1, 2, 3, 3]}


def test_stage_rows_count_reach_clear_and_how_games_end_there():
    """Reaching a stage = ending on it or later; clearing it = moving past it, or winning on
    it; a game that ends on a stage without clearing it is counted by its end cause there;
    steps and programs are means over the games that reached the stage; resources are means
    over the games that ended there."""
    rows = stage_report(hand_made_results(), num_stages=3)
    assert [r["reached"] for r in rows] == [1.0, 0.75, 0.5]
    assert [r["cleared"] for r in rows] == [0.75, 0.5, 0.25]
    assert rows[2]["clear_rate"] == 0.5
    assert rows[0]["ended"] == {"died": 1, "truncated": 0, "invalid": 0, "terminated": 0,
                                "unfinished": 0}
    assert rows[1]["ended"]["truncated"] == 1
    assert rows[2]["ended"]["died"] == 1  # the won game is not an end on stage 3
    assert rows[1]["steps_mean"] == pytest.approx((10 + 3 + 2) / 3)
    assert rows[2]["programs_mean"] == 1.0
    assert rows[2]["end_credits"] == 2.0 and rows[0]["end_credits"] == 0.0
    text = format_stage_report(rows)
    assert len(text.splitlines()) == 4 and "end_credits" in text and "programs" in text


def test_an_env_without_a_cause_never_ends_by_it_and_one_without_stages_has_no_report():
    """A cause the env has no metric for is never true; a game the env ended (finished, not
    truncated) by none of its named causes is "terminated", not "unfinished" (CartPole's
    fallen pole: no won or died metric)."""
    results = hand_made_results()
    del results["died"], results["invalid"]
    causes = end_causes(results)
    assert not causes["died"].any() and not causes["invalid"].any()
    assert causes["truncated"].tolist() == [False, True, False, False]
    assert causes["terminated"].tolist() == [True, False, True, False]
    plain = {"finished": np.array([1, 1, 0], bool), "truncated": np.array([0, 1, 0], bool),
             "length": np.array([9, 500, 500]), "episode_return": np.zeros(3)}
    assert game_outcomes(plain)["end"] == ["terminated", "truncated", "unfinished"]
    assert stage_report(plain) == []


@pytest.mark.slow  # extended suite (pytest -m slow)
def test_heuristic_games_report_consistent_stages_and_resources():
    """On HackMatrix (a few heuristic games): the report's stage-1 reach is 1, reach never
    grows with the stage, the ended games of all stages add up to the games that did not win,
    and the steps per stage add up to the episode lengths."""
    env = TrainerEnv(*registry.make("hackmatrix", close_undo_exploit=True))
    results = jax.device_get(jax.jit(lambda key: play_episodes(
        env, env.default_params, env.heuristic_policy(), key, 8, 400))(
            jax.random.PRNGKey(3)))
    rows = stage_report(results, env.num_stages)
    assert len(rows) == env.num_stages and rows[0]["reached"] == 1.0
    assert all(a["reached"] >= b["reached"] for a, b in zip(rows, rows[1:]))
    ended = sum(sum(r["ended"].values()) for r in rows)
    assert ended == int(np.sum(~np.asarray(results["won"])))
    np.testing.assert_array_equal(np.sum(results["stage_steps"], axis=1), results["length"])
    assert {"end_hp", "end_credits", "end_energy", "end_programs_owned", "end_enemies",
            "end_siphon_enemies", "end_transmissions"} <= set(rows[0])
    # The heuristic never siphons, so no enemy of its games came from a siphon.
    assert all(row["end_siphon_enemies"] in (None, 0.0) for row in rows)
    assert any((row["end_enemies"] or 0) > 0 for row in rows)


def test_the_training_evaluator_plays_greedy_and_sampled_on_the_same_boards(monkeypatch):
    """The trainer's periodic evaluation plays both modes from one key, so that its greedy and
    sampled figures compare game by game as ``evaluate.py``'s do (until stop 81 each mode had
    its own key, hence its own boards). The games are replaced by the key they were played
    from."""
    import purejaxrl.evaluation as evaluation

    def keys_instead_of_games(env, env_params, policy, key, num_envs, max_steps):
        return jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype,
                                                                  jax.dtypes.prng_key) else key
    monkeypatch.setattr(evaluation, "play_episodes", keys_instead_of_games)
    evaluate = evaluation.make_training_evaluator(None, None, network=object(), num_envs=2,
                                                  max_steps=3)
    played = evaluate({}, jax.random.PRNGKey(7))
    np.testing.assert_array_equal(played["greedy"], played["sampled"])
