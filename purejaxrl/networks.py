"""Actor-critic network over the observation, and the masked categorical distribution.

Three encoders feed the MLP torso (``--encoder``), each reading the observation through the
env's hooks (``env_protocol.TrainerEnv``), never its fields:

* ``flat``: the env's flat view (``flat_observation``; HackMatrix's ``flatten(obs)``: player,
  programs, grid in that order; any other env's leaves flattened), the baseline.
* ``egocentric``: the env's board (``board_view``: a grid of per-cell features and the player's
  cell) re-centred on the player (``egocentric_window``: a (2H-1)x(2W-1) window in which every
  board cell is visible from every player position, plus an on-board channel), each cell
  embedded by one shared dense layer, then flattened next to the view's other features
  (HackMatrix: the player features, the owned programs and the action mask). Moves and shots
  are relative to the player, so a pattern such as "the exit is one cell up" or "an enemy is in
  my column" has one set of weights wherever the player stands (as in Craftax's and NetHack's
  player-centred views).
* ``attention``: the same board view as tokens, one per cell: each cell's features embedded
  by a shared dense layer of ``cell_features`` units, plus a learned embedding of the cell's
  offset from the player (the egocentric prior) and one of its place on the board (the
  edges); ``ATTENTION_LAYERS`` pre-norm transformer blocks (``ATTENTION_HEADS``-head
  self-attention over the H x W cells, then a two-layer MLP, each residual), so that a cell's
  features can depend on any other cell (an enemy behind a block, the exit past a wall) before
  the torso; the tokens flattened next to the view's other features.
* ``egocentric-conv``: ``egocentric`` with ``CONV_LAYERS`` residual 3x3 convolutions over the
  H x W board of cell embeddings before the window, so that a cell's features hold its
  neighbourhood (an enemy beside a block, the cells around the exit) with one set of weights
  for every place of the board; at 8 features per cell about 1.2k parameters more.
* ``cnn``: for image observations [H, W, C] (MinAtar): one 3x3 convolution of
  ``CNN_CHANNELS`` channels (MinAtar's network), flattened.

With ``--recurrent-core gru`` the network is ``RecurrentActorCritic``: the same encoders and
torso, then a GRU cell whose hidden state is carried per env (zeroed where an episode starts),
then the heads; it runs over time-major sequences, one step being a sequence of length 1.

The action mask is applied to the logits outside the network, so that the same masking code
serves sampling, log-probabilities, entropy and KL.
"""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from envs.contract import BoardView

# A large *finite* negative: exp() of it underflows to exactly 0 in float32, so masked actions
# get probability 0, while (unlike -inf) it never yields inf - inf = nan in log-softmax or in
# 0 * log(0) terms.
MASKED_LOGIT = -1e9

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu}
_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
CNN_CHANNELS = 16
# Residual 3x3 convolutions of ``egocentric-conv`` over the board of cell embeddings.
CONV_LAYERS = 2
# The attention encoder's shape; its token width is ``cell_features`` (a multiple of the heads).
ATTENTION_HEADS = 4
ATTENTION_LAYERS = 2


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
            layer = _dense(self.width, np.sqrt(2), _DTYPES[self.dtype])
            x = _ACTIVATIONS[self.activation](layer(x))
        return x


def window_size(height: int, width: int) -> tuple[int, int]:
    """Offsets -(H-1)..(H-1) and -(W-1)..(W-1) around the player: the whole board is visible
    from any cell."""
    return 2 * height - 1, 2 * width - 1


