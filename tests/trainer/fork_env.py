"""A one-decision env for the search's objective (test_search.py, test_distillation.py): the
step's rewards and the critic's values alone decide which move a search prefers."""

from flax import struct
import jax.numpy as jnp
from gymnax.environments import spaces


@struct.dataclass
class ForkObs:
    position: jnp.ndarray  # 0: the start; 1 and 2: where actions 0 and 1 lead
    action_mask: jnp.ndarray


class ForkSearchHooks:
    """The game's side of search for the fork: its objective is the "gain" (action 0 earns
    1, action 1 nothing), its leaves are worth 0, every world is the true state."""

    DEFAULT_GAMMA = 0.99

    @staticmethod
    def make_hooks(env, *, fair: bool, gamma: float = DEFAULT_GAMMA) -> dict:
        del fair, gamma  # every world is the true state; the fork's model has no shaping
        return dict(model_env=env, model_params=None, to_model=lambda state: state,
                    sample_world=None,
                    reward_fn=lambda reward, info: info["reward_breakdown"]["gain"],
                    leaf_value=lambda key, obs, state: jnp.float32(0.0))


class Fork:
    """One move from the start: action 0 leads to position 1 and earns 1 of the training
    reward "gain" (its breakdown) but -5 of the env's reward; action 1 leads to position 2 and
    earns nothing; both positions are absorbing and earn nothing more. What position 2 is
    worth is the critic's to say."""

    training_rewards = {"gain": lambda reward, breakdown: breakdown["gain"]}
    search_hooks = ForkSearchHooks

    def action_space(self, params):
        return spaces.Discrete(2)

    def reset(self, key, params):
        return ForkObs(jnp.int32(0), jnp.ones(2, bool)), jnp.int32(0)

    def step_env(self, key, state, action, params):
        del key, params
        first = state == 0
        position = jnp.where(first, action + 1, state)  # positions 1 and 2 are absorbing
        gain = first & (action == 0)
        info = {"reward_breakdown": {"gain": jnp.where(gain, 1.0, 0.0)}}
        return (ForkObs(position, jnp.ones(2, bool)), position, jnp.where(gain, -5.0, 0.0),
                jnp.bool_(False), info)

    def step(self, key, state, action, params):
        obs, state, reward, done, info = self.step_env(key, state, action, params)
        return obs, state, reward, done, jnp.bool_(False), info


class TableCritic:
    """An actor-critic stand-in: uniform logits, value ``values[position]``."""

    def __init__(self, values):
        self.values = jnp.asarray(values, jnp.float32)

    def apply(self, params, obs):
        return jnp.zeros(obs.action_mask.shape), self.values[obs.position]
