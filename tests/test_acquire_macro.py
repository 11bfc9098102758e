"""The acquire macro (``HackMatrix(acquire_macro=True)``, ``envs/hackmatrix/acquire_macro.py``):
action 28 plays the next move of a plan, read from the observation, to siphon a program block
the player does not own; the game itself is unchanged."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix import HackMatrix, build_observation, set_state
from envs.hackmatrix.acquire_macro import macro_action
from envs.hackmatrix.core.constants import ACTION_SIPHON, N_ACTIONS, PROGRAM_ACTION_OFFSET, \
    PROGRAM_NAMES

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3  # up = row + 1
MACRO = N_ACTIONS
PLAIN = HackMatrix(close_undo_exploit=True)
WITH_MACRO = HackMatrix(close_undo_exploit=True, acquire_macro=True)
_macro = jax.jit(lambda state: macro_action(build_observation(state)))


def _board(player=None, blocks=None, **changes):
    scenario = {"player": player or {"row": 0, "col": 0, "dataSiphons": 1},
                "blocks": blocks if blocks is not None else
                [{"row": 0, "col": 3, "type": "program", "programType": "reset"}]}
    return set_state({**scenario, **changes})


def _plan(state):
    offered, action = _macro(state)
    return bool(offered), int(action)


def test_with_a_siphon_the_macro_walks_the_shortest_path_then_siphons():
    """A reset block at (0,3), the player at (0,0) with a data siphon: the cells beside the block
    are (0,2), (0,4) and (1,3); the nearest is (0,2), two moves right; there the macro
    siphons (game-rules §6: the cross takes the block beside the player)."""
    assert _plan(_board()) == (True, RIGHT)
    assert _plan(_board(player={"row": 0, "col": 2, "dataSiphons": 1})) == (True, ACTION_SIPHON)
    # From (2,3) the nearest target is (1,3), one move down (row - 1).
    assert _plan(_board(player={"row": 2, "col": 3, "dataSiphons": 1})) == (True, DOWN)


def test_blocks_are_walked_around():
    """A wall of data blocks on column 1, rows 0-4: from (0,0) the only way to the reset block's
    side runs up column 0 to row 5, so the first move is up."""
    wall = [{"row": r, "col": 1, "type": "data"} for r in range(5)]
    reset = {"row": 0, "col": 3, "type": "program", "programType": "reset"}
    assert _plan(_board(blocks=wall + [reset])) == (True, UP)


def test_without_a_siphon_the_macro_heads_for_a_floor_data_siphon():
    """No data siphon in hand: the plan walks to the nearest floor data siphon first (walking
    onto it collects one, game-rules §5); a siphon on (3,0) is three moves up from (0,0)."""
    state = _board(player={"row": 0, "col": 0},
                   resources=[{"row": 3, "col": 0, "dataSiphon": True}])
    assert _plan(state) == (True, UP)


def test_the_macro_is_not_offered_without_a_program_to_take():
    """Not offered: no program block; a program already owned; a siphoned block; a question
    block (its program is hidden: the plan reads the observation only); no siphon in hand
    and none on the floor."""
    reset = {"row": 0, "col": 3, "type": "program", "programType": "reset"}
    question = _board()
    cell = 0 * 6 + 3
    question = question.replace(grid=question.grid.replace(
        question=question.grid.question.at[cell].set(True)))
    for name, state in {
            "no program block": _board(blocks=[{"row": 0, "col": 3, "type": "data"}]),
            "owned": _board(ownedPrograms=[PROGRAM_ACTION_OFFSET + PROGRAM_NAMES.index("reset")]),
            "siphoned": _board(blocks=[{**reset, "siphoned": True}]),
            "question": question,
            "no siphon anywhere": _board(player={"row": 0, "col": 0})}.items():
        assert not _plan(state)[0], name


def test_the_pool_narrows_the_programs_the_macro_goes_for():
    """``acquire_macro_pool``: from (0,0), a warp block at (2,0) has its side (1,0) one move up,
    and a reset block at (0,3) its side (0,2) two moves right. With no pool the macro goes
    for warp (nearer); with a pool of reset, for reset; with a pool of reset and only warp on
    the board it is not offered. A pool without the macro, or an unknown name, is refused."""
    warp = {"row": 2, "col": 0, "type": "program", "programType": "warp"}
    reset = {"row": 0, "col": 3, "type": "program", "programType": "reset"}
    state = _board(blocks=[warp, reset])
    pooled = HackMatrix(acquire_macro=True, acquire_macro_pool=("reset",))
    # No pool: (1,0), beside warp, is one move up; the pool of reset: (0,2), two moves right.
    assert bool(WITH_MACRO.observe(state).action_mask[MACRO])
    assert bool(pooled.observe(state).action_mask[MACRO])
    assert int(WITH_MACRO.played_action(state, MACRO)) == UP
    assert int(pooled.played_action(state, MACRO)) == RIGHT
    only_warp = _board(blocks=[warp])
    assert not bool(pooled.observe(only_warp).action_mask[MACRO])
    for options, message in (({"acquire_macro_pool": ("reset",)}, "needs acquire_macro"),
                             ({"acquire_macro": True, "acquire_macro_pool": ("resett",)},
                              "acquire_macro_pool must name distinct programs")):
        try:
            HackMatrix(**options)
        except ValueError as error:
            assert message in str(error)
        else:
            raise AssertionError(f"{options} accepted")


def test_from_a_stage_on_the_macro_is_held_back_on_the_earlier_stages():
    """``acquire_macro_from_stage`` K: on stages before K the macro is not offered (and action 28
    plays 28, an invalid action), from K on it is offered and plays the plan's move, on the
    same board; K outside 1..8, or K > 1 without the macro, is refused."""
    from_three = HackMatrix(acquire_macro=True, acquire_macro_from_stage=3)
    board = _board()
    for stage, offered in ((1, False), (2, False), (3, True), (8, True)):
        state = board.replace(stage=jnp.int32(stage))
        assert bool(from_three.observe(state).action_mask[MACRO]) is offered, stage
        assert bool(WITH_MACRO.observe(state).action_mask[MACRO]), stage
        assert int(from_three.played_action(state, MACRO)) == (RIGHT if offered else MACRO)
    for options, message in (({"acquire_macro_from_stage": 3}, "needs acquire_macro"),
                             ({"acquire_macro": True, "acquire_macro_from_stage": 0},
                              "must be a stage, 1..8"),
                             ({"acquire_macro": True, "acquire_macro_from_stage": 9},
                              "must be a stage, 1..8")):
        with pytest.raises(ValueError, match=message):
            HackMatrix(**options)


def test_the_mask_offers_the_macro_and_the_step_plays_its_move():
    """With the option the action space and the mask have 29 entries, the last one the macro's
    offer; stepping 28 is stepping the move it plays (same state, reward and observation, the
    played action in ``info``), and a policy that takes it twice then once more owns reset."""
    params = WITH_MACRO.default_params
    state = _board()
    obs = WITH_MACRO.observe(state)
    assert WITH_MACRO.action_space(params).n == 29 and obs.action_mask.shape == (29,)
    assert bool(obs.action_mask[MACRO])
    np.testing.assert_array_equal(obs.action_mask[:N_ACTIONS], build_observation(state).action_mask)
    step = jax.jit(WITH_MACRO.step_env)
    key = jax.random.PRNGKey(3)
    by_macro = step(key, state, MACRO, params)
    by_move = step(key, state, RIGHT, params)
    for a, b in zip(jax.tree.leaves(by_macro[:4]), jax.tree.leaves(by_move[:4])):
        np.testing.assert_array_equal(a, b)
    assert int(by_macro[4]["action_played"]) == RIGHT
    state = by_macro[1]
    for _ in range(2):
        _, state, _, done, info = step(key, state, MACRO, params)
        assert not bool(done)
    assert int(info["action_played"]) == ACTION_SIPHON
    assert bool(state.owned[PROGRAM_NAMES.index("reset")])


def test_batched_lanes_plan_only_where_the_macro_is_taken():
    """Under vmap only the lanes that take the macro run its plan (``sparse_update``): each
    lane's played action equals the lane played alone, the macro's move where offered, 28
    where not, and any other action unchanged."""
    offered, refused = _board(), _board(blocks=[])
    lanes = [(offered, MACRO, RIGHT), (refused, MACRO, MACRO), (offered, LEFT, LEFT),
             (refused, UP, UP), (offered, ACTION_SIPHON, ACTION_SIPHON)]
    states = jax.tree.map(lambda *leaves: jnp.stack(leaves), *[lane[0] for lane in lanes])
    actions = jnp.asarray([lane[1] for lane in lanes], jnp.int32)
    played = jax.jit(jax.vmap(WITH_MACRO.played_action))(states, actions)
    np.testing.assert_array_equal(played, [lane[2] for lane in lanes])
    alone = jax.jit(WITH_MACRO.played_action)
    for state, action, expected in lanes:
        assert int(alone(state, action)) == expected


def test_the_macro_where_it_is_not_offered_is_an_invalid_action():
    """Played where the mask refuses it, the macro is an invalid action like any other masked
    one (decisions R4: the episode terminates, the game state does not change)."""
    state = _board(blocks=[])
    params = WITH_MACRO.default_params
    _, after, _, done, info = jax.jit(WITH_MACRO.step_env)(jax.random.PRNGKey(0), state, MACRO,
                                                            params)
    assert bool(info["invalid_action"]) and bool(done)
    np.testing.assert_array_equal(after.player.row, state.player.row)
    np.testing.assert_array_equal(after.player.col, state.player.col)


def test_without_the_option_the_env_is_the_game():
    """Off (the default): 28 actions, a 28-entry mask, and random play gives the same
    observations as the env with the option less its last mask entry, on the same keys (the
    option adds an action and changes nothing else)."""
    params = PLAIN.default_params
    assert PLAIN.action_space(params).n == N_ACTIONS

    def play(env):
        def body(carry, key):
            obs, state = carry
            k_act, k_step = jax.random.split(key)
            mask = obs.action_mask[:N_ACTIONS]
            action = jax.random.categorical(k_act, jnp.where(mask, 0.0, -jnp.inf))
            obs, state, reward, _, _, info = env.step(k_step, state, action, params)
            return (obs, state), (obs.grid, obs.action_mask[:N_ACTIONS], reward)
        obs, state = env.reset(jax.random.PRNGKey(5), params)
        return jax.lax.scan(body, (obs, state), jax.random.split(jax.random.PRNGKey(6), 12))[1]

    for a, b in zip(jax.jit(lambda: play(PLAIN))(), jax.jit(lambda: play(WITH_MACRO))()):
        np.testing.assert_array_equal(a, b)


def test_a_watched_game_names_the_macro_counts_its_siphons_and_replays():
    """The viewer's episode loop (``viz.replay``) with the option: the policy sees the 29-entry
    mask, a frame names the macro, the summary counts the siphons the macro played, and the
    recorded actions (macros included) replay to the same states."""
    from envs.hackmatrix.viz.render_text import action_name
    from envs.hackmatrix.viz.replay import Simulator, run_episode, verify_replay

    def take_macro(params, key, obs, greedy):
        del params, key, greedy
        assert obs.action_mask.shape == (MACRO + 1,)
        mask = obs.action_mask
        return {"action": jnp.where(mask[MACRO], MACRO, jnp.argmax(mask[:ACTION_SIPHON])),
                "value": jnp.float32(0.0), "probs": mask / jnp.sum(mask)}

    params = WITH_MACRO.default_params
    played = run_episode(Simulator(WITH_MACRO, params, take_macro, params=None), seed=4,
                         episode=0, max_steps=40)
    record = played["record"]
    names = {frame["action"]["name"] for frame in played["frames"] if frame["action"]}
    assert action_name(MACRO) in names and MACRO in record["actions"]
    assert played["summary"]["siphons"] >= 1  # siphons played by the macro are counted
    replayed = run_episode(Simulator(WITH_MACRO, params), seed=4, episode=0,
                           max_steps=len(record["actions"]),
                           forced_actions=tuple(record["actions"]))
    verify_replay(record, replayed)



def test_the_macro_is_the_games_only_plan_action():
    """``search_hooks.plan_actions``, what the rollout search may hold: the macro (28) only,
    and nothing without the option."""
    from envs.hackmatrix import search_hooks
    assert not search_hooks.plan_actions(PLAIN).any()
    assert np.flatnonzero(search_hooks.plan_actions(WITH_MACRO)).tolist() == [MACRO]


@pytest.mark.slow  # compiles the rollout search on the game (about a minute on 2 cores)
def test_the_rollout_search_holds_the_macro_through_to_the_program():
    """A network that always walks up, and a leaf worth 1 where RESET is owned. Unheld, the
    macro's rollout would be one step right and then the network's walk, worth 0 like
    walking up (and the network's favourite is kept on a tie); held for 3 steps, the macro
    walks beside the block and siphons it: its score is 1 and the search takes it (SPEC
    §4.5)."""
    from envs.hackmatrix import search_hooks
    from purejaxrl import rollout_search, search
    reset = PROGRAM_NAMES.index("reset")
    logits = jnp.full(N_ACTIONS + 1, -5.0).at[UP].set(2.0).at[MACRO].set(1.0)
    node = search.feedforward_node(
        lambda obs: logits, lambda key, obs, state: state.owned[reset].astype(jnp.float32))
    hooks = search_hooks.make_hooks(WITH_MACRO, fair=False, leaf="zero")
    del hooks["leaf_value"]
    settings = rollout_search.RolloutSettings(num_rollouts=1, horizon=3, num_candidates=2,
                                              gamma=1.0, hold_steps=3)
    find = rollout_search.make_rollout_search(
        settings=settings, node_fn=node, plan_actions=search_hooks.plan_actions(WITH_MACRO),
        **hooks)
    state = _board()
    action, scores, _ = jax.jit(find)(jax.random.PRNGKey(0), WITH_MACRO.observe(state), state,
                                      ())
    assert int(action) == MACRO
    assert (float(scores[MACRO]), float(scores[UP])) == (1.0, 0.0)