@functools.lru_cache(maxsize=None)
def window_sources(height: int, width: int) -> np.ndarray:
    """[p, w]: the board cell (row-major) seen at window cell w (row-major) by a player on cell
    p, or ``height * width`` (a padding row) where that offset leaves the board."""
    cells = height * width
    rows_of, cols_of = np.arange(cells) // width, np.arange(cells) % width
    win_h, win_w = window_size(height, width)
    row_offsets = np.arange(win_h) - (height - 1)
    col_offsets = np.arange(win_w) - (width - 1)
    table = np.full((cells, win_h * win_w), cells, np.int32)
    for player in range(cells):
        rows = rows_of[player] + row_offsets[:, None] + 0 * col_offsets[None, :]
        cols = cols_of[player] + col_offsets[None, :] + 0 * row_offsets[:, None]
        inside = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
        table[player] = np.where(inside, rows * width + cols, cells).ravel()
    return table


def neighbourhoods(cells: jax.Array) -> jax.Array:
    """[..., H, W, 9F] from [..., H, W, F]: each cell's 3x3 neighbourhood, row by row, then the
    channels (zeros off the board), so that one dense layer on it is a 3x3 convolution with
    zero padding. Nine slices of the zero-padded board: on CPU the whole update runs faster
    than with ``nn.Conv`` at 8 channels or with a gather (SPEC §4.2)."""
    height, width = cells.shape[-3:-1]
    pad = [(0, 0)] * (cells.ndim - 3) + [(1, 1), (1, 1), (0, 0)]
    padded = jnp.pad(cells, pad)
    return jnp.concatenate([padded[..., dr:dr + height, dc:dc + width, :]
                            for dr in range(3) for dc in range(3)], axis=-1)


def egocentric_window(features: jax.Array, row: jax.Array, col: jax.Array) -> jax.Array:
    """f32[..., 2H-1, 2W-1, F + 1] from per-cell ``features`` f32[..., H, W, F]: window cell
    [i, j] holds board cell (row + i - (H-1), col + j - (W-1)), and a last channel is 1 on the
    board and 0 off it (where the features are 0). One gather through ``window_sources``
    (measured faster than one-hot contractions on CPU, forward and backward)."""
    height, width = features.shape[-3:-1]
    lead = features.shape[:-3]
    cells = features.reshape(lead + (height * width, features.shape[-1]))
    cells = jnp.concatenate([cells, jnp.ones(cells.shape[:-1] + (1,), cells.dtype)], axis=-1)
    padded = jnp.concatenate([cells, jnp.zeros(lead + (1, cells.shape[-1]), cells.dtype)],
                             axis=-2)
    sources = jnp.asarray(window_sources(height, width))[row * width + col]  # [..., window]
    window = jnp.take_along_axis(padded, sources[..., None], axis=-2)
    return window.reshape(lead + window_size(height, width) + (cells.shape[-1],))


def egocentric_grid(view: BoardView) -> jax.Array:
    """A board view's grid (f32[..., H, W, F]) re-centred on the player: f32[..., 2H-1, 2W-1,
    F + 1]."""
    return egocentric_window(view.grid.astype(jnp.float32), view.row, view.col)


def beside_view_features(board: jax.Array, view: BoardView, dtype) -> jax.Array:
    """An encoded board [..., *board axes] flattened, then the view's other features."""
    lead = view.row.shape
    return jnp.concatenate([board.reshape(lead + (-1,))]
                           + [feature.astype(dtype) for feature in view.features], axis=-1)


class EgocentricEncoder(nn.Module):
    """Each board cell embedded by one shared dense layer, then (``conv_layers`` > 0) residual
    3x3 convolutions over the board (zero-padded at its edges), the embeddings re-centred on
    the player (``egocentric_window``: embedding first, so the layers run on the H x W cells,
    not the window's), flattened next to the view's other features. Without convolutions the
    parameter tree is the plain egocentric encoder's."""

    cell_features: int
    activation: str
    dtype: str
    conv_layers: int = 0

    @nn.compact
    def __call__(self, view: BoardView):
        dtype = _DTYPES[self.dtype]
        act = _ACTIVATIONS[self.activation]
        cells = act(_dense(self.cell_features, np.sqrt(2), dtype)(view.grid.astype(dtype)))
        for _ in range(self.conv_layers):
            conv = _dense(self.cell_features, np.sqrt(2), dtype)
            cells = cells + act(conv(neighbourhoods(cells)))
        window = egocentric_window(cells.astype(jnp.float32), view.row, view.col).astype(dtype)
        return beside_view_features(window, view, dtype)


