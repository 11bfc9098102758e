"""Self-imitation (purejaxrl/self_imitation.py, ``--sil-coef``): which rollout items the replay
keeps and for how long, how a recurrent window keeps the hidden state it started from, that the
loss imitates an action only while its return beats the critic, and that a run with it trains,
reports it and resumes bit for bit."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purejaxrl import ppo, self_imitation
from purejaxrl.checkpoint import load_checkpoint
from purejaxrl.config import ConfigError, validate_config
from purejaxrl.networks import log_prob_of
from purejaxrl.train import train
from tests.trainer.toy_run import CONFIG, assert_trees_equal, options, run_on_four_devices

# 4 envs x 8 steps: 32 one-step items per rollout; the replay holds 8, 4 from each update.
SIL = CONFIG.replace(sil_coef=1.0, sil_windows=8, sil_windows_per_update=4)
# A GRU with 4-step windows: 2 windows per env, 8 items per rollout; 4 kept, 2 per update.
SIL_GRU = SIL.replace(recurrent_core="gru", core_width=8, sequence_length=4, sil_windows=4,
                      sil_windows_per_update=2)


def transitions(steps, envs, value, action=None):
    """A time-major [T, N] batch whose ``action`` numbers the steps (t * N + n)."""
    zeros = jnp.zeros((steps, envs), jnp.float32)
    number = jnp.arange(steps * envs, dtype=jnp.int32).reshape(steps, envs)
    return ppo.Transition(obs={"x": number.astype(jnp.float32)},
                          mask=jnp.ones((steps, envs, 2), bool),
                          action=number if action is None else action, log_prob=zeros,
                          value=jnp.asarray(value, jnp.float32), reward=zeros,
                          terminated=zeros.astype(bool), truncated=zeros.astype(bool),
                          bootstrap_value=zeros, episode_start=None)


def test_the_replay_keeps_each_rollouts_most_positive_items_for_a_fixed_number_of_updates():
    """Feed-forward items are steps; each update writes the B items whose return beats the
    value by the most into its own block of the ring (update u: block u mod K / B); an item
    whose return is below its value counts 0, never negative; after K / B updates a block is
    overwritten, so no item stays longer."""
    steps, envs = 4, 3
    batch = transitions(steps, envs, value=np.zeros((steps, envs)))
    gain = np.zeros((steps, envs), np.float32)
    gain[1, 2], gain[3, 0], gain[0, 1] = 5.0, 3.0, 1.0  # items 5, 9, 1
    gain[2, 2] = -9.0
    replay = self_imitation.empty_replay(jax.tree.map(lambda x: x[0], batch), None, 4, 1)
    store = jax.jit(self_imitation.store, static_argnums=(5,))
    replay = store(replay, batch, jnp.asarray(gain), None, jnp.int32(0), 2)
    assert np.asarray(replay.filled).tolist() == [True, True, False, False]
    assert sorted(np.asarray(replay.transitions.action)[:2, 0].tolist()) == [5, 9]
    np.testing.assert_array_equal(np.sort(np.asarray(replay.targets)[:2, 0]), [3.0, 5.0])
    later = transitions(steps, envs, value=np.zeros((steps, envs)),
                        action=jnp.full((steps, envs), 100, jnp.int32))
    replay = store(replay, later, jnp.asarray(gain), None, jnp.int32(1), 2)
    replay = store(replay, later, jnp.asarray(gain), None, jnp.int32(2), 2)  # block 0 again
    assert np.asarray(replay.filled).all()
    assert np.asarray(replay.transitions.action)[:, 0].tolist() == [100] * 4


def test_a_recurrent_item_is_one_envs_window_with_the_hidden_state_it_started_from():
    """With windows of L steps, item w * N + n is env n's steps w*L .. w*L+L-1 in order, with
    the hidden state the rollout had at that window's start."""
    steps, envs, windows = 6, 2, 3
    batch = transitions(steps, envs, value=np.zeros((steps, envs)))
    hidden = jnp.arange(windows * envs * 2, dtype=jnp.float32).reshape(windows, envs, 2)
    items, targets, item_hidden = self_imitation.rollout_items(
        batch, jnp.zeros((steps, envs)), hidden)
    assert items.action.shape == (windows * envs, 2) and targets.shape == (windows * envs, 2)
    action = np.asarray(items.action)
    for w in range(windows):
        for n in range(envs):
            item = w * envs + n
            assert action[item].tolist() == [(2 * w) * envs + n, (2 * w + 1) * envs + n]
            np.testing.assert_array_equal(np.asarray(item_hidden)[item],
                                          np.asarray(hidden)[w, n])


def stored_share(config, gap):
    """A replay share of one rollout's first items for ``config``'s untrained network, with
    returns ``gap`` above the network's own values (one gap per item)."""
    env, env_params, network, optimizer, components = ppo.build(config)
    runner = ppo.init_runner_state(config, env, env_params, network, optimizer, len(components))
    _, batch, _, _, window_hidden, _ = ppo.collect_rollout(runner, config, env, env_params, network,
                                                        components)
    items, _, hidden = self_imitation.rollout_items(batch, batch.value, window_hidden)
    count = len(gap)
    pick = lambda x: x[:count]  # noqa: E731
    share = self_imitation.ReplayWindows(
        transitions=jax.tree.map(pick, items),
        targets=pick(items.value) + jnp.asarray(gap, jnp.float32)[:, None],
        hidden=None if hidden is None else pick(hidden), filled=jnp.ones(count, bool))
    return network, runner.params, share


