"""The recurrent policy (``--recurrent-core gru``) on the toy corridor: the hidden state is
zeroed where an episode starts and carried otherwise, the loss replays the core from the
rollout's start hidden state (so before the first gradient step every ratio is 1), masked
actions are never sampled, and a GRU run resumes bit for bit and trains several seeds.

Short episodes (max 5 steps) so that a 16-step rollout holds several episode starts per env."""

import functools
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purejaxrl import ppo
from purejaxrl.checkpoint import load_checkpoint, save_checkpoint
from purejaxrl.config import ConfigError, TrainConfig, validate_config
from purejaxrl.cli.evaluate import main as evaluate_main
from purejaxrl.evaluation import network_policy, play_episodes
from purejaxrl.networks import greedy_masked, log_prob_of, step_recurrent
from purejaxrl.policy import load_policy
from purejaxrl.train import train
from envs.toy import EXIT_CELL, ToyState
from tests.trainer.toy_run import assert_trees_equal, options, rollout_setup

CONFIG = TrainConfig(env="toy", num_envs=4, num_steps=16, max_episode_steps=5, hidden_width=16,
                     hidden_depth=1, recurrent_core="gru", core_width=8, sequence_length=None,
                     num_minibatches=2, update_epochs=2, total_timesteps=5 * 64, lr=1e-2)


@pytest.fixture(scope="module")
def built():
    setup = rollout_setup(CONFIG)
    # One step of the core for a batch of envs, jitted once for the tests that replay by hand.
    setup["step"] = jax.jit(functools.partial(step_recurrent, setup["network"]))
    return setup


@pytest.fixture(scope="module")
def rollouts(built):
    """Two consecutive rollouts from the start of training: the second starts from a hidden
    state the first carried (not zeros)."""
    first_runner, first, first_stats, _, first_windows, _ = built["collect"](built["runner"])
    second_runner, second, second_stats, _, second_windows, _ = built["collect"](first_runner)
    return [dict(start=built["runner"], transitions=jax.device_get(first),
                 stats=jax.device_get(first_stats), end=first_runner, windows=first_windows),
            dict(start=first_runner, transitions=jax.device_get(second),
                 stats=jax.device_get(second_stats), end=second_runner,
                 windows=second_windows)]


def test_runner_state_carries_a_zero_hidden_state_per_env(built):
    """The initial hidden state is zeros, one row of core_width per env."""
    hidden = np.asarray(built["runner"].hidden)
    assert hidden.shape == (CONFIG.num_envs, CONFIG.core_width) and not hidden.any()