class AttentionEncoder(nn.Module):
    """Board cells as tokens with self-attention between them (the module docstring's
    ``attention``): f32[..., H * W * cell_features + the view's other features]."""

    cell_features: int
    activation: str
    dtype: str

    @nn.compact
    def __call__(self, view: BoardView):
        dtype = _DTYPES[self.dtype]
        height, width = view.grid.shape[-3:-1]
        lead = view.row.shape
        cells = height * width
        tokens = _dense(self.cell_features, np.sqrt(2), dtype)(view.grid.astype(dtype))
        tokens = tokens.reshape(lead + (cells, self.cell_features))
        rows, cols = np.arange(cells) // width, np.arange(cells) % width
        offsets = ((rows - view.row[..., None] + height - 1) * (2 * width - 1)
                   + cols - view.col[..., None] + width - 1)
        embedding_init = nn.initializers.normal(0.02)
        relative = nn.Embed(window_size(height, width)[0] * window_size(height, width)[1],
                            self.cell_features, embedding_init=embedding_init, dtype=dtype,
                            param_dtype=jnp.float32)(offsets)
        absolute = self.param("cell_position", embedding_init, (cells, self.cell_features))
        x = tokens + relative + absolute.astype(dtype)
        for _ in range(ATTENTION_LAYERS):
            y = nn.LayerNorm(dtype=dtype, param_dtype=jnp.float32)(x)
            x = x + nn.MultiHeadDotProductAttention(
                num_heads=ATTENTION_HEADS, dtype=dtype, param_dtype=jnp.float32)(y)
            y = nn.LayerNorm(dtype=dtype, param_dtype=jnp.float32)(x)
            y = _ACTIVATIONS[self.activation](_dense(2 * self.cell_features, np.sqrt(2),
                                                     dtype)(y))
            x = x + _dense(self.cell_features, 1.0, dtype)(y)
        return beside_view_features(x, view, dtype)


class ConvEncoder(nn.Module):
    """Image observations [..., H, W, C]: one 3x3 convolution (MinAtar's network), flattened."""

    activation: str
    dtype: str

    @nn.compact
    def __call__(self, image):
        dtype = _DTYPES[self.dtype]
        conv = nn.Conv(CNN_CHANNELS, (3, 3), padding="VALID",
                       kernel_init=nn.initializers.orthogonal(np.sqrt(2)),
                       bias_init=nn.initializers.zeros, dtype=dtype, param_dtype=jnp.float32)
        features = _ACTIVATIONS[self.activation](conv(image.astype(dtype)))
        return features.reshape(image.shape[:-3] + (-1,))


def encode_observation(module: nn.Module, obs) -> jax.Array:
    """The features of ``obs`` under ``module.encoder``. Called inside a network's compact
    ``__call__``, so the encoder is that network's submodule (``EgocentricEncoder_0`` or
    ``AttentionEncoder_0`` or ``ConvEncoder_0``: the names checkpoints hold)."""
    if module.encoder in ("egocentric", "egocentric-conv"):
        conv_layers = CONV_LAYERS if module.encoder == "egocentric-conv" else 0
        return EgocentricEncoder(module.cell_features, module.activation, module.compute_dtype,
                                 conv_layers)(module.env.board_view(obs))
    if module.encoder == "attention":
        return AttentionEncoder(module.cell_features, module.activation,
                                module.compute_dtype)(module.env.board_view(obs))
    if module.encoder == "cnn":
        return ConvEncoder(module.activation, module.compute_dtype)(obs)
    return module.env.flat_observation(obs).astype(_DTYPES[module.compute_dtype])


