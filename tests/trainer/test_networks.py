"""The egocentric encoder: the player-centred window holds exactly the board cells at each
offset from the player (programs-rewards-observation §9.2: player[0] = row / 5, player[1] =
col / 5), nothing off the board, and the network built on it runs on single and batched
observations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix import HackMatrix
from envs.hackmatrix.core.constants import GRID
from purejaxrl.config import TrainConfig
from purejaxrl.networks import EGOCENTRIC_SIZE, egocentric_grid, make_network, player_cell

CENTRE = GRID - 1


@pytest.fixture(scope="module")
def observations():
    """Reset observations of 16 boards with a random grid payload, so every cell differs."""
    env = HackMatrix()
    obs, _ = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(jax.random.PRNGKey(0), 16), env.default_params)
    grid = jax.random.uniform(jax.random.PRNGKey(1), obs.grid.shape)
    rows = jnp.arange(16) % GRID
    cols = (jnp.arange(16) * 5 // 3) % GRID
    player = obs.player.at[:, 0].set(rows / (GRID - 1)).at[:, 1].set(cols / (GRID - 1))
    return obs.replace(grid=grid, player=player)


def test_window_cell_at_offset_is_the_board_cell_at_that_offset(observations):
    window = np.asarray(egocentric_grid(observations))
    grid = np.asarray(observations.grid)
    rows, cols = (np.asarray(x) for x in player_cell(observations))
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


def test_window_centre_is_the_player_cell_and_holds_the_whole_board(observations):
    window = np.asarray(egocentric_grid(observations))
    grid = np.asarray(observations.grid)
    rows, cols = (np.asarray(x) for x in player_cell(observations))
    for n in range(16):
        np.testing.assert_array_equal(window[n, CENTRE, CENTRE, :-1], grid[n, rows[n], cols[n]])
        assert window[n, ..., -1].sum() == GRID * GRID  # every board cell is in view


def test_egocentric_network_runs_single_and_batched_with_same_outputs(observations):
    config = TrainConfig(encoder="egocentric", cell_features=4, hidden_width=16)
    network = make_network(config, 28)
    single = jax.tree.map(lambda x: x[0], observations)
    params = network.init(jax.random.PRNGKey(0), single)
    logits, value = network.apply(params, observations)
    assert logits.shape == (16, 28) and value.shape == (16,)
    logits0, value0 = network.apply(params, single)
    np.testing.assert_allclose(logits0, logits[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value0, value[0], rtol=1e-5, atol=1e-6)
