"""Actor-critic network over the observation, and the masked categorical distribution.

Two encoders feed the MLP torso (``--encoder``):

* ``flat``: ``flatten(obs)`` (player, programs, grid in that order), the baseline.
* ``egocentric``: the grid re-centred on the player (``egocentric_grid``, an 11x11 window in
  which every board cell is visible from every player position, plus an on-board channel), each
  cell embedded by one shared dense layer, then flattened next to the player features, the owned
  programs and the action mask. Moves and shots are relative to the player, so a pattern such as
  "the exit is one cell up" or "an enemy is in my column" has one set of weights wherever the
  player stands (as in Craftax's and NetHack's player-centred views).

The action mask is applied to the logits outside the network, so that the same masking code
serves sampling, log-probabilities, entropy and KL.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from envs.hackmatrix.core.constants import COL_OF, GRID, N_CELLS, ROW_OF
from envs.hackmatrix.core.entities import on_board
from envs.hackmatrix.observation import Observation, flatten

# A large *finite* negative: exp() of it underflows to exactly 0 in float32, so masked actions
# get probability 0, while (unlike -inf) it never yields inf - inf = nan in log-softmax or in
# 0 * log(0) terms.
MASKED_LOGIT = -1e9

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu}
# Offsets -(GRID-1)..(GRID-1) around the player: the whole board is visible from any cell.
EGOCENTRIC_SIZE = 2 * GRID - 1
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


def player_cell(obs: Observation) -> tuple[jax.Array, jax.Array]:
    """(row, col) i32 of the player, read back from player[0] = row / 5 and player[1] = col / 5
    (programs-rewards-observation §9.2)."""
    scaled = jnp.round(obs.player[..., :2] * (GRID - 1)).astype(jnp.int32)
    scaled = jnp.clip(scaled, 0, GRID - 1)
    return scaled[..., 0], scaled[..., 1]


def _window_sources() -> np.ndarray:
    """WINDOW_SOURCE[p, w]: the board cell seen at window cell w (row-major over 11 x 11) by a
    player on cell p, or ``N_CELLS`` (a padding row) where that offset leaves the board."""
    table = np.full((N_CELLS, EGOCENTRIC_SIZE * EGOCENTRIC_SIZE), N_CELLS, np.int32)
    offsets = np.arange(EGOCENTRIC_SIZE) - (GRID - 1)
    for player in range(N_CELLS):
        rows = ROW_OF[player] + offsets[:, None] + 0 * offsets[None, :]
        cols = COL_OF[player] + offsets[None, :] + 0 * offsets[:, None]
        inside = on_board(rows, cols)
        table[player] = np.where(inside, rows * GRID + cols, N_CELLS).ravel()
    return table


WINDOW_SOURCE = _window_sources()


def egocentric_window(features: jax.Array, row: jax.Array, col: jax.Array) -> jax.Array:
    """f32[..., 11, 11, F + 1] from per-cell ``features`` f32[..., 6, 6, F]: window cell
    [i, j] holds board cell (row + i - 5, col + j - 5), and a last channel is 1 on the board and
    0 off it (where the features are 0). One gather through ``WINDOW_SOURCE`` (measured faster
    than one-hot contractions on CPU, forward and backward)."""
    lead = features.shape[:-3]
    cells = features.reshape(lead + (N_CELLS, features.shape[-1]))
    cells = jnp.concatenate([cells, jnp.ones(cells.shape[:-1] + (1,), cells.dtype)], axis=-1)
    padded = jnp.concatenate([cells, jnp.zeros(lead + (1, cells.shape[-1]), cells.dtype)],
                             axis=-2)
    sources = jnp.asarray(WINDOW_SOURCE)[row * GRID + col]  # [..., 121]
    window = jnp.take_along_axis(padded, sources[..., None], axis=-2)
    return window.reshape(lead + (EGOCENTRIC_SIZE, EGOCENTRIC_SIZE, cells.shape[-1]))


def egocentric_grid(obs: Observation) -> jax.Array:
    """The observation's grid (f32[..., 6, 6, 42]) re-centred on the player: f32[..., 11, 11,
    43]."""
    return egocentric_window(obs.grid.astype(jnp.float32), *player_cell(obs))


class EgocentricEncoder(nn.Module):
    """Each board cell embedded by one shared dense layer, the embeddings re-centred on the
    player (``egocentric_window``: embedding first, so the layer runs on 36 cells, not 121),
    flattened next to the player features, owned programs and action mask."""

    cell_features: int
    activation: str
    dtype: str

    @nn.compact
    def __call__(self, obs: Observation):
        dtype = _DTYPES[self.dtype]
        cells = _ACTIVATIONS[self.activation](
            _dense(self.cell_features, np.sqrt(2), dtype)(obs.grid.astype(dtype)))
        window = egocentric_window(cells.astype(jnp.float32), *player_cell(obs)).astype(dtype)
        lead = obs.player.shape[:-1]
        return jnp.concatenate([
            window.reshape(lead + (-1,)), obs.player.astype(dtype),
            obs.programs.astype(dtype), obs.action_mask.astype(dtype)], axis=-1)


class ActorCritic(nn.Module):
    """MLP actor-critic over the ``encoder``'s features. Returns float32 (logits[..., A],
    value[...]) whatever the compute dtype; parameters are always float32."""

    num_actions: int
    hidden_width: int = 256
    hidden_depth: int = 2
    activation: str = "tanh"
    separate_torsos: bool = True
    compute_dtype: str = "float32"
    encoder: str = "flat"
    cell_features: int = 8

    @nn.compact
    def __call__(self, obs: Observation):
        if self.encoder == "egocentric":
            x = EgocentricEncoder(self.cell_features, self.activation, self.compute_dtype)(obs)
        else:
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
                       separate_torsos=config.separate_torsos, compute_dtype=config.compute_dtype,
                       encoder=config.encoder, cell_features=config.cell_features)


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
