"""The tiny toy-corridor run shared by the in-process trainer tests: one configuration and one
set of run options, so that its update chunk compiles once per session (the compile cache
serves every test, in-process or subprocess, that runs the same program)."""

import dataclasses
import functools
import json
import os
import subprocess
import sys
import textwrap

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


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What a script run on four devices starts with: XLA_FLAGS must be set before jax is imported.
_FOUR_DEVICES_PRELUDE = """
import json, os, pathlib, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"
sys.path.insert(0, sys.argv[1])
out = pathlib.Path(sys.argv[2])
"""


def run_on_four_devices(body: str, out_dir) -> dict:
    """Run ``body`` (Python that may use ``out``, a fresh directory, and must print one JSON
    line last) in a subprocess that sees 4 forced CPU devices; returns that JSON."""
    script = _FOUR_DEVICES_PRELUDE + textwrap.dedent(body)
    completed = subprocess.run(
        [sys.executable, "-c", script, REPO_ROOT, str(out_dir)], capture_output=True, text=True,
        env={k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])