def imitated_log_prob(network, params, share):
    batch = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), share.transitions)
    obs = network.env.expand_observation(batch.obs)
    if share.hidden is None:
        logits = network.apply(params, jax.tree.map(lambda x: x[0], obs))[0][None]
    else:
        logits = network.apply(params, share.hidden, obs, batch.episode_start)[1]
    return jnp.sum(log_prob_of(logits, batch.mask, batch.action))


@pytest.mark.parametrize("config", [SIL, SIL_GRU], ids=["feed-forward", "gru"])
def test_the_loss_imitates_an_action_only_while_its_return_beats_the_critic(config):
    """Returns above the critic: a small step down the loss raises the log-probability of the
    stored actions (the core replayed from the stored hidden state for a GRU). Returns below
    it, or items not yet filled: the loss and its gradient are exactly 0 (never pushed away)."""
    network, params, share = stored_share(config, [1.0, 0.5])
    loss_grad = jax.jit(jax.value_and_grad(
        lambda p, s: self_imitation.self_imitation_loss(network, p, s)[0]))
    loss, grads = loss_grad(params, share)
    assert float(loss) > 0
    stepped = jax.tree.map(lambda p, g: p - 1e-2 * g, params, grads)
    assert float(imitated_log_prob(network, stepped, share)) > float(
        imitated_log_prob(network, params, share))

    for below in (share.replace(targets=share.targets - 2.0),
                  share.replace(filled=jnp.zeros_like(share.filled))):
        loss, grads = loss_grad(params, below)
        assert float(loss) == 0.0
        assert all(float(jnp.max(jnp.abs(g))) == 0.0 for g in jax.tree.leaves(grads))


@pytest.mark.parametrize("field, value, message", [
    ("sil_coef", -1.0, "--sil-coef must be >= 0"),
    ("sil_windows_per_update", 3, "--sil-windows-per-update 3 must divide --sil-windows 8"),
    ("sil_windows", 9, "--num-minibatches 2 must divide the --sil-windows per device (9)"),
    ("sil_windows_per_update", 64, "more than a rollout's items (32)"),
])
def test_a_replay_that_cannot_be_cut_as_asked_is_refused(field, value, message):
    """Before any work: a negative weight, a ring that is not whole blocks, a replay the
    minibatches cannot share equally, more items per update than a rollout has."""
    config = SIL.replace(**{field: value})
    if field == "sil_windows":
        config = config.replace(sil_windows_per_update=3)
    if value == 64:
        config = config.replace(sil_windows=128)
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_config(config)


@pytest.mark.slow  # extended suite (pytest -m slow)
@pytest.mark.parametrize("config", [SIL, SIL_GRU], ids=["feed-forward", "gru"])
def test_a_self_imitation_run_reports_its_loss_and_resumes_bit_for_bit(tmp_path,
                                                                       compile_cache_dir,
                                                                       config):
    """Toy corridor: the replay fills, the record carries the self-imitation loss and the
    share of replayed steps still beating the critic, and 3 updates + resume + 2 == 5 in one
    run, replay included."""
    whole = train(config, options(tmp_path / "whole", compile_cache_dir))
    assert bool(np.all(np.asarray(whole.runner_state.replay.filled)))
    records = whole.records
    assert all(np.isfinite(r["ppo/sil_loss"]) for r in records)
    assert any(r["ppo/sil_positive"] > 0 for r in records)
    first = train(config, options(tmp_path / "parts", compile_cache_dir), stop_after_updates=3)
    second = train(config, options(tmp_path / "parts", compile_cache_dir),
                   checkpoint=load_checkpoint(first.run_dir))
    assert_trees_equal(second.runner_state, whole.runner_state)


@pytest.mark.slow  # extended suite: a 4-device run in a subprocess
def test_the_replay_is_split_over_devices_and_a_checkpoint_resumes_on_one(tmp_path):
    """K and B are global: on 4 devices each keeps K / 4 items and writes B / 4 per update,
    so the checkpoint holds K rows as a 1-device run's does, and resumes on 1 device."""
    report = run_on_four_devices("""
        from purejaxrl.checkpoint import load_checkpoint
        from purejaxrl.train import train
        from tests.trainer.test_self_imitation import SIL
        from tests.trainer.toy_run import options
        four = train(SIL.replace(num_devices=4), options(out, None), stop_after_updates=2)
        replay = four.runner_state.replay
        one = train(SIL, options(out, None), checkpoint=load_checkpoint(four.run_dir))
        print(json.dumps({"rows": replay.filled.shape[0],
                          "shard_rows": [s.data.shape[0]
                                         for s in replay.filled.addressable_shards],
                          "filled": int(replay.filled.sum()),
                          "updates_done": one.updates_done,
                          "first_record": one.records[0]["update"]}))
    """, tmp_path)
    assert report["rows"] == SIL.sil_windows and report["shard_rows"] == [2, 2, 2, 2]
    assert report["filled"] == SIL.sil_windows  # 2 updates x 4 items fill the ring of 8
    assert report["updates_done"] == SIL.num_updates and report["first_record"] > 2
