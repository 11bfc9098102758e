"""Rollout bookkeeping on the toy corridor (issue P1): a stored transition pairs the
observation an action was chosen from with that action, its log-prob, value and mask; after an
episode ends the next action is chosen from the reset observation; truncated steps carry the
value of the final observation; episode statistics cover finished episodes only.

The toy rewards depend on where the action was taken (envs/toy/corridor.py table), so an
off-by-one pairing changes the numbers checked here."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purejaxrl.config import TrainConfig
from purejaxrl.networks import log_prob_of
from envs.toy import EXIT_CELL, ToyState
from tests.trainer.toy_run import rollout_setup

# The env's own reward is the one stored and checked against the toy table below.
CONFIG = TrainConfig(env="toy", num_envs=6, num_steps=48, max_episode_steps=7, hidden_width=16,
                     hidden_depth=1, num_minibatches=1, update_epochs=1, total_timesteps=288,
                     training_reward="env", recurrent_core="none")


def toy_reward(features, action):
    """The toy table, from the observation the action was chosen from."""
    cell = int(round(float(features[0]) * EXIT_CELL))
    best = int(round(float(features[2]) * EXIT_CELL))
    reward = -0.01
    if action == 3:
        reward += 0.1 * (cell + 1 > best) + 1.0 * (cell + 1 == EXIT_CELL)
    elif action == 1:
        reward += 0.05 * cell
    elif action == 0:
        reward += -1.0
    elif action == 4:
        reward += 0.3
    elif action == 5:
        reward += -0.02
    return reward


@pytest.fixture(scope="module")
def rollout():
    setup = rollout_setup(CONFIG)
    new_runner, transitions, stats, discounted, windows, _ = setup["collect"](setup["runner"])
    return dict(setup, new_runner=new_runner, transitions=jax.device_get(transitions),
                stats=jax.device_get(stats), discounted=np.asarray(discounted),
                windows=windows)


def test_a_feed_forward_rollout_carries_no_hidden_state(rollout):
    """Without a recurrent core there is no hidden state to carry, record per BPTT window or
    replay: the runner's and the rollout's are None, and no episode starts are stored."""
    assert rollout["new_runner"].hidden is None and rollout["windows"] is None
    assert rollout["transitions"].episode_start is None


def test_rollout_covers_terminations_and_truncations(rollout):
    """Precondition of the tests below: the rollout has both kinds of episode end."""
    t = rollout["transitions"]
    assert (t.terminated & ~t.truncated).any() and t.truncated.any()


def test_reward_matches_observation_action_pairing(rollout):
    """reward[t] equals the toy table evaluated on (obs[t], action[t])."""
    t = rollout["transitions"]
    for step in range(CONFIG.num_steps):
        for env_index in range(CONFIG.num_envs):
            expected = toy_reward(t.obs.features[step, env_index],
                                  int(t.action[step, env_index]))
            assert np.isclose(t.reward[step, env_index], expected, atol=1e-6), (step, env_index)


def test_log_prob_value_and_mask_belong_to_the_stored_observation(rollout):
    """Re-running the network on obs[t] gives the stored value and the stored log-prob of
    action[t]; the action is legal under obs[t]'s mask."""
    t = rollout["transitions"]
    params = rollout["runner"].params
    logits, values = rollout["network"].apply(params, t.obs)
    np.testing.assert_allclose(values, t.value, atol=1e-5)
    np.testing.assert_array_equal(t.mask, t.obs.action_mask)
    np.testing.assert_allclose(log_prob_of(logits, t.mask, t.action), t.log_prob, atol=1e-5)
    assert np.take_along_axis(t.mask, t.action[..., None], axis=-1).all()


