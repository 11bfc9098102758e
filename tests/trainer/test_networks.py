"""The egocentric encoder: the player-centred window holds exactly the board cells at each
offset from the player (HackMatrix's board view: programs-rewards-observation §9.2, player[0] =
row / 5, player[1] = col / 5; the toy corridor's one-row board), nothing off the board, and the
network built on it runs on single and batched observations; the convolutions of
egocentric-conv reach exactly the neighbouring cells; the attention encoder's tokens see every
cell of the board; the CNN encoder on images."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import registry
from envs.hackmatrix.core.constants import GRID
from purejaxrl import ppo
from purejaxrl.config import ConfigError, TrainConfig, validate_config
from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.networks import (ATTENTION_HEADS, CONV_LAYERS, AttentionEncoder,
                                EgocentricEncoder, egocentric_grid, make_network,
                                neighbourhoods, window_size)

CENTRE = GRID - 1
EGOCENTRIC_SIZE = 2 * GRID - 1


@pytest.fixture(scope="module")
def hackmatrix():
    return TrainerEnv(*registry.make("hackmatrix"))


@pytest.fixture(scope="module")
def observations(hackmatrix):
    """Reset observations of 16 boards with a random grid payload, so every cell differs."""
    env = hackmatrix.env
    obs, _ = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(jax.random.PRNGKey(0), 16), env.default_params)
    grid = jax.random.uniform(jax.random.PRNGKey(1), obs.grid.shape)
    rows = jnp.arange(16) % GRID
    cols = (jnp.arange(16) * 5 // 3) % GRID
    player = obs.player.at[:, 0].set(rows / (GRID - 1)).at[:, 1].set(cols / (GRID - 1))
    return obs.replace(grid=grid, player=player)


def test_window_cell_at_offset_is_the_board_cell_at_that_offset(hackmatrix, observations):
    view = hackmatrix.board_view(observations)
    window = np.asarray(egocentric_grid(view))
    grid = np.asarray(observations.grid)
    rows, cols = np.asarray(view.row), np.asarray(view.col)
    np.testing.assert_array_equal(rows, np.arange(16) % GRID)  # the player's cell, read back
    np.testing.assert_array_equal(cols, (np.arange(16) * 5 // 3) % GRID)
    assert window.shape == (16, EGOCENTRIC_SIZE, EGOCENTRIC_SIZE, grid.shape[-1] + 1)
    for n in range(16):
        for i in range(EGOCENTRIC_SIZE):
            for j in range(EGOCENTRIC_SIZE):
                r, c = rows[n] + i - CENTRE, cols[n] + j - CENTRE
                if 0 <= r < GRID and 0 <= c < GRID:
                    np.testing.assert_array_equal(window[n, i, j, :-1], grid[n, r, c])
                    assert window[n, i, j, -1] == 1.0
                else:
                    assert not window[n, i, j].any(), (n, i, j)


def test_window_centre_is_the_player_cell_and_holds_the_whole_board(hackmatrix, observations):
    view = hackmatrix.board_view(observations)
    window = np.asarray(egocentric_grid(view))
    grid = np.asarray(observations.grid)
    rows, cols = np.asarray(view.row), np.asarray(view.col)
    for n in range(16):
        np.testing.assert_array_equal(window[n, CENTRE, CENTRE, :-1], grid[n, rows[n], cols[n]])
        assert window[n, ..., -1].sum() == GRID * GRID  # every board cell is in view


@pytest.mark.parametrize("encoder, cell_features",
                         [("egocentric", 4), ("egocentric-conv", 4), ("attention", 8)])
def test_board_network_runs_single_and_batched_with_same_outputs(hackmatrix, observations,
                                                                  encoder, cell_features):
    config = TrainConfig(encoder=encoder, cell_features=cell_features, hidden_width=16,
                         recurrent_core="none")
    network = make_network(config, hackmatrix)
    single = jax.tree.map(lambda x: x[0], observations)
    params = network.init(jax.random.PRNGKey(0), single)
    logits, value = network.apply(params, observations)
    assert logits.shape == (16, 28) and value.shape == (16,)
    logits0, value0 = network.apply(params, single)
    np.testing.assert_allclose(logits0, logits[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value0, value[0], rtol=1e-5, atol=1e-6)


def test_a_dense_layer_on_the_neighbourhoods_is_a_zero_padded_3x3_convolution():
    """``neighbourhoods`` lays out each cell's 3x3 neighbourhood as ``nn.Conv`` reads its
    kernel (row by row, then the channels), zeros off the board: the same weights give the
    same output as a SAME-padded convolution, on a non-square board too."""
    cells = jax.random.normal(jax.random.PRNGKey(2), (3, 4, 5, 6))
    conv = nn.Conv(7, (3, 3), padding="SAME")
    params = conv.init(jax.random.PRNGKey(3), cells)
    kernel, bias = params["params"]["kernel"], params["params"]["bias"]
    dense = neighbourhoods(cells) @ kernel.reshape(9 * 6, 7) + bias
    np.testing.assert_allclose(dense, conv.apply(params, cells), rtol=1e-5, atol=1e-5)


def test_egocentric_conv_features_reach_exactly_the_cells_its_convolutions_cover(hackmatrix,
                                                                                 observations):
    """With CONV_LAYERS 3x3 convolutions the player's own window cell (the window's centre)
    changes when a cell CONV_LAYERS steps away changes and not when one a step further does;
    the plain egocentric encoder's centre depends on the player's cell alone, and its
    parameter tree has no convolution (checkpoints of the default keep loading)."""
    view = hackmatrix.board_view(jax.tree.map(lambda x: x[0], observations))
    view = view._replace(row=jnp.int32(0), col=jnp.int32(0))
    features = 4
    per_cell = features + 1  # the window's on-board channel
    start = (CENTRE * EGOCENTRIC_SIZE + CENTRE) * per_cell
    centre = slice(start, start + features)

    def centre_changes(conv_layers, far_col):
        encoder = EgocentricEncoder(features, "tanh", "float32", conv_layers)
        params = encoder.init(jax.random.PRNGKey(0), view)
        shifted = view._replace(grid=view.grid.at[0, far_col].add(1.0))
        before, after = encoder.apply(params, view), encoder.apply(params, shifted)
        return params, not np.allclose(np.asarray(after[centre]), np.asarray(before[centre]))

    conv_params, near = centre_changes(CONV_LAYERS, CONV_LAYERS)
    assert near and not centre_changes(CONV_LAYERS, CONV_LAYERS + 1)[1]
    plain_params, plain_near = centre_changes(0, 1)
    assert not plain_near
    assert sorted(plain_params["params"]) == ["Dense_0"]
    assert sorted(conv_params["params"]) == [f"Dense_{k}" for k in range(CONV_LAYERS + 1)]


def test_an_attention_token_depends_on_a_far_cell_and_on_the_players_place(hackmatrix,
                                                                          observations):
    """The attention encoder's output is one token of ``cell_features`` per board cell, then
    the view's other features. Self-attention lets the token of cell (0, 0) change when only
    the far corner (5, 5) changes (a per-cell embedding alone could not), and the offset
    embedding makes the same board read differently from another player cell."""
    view = hackmatrix.board_view(jax.tree.map(lambda x: x[0], observations))
    encoder = AttentionEncoder(cell_features=8, activation="tanh", dtype="float32")
    params = encoder.init(jax.random.PRNGKey(0), view)
    encode = jax.jit(encoder.apply)
    base = np.asarray(encode(params, view))
    others = sum(feature.shape[-1] for feature in view.features)
    assert base.shape == (GRID * GRID * 8 + others,)
    corner = view._replace(grid=view.grid.at[GRID - 1, GRID - 1].add(1.0))
    changed = np.asarray(encode(params, corner))
    assert not np.allclose(changed[:8], base[:8])  # cell (0, 0)'s token
    moved = view._replace(row=(view.row + 1) % GRID)
    assert not np.allclose(np.asarray(encode(params, moved))[:8], base[:8])


def test_the_attention_encoder_is_refused_where_it_cannot_be_built():
    """Its token width must split into the heads, and it needs a board view."""
    with pytest.raises(ConfigError, match=f"multiple of the attention encoder's "
                                          f"{ATTENTION_HEADS} heads"):
        validate_config(TrainConfig(encoder="attention", cell_features=ATTENTION_HEADS + 2))
    with pytest.raises(ConfigError, match="--encoder attention needs an env with a board view"):
        ppo.make_env(ppo.config_for_env("CartPole-v1", encoder="attention", cell_features=8))


def test_a_one_row_board_gets_a_one_row_window():
    """The toy corridor's 1x5 board: a 1x9 window whose centre is the agent's cell."""
    toy = TrainerEnv(*registry.make("toy"))
    obs, _ = toy.reset(jax.random.PRNGKey(0), toy.default_params)
    window = np.asarray(egocentric_grid(toy.board_view(obs)))
    assert window_size(1, 5) == (1, 9) and window.shape == (1, 9, 3)
    np.testing.assert_array_equal(window[0, 4], [1.0, 0.0, 1.0])  # agent on cell 0, on board
    np.testing.assert_array_equal(window[0, 8], [0.0, 1.0, 1.0])  # the exit, 4 cells right
    assert not window[0, :4].any()  # left of cell 0: off the board


def test_cnn_encoder_runs_on_minatar_images_single_and_batched():
    env = TrainerEnv(*registry.make("Breakout-MinAtar"))
    assert env.image_observation
    obs, _ = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(0), 3),
                                                   env.default_params)
    network = make_network(TrainConfig(env="Breakout-MinAtar", encoder="cnn", hidden_width=8,
                                       recurrent_core="none"),
                           env)
    params = network.init(jax.random.PRNGKey(0), obs[0])
    assert params["params"]["ConvEncoder_0"]["Conv_0"]["kernel"].shape == (3, 3, 4, 16)
    logits, value = network.apply(params, obs)
    assert logits.shape == (3, env.num_actions) and value.shape == (3,)
    np.testing.assert_allclose(network.apply(params, obs[1])[0], logits[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("recurrent_core", ["none", "gru"])
def test_head_width_gives_the_actor_and_the_critic_a_hidden_layer_each(hackmatrix, observations,
                                                                        recurrent_core):
    """--head-width W puts a hidden layer of W in each head after the shared layers: the critic's
    layer moves the value and never the logits. Width 0 (the default) keeps the parameter
    tree checkpoints hold: two linear output layers, Dense_0 (logits) and Dense_1 (value)."""
    single = jax.tree.map(lambda x: x[0], observations)

    def build(head_width):
        config = TrainConfig(hidden_width=16, core_width=8, recurrent_core=recurrent_core,
                             head_width=head_width)
        network = make_network(config, hackmatrix)
        params = (network.init_params(jax.random.PRNGKey(0), single) if recurrent_core == "gru"
                  else network.init(jax.random.PRNGKey(0), single))
        return network, params

    def apply(network, params):
        if recurrent_core == "gru":
            sequence = jax.tree.map(lambda x: x[None], observations)
            _, logits, value = network.apply(params, network.initial_hidden(16), sequence,
                                             jnp.ones((1, 16), bool))
            return logits[0], value[0]
        return network.apply(params, observations)

    _, linear = build(0)
    assert sorted(k for k in linear["params"] if k.startswith("Dense")) == ["Dense_0", "Dense_1"]
    assert linear["params"]["Dense_0"]["kernel"].shape[-1] == 28
    network, params = build(4)
    dense = {k: v["kernel"].shape for k, v in params["params"].items() if k.startswith("Dense")}
    assert [dense[f"Dense_{i}"][-1] for i in range(4)] == [4, 28, 4, 1]  # actor, then critic
    logits, value = apply(network, params)
    critic_hidden = params["params"]["Dense_2"]["kernel"]
    moved = jax.tree.map(lambda x: x, params)
    moved["params"]["Dense_2"]["kernel"] = critic_hidden + 0.5
    logits_after, value_after = apply(network, moved)
    np.testing.assert_array_equal(logits_after, logits)
    assert not np.allclose(value_after, value)


def test_a_negative_head_width_is_refused():
    with pytest.raises(ConfigError, match="--head-width"):
        validate_config(TrainConfig(head_width=-1))
