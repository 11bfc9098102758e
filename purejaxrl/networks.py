"""Actor-critic network over the observation, and the masked categorical distribution.

The baseline is a flat MLP over ``flatten(obs)`` (player, programs, grid in that order). The
action mask is applied to the logits outside the network, so that the same masking code serves
sampling, log-probabilities, entropy and KL.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from envs.hackmatrix.observation import Observation, flatten

# A large *finite* negative: exp() of it underflows to exactly 0 in float32, so masked actions
# get probability 0, while (unlike -inf) it never yields inf - inf = nan in log-softmax or in
# 0 * log(0) terms.
MASKED_LOGIT = -1e9

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu}
_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def _dense(features: int, scale: float, dtype) -> nn.Dense:
    # Orthogonal weights and zero biases (the PPO implementation-details recipe).
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(scale),
                    bias_init=nn.initializers.zeros, dtype=dtype, param_dtype=jnp.float32)


class MLPTorso(nn.Module):
    width: int
    depth: int
    activation: str
    dtype: str

    @nn.compact
    def __call__(self, x):
        for _ in range(self.depth):
            x = _ACTIVATIONS[self.activation](_dense(self.width, np.sqrt(2), _DTYPES[self.dtype])(x))
        return x


class ActorCritic(nn.Module):
    """Flat MLP actor-critic. Returns float32 (logits[..., A], value[...]) whatever the compute
    dtype; parameters are always float32."""

    num_actions: int
    hidden_width: int = 256
    hidden_depth: int = 2
    activation: str = "tanh"
    separate_torsos: bool = True
    compute_dtype: str = "float32"

    @nn.compact
    def __call__(self, obs: Observation):
        x = flatten(obs).astype(_DTYPES[self.compute_dtype])
        torso = lambda: MLPTorso(self.hidden_width, self.hidden_depth, self.activation,
                                 self.compute_dtype)
        actor_features = torso()(x)
        critic_features = torso()(x) if self.separate_torsos else actor_features
        logits = _dense(self.num_actions, 0.01, _DTYPES[self.compute_dtype])(actor_features)
        value = _dense(1, 1.0, _DTYPES[self.compute_dtype])(critic_features)
        return logits.astype(jnp.float32), value[..., 0].astype(jnp.float32)


def make_network(config, num_actions: int) -> ActorCritic:
    return ActorCritic(num_actions=num_actions, hidden_width=config.hidden_width,
                       hidden_depth=config.hidden_depth, activation=config.activation,
                       separate_torsos=config.separate_torsos, compute_dtype=config.compute_dtype)


# ---------------------------------------------------------------- masked categorical

def masked_logits(logits: jax.Array, mask: jax.Array) -> jax.Array:
    return jnp.where(mask, logits, MASKED_LOGIT)


def masked_log_probs(logits: jax.Array, mask: jax.Array) -> jax.Array:
    """Log-softmax over the legal actions; masked entries hold a huge negative, never used."""
    return jax.nn.log_softmax(masked_logits(logits, mask), axis=-1)


def sample_masked(key: jax.Array, logits: jax.Array, mask: jax.Array) -> jax.Array:
    """Sample an action; a masked action has probability exactly 0 (Gumbel noise is bounded
    far below 1e9, so it can never lift a masked logit above a legal one)."""
    return jax.random.categorical(key, masked_logits(logits, mask), axis=-1)


def greedy_masked(logits: jax.Array, mask: jax.Array) -> jax.Array:
    return jnp.argmax(masked_logits(logits, mask), axis=-1)


def log_prob_of(logits: jax.Array, mask: jax.Array, action: jax.Array) -> jax.Array:
    log_probs = masked_log_probs(logits, mask)
    return jnp.take_along_axis(log_probs, action[..., None].astype(jnp.int32), axis=-1)[..., 0]


def masked_entropy(logits: jax.Array, mask: jax.Array) -> jax.Array:
    """Entropy of the distribution restricted to the legal actions (illegal terms are 0, not
    0 * -1e9 garbage)."""
    log_probs = masked_log_probs(logits, mask)
    return -jnp.sum(jnp.where(mask, jnp.exp(log_probs) * log_probs, 0.0), axis=-1)


def masked_kl(logits_p: jax.Array, logits_q: jax.Array, mask: jax.Array) -> jax.Array:
    """KL(p || q) summed over the legal actions only."""
    log_p = masked_log_probs(logits_p, mask)
    log_q = masked_log_probs(logits_q, mask)
    return jnp.sum(jnp.where(mask, jnp.exp(log_p) * (log_p - log_q), 0.0), axis=-1)


def parameter_count(params) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(params)))