def test_next_action_after_episode_end_comes_from_reset_observation(rollout):
    """After a done step the next stored observation is the reset observation (cell 0, best 0,
    nothing siphoned, all time reset), not the final observation of the ended episode; and
    without a done step, obs[t+1] is what env.step returned for action[t]."""
    t = rollout["transitions"]
    env, env_params = rollout["env"], rollout["env_params"]
    reset_obs, _ = env.reset(jax.random.PRNGKey(0), env_params)
    done = t.terminated | t.truncated
    checked_resets = 0
    for step in range(CONFIG.num_steps - 1):
        for env_index in range(CONFIG.num_envs):
            next_obs = jax.tree.map(lambda x: x[step + 1, env_index], t.obs)
            if done[step, env_index]:
                for a, b in zip(jax.tree.leaves(next_obs), jax.tree.leaves(reset_obs)):
                    np.testing.assert_array_equal(a, b)
                checked_resets += 1
            else:
                cell_before = round(float(t.obs.features[step, env_index, 0]) * EXIT_CELL)
                cell_after = round(float(next_obs.features[0]) * EXIT_CELL)
                action = int(t.action[step, env_index])
                move = {3: 1, 2: -1}.get(action, 0)
                assert cell_after == cell_before + move
    assert checked_resets > 0


def test_truncation_bootstrap_uses_final_observation_value(rollout):
    """bootstrap_value = V(info["final_observation"]) on truncated steps, 0 elsewhere; the final
    observation (last cell of the ended episode) is rebuilt by stepping the env from obs[t]."""
    t = rollout["transitions"]
    network, params = rollout["network"], rollout["runner"].params
    truncated = t.truncated & ~t.terminated
    assert not t.bootstrap_value[~t.truncated].any()
    steps, envs = np.nonzero(truncated)
    assert len(steps) > 0
    checked = 0
    for step, env_index in zip(steps, envs):
        player = t.obs.features[step, env_index]
        cell, best = round(player[0] * EXIT_CELL), round(player[2] * EXIT_CELL)
        action = int(t.action[step, env_index])
        final_cell = cell + {3: 1, 2: -1}.get(action, 0)
        final_state = ToyState(cell=jnp.int32(final_cell),
                               best_cell=jnp.int32(max(best, final_cell)),
                               siphoned=jnp.bool_(player[1] > 0 or action == 4),
                               time=jnp.int32(CONFIG.max_episode_steps))
        _, expected = network.apply(params, rollout["env"].env.observation(final_state))
        np.testing.assert_allclose(t.bootstrap_value[step, env_index], expected, atol=1e-5)
        # It differs from the value of the reset observation stored next (that is the bug
        # this guards against: bootstrapping a truncated episode from the new episode).
        differs_from_reset = final_cell > 0 or best > 0 or player[1] > 0 or action == 4
        if step + 1 < CONFIG.num_steps and differs_from_reset:
            checked += 1
            assert not np.isclose(expected, t.value[step + 1, env_index], atol=1e-7)
    assert checked > 0


def test_episode_statistics_sum_finished_episodes_only(rollout):
    """Returns/lengths logged at each done step equal the sums of that episode's rewards/steps
    (the first episode of each env starts at step 0; the unfinished tail is not logged)."""
    t, stats = rollout["transitions"], rollout["stats"]
    done = t.terminated | t.truncated
    expected_returns, expected_lengths = [], []
    for env_index in range(CONFIG.num_envs):
        total, length = 0.0, 0
        for step in range(CONFIG.num_steps):
            total += float(t.reward[step, env_index])
            length += 1
            if done[step, env_index]:
                expected_returns.append(total)
                expected_lengths.append(length)
                total, length = 0.0, 0
    assert np.isclose(stats["episodes"].sum(), len(expected_returns))
    assert np.isclose(stats["return_sum"].sum(), sum(expected_returns), atol=1e-4)
    assert np.isclose(stats["length_sum"].sum(), sum(expected_lengths))
    # The per-component breakdown adds up to the return.
    assert np.isclose(stats["breakdown_sum"].sum(), sum(expected_returns), atol=1e-4)
    invalid = [m.name for m in rollout["env"].metrics].index("invalid")
    assert stats["masked_actions_sampled"].sum() == 0
    assert stats["env_metrics"][..., invalid].sum() == 0
    # Truncations are episode ends by the time limit only.
    assert stats["truncations"].sum() == (t.truncated & ~t.terminated).sum()