def output_head(x, features: int, scale: float, width: int, activation: str, dtype) -> jax.Array:
    """One output head, built in the calling module: ``width`` > 0 puts a hidden layer of that
    width (the network's activation) before the output layer, so the actor and the critic each
    get features of their own after the shared layers (PureJaxRL's ``ppo_rnn`` heads); 0 is
    one linear layer, and the parameter tree is the one of networks without the option."""
    if width:
        x = _ACTIVATIONS[activation](_dense(width, np.sqrt(2), dtype)(x))
    return _dense(features, scale, dtype)(x)


class ActorCritic(nn.Module):
    """MLP actor-critic over the ``encoder``'s features. Returns float32 (logits[..., A],
    value[...]) whatever the compute dtype; parameters are always float32. ``env`` (a
    ``TrainerEnv``) gives the encoders their view of the observation."""

    num_actions: int
    env: Any
    hidden_width: int = 256
    hidden_depth: int = 2
    activation: str = "tanh"
    separate_torsos: bool = True
    compute_dtype: str = "float32"
    encoder: str = "flat"
    cell_features: int = 8
    head_width: int = 0

    @nn.compact
    def __call__(self, obs):
        x = encode_observation(self, obs)
        def torso():
            return MLPTorso(self.hidden_width, self.hidden_depth, self.activation,
                            self.compute_dtype)
        actor_features = torso()(x)
        critic_features = torso()(x) if self.separate_torsos else actor_features
        dtype = _DTYPES[self.compute_dtype]
        logits = output_head(actor_features, self.num_actions, 0.01, self.head_width,
                             self.activation, dtype)
        value = output_head(critic_features, 1, 1.0, self.head_width, self.activation, dtype)
        return logits.astype(jnp.float32), value[..., 0].astype(jnp.float32)


class ResettingGRU(nn.Module):
    """One GRU step per env whose hidden state is zeroed where ``episode_start`` is set, before
    the step reads it: a new episode never sees the previous one's memory."""

    features: int

    @nn.compact
    def __call__(self, hidden, step_inputs):
        features, episode_start = step_inputs
        hidden = jnp.where(episode_start[..., None], jnp.zeros_like(hidden), hidden)
        # float32 whatever the compute dtype: the carry keeps one dtype through the scan.
        return nn.GRUCell(features=self.features, dtype=jnp.float32,
                          param_dtype=jnp.float32)(hidden, features.astype(jnp.float32))


# The resetting GRU over a time-major sequence [T, N, ...]: one set of parameters for every
# step (broadcast), the hidden state carried from step to step.
ScannedGRU = nn.scan(ResettingGRU, variable_broadcast="params", split_rngs={"params": False},
                     in_axes=0, out_axes=0)


class RecurrentActorCritic(nn.Module):
    """Encoder -> torso -> GRU core -> actor and critic heads (the torso and the core are
    shared by both heads). Always applied to a time-major sequence: ``hidden`` f32[N, C] is the
    state before the first step, ``obs`` and ``episode_start`` (bool[T, N]: zero the hidden
    state before this step) have leading axes [T, N]. Returns (hidden after the last step,
    logits f32[T, N, A], value f32[T, N]). One step is a sequence of length 1
    (``step_recurrent``). The encoders and the torso are ``ActorCritic``'s."""

    num_actions: int
    env: Any
    core_width: int = 256
    hidden_width: int = 256
    hidden_depth: int = 2
    activation: str = "tanh"
    compute_dtype: str = "float32"
    encoder: str = "flat"
    cell_features: int = 8
    head_width: int = 0

    @nn.compact
    def __call__(self, hidden, obs, episode_start):
        dtype = _DTYPES[self.compute_dtype]
        x = encode_observation(self, obs)
        x = MLPTorso(self.hidden_width, self.hidden_depth, self.activation,
                     self.compute_dtype)(x)
        hidden, core = ScannedGRU(self.core_width)(hidden, (x, episode_start))
        core = core.astype(dtype)
        logits = output_head(core, self.num_actions, 0.01, self.head_width, self.activation,
                             dtype)
        value = output_head(core, 1, 1.0, self.head_width, self.activation, dtype)
        return hidden, logits.astype(jnp.float32), value[..., 0].astype(jnp.float32)

    def initial_hidden(self, num_envs: int) -> jax.Array:
        """The hidden state of envs that have seen nothing: zeros, f32[N, C]."""
        return jnp.zeros((num_envs, self.core_width), jnp.float32)

    def init_params(self, key, obs):
        """Parameters from one env's observation (no batch axis), as ``ActorCritic.init``."""
        sequence = jax.tree.map(lambda x: x[None, None], obs)
        return self.init(key, self.initial_hidden(1), sequence, jnp.ones((1, 1), bool))


