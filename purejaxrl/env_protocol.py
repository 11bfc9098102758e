"""The environment as the trainer sees it: ``TrainerEnv`` wraps any env of ``envs.registry``
(a gymnax 1.0 ``Environment``) and reads every optional hook of the contract
(``envs/contract.py``, which documents it and checks it) once, with its default where the env
has none. The rest of ``purejaxrl/`` reads the env only through this class, so nothing in it
depends on an env's internals:

- rollout, loss (``ppo.py``): ``reset``/``step``, ``action_mask``, ``compact_observation``
  and ``expand_observation`` (the stored rollout), ``reward_components``,
  ``training_reward``, ``metric_values``, ``num_stages`` (curriculum), ``action_groups``
  (the group-entropy bonus), ``exploration_target`` (``--explore-share``);
- network (``networks.py``): ``flat_observation`` (encoder ``flat``), ``board_view``
  (``egocentric``), ``observation_shape`` (``cnn``);
- records (``logger.py``): ``metrics``, ``num_stages``, ``health_metrics``, ``alerts``;
- evaluation: ``metrics``, ``num_stages``, ``heuristic_policy``, ``episode_resources``.

Hooks are written for one env; the methods here take any leading batch dimensions (vmapped).
"""

from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from envs.contract import BoardView, Metric, num_actions

ENV_TRAINING_REWARD = "env"  # the env's own reward, offered by every env


class TrainerEnv:
    """``env`` (with ``params``, used only to read its signature) and its hooks."""

    def __init__(self, env, params):
        self.env = env
        self.num_actions = num_actions(env, params)
        obs, state = jax.eval_shape(env.reset, jax.random.PRNGKey(0), params)
        step = jax.eval_shape(env.step, jax.random.PRNGKey(0), state, jnp.int32(0), params)
        # One env's observation (shapes and dtypes) and its leaves' ranks.
        self.observation_shape = obs
        self._ranks = [leaf.ndim for leaf in jax.tree.leaves(obs)]
        # The breakdown's names in pytree (sorted) order: the order of the breakdown in metrics
        # and in checkpoints.
        self.reward_components: tuple[str, ...] = tuple(step[5].get("reward_breakdown", {}))
        self.training_reward_names = (ENV_TRAINING_REWARD,) + tuple(
            getattr(env, "training_rewards", {}))
        self.metrics: tuple[Metric, ...] = tuple(getattr(env, "metrics", ()))
        self.num_stages: Optional[int] = getattr(env, "num_stages", None)
        self.has_board_view = hasattr(env, "board_view")
        self.episode_resources: Optional[Callable] = getattr(env, "episode_resources", None)
        self.version = getattr(env, "version", None)
        # The model, worlds, leaf values and action counters of search (purejaxrl/search.py).
        self.search_hooks = getattr(env, "search_hooks", None)
        # Kinds of action, ((name, actions), ...), a partition of the actions; None: no groups.
        self.action_groups: Optional[tuple] = getattr(env, "action_groups", None)
        self.has_exploration_target = hasattr(env, "exploration_target")
        # Where a metric's alert shows: its record key -> the alert's words.
        self.alerts = {m.log: m.alert for m in self.metrics if m.log and m.alert}

    # ------------------------------------------------------------------------ gymnax API
    @property
    def name(self) -> str:
        return getattr(self.env, "name", type(self.env).__name__)

    @property
    def default_params(self):
        return self.env.default_params

    def reset(self, key, params):
        return self.env.reset(key, params)

    def step(self, key, state, action, params):
        return self.env.step(key, state, action, params)

    # ------------------------------------------------------------------------ hooks
    def action_group_matrix(self) -> Optional[jax.Array]:
        """f32[A, G]: 1 where action a belongs to group g (``probs @ matrix`` gives each
        group's share of the policy); None for an env without ``action_groups``."""
        if self.action_groups is None:
            return None
        matrix = np.zeros((self.num_actions, len(self.action_groups)), np.float32)
        for column, (_, members) in enumerate(self.action_groups):
            matrix[list(members), column] = 1.0
        return jnp.asarray(matrix)

    def _lead(self, obs) -> tuple:
        """The leading batch dimensions of ``obs`` (none for one env's observation)."""
        leaf = jax.tree.leaves(obs)[0]
        return leaf.shape[:leaf.ndim - self._ranks[0]]

    def _over_batch(self, fn: Callable, obs, *args):
        """``fn`` (written for one env) over every leading batch dimension of ``obs``."""
        for _ in self._lead(obs):
            fn = jax.vmap(fn)
        return fn(obs, *args)

    def action_mask(self, obs) -> jax.Array:
        """bool[..., A]: the legal actions (all where the env has no mask)."""
        if hasattr(self.env, "action_mask"):
            return self._over_batch(self.env.action_mask, obs)
        return jnp.ones(self._lead(obs) + (self.num_actions,), bool)

    def exploration_target(self, obs) -> tuple[jax.Array, jax.Array]:
        """(bool[...], i32[...]): where the env offers an action to explore, and that action."""
        return self._over_batch(self.env.exploration_target, obs)

    def compact_observation(self, obs):
        """The observation as a rollout stores it (the env's smaller form; as it is by
        default): a stored rollout is the largest buffer of an update."""
        if hasattr(self.env, "compact_observation"):
            return self._over_batch(self.env.compact_observation, obs)
        return obs

    def expand_observation(self, stored):
        """The observation ``compact_observation`` stored, bit for bit."""
        if hasattr(self.env, "expand_observation"):
            return self._over_batch(self.env.expand_observation, stored)
        return stored

    def flat_observation(self, obs) -> jax.Array:
        """f32[..., D]: the env's flat view, else every leaf flattened and concatenated."""
        if hasattr(self.env, "flat_observation"):
            return self._over_batch(self.env.flat_observation, obs)
        lead = self._lead(obs)
        return jnp.concatenate([leaf.reshape(lead + (-1,)).astype(jnp.float32)
                                for leaf in jax.tree.leaves(obs)], axis=-1)

    def board_view(self, obs) -> BoardView:
        return self._over_batch(self.env.board_view, obs)

    @property
    def image_observation(self) -> bool:
        """A single array of rank 3 ([H, W, C]): what the ``cnn`` encoder takes."""
        return isinstance(self.observation_shape, jax.ShapeDtypeStruct) and self._ranks == [3]

    def training_reward(self, name: str, reward: jax.Array, breakdown: dict) -> jax.Array:
        """The reward PPO optimises (``TrainConfig.training_reward``): the env's own, or one of
        its ``training_rewards``, for rewards of any batch shape."""
        if name == ENV_TRAINING_REWARD:
            return reward
        fn = self.env.training_rewards[name]
        for _ in range(reward.ndim):
            fn = jax.vmap(fn)
        return fn(reward, breakdown)

    def metric_values(self, obs, action, info) -> jax.Array:
        """f32[N, M]: every metric's value on each of N env steps (``obs`` the observation the
        action was chosen from, ``info`` the step's)."""
        if not self.metrics:
            return jnp.zeros(action.shape + (0,), jnp.float32)
        return jnp.stack([jax.vmap(m.value)(obs, action, info).astype(jnp.float32)
                          for m in self.metrics], axis=-1)

    def heuristic_policy(self) -> Optional[Callable]:
        return getattr(self.env, "heuristic_policy", None)

    def health_metrics(self, totals: dict) -> dict:
        hook = getattr(self.env, "health_metrics", None)
        return {} if hook is None else hook(totals)