def test_hidden_state_is_zeroed_at_episode_starts_and_carried_otherwise(built, rollouts):
    """Replaying each step by hand: where an episode starts (every env on training's first step,
    then after every done) the stored log-prob and value are those of a fresh zero hidden state;
    elsewhere they are those of the hidden state the previous step produced, which differs."""
    network, params, step = built["network"], built["runner"].params, built["step"]
    zeros = network.initial_hidden(CONFIG.num_envs)
    no_reset = jnp.zeros(CONFIG.num_envs, bool)
    carried_somewhere = False
    for index, rollout in enumerate(rollouts):
        t = rollout["transitions"]
        hidden = rollout["start"].hidden
        previous_done = (np.ones(CONFIG.num_envs, bool) if index == 0
                         else np.asarray(rollouts[0]["transitions"].terminated[-1]
                                         | rollouts[0]["transitions"].truncated[-1]))
        assert t.episode_start.any() and not t.episode_start.all()
        for s in range(CONFIG.num_steps):
            obs = jax.tree.map(lambda x: x[s], t.obs)
            np.testing.assert_array_equal(t.episode_start[s], previous_done)
            fresh_hidden, fresh_logits, fresh_value = step(params, zeros, obs, no_reset)
            kept_hidden, kept_logits, kept_value = step(params, hidden, obs, no_reset)
            start = t.episode_start[s]
            logits = np.where(start[:, None], fresh_logits, kept_logits)
            value = np.where(start, fresh_value, kept_value)
            np.testing.assert_allclose(t.value[s], value, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(t.log_prob[s], log_prob_of(logits, t.mask[s],
                                                                  t.action[s]),
                                       rtol=1e-5, atol=1e-6)
            carried = ~start & (np.abs(np.asarray(kept_value - fresh_value)) > 1e-6)
            carried_somewhere |= bool(carried.any())
            hidden = jnp.where(start[:, None], fresh_hidden, kept_hidden)
            previous_done = np.asarray(t.terminated[s] | t.truncated[s])
        np.testing.assert_allclose(rollout["end"].hidden, hidden, rtol=1e-5, atol=1e-6)
    assert carried_somewhere  # the carried state made a difference somewhere


def test_truncation_bootstraps_with_the_hidden_state_of_the_truncated_step(built, rollouts):
    """bootstrap_value on a truncated step = V(final observation) seen with the hidden state
    that step produced (not a zero one, not the next episode's): the final observation is
    rebuilt by stepping the toy from obs[t], as in test_rollout."""
    params, toy, step = built["runner"].params, built["env"].env, built["step"]
    checked = hidden_matters = 0
    for rollout in rollouts:
        t = rollout["transitions"]
        assert not t.bootstrap_value[~t.truncated].any()
        hidden = rollout["start"].hidden
        for s in range(CONFIG.num_steps):
            obs = jax.tree.map(lambda x: x[s], t.obs)
            hidden, _, _ = step(params, hidden, obs, jnp.asarray(t.episode_start[s]))
            for env_index in np.nonzero(t.truncated[s] & ~t.terminated[s])[0]:
                player = t.obs.features[s, env_index]
                cell, best = round(player[0] * EXIT_CELL), round(player[2] * EXIT_CELL)
                action = int(t.action[s, env_index])
                final_cell = cell + {3: 1, 2: -1}.get(action, 0)
                final = toy.observation(ToyState(
                    cell=jnp.int32(final_cell), best_cell=jnp.int32(max(best, final_cell)),
                    siphoned=jnp.bool_(player[1] > 0 or action == 4),
                    time=jnp.int32(CONFIG.max_episode_steps)))
                final = jax.tree.map(lambda x: x[None], final)
                _, _, expected = step(params, hidden[env_index][None], final,
                                      jnp.zeros(1, bool))
                _, _, from_zero = step(params, jnp.zeros_like(hidden[:1]), final,
                                       jnp.zeros(1, bool))
                np.testing.assert_allclose(t.bootstrap_value[s, env_index], expected[0],
                                           rtol=1e-5, atol=1e-6)
                checked += 1
                hidden_matters += not np.isclose(expected[0], from_zero[0], atol=1e-6)
    assert checked > 0 and hidden_matters > 0


def replay_minibatches(built, config, transitions, windows, key):
    """The update's minibatches of ``transitions`` (``ppo.sequence_minibatch`` of every row
    of ``ppo.minibatch_rows``, with the hidden state at each window's start) and, per
    minibatch, the log-probs and values the loss replays with the initial parameters, and the
    loss's diagnostics: (log_prob, value, batches, aux), each with a leading minibatch axis."""
    network, params = built["network"], built["runner"].params
    advantages = jnp.zeros((config.num_steps, config.num_envs))

    @jax.jit
    def replay(transitions, windows):
        rows = ppo.minibatch_rows(key, windows.shape[0] * windows.shape[1], config)
        batches, _, _, hidden = jax.vmap(lambda row: ppo.sequence_minibatch(
            transitions, advantages, advantages, windows, row, config))(rows)

        def one(batch, hidden):
            _, logits, value = network.apply(params, hidden, batch.obs, batch.episode_start)
            _, aux = ppo.ppo_loss(params, network, batch, jnp.ones(batch.value.shape),
                                  jnp.zeros(batch.value.shape), config, hidden)
            return log_prob_of(logits, batch.mask, batch.action), value, batch, aux
        return jax.vmap(one)(batches, hidden)
    return replay(transitions, windows)


def assert_loss_replays_the_values(aux, batches):
    """``ppo_loss`` itself replays the core (with targets 0 its value loss is 0.5 mean V^2 of
    its own values, which equal the rollout's only if it started from the window's hidden
    state with the recorded episode starts): first order in a wrong value, where the KL above
    is second order in a wrong log-prob."""
    values = np.asarray(batches.value)
    np.testing.assert_allclose(aux["value_loss"],
                               0.5 * np.mean(np.square(values), axis=tuple(range(1, values.ndim))),
                               rtol=1e-4)


def test_sequence_replay_reproduces_the_rollout(built, rollouts):
    """The update's minibatches (whole env sequences from the rollout's start hidden state,
    with the recorded episode starts) give back the rollout's log-probs and values: before the
    first gradient step every ratio is 1. Checked on the second rollout, whose start hidden
    state is not zero."""
    rollout = rollouts[1]
    transitions = jax.tree.map(jnp.asarray, rollout["transitions"])

    # Without --sequence-length the rollout is one window, which starts from its start state.
    np.testing.assert_array_equal(rollout["windows"], rollout["start"].hidden[None])

    assert np.abs(np.asarray(rollout["start"].hidden)).max() > 0
    log_prob, value, batches, aux = replay_minibatches(
        built, CONFIG, transitions, rollout["start"].hidden[None], jax.random.PRNGKey(3))
    assert log_prob.shape == (CONFIG.num_minibatches, CONFIG.num_steps,
                              CONFIG.num_envs // CONFIG.num_minibatches)
    np.testing.assert_allclose(log_prob, batches.log_prob, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value, batches.value, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(aux["approx_kl"], 0.0, atol=1e-6)
    np.testing.assert_array_equal(aux["clip_fraction"], 0.0)
    assert_loss_replays_the_values(aux, batches)
    # Every env appears in exactly one minibatch, whole.
    np.testing.assert_array_equal(
        np.sort(np.asarray(batches.action).transpose(0, 2, 1).reshape(CONFIG.num_envs, -1),
                axis=0),
        np.sort(np.asarray(transitions.action).T, axis=0))


def test_masked_actions_are_never_sampled(rollouts):
    """Every action the GRU policy sampled is legal under the mask of its observation."""
    for rollout in rollouts:
        t = rollout["transitions"]
        legal = np.take_along_axis(t.mask, t.action[..., None], axis=-1)[..., 0]
        assert legal.all() and rollout["stats"]["masked_actions_sampled"].sum() == 0


WINDOWED = CONFIG.replace(sequence_length=4)  # 16-step rollouts cut into 4 windows


@pytest.fixture(scope="module")
def windowed_rollout(built, rollouts):
    """The second rollout of ``rollouts`` collected again under ``--sequence-length 4`` (same
    parameters, same start state)."""
    collect = rollout_setup(WINDOWED)["collect"]
    _, transitions, _, _, windows, _ = collect(rollouts[1]["start"])
    return dict(transitions=jax.device_get(transitions), windows=np.asarray(windows))


def carried_hidden_before_each_step(built, start_hidden, transitions):
    """The hidden state the rollout carries into each step (before that step's zeroing at an
    episode start), replayed by hand: f32[T, N, C]."""
    params, step = built["runner"].params, built["step"]
    hidden, before = start_hidden, []
    for s in range(CONFIG.num_steps):
        before.append(np.asarray(hidden))
        obs = jax.tree.map(lambda x: x[s], transitions.obs)
        hidden, _, _ = step(params, hidden, obs, jnp.asarray(transitions.episode_start[s]))
    return np.stack(before)


def test_windows_leave_the_rollout_unchanged_and_start_from_the_carried_state(
        built, rollouts, windowed_rollout):
    """BPTT windows change only what the update replays: the windowed rollout takes the same
    actions with the same log-probs and values as the whole-rollout one, and window w's
    hidden state is the one the rollout carried into step w * sequence_length (not zeros:
    the core is handed over from window to window)."""
    whole, windowed = rollouts[1]["transitions"], windowed_rollout["transitions"]
    np.testing.assert_array_equal(windowed.action, whole.action)
    np.testing.assert_array_equal(windowed.episode_start, whole.episode_start)
    np.testing.assert_allclose(windowed.log_prob, whole.log_prob, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(windowed.value, whole.value, rtol=1e-5, atol=1e-6)
    carried = carried_hidden_before_each_step(built, rollouts[1]["start"].hidden, whole)
    windows = windowed_rollout["windows"]
    assert windows.shape == (4, CONFIG.num_envs, CONFIG.core_width)
    np.testing.assert_allclose(windows, carried[::WINDOWED.sequence_length], rtol=1e-5,
                               atol=1e-6)
    assert np.abs(windows[1:]).max() > 0


def test_windowed_replay_reproduces_the_rollout(built, windowed_rollout):
    """The update's minibatches of windows (each replayed from its own start hidden state with
    the recorded episode starts) give back the rollout's log-probs and values, so every
    ratio is 1 before the first gradient step; every window of every env is in exactly one
    minibatch, whole."""
    transitions = jax.tree.map(jnp.asarray, windowed_rollout["transitions"])

    log_prob, value, batches, aux = replay_minibatches(
        built, WINDOWED, transitions, windowed_rollout["windows"], jax.random.PRNGKey(4))
    sequences = CONFIG.num_envs * 4
    assert log_prob.shape == (WINDOWED.num_minibatches, WINDOWED.sequence_length,
                              sequences // WINDOWED.num_minibatches)
    np.testing.assert_allclose(log_prob, batches.log_prob, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value, batches.value, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(aux["approx_kl"], 0.0, atol=1e-6)
    assert_loss_replays_the_values(aux, batches)
    # The windows' (step index within the rollout, env) pairs: each exactly once.
    windows_of = np.asarray(transitions.action).reshape(4, WINDOWED.sequence_length, -1)
    expected = windows_of.transpose(0, 2, 1).reshape(sequences, -1)
    got = np.asarray(batches.action).transpose(0, 2, 1).reshape(sequences, -1)
    assert sorted(map(tuple, got.tolist())) == sorted(map(tuple, expected.tolist()))
    # In the shuffle's order: minibatch m's j-th sequence is sequence rows[m, j] = w * N + n,
    # env n's window w.
    rows = np.asarray(ppo.minibatch_rows(jax.random.PRNGKey(4), sequences, WINDOWED))
    np.testing.assert_array_equal(got, expected[rows.ravel()])


def test_sequence_length_validation():
    """--sequence-length must divide --num-steps; minibatches then split the sequences (envs x
    windows), so 8 minibatches fit 4 envs x 4 windows. A feed-forward network has no
    sequence: its rollout is one window whatever the field says (the CLI refuses the explicit
    flag without a core: test_cli_flags_and_auto_scaled_minibatches_split_envs)."""
    feed_forward = WINDOWED.replace(recurrent_core="none", num_minibatches=32)
    validate_config(feed_forward)
    assert feed_forward.windows_per_env == 1 and WINDOWED.windows_per_env == 4
    for bad in (0, 5, 32):
        with pytest.raises(ConfigError, match="positive divisor of --num-steps"):
            validate_config(WINDOWED.replace(sequence_length=bad))
    validate_config(WINDOWED.replace(num_minibatches=8))
    with pytest.raises(ConfigError, match="must divide the sequences per device"):
        validate_config(WINDOWED.replace(num_minibatches=32))


def test_gru_config_validation():
    """With a GRU the minibatches split envs: num_envs per device must be divisible by
    num_minibatches; the core is shared, so separate torsos are refused; the choice and the
    width are checked."""
    with pytest.raises(ConfigError, match="must divide the sequences per device"):
        validate_config(CONFIG.replace(num_minibatches=8))
    with pytest.raises(ConfigError, match="--separate-torsos"):
        validate_config(CONFIG.replace(separate_torsos=True))
    with pytest.raises(ConfigError, match="--recurrent-core"):
        validate_config(CONFIG.replace(recurrent_core="lstm"))
    with pytest.raises(ConfigError, match="--core-width"):
        validate_config(CONFIG.replace(core_width=0))
    validate_config(CONFIG)


def test_evaluation_carries_the_hidden_state(built):
    """play_episodes with a GRU network's greedy policy plays what a hand loop plays that
    carries the core's hidden state from step to step (zeros at the reset): same returns and
    lengths. The loop's keys are play_episodes's."""
    env, network, params = built["env"], built["network"], built["runner"].params
    env_params = env.default_params.replace(max_steps_in_episode=CONFIG.max_episode_steps)
    num_envs, max_steps, key = 4, 12, jax.random.PRNGKey(5)
    results = jax.device_get(jax.jit(lambda key: play_episodes(
        env, env_params, network_policy(env, network, params, True), key, num_envs,
        max_steps))(key))

    @jax.jit
    def hand_loop(key):
        reset_key, loop_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), env_params)
        hidden = network.initial_hidden(num_envs)
        finished = jnp.zeros(num_envs, bool)
        returns, lengths = jnp.zeros(num_envs), jnp.zeros(num_envs, jnp.int32)
        for _ in range(max_steps):
            loop_key, _, step_key = jax.random.split(loop_key, 3)
            hidden, logits, _ = step_recurrent(network, params, hidden, obs,
                                               jnp.zeros(num_envs, bool))
            action = greedy_masked(logits, env.action_mask(obs))
            obs, state, reward, terminated, truncated, _ = jax.vmap(
                env.step, in_axes=(0, 0, 0, None))(jax.random.split(step_key, num_envs),
                                                   state, action, env_params)
            returns += jnp.where(finished, 0.0, reward)
            lengths += (~finished).astype(jnp.int32)
            finished |= terminated | truncated
        return returns, lengths, finished

    returns, lengths, finished = jax.device_get(hand_loop(key))
    assert finished.all() and results["finished"].all()
    np.testing.assert_allclose(results["episode_return"], returns, rtol=1e-6)
    np.testing.assert_array_equal(results["length"], lengths)
    assert results["masked"].sum() == 0


@pytest.mark.slow  # extended suite (pytest -m slow): three trainings, evaluate and watch
def test_gru_run_resumes_bit_for_bit(tmp_path, compile_cache_dir, capsys):
    """3 updates, save, resume, 2 more == 5 updates in one run, hidden state included (it is
    part of the runner state the checkpoint holds). The checkpoint loads as a policy, and
    scripts/evaluate.py and scripts/watch_agent.py play it."""
    full = train(CONFIG, options(tmp_path / "full", compile_cache_dir))
    assert full.updates_done == 5
    assert np.abs(np.asarray(full.runner_state.hidden)).max() > 0
    first = train(CONFIG, options(tmp_path / "parts", compile_cache_dir), stop_after_updates=3)
    saved = load_checkpoint(first.run_dir)
    assert saved["runner_state"].hidden.shape == (CONFIG.num_envs, CONFIG.core_width)
    second = train(CONFIG, options(tmp_path / "parts", compile_cache_dir), checkpoint=saved)
    assert second.updates_done == 5
    assert_trees_equal(second.runner_state, full.runner_state)
    assert all(r["actions/masked_sampled"] == 0 for r in full.records)
    assert load_policy(first.run_dir).config.recurrent_core == "gru"
    assert evaluate_main(["--checkpoint", first.run_dir, "--episodes", "4", "--max-episode-steps",
                          "20", "--policies", "checkpoint-greedy,checkpoint-sampled,random"]) == 0
    assert "checkpoint-greedy" in capsys.readouterr().out
    from scripts import watch_agent
    assert watch_agent.main([first.run_dir, "--episodes", "2", "--max-episode-steps", "8",
                             "--no-compile-cache"]) == 0
    assert "2 episodes: mean return" in capsys.readouterr().out


def test_a_windowed_run_checkpoint_loads_with_its_sequence_length(built, tmp_path):
    """A config field that takes an int or None (sequence_length, max_episode_steps) is read
    back from a checkpoint as the int it was saved with: a --sequence-length run resumes,
    evaluates and is watched like any other (its checkpoint was once refused as "config field
    sequence_length is 8")."""
    config = CONFIG.replace(sequence_length=8)
    save_checkpoint(str(tmp_path), runner_state=built["runner"], config=config.to_dict(),
                    update=0, env_steps=0, run_name="windowed", wandb_run_id=None,
                    elapsed_seconds=0.0, keep=1)
    loaded = load_checkpoint(str(tmp_path))
    assert loaded["config"]["sequence_length"] == 8
    assert load_policy(str(tmp_path)).config.sequence_length == 8


@pytest.mark.slow  # extended suite (pytest -m slow)
def test_gru_run_with_two_seeds_trains(tmp_path, compile_cache_dir):
    """--num-seeds 2 with a GRU: the hidden state gets the seed axis (sharded and vmapped like
    the other per-env fields), the run completes and the seeds' hidden states differ."""
    config = CONFIG.replace(num_seeds=2, total_timesteps=64)
    result = train(config, options(tmp_path, compile_cache_dir))
    assert result.updates_done == 1
    hidden = np.asarray(result.runner_state.hidden)
    assert hidden.shape == (2, CONFIG.num_envs, CONFIG.core_width)
    assert not np.array_equal(hidden[0], hidden[1])


def test_cli_flags_and_auto_scaled_minibatches_split_envs():
    """--recurrent-core gru --core-width N --sequence-length L reach the config; the
    auto-scaled minibatch count then divides the sequences per device (here 6 envs x 1000
    steps: 4 would divide the batch but not the 6 whole-rollout sequences; it divides the 24
    windows of 250). The default network is the GRU 128 with 8-step windows (SPEC §4.4);
    --recurrent-core none is the feed-forward one, its minibatches unchanged and no window
    in its config, and an explicit --sequence-length without a core is refused. An older
    checkpoint's config without the fields reads as feed-forward with whole-rollout
    windows."""
    from purejaxrl.cli.train import build_parser, config_from_args
    from purejaxrl.config import FIELDS_ADDED_LATER

    def parsed(*flags):
        args = build_parser().parse_args(["--env", "toy", "--num-envs", "6", "--num-steps",
                                          "1000", *flags])
        return config_from_args(args, None, devices=1, say=lambda *a, **k: None)
    gru = parsed("--recurrent-core", "gru", "--core-width", "32", "--sequence-length", "1000")
    assert (gru.recurrent_core, gru.core_width) == ("gru", 32)
    assert 6 % gru.num_minibatches == 0
    validate_config(gru.replace(separate_torsos=False))
    # With 250-step windows the 6 envs hold 24 sequences: the count nearest 4 that divides them.
    windowed = parsed("--recurrent-core", "gru", "--sequence-length", "250")
    assert (windowed.sequence_length, windowed.num_minibatches, gru.num_minibatches) == (250, 4, 3)
    validate_config(windowed)
    default = parsed()
    assert (default.recurrent_core, default.core_width, default.sequence_length) == ("gru", 128, 8)
    assert (6 * 1000 // 8) % default.num_minibatches == 0
    validate_config(default)
    feed_forward = parsed("--recurrent-core", "none")
    assert (feed_forward.num_minibatches, feed_forward.sequence_length) == (4, None)
    with pytest.raises(ConfigError, match="--sequence-length needs a recurrent core"):
        parsed("--recurrent-core", "none", "--sequence-length", "8")
    old = {k: v for k, v in TrainConfig().to_dict().items()
           if k not in ("recurrent_core", "core_width", "sequence_length")}
    assert TrainConfig.from_dict(old).recurrent_core == "none"
    assert TrainConfig.from_dict(old).sequence_length is None
    assert FIELDS_ADDED_LATER["core_width"] == 256


TWO_DEVICES = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    os.environ["JAX_PLATFORMS"] = "cpu"
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    from jax.sharding import PartitionSpec as P
    from purejaxrl.checkpoint import load_checkpoint, save_checkpoint
    from purejaxrl.train import train
    from tests.trainer.test_recurrent import CONFIG
    from tests.trainer.toy_run import options
    out = sys.argv[2]
    base = CONFIG.replace(num_minibatches=1)
    two = train(base.replace(num_devices=2), options(out + "/two", None), stop_after_updates=1)
    one = train(base.replace(num_devices=1), options(out + "/one", None), stop_after_updates=1)
    assert two.runner_state.hidden.sharding.spec == P("devices")
    np.testing.assert_allclose(np.asarray(two.runner_state.hidden),
                               np.asarray(one.runner_state.hidden), rtol=1e-5, atol=1e-6)
    moved = train(base.replace(num_devices=1), options(out + "/two", None),
                  checkpoint=load_checkpoint(two.run_dir), stop_after_updates=2)
    seeds = train(base.replace(num_devices=2, num_seeds=2), options(out + "/seeds", None),
                  stop_after_updates=1)
    assert seeds.runner_state.hidden.shape == (2, CONFIG.num_envs, CONFIG.core_width)
    assert seeds.runner_state.hidden.sharding.spec == P(None, "devices")
    print("ok")
""")


@pytest.mark.slow
def test_hidden_state_is_split_over_devices(tmp_path):
    """On 2 virtual CPU devices (a subprocess: XLA_FLAGS must precede jax) the hidden state is
    split over the device axis like the envs (with a seed axis in front for --num-seeds 2); the
    rollout does not depend on the split (hidden state after the first update's rollout equals
    the single-device run's); a 2-device GRU checkpoint resumes on 1 device."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    completed = subprocess.run([sys.executable, "-c", TWO_DEVICES, root, str(tmp_path)],
                               capture_output=True, text=True, env=env, timeout=600, cwd=root)
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert completed.stdout.strip().splitlines()[-1] == "ok"


def test_the_update_hands_the_rollout_over_to_gae_and_to_the_epochs(built, rollouts,
                                                                    monkeypatch):
    """One jitted ``ppo_update`` from the second rollout's start (a carried, non-zero hidden
    state): the epochs replay from the rollout's own start hidden state (not the state after
    the rollout), and GAE gets the rollout's terminated and truncated flags, its bootstrap
    values, and its rewards in the units of the return statistics merged with this rollout.
    The values are copied out of the compiled update as it runs."""
    seen = {}

    def spying(name, real, pick):
        def spy(*args):
            jax.debug.callback(lambda *values: seen.__setitem__(name, [np.asarray(v)
                                                                      for v in values]),
                               *pick(*args))
            return real(*args)
        return spy
    monkeypatch.setattr(ppo, "update_epochs", spying(
        "epochs", ppo.update_epochs, lambda *args: (args[10],)))  # window_hidden
    monkeypatch.setattr(ppo, "compute_gae", spying(
        "gae", ppo.compute_gae, lambda rewards, values, terminated, truncated, bootstrap, *_:
        (rewards, terminated, truncated, bootstrap)))
    env, env_params, network, optimizer, components = ppo.build(CONFIG)
    update = jax.jit(functools.partial(
        ppo.ppo_update, config=CONFIG, env=env, env_params=env_params, network=network,
        optimizer=optimizer, reward_components=components, axis_name=None))
    start = rollouts[1]["start"]
    jax.block_until_ready(update(start))
    _, transitions, _, discounted, windows, _ = built["collect"](start)
    np.testing.assert_array_equal(seen["epochs"][0], np.asarray(windows))
    np.testing.assert_array_equal(seen["epochs"][0][0], np.asarray(start.hidden))
    assert CONFIG.normalize_rewards
    scale = ppo.reward_scale(ppo.update_return_statistics(start.return_stats, discounted, None))
    rewards, terminated, truncated, bootstrap = seen["gae"]
    np.testing.assert_allclose(rewards, np.asarray(transitions.reward * scale), rtol=1e-6)
    assert float(scale) != 1.0  # the scaling is seen, not an identity
    np.testing.assert_array_equal(terminated, np.asarray(transitions.terminated))
    np.testing.assert_array_equal(truncated, np.asarray(transitions.truncated))
    np.testing.assert_array_equal(bootstrap, np.asarray(transitions.bootstrap_value))
    assert truncated.any()  # so a swap of the two flags would show
