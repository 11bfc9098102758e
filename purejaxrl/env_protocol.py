"""What the trainer needs from an environment, typed. The check that an environment provides
it is ``envs.contract.check_env_contract`` (tests/test_env_contract.py).

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
