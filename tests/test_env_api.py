"""The gymnax 1.0 contract (decisions R5): reset/step signatures, auto-reset with
final_observation, terminated vs truncated, determinism, jit == vmap, spaces."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix.env import HackMatrix
from envs.hackmatrix.observation import FLAT_SIZE, flatten
from tests.game_harness import scenario

ENV = HackMatrix()
PARAMS = ENV.default_params
STEP = jax.jit(ENV.step)
RESET = jax.jit(ENV.reset)
VSTEP = jax.jit(jax.vmap(ENV.step, in_axes=(0, 0, 0, None)))
VRESET = jax.jit(jax.vmap(ENV.reset, in_axes=(0, None)))


def tree_equal(a, b):
    return all(bool(jnp.array_equal(x, y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def first_valid(mask):
    return int(np.argmax(np.asarray(mask)))


def test_reset_returns_observation_with_mask_and_flat_view():
    obs, state = RESET(jax.random.PRNGKey(0), PARAMS)
    assert obs.player.shape == (10,) and obs.programs.shape == (23,)
    assert obs.grid.shape == (6, 6, 42) and obs.action_mask.shape == (28,)
    assert flatten(obs).shape == (FLAT_SIZE,) == (1545,)
    assert int(state.stage) == 1 and int(state.time) == 0


def test_same_key_and_state_give_the_same_result():
    """R2: all randomness comes from the key."""
    obs, state = RESET(jax.random.PRNGKey(1), PARAMS)
    a = first_valid(obs.action_mask)
    out1 = STEP(jax.random.PRNGKey(7), state, a, PARAMS)
    out2 = STEP(jax.random.PRNGKey(7), state, a, PARAMS)
    assert tree_equal(out1, out2)
    _, s2 = RESET(jax.random.PRNGKey(1), PARAMS)
    assert tree_equal(state, s2)


def test_vmap_equals_per_env_steps():
    keys = jax.random.split(jax.random.PRNGKey(3), 4)
    obs, states = VRESET(keys, PARAMS)
    actions = jnp.array([first_valid(m) for m in obs.action_mask])
    step_keys = jax.random.split(jax.random.PRNGKey(4), 4)
    batched = VSTEP(step_keys, states, actions, PARAMS)
    for i in range(4):
        single_state = jax.tree.map(lambda x: x[i], states)
        single = STEP(step_keys[i], single_state, actions[i], PARAMS)
        assert tree_equal(jax.tree.map(lambda x: x[i], batched), single)


def test_invalid_action_terminates_and_auto_resets_with_final_observation():
    """R4/R5: an invalid action terminates; step returns the reset observation and the
    ended episode's last observation in info['final_observation']."""
    state = scenario(player={"row": 0, "col": 0, "credits": 7})
    obs, new_state, reward, terminated, truncated, info = STEP(jax.random.PRNGKey(0), state, 1,
                                                               PARAMS)
    assert bool(terminated) and not bool(truncated) and float(reward) == 0.0
    assert bool(info["invalid_action"])
    final = info["final_observation"]
    assert float(final.player[3]) == pytest.approx(7 / 50)  # the ended game's credits
    assert int(new_state.time) == 0 and int(new_state.stage) == 1  # a fresh game
    assert not tree_equal(final, obs)


def test_time_limit_truncates_without_terminating():
    """R5: reaching max_steps_in_episode is truncation, not termination."""
    params = PARAMS.replace(max_steps_in_episode=1)
    state = scenario()
    _, _, _, terminated, truncated, info = STEP(jax.random.PRNGKey(0), state, 0, params)
    assert bool(truncated) and not bool(terminated)
    assert bool(info["truncated"])


def test_spaces():
    assert ENV.action_space(PARAMS).n == 28
    space = ENV.observation_space(PARAMS)
    assert space.spaces["grid"].shape == (6, 6, 42)
    assert ENV.num_actions == 28


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="reward_shaping"):
        HackMatrix(reward_shaping="dense")