def test_env_metrics_count_outcomes_at_whole_episode_ends_and_actions_on_every_step(rollout):
    """The toy's metrics (won, died: outcomes; invalid, moves, shots, siphons, waits: counts)
    summed as the rollout reports them: an outcome on the steps that end an episode, a count
    on every step, each from the action taken on it."""
    t, stats = rollout["transitions"], rollout["stats"]
    names = [m.name for m in rollout["env"].metrics]
    totals = dict(zip(names, stats["env_metrics"].sum(axis=(0, 1))))
    a = t.action
    ends = t.terminated | t.truncated
    won = ends & (a == 3) & (np.round(t.obs.features[..., 0] * EXIT_CELL) == EXIT_CELL - 1)
    died = ends & (a == 0)
    assert totals["won"] == won.sum() and totals["died"] == died.sum()
    assert won.sum() > 0 and died.sum() > 0
    expected = {"invalid": 0, "moves": np.sum((a == 0) | (a == 2) | (a == 3)),
                "shots": np.sum(a == 1),
                "siphons": np.sum(a == 4), "waits": np.sum(a == 5)}
    assert {name: totals[name] for name in expected} == expected


def test_discounted_return_accumulates_with_gamma_and_restarts_after_an_episode_end(rollout):
    """The reward normaliser's input: G_t = r_t + gamma * G_{t-1}, where G_{t-1} = 0 after an
    episode end (the next step belongs to a new episode)."""
    t = rollout["transitions"]
    previous = np.zeros(CONFIG.num_envs)
    for step in range(CONFIG.num_steps):
        expected = t.reward[step] + CONFIG.gamma * previous
        np.testing.assert_allclose(rollout["discounted"][step], expected, rtol=1e-5, atol=1e-6)
        previous = np.where(t.terminated[step] | t.truncated[step], 0.0, expected)
    np.testing.assert_allclose(rollout["new_runner"].episode.discounted_returns, previous,
                               rtol=1e-5, atol=1e-6)


def test_feed_forward_minibatches_gather_every_step_once_from_the_rollout(rollout):
    """The update's minibatches (``ppo.step_minibatch`` of each row of ``ppo.minibatch_rows``)
    hold single steps t * N + n of the [T, N] rollout, each with its own action, advantage and
    target, and together every step exactly once; they are gathered from the rollout as
    needed, so the update holds no shuffled copy of it."""
    from purejaxrl import ppo
    config = CONFIG.replace(num_minibatches=4)
    t = jax.tree.map(jnp.asarray, rollout["transitions"])
    steps = config.num_steps * config.num_envs
    advantages = jnp.arange(steps, dtype=jnp.float32).reshape(config.num_steps, config.num_envs)
    rows = ppo.minibatch_rows(jax.random.PRNGKey(5), steps, config)
    assert rows.shape == (4, steps // 4)
    np.testing.assert_array_equal(np.sort(np.asarray(rows).ravel()), np.arange(steps))
    for row in np.asarray(rows):
        batch, adv, tgt, hidden = ppo.step_minibatch(t, advantages, -advantages, row, config)
        assert hidden is None
        np.testing.assert_array_equal(adv, row)  # step t * N + n carries its own advantage
        np.testing.assert_array_equal(tgt, -row)
        step, env = row // config.num_envs, row % config.num_envs
        np.testing.assert_array_equal(batch.action, np.asarray(t.action)[step, env])
        np.testing.assert_array_equal(batch.obs.features, np.asarray(t.obs.features)[step, env])


def test_the_masked_action_count_counts_an_illegal_sample(monkeypatch):
    """The monitor of masked actions (``masked_actions_sampled``, logged per chunk) is no
    constant 0: a sampler that returns the first illegal action wherever there is one makes
    it count exactly the steps whose mask forbids some action (the toy forbids moves into
    walls)."""
    from purejaxrl import ppo
    monkeypatch.setattr(ppo, "sample_masked", lambda key, logits, mask: jnp.argmin(mask))
    setup = rollout_setup(CONFIG.replace(num_steps=8))
    _, transitions, stats, _, _, _ = setup["collect"](setup["runner"])
    forbids = ~np.asarray(transitions.mask).all(axis=-1)
    assert forbids.any()
    np.testing.assert_array_equal(np.asarray(stats["masked_actions_sampled"]),
                                  forbids.astype(np.float32))
