"""The tiny toy-corridor run shared by the in-process trainer tests: one configuration and one
set of run options, so that its update chunk compiles once per session (the compile cache
serves every test, in-process or subprocess, that runs the same program)."""

import dataclasses
import functools

import jax
import numpy as np

from purejaxrl import ppo
from purejaxrl.config import RunOptions, TrainConfig

# 4 envs x 8 steps = 32 samples per update; 5 updates in chunks of 2 = 2 + 2 + 1 (partial).
CONFIG = TrainConfig(env="toy", num_envs=4, num_steps=8, num_minibatches=2, update_epochs=2,
                     total_timesteps=5 * 32, max_episode_steps=6, hidden_width=16,
                     hidden_depth=1, recurrent_core="none", lr=1e-2)


def options(tmp_path, cache_dir, **overrides) -> RunOptions:
    """Quiet (so no progress callback: the chunk stays cacheable), no wandb, chunks of 2."""
    base = RunOptions(run_name="run", checkpoint_dir=str(tmp_path), updates_per_chunk=2,
                      wandb=False, artifact=False, compile_cache_dir=cache_dir, quiet=True,
                      save_interval_minutes=60.0)
    return dataclasses.replace(base, **overrides)


def assert_trees_equal(a, b):
    """Same structure and every leaf equal bit for bit."""
    a, b = jax.device_get(a), jax.device_get(b)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def rollout_setup(config: TrainConfig) -> dict:
    """What the rollout tests start from: the built env and network, the runner state before
    the first update, and ``collect``, ``ppo.collect_rollout`` jitted for ``config``."""
    env, env_params, network, optimizer, components = ppo.build(config)
    runner = ppo.init_runner_state(config, env, env_params, network, optimizer, len(components))
    return dict(env=env, env_params=env_params, network=network, components=components,
                runner=runner, collect=jitted_collect(config, env, env_params, network,
                                                      components))


def jitted_collect(config: TrainConfig, env, env_params, network, components):
    """``ppo.collect_rollout`` jitted for ``config`` and ``env``: runner -> its outputs."""
    return jax.jit(functools.partial(ppo.collect_rollout, config=config, env=env,
                                     env_params=env_params, network=network,
                                     reward_components=components))