def is_recurrent(network) -> bool:
    return isinstance(network, RecurrentActorCritic)


def init_network(network, key, obs):
    """Parameters of ``network`` from one env's observation (no batch axis)."""
    if is_recurrent(network):
        return network.init_params(key, obs)
    return network.init(key, obs)


def step_recurrent(network: RecurrentActorCritic, params, hidden, obs, episode_start):
    """One step for a batch of envs (``obs`` leading axis N): (new hidden f32[N, C],
    logits f32[N, A], value f32[N]); the hidden state is zeroed first where
    ``episode_start``."""
    sequence = jax.tree.map(lambda x: x[None], obs)
    hidden, logits, value = network.apply(params, hidden, sequence, episode_start[None])
    return hidden, logits[0], value[0]


def apply_step(network, params, hidden, obs, episode_start):
    """One step for a batch of envs, for either network: (hidden after the step, logits,
    value). A feed-forward network has no hidden state (None in, None out) and ignores
    ``episode_start``."""
    if hidden is None:
        logits, value = network.apply(params, obs)
        return None, logits, value
    return step_recurrent(network, params, hidden, obs, episode_start)


def make_network(config, env):
    """The network of ``config`` for ``env`` (a ``TrainerEnv``): ``ActorCritic`` without a
    recurrent core, ``RecurrentActorCritic`` with one."""
    if config.recurrent_core == "gru":
        return RecurrentActorCritic(
            num_actions=env.num_actions, env=env, core_width=config.core_width,
            hidden_width=config.hidden_width, hidden_depth=config.hidden_depth,
            activation=config.activation, compute_dtype=config.compute_dtype,
            encoder=config.encoder, cell_features=config.cell_features,
            head_width=config.head_width)
    return ActorCritic(num_actions=env.num_actions, env=env, hidden_width=config.hidden_width,
                       hidden_depth=config.hidden_depth, activation=config.activation,
                       separate_torsos=config.separate_torsos, compute_dtype=config.compute_dtype,
                       encoder=config.encoder, cell_features=config.cell_features,
                       head_width=config.head_width)


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


def masked_group_entropy(logits: jax.Array, mask: jax.Array,
                         group_matrix: jax.Array) -> jax.Array:
    """Entropy of the policy's marginal over groups of actions (``group_matrix`` f32[A, G],
    a partition: each group's probability is the sum of its legal actions'). A group with no
    legal action has probability exactly 0 and adds nothing (the inner ``where`` keeps its
    gradient finite)."""
    probs = jnp.where(mask, jnp.exp(masked_log_probs(logits, mask)), 0.0)
    group_probs = probs @ group_matrix
    positive = group_probs > 0
    safe = jnp.where(positive, group_probs, 1.0)
    return -jnp.sum(jnp.where(positive, group_probs * jnp.log(safe), 0.0), axis=-1)


def masked_kl(logits_p: jax.Array, logits_q: jax.Array, mask: jax.Array) -> jax.Array:
    """KL(p || q) summed over the legal actions only."""
    log_p = masked_log_probs(logits_p, mask)
    log_q = masked_log_probs(logits_q, mask)
    return jnp.sum(jnp.where(mask, jnp.exp(log_p) * (log_p - log_q), 0.0), axis=-1)


def parameter_count(params) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(params)))
