"""Expert iteration (purejaxrl/expert_iteration.py, SPEC §4.5) on the toy corridor, with a
stand-in teacher whose target is a known function of the observation (the search itself is
tested in test_search.py; the end-to-end run on HackMatrix is in the extended suite).

Rules checked:
* self-play records, for every move, the observation the teacher chose from, beside the target
  it gave for that observation; the next move's observation is the env's step from it (the
  same keys, replayed by hand), and episodes continue across iterations;
* fitting moves the network's masked policy to the target (KL falls, argmax follows), and a
  masked action keeps no probability;
* bad options are refused with one line and exit 2 before any work.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purejaxrl import expert_iteration as ei
from purejaxrl import ppo
from purejaxrl.cli.expert_iteration import main as ei_main
from purejaxrl.networks import init_network
from envs.toy.corridor import WAIT
from tests.trainer.toy_run import CONFIG

LANES, STEPS = 3, 5


@pytest.fixture(scope="module")
def toy():
    env, env_params, network, _, _ = ppo.build(CONFIG)
    obs, _ = env.reset(jax.random.PRNGKey(0), env_params)
    params = init_network(network, jax.random.PRNGKey(1), obs)
    return env, env_params, network, params


def teacher_choice(mask):
    """The stand-in teacher's move: the highest-index legal action below WAIT (in the corridor:
    right, or siphon on cell 2), so the agent walks and the observations change."""
    return np.where(mask & (np.arange(mask.shape[-1]) < WAIT), np.arange(mask.shape[-1]),
                    -1).max(axis=-1)


def stand_in_teacher(env):
    """Target: all weight on ``teacher_choice``; the move: that action."""
    def teacher_for(params):
        del params

        def teach(key, obs, env_state):
            del key, env_state
            mask = env.action_mask(obs)
            below_wait = mask & (jnp.arange(mask.shape[-1]) < WAIT)
            action = jnp.max(jnp.where(below_wait, jnp.arange(mask.shape[-1]), -1))
            return action, jax.nn.one_hot(action, mask.shape[-1])
        return teach
    return teacher_for


def test_self_play_aligns_each_target_with_its_observation(toy):
    env, env_params, _, params = toy
    self_play = jax.jit(ei.make_self_play(env, env_params, stand_in_teacher(env), STEPS))
    carry = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(jax.random.PRNGKey(2), LANES), env_params)
    key = jax.random.PRNGKey(3)
    new_carry, moves = self_play(params, carry, key)

    obs = carry[0]
    state = carry[1]
    for t, move_key in enumerate(jax.random.split(key, STEPS)):
        recorded = jax.tree.map(lambda x: x[t], moves["obs"])
        for got, want in zip(jax.tree.leaves(recorded), jax.tree.leaves(obs)):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        mask = np.asarray(env.action_mask(obs))
        np.testing.assert_array_equal(np.asarray(moves["mask"][t]), mask)
        actions = np.asarray(moves["target"][t]).argmax(axis=-1)
        assert mask[np.arange(LANES), actions].all()
        assert (actions == teacher_choice(mask)).all()
        _, step_key = jax.random.split(move_key)
        obs, state, _, terminated, truncated, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(jax.random.split(step_key, LANES), state,
                                               jnp.asarray(actions), env_params)
        np.testing.assert_array_equal(np.asarray(moves["done"][t]),
                                      np.asarray(terminated | truncated))
    assert len({float(x) for x in np.asarray(moves["obs"].features)[:, 0, 0]}) > 2  # it walked
    # The carry is where the last move left the lanes: the next iteration continues there.
    for got, want in zip(jax.tree.leaves(new_carry[0]), jax.tree.leaves(obs)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_fitting_moves_the_masked_policy_to_the_target(toy):
    env, env_params, network, params = toy
    self_play = jax.jit(ei.make_self_play(env, env_params, stand_in_teacher(env), STEPS))
    carry = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(jax.random.PRNGKey(4), LANES), env_params)
    _, moves = self_play(params, carry, jax.random.PRNGKey(5))
    data = ei.flatten_moves(moves)
    assert len(data["target"]) == LANES * STEPS

    settings = ei.ExpertIterationSettings(num_envs=LANES, num_steps=STEPS, minibatch_size=5,
                                          epochs=1, lr=3e-2)
    optimizer = ei.make_optimizer(settings)
    fit_step = jax.jit(ei.make_fit_step(network, optimizer))
    loss = jax.jit(lambda p: ei.policy_loss(network, p, data["obs"], data["target"],
                                            data["mask"])[1])
    before = loss(params)
    opt_state = optimizer.init(params)
    rng = np.random.default_rng(0)
    for batch in ei.minibatches(data, settings.minibatch_size, 40, rng):
        params, opt_state, _ = fit_step(params, opt_state, batch)
    after = loss(params)
    assert float(after["kl"]) < 0.1 * float(before["kl"])
    logits, _ = network.apply(params, data["obs"])
    policy = np.asarray(jax.nn.softmax(jnp.where(data["mask"], logits, -1e9)))
    assert (policy.argmax(axis=-1) == data["target"].argmax(axis=-1)).all()
    assert (policy[~data["mask"]] < 1e-6).all()


def test_minibatches_cover_every_sample_once_per_epoch():
    data = {"target": np.arange(10)}
    passes = list(ei.minibatches(data, 3, 2, np.random.default_rng(0)))
    assert len(passes) == 6  # 3 per epoch: the remainder of 1 is dropped
    first_epoch = np.concatenate([batch["target"] for batch in passes[:3]])
    assert len(set(first_epoch.tolist())) == 9


@pytest.mark.parametrize("flags, message", [
    (["--minutes", "0"], "--minutes must be > 0"),
    (["--simulations", "0"], "--simulations must be >= 1"),
    (["--minibatch-size", "2048"], "is larger than one iteration's moves"),
    (["--lr", "-1"], "--lr must be > 0"),
    (["--stop-after-iterations", "0"], "--stop-after-iterations must be >= 1"),
    (["--value-scale", "0"], "--value-scale must be > 0"),
])
def test_bad_options_are_refused_before_any_work(flags, message, tmp_path, capsys):
    checkpoint = tmp_path / "checkpoint_1.msgpack"
    checkpoint.write_bytes(b"")
    code = ei_main(["--checkpoint", str(checkpoint), "--out", str(tmp_path / "out"), *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["--minutes", "--save-interval-minutes", "--value-scale",
                                  "--lr"])
@pytest.mark.parametrize("value", ["inf", "nan"])
def test_non_finite_numbers_are_refused_while_parsing(flag, value, tmp_path, capsys):
    """NaN and infinity are no budget, interval, scale or learning rate (inf passes ``x > 0``):
    refused while the arguments are parsed, one ``error:`` line, exit 2, nothing created."""
    checkpoint = tmp_path / "checkpoint_1.msgpack"
    checkpoint.write_bytes(b"")
    with pytest.raises(SystemExit) as stop:
        ei_main(["--checkpoint", str(checkpoint), "--out", str(tmp_path / "out"), flag, value])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: argument {flag}: must be a finite number")
    assert not (tmp_path / "out").exists()


def test_existing_output_and_missing_checkpoint_are_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "expert_iteration.jsonl").write_text("{}\n")
    checkpoint = tmp_path / "checkpoint_1.msgpack"
    checkpoint.write_bytes(b"")
    assert ei_main(["--checkpoint", str(checkpoint), "--out", str(out)]) == 2
    assert "already exists and is not empty" in capsys.readouterr().err
    assert ei_main(["--checkpoint", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert (out / "expert_iteration.jsonl").read_text() == "{}\n"  # untouched


@pytest.mark.slow  # extended suite: compiles the search on HackMatrix (about 2 minutes)
def test_two_iterations_on_hackmatrix_write_a_checkpoint_that_plays(tmp_path):
    """From an untrained HackMatrix checkpoint: two iterations with a tiny search, one metrics
    line each, and a checkpoint the policy loader accepts whose parameters were fitted (they
    differ from the source's) while the rest of the runner state is the source's."""
    from purejaxrl.checkpoint import load_checkpoint, save_checkpoint
    from purejaxrl.config import TrainConfig
    from purejaxrl.policy import load_policy

    config = TrainConfig(num_envs=2, hidden_width=16, hidden_depth=1, recurrent_core="none")
    env, env_params, network, optimizer, components = ppo.build(config)
    runner = ppo.init_runner_state(config, env, env_params, network, optimizer, len(components))
    source = str(tmp_path / "source")
    save_checkpoint(source, runner_state=runner, config=config.to_dict(), update=0,
                    env_steps=0, run_name="source", wandb_run_id=None, elapsed_seconds=0.0,
                    keep=1)
    out = tmp_path / "ei"
    assert ei_main(["--checkpoint", source, "--out", str(out), "--num-envs", "2",
                    "--num-steps", "2", "--minibatch-size", "4", "--simulations", "2",
                    "--stop-after-iterations", "2"]) == 0
    lines = (out / "expert_iteration.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in lines] == [1, 2]
    fitted = load_policy(str(out)).params
    before = jax.tree.leaves(jax.device_get(runner.params))
    assert any(not np.array_equal(a, b) for a, b in zip(before, jax.tree.leaves(fitted)))
    saved = load_checkpoint(str(out))
    np.testing.assert_array_equal(np.asarray(saved["runner_state"].update_step),
                                  np.asarray(runner.update_step))
