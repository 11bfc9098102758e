"""The stored rollout (envs/contract.py: ``compact_observation`` / ``expand_observation``): a
rollout keeps each observation in the env's smaller form, and the loss reads it back exactly,
so an env's storage changes the update's memory and nothing of its numbers.

The toy corridor stored two ways side by side from the same runner: as it is, and with its
features as int8 counts (cells out of ``EXIT_CELL``), an encoding the network would misread
if the loss forgot to expand it."""

import jax
import jax.numpy as jnp
import numpy as np

from envs.contract import check_env_contract
from envs.toy import EXIT_CELL, ToyCorridor
from purejaxrl import ppo
from purejaxrl.config import TrainConfig
from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.networks import make_network
from tests.trainer.toy_run import assert_trees_equal, jitted_collect

CONFIG = TrainConfig(env="toy", num_envs=4, num_steps=12, max_episode_steps=5, hidden_width=16,
                     hidden_depth=1, num_minibatches=1, update_epochs=1, total_timesteps=48,
                     training_reward="env", recurrent_core="none")
SCALES = np.array([EXIT_CELL, 1, EXIT_CELL], np.float32)  # cell, siphoned, best cell


class StoredAsCounts(ToyCorridor):
    """The toy corridor whose rollouts store its features as int8 counts."""

    def compact_observation(self, obs):
        return obs.replace(features=jnp.round(obs.features * SCALES).astype(jnp.int8))

    def expand_observation(self, stored):
        return stored.replace(features=stored.features.astype(jnp.float32) / SCALES)


def test_a_compact_rollout_expands_to_the_plain_one_and_gives_the_same_loss():
    plain_env, env_params, plain_network, optimizer, components = ppo.build(CONFIG)
    counts = StoredAsCounts()
    check_env_contract(counts, env_params)  # expand(compact(obs)) is obs, bit for bit
    counts_env = TrainerEnv(counts, env_params)
    counts_network = make_network(CONFIG, counts_env)
    runner = ppo.init_runner_state(CONFIG, plain_env, env_params, plain_network, optimizer,
                                   len(components))
    _, plain, *_ = jitted_collect(CONFIG, plain_env, env_params, plain_network,
                                  components)(runner)
    _, stored, *_ = jitted_collect(CONFIG, counts_env, env_params, counts_network,
                                   components)(runner)

    # Stored in the env's form; everything else about the rollout is unchanged.
    assert stored.obs.features.dtype == jnp.int8
    assert not np.array_equal(np.asarray(stored.obs.features, np.float32),
                              np.asarray(plain.obs.features))
    assert_trees_equal(counts_env.expand_observation(stored.obs), plain.obs)
    assert_trees_equal(stored.replace(obs=None), plain.replace(obs=None))

    # The loss reads the stored form back: the same loss and gradient, bit for bit.
    advantages = jnp.linspace(-1.0, 1.0, CONFIG.num_steps * CONFIG.num_envs).reshape(
        CONFIG.num_steps, CONFIG.num_envs)
    targets = jnp.ones_like(advantages)

    def loss(network, batch):
        return jax.jit(jax.value_and_grad(
            lambda p: ppo.ppo_loss(p, network, batch, advantages, targets, CONFIG)[0]))(
                runner.params)
    assert_trees_equal(loss(counts_network, stored), loss(plain_network, plain))
