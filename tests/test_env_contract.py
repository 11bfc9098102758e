"""The environment contract (envs/contract.py, the spirit of pgx.api_test) holds for every kind of
env the trainer is used with: HackMatrix and the toy corridor (every optional hook), gymnax's
CartPole-v1 (a plain vector env) and Breakout-MinAtar (a plain image env); and the registry
(envs/registry.py) builds them by id. Episodes are capped at a few steps so that random legal
play ends some of them inside the check."""

import pytest

from envs import registry
from envs.contract import check_env_contract
from envs.toy import ToyCorridor

EPISODE_CAP = 5


@pytest.mark.parametrize("env_id", ["hackmatrix", "toy", "CartPole-v1", "Breakout-MinAtar"])
def test_environment_meets_the_contract(env_id):
    env, params = registry.make(env_id)
    params = params.replace(max_steps_in_episode=EPISODE_CAP)
    check_env_contract(env, params, num_envs=2, num_steps=3 * EPISODE_CAP)


def test_the_contract_check_catches_a_metric_that_reads_a_missing_info_key():
    """The check can fail: a toy corridor whose step drops "died", which its metric reads, is
    refused, naming the key."""
    class WithoutDied(ToyCorridor):
        def step_env(self, key, state, action, params):
            *out, info = super().step_env(key, state, action, params)
            return (*out, {k: v for k, v in info.items() if k != "died"})

    env = WithoutDied()
    with pytest.raises(KeyError, match="died"):
        check_env_contract(env, env.default_params.replace(max_steps_in_episode=EPISODE_CAP),
                           num_envs=2, num_steps=3 * EPISODE_CAP)


def test_the_contract_check_catches_a_breakdown_that_does_not_sum_to_the_reward():
    class Overpaid(ToyCorridor):
        def step_env(self, key, state, action, params):
            obs, state, reward, terminated, info = super().step_env(key, state, action, params)
            return obs, state, reward + 1.0, terminated, info

    env = Overpaid()
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        check_env_contract(env, env.default_params.replace(max_steps_in_episode=EPISODE_CAP),
                           num_envs=2, num_steps=3 * EPISODE_CAP)


def test_registry_passes_each_env_only_the_training_options_it_declares():
    """HackMatrix takes the training options; the toy corridor and gymnax envs declare none and
    build unchanged when they are given."""
    options = dict(reward_shaping="potential", close_undo_exploit=True, undo_pays_once=True)
    hackmatrix, _ = registry.make("hackmatrix", **options)
    assert (hackmatrix.reward_shaping, hackmatrix.close_undo_exploit,
            hackmatrix.undo_pays_once) == ("potential", True, True)
    toy, _ = registry.make("toy", **options)
    assert isinstance(toy, ToyCorridor)
    cartpole, params = registry.make("CartPole-v1", **options)
    assert cartpole.num_actions == 2 and params.max_steps_in_episode == 500


@pytest.mark.parametrize("env_id, message", [
    ("cartpole", "unknown env 'cartpole': use hackmatrix, toy or a gymnax id"),
    ("Pendulum-v1", "Pendulum-v1 has a Box action space; the trainer supports discrete"),
])
def test_registry_refuses_what_the_trainer_cannot_train(env_id, message):
    with pytest.raises(registry.UnknownEnvError, match=message):
        registry.make(env_id)


def test_every_id_of_the_registry_starts_with_our_envs_and_includes_gymnax():
    ids = registry.env_ids()
    assert ids[:2] == ("hackmatrix", "toy") and registry.DEFAULT_ENV == "hackmatrix"
    assert {"CartPole-v1", "Breakout-MinAtar"} <= set(ids)
    assert registry.env_version("hackmatrix").startswith("hackmatrix-jax/")
    assert registry.env_version("CartPole-v1") is None


def test_the_contract_check_catches_a_table_column_without_a_summary():
    """A metric's evaluation column shows its summary: one without a summary is refused."""
    from envs.contract import Metric

    class ColumnOnly(ToyCorridor):
        metrics = ToyCorridor.metrics + (
            Metric("steps", lambda obs, action, info: info["won"] | True, column="steps"),)

    env = ColumnOnly()
    with pytest.raises(AssertionError, match="'steps' has a table column but no summary"):
        check_env_contract(env, env.default_params.replace(max_steps_in_episode=EPISODE_CAP),
                           num_envs=2, num_steps=3 * EPISODE_CAP)