def test_states_from_reset_step_and_set_state_share_one_signature():
    """A state's abstract type (shapes, dtypes, no weak types) is the same whichever way it was
    made, so a jitted step compiles once for all of them."""
    def signature(tree):
        return [(x.shape, x.dtype, x.weak_type)
                for x in jax.tree.leaves(jax.eval_shape(lambda t: t, tree))]

    _, reset_state = jax.eval_shape(ENV.reset, jax.random.PRNGKey(0), PARAMS)
    stepped = jax.eval_shape(ENV.step, jax.random.PRNGKey(0), reset_state, 0, PARAMS)[1]
    assert signature(reset_state) == signature(stepped) == signature(scenario())
    assert not any(weak for _, _, weak in signature(reset_state))


def test_auto_reset_step_equals_step_env_then_reset_lane_by_lane():
    """env.step generates stage advances and new games in one pass; lane for lane it must equal
    step_env(key_step) followed by reset(key_reset) where the episode ended. The lanes: a stage
    completed on the truncating step (the final observation shows the new stage's board, the
    next state is a new game), a stage completed mid-episode, an invalid action (reset), and a
    plain move (no board generated)."""
    from tests.game_harness import _jitted_step_env
    params = PARAMS.replace(max_steps_in_episode=10)
    right, up, down = 3, 0, 1
    lanes = [
        (scenario(player={"row": 5, "col": 4}, stage=3).replace(time=jnp.int32(9)), right),
        (scenario(player={"row": 5, "col": 4, "hp": 2}, stage=2), right),
        (scenario(player={"row": 0, "col": 0}), down),
        (scenario(player={"row": 2, "col": 2}), up),
    ]
    states = jax.tree.map(lambda *x: jnp.stack(x), *[s for s, _ in lanes])
    actions = jnp.array([a for _, a in lanes])
    keys = jax.random.split(jax.random.PRNGKey(11), 4)
    obs, next_states, reward, terminated, truncated, info = VSTEP(keys, states, actions, params)

    lane = lambda tree, i: jax.tree.map(lambda x: x[i], tree)  # noqa: E731
    for i, (state, action) in enumerate(lanes):
        key_step, key_reset = jax.random.split(keys[i])
        ref_obs, ref_state, ref_reward, ref_terminated, ref_info = _jitted_step_env(ENV)(
            key_step, state, jnp.int32(action), params)
        ref_truncated = ~ref_terminated & (ref_state.time >= params.max_steps_in_episode)
        ended = bool(ref_terminated | ref_truncated)
        assert (bool(terminated[i]), bool(truncated[i])) == (bool(ref_terminated),
                                                             bool(ref_truncated))
        assert float(reward[i]) == float(ref_reward)
        assert tree_equal(lane(info["final_observation"], i), ref_obs)
        assert tree_equal({k: lane(info[k], i) for k in ref_info}, ref_info)
        if ended:
            ref_obs, ref_state = RESET(key_reset, params)
        got_state = lane(next_states, i)
        if ended:  # a new game's history is empty: its snapshot slots are never read
            got_state = got_state.replace(history=got_state.history.replace(snapshots=None))
            ref_state = ref_state.replace(history=ref_state.history.replace(snapshots=None))
        assert tree_equal(got_state, ref_state), f"lane {i}: next state differs"
        assert tree_equal(lane(obs, i), ref_obs), f"lane {i}: next observation differs"
    # The lanes do what they are there for.
    assert list(map(bool, truncated)) == [True, False, False, False]
    assert list(map(bool, info["stage_complete"])) == [True, True, False, False]
    assert list(map(int, info["stage"])) == [4, 3, 1, 1]  # the ended episode's stage
    assert list(map(int, next_states.stage)) == [1, 3, 1, 1]  # lane 0 starts a new game
    assert bool(terminated[2]) and int(next_states.time[0]) == 0
