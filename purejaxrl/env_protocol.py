"""What the trainer needs from an environment, typed, and the one check that an environment
provides it (in the spirit of ``pgx.api_test``). ``envs.hackmatrix.HackMatrix`` and
``purejaxrl.toy_env.ToyCorridor`` implement it; tests/trainer/test_env_contract.py runs the
check on both.

The trainer relies on exactly this (``ppo.py``, ``evaluation.py``): the gymnax-style
``reset(key, params) -> (obs, state)`` and auto-resetting
``step(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)`` with an
``Observation`` whose ``action_mask`` has ``num_actions`` entries, the ``INFO_KEYS`` below in
``info``, and params with the episode limit and the shaping discount."""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from envs.hackmatrix.observation import Observation

# info of a step, as the trainer reads it: name -> (dtype kind, shape). "reward_breakdown" is a
# dict of float32 scalars named by REWARD_COMPONENTS; "final_observation" an Observation.
INFO_KEYS = {
    "invalid_action": (jnp.bool_, ()),  # the mask forbade the action (ends the episode)
    "stage_complete": (jnp.bool_, ()),
    "won": (jnp.bool_, ()),
    "died": (jnp.bool_, ()),
    "stage": (jnp.int32, ()),  # stage after the step (1-based)
    "shot": (jnp.bool_, ()),  # a direction action that shot rather than moved
    "undo_exploit_completion": (jnp.bool_, ()),
    "overflow": (jnp.int32, ()),  # slot-capacity overflows so far (must stay 0)
}


class EnvParams(Protocol):
    max_steps_in_episode: int  # truncation
    shaping_gamma: float  # the discount of potential-based shaping: set to the agent's gamma

    def replace(self, **changes) -> "EnvParams": ...


class TrainableEnv(Protocol):
    num_actions: int
    reward_components: tuple[str, ...]  # info["reward_breakdown"] keys, in summing order

    @property
    def default_params(self) -> EnvParams: ...

    def reset(self, key: jax.Array, params: EnvParams) -> tuple[Observation, Any]: ...

    def step(self, key: jax.Array, state: Any, action: jax.Array, params: EnvParams
             ) -> tuple[Observation, Any, jax.Array, jax.Array, jax.Array, dict]: ...

    def observation_space(self, params: EnvParams): ...


def _check_observation(obs: Observation, space, num_actions: int, where: str) -> None:
    assert isinstance(obs, Observation), f"{where}: {type(obs).__name__} is not an Observation"
    for name, box in space.spaces.items():
        leaf = getattr(obs, name)
        assert leaf.shape == box.shape, f"{where}: {name} shape {leaf.shape} != {box.shape}"
        assert leaf.dtype == box.dtype, f"{where}: {name} dtype {leaf.dtype} != {box.dtype}"
    assert obs.action_mask.shape == (num_actions,)
    assert bool(jnp.any(obs.action_mask)), f"{where}: empty action mask"


def check_env_contract(env: TrainableEnv, params: EnvParams, *, num_envs: int = 4,
                       num_steps: int = 32, seed: int = 0) -> None:
    """Assert that ``env`` meets the trainer's contract: observations match the declared
    spaces with a non-empty mask; ``step`` returns the 6-tuple with float32 reward, bool flags
    and every ``INFO_KEYS`` entry of the declared dtype and shape, the reward breakdown named by
    ``reward_components`` and summing to the reward, and ``final_observation``; jit and vmap of
    random legal play over ``num_steps`` trace ``step`` once; an episode that ends is followed
    by a reset observation while ``final_observation`` keeps the ended one."""
    space = env.observation_space(params)
    obs, state = jax.jit(env.reset)(jax.random.PRNGKey(seed), params)
    _check_observation(obs, space, env.num_actions, "reset")

    traces = []

    def step(key, state, action):
        traces.append(None)  # runs once per trace
        return env.step(key, state, action, params)

    def play(key, obs, state):
        def one(carry, key):
            obs, state = carry
            act_key, step_key = jax.random.split(key)
            logits = jnp.where(obs.action_mask, 0.0, -jnp.inf)
            action = jax.vmap(jax.random.categorical)(jax.random.split(act_key, num_envs),
                                                       logits)
            out = jax.vmap(step)(jax.random.split(step_key, num_envs), state, action)
            legal = jnp.take_along_axis(obs.action_mask, action[:, None], axis=1)[:, 0]
            return (out[0], out[1]), (out, obs, legal)
        return jax.lax.scan(one, (obs, state), jax.random.split(key, num_steps))[1]

    keys = jax.random.split(jax.random.PRNGKey(seed + 1), num_envs)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    (next_obs, _, reward, terminated, truncated, info), before, legal = jax.device_get(
        jax.jit(play)(jax.random.PRNGKey(seed + 2), obs, state))
    assert len(traces) == 1, f"step was traced {len(traces)} times"
    assert bool(np.all(legal)), "random legal play chose a masked action"
    batch = (num_steps, num_envs)
    assert reward.shape == batch and reward.dtype == np.float32, (reward.shape, reward.dtype)
    for flag in (terminated, truncated):
        assert flag.shape == batch and flag.dtype == np.bool_
    assert not np.any(terminated & truncated), "a step both terminated and truncated"
    for name, (dtype, shape) in INFO_KEYS.items():
        assert name in info, f"info lacks {name!r}"
        assert info[name].dtype == dtype and info[name].shape == batch + shape, (
            name, info[name].dtype, info[name].shape)
    breakdown = info["reward_breakdown"]
    assert set(breakdown) == set(env.reward_components), tuple(breakdown)
    np.testing.assert_allclose(sum(breakdown[n] for n in env.reward_components), reward,
                               rtol=1e-5, atol=1e-5)
    for t in range(num_steps):
        _check_observation(jax.tree.map(lambda x: x[t, 0], next_obs), space, env.num_actions,
                           f"step {t}")
    done = terminated | truncated
    assert np.any(done), f"no episode ended in {num_steps} steps of random play"
    final = info["final_observation"]
    assert jax.tree.structure(final) == jax.tree.structure(next_obs)
    same = np.all(np.stack([np.all(x == y, axis=tuple(range(2, x.ndim)))
                            for x, y in zip(jax.tree.leaves(final), jax.tree.leaves(next_obs))]),
                  axis=0)
    # Where the episode goes on, final_observation is the next observation (where it ended,
    # the ended episode's last one: the step's observation before the reset replaced it).
    assert np.all(same[~done]), "final_observation differs from the observation mid-episode"
    # The observation an action was chosen from is the previous step's next observation.
    for t in range(1, num_steps):
        assert all(np.array_equal(a[t], b[t - 1]) for a, b in
                   zip(jax.tree.leaves(before), jax.tree.leaves(next_obs)))
