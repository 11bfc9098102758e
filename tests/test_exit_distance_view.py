"""The exit-distance view (``HackMatrix(exit_distance_view=True)``, ``training.exit_distance_map``):
one more board-view channel, each cell's path distance to the exit read from the observation;
the observation itself and the game are unchanged."""

import jax
import jax.numpy as jnp
import numpy as np

from envs.hackmatrix import HackMatrix, build_observation, set_state
from envs.hackmatrix.core import bitboard
from envs.hackmatrix.core.constants import BLOCK, GRID, N_CELLS
from envs.hackmatrix.core.rewards import bfs_distance
from envs.hackmatrix.observation import N_GRID_CHANNELS
from envs.hackmatrix.training import exit_distance_map

PLAIN = HackMatrix()
WITH_VIEW = HackMatrix(exit_distance_view=True)
_map = jax.jit(lambda state: exit_distance_map(build_observation(state)))


@jax.jit
def _swift_distances(state):
    """Swift's findDistance from every cell to the exit (``core.rewards.bfs_distance``)."""
    blocks = bitboard.from_bool(state.grid.content.reshape(-1) == BLOCK)
    exit_cell = state.exit_row * GRID + state.exit_col
    return jax.vmap(lambda cell: bfs_distance(blocks, cell, exit_cell))(jnp.arange(N_CELLS))


def test_every_open_cell_holds_swifts_path_distance_to_the_exit():
    """On generated boards of every stage, each cell without a block holds findDistance / 36
    where a path exists and 1 where none does; block cells hold 1."""
    keys = jax.random.split(jax.random.PRNGKey(7), 8)
    for stage, key in zip(range(1, 9), keys):
        state = PLAIN.new_game(key).replace(stage=jnp.int32(stage))
        distance_map = np.asarray(_map(state)).reshape(-1)
        distance, reachable = map(np.asarray, _swift_distances(state))
        blocks = np.asarray(state.grid.content).reshape(-1) == BLOCK
        open_cells = ~blocks
        np.testing.assert_allclose(distance_map[open_cells & reachable],
                                   distance[open_cells & reachable] / N_CELLS, rtol=1e-6)
        assert np.all(distance_map[open_cells & ~reachable] == 1.0)
        assert np.all(distance_map[blocks] == 1.0)


def test_a_walled_off_exit_is_a_detour_and_a_closed_pocket_has_no_path():
    """The exit of a setState board is (5,5). Blocks at (4,5) and (4,4) close its column: from
    (3,5) the way round through (4,3) is 6 steps, not 2; a cell closed in by blocks has no
    path (1)."""
    block = {"type": "data", "points": 1, "spawnCount": 1}
    state = set_state({"player": {"row": 2, "col": 2},
                       "blocks": [{"row": r, "col": c, **block}
                                  for r, c in ((4, 5), (4, 4), (0, 1), (1, 0))]})
    distance_map = np.asarray(_map(state)) * N_CELLS
    assert distance_map[5, 5] == 0 and distance_map[5, 4] == 1
    assert distance_map[3, 5] == 6  # (3,4) (3,3) (4,3) (5,3) (5,4) (5,5)
    assert distance_map[0, 0] == N_CELLS  # closed in by (0,1) and (1,0)


def test_the_view_adds_one_channel_and_changes_nothing_else():
    """With the option the board view's grid has one more channel (the map); the observation,
    the other channels and the view's other features are the plain env's."""
    state = PLAIN.new_game(jax.random.PRNGKey(3))
    obs = PLAIN.observe(state)
    plain, viewed = PLAIN.board_view(obs), WITH_VIEW.board_view(WITH_VIEW.observe(state))
    assert plain.grid.shape == (GRID, GRID, N_GRID_CHANNELS)
    assert viewed.grid.shape == (GRID, GRID, N_GRID_CHANNELS + 1)
    np.testing.assert_array_equal(viewed.grid[..., :N_GRID_CHANNELS], plain.grid)
    np.testing.assert_array_equal(viewed.grid[..., -1], _map(state))
    for a, b in zip(jax.tree.leaves((plain.row, plain.col, plain.features)),
                    jax.tree.leaves((viewed.row, viewed.col, viewed.features))):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(jax.tree.leaves(obs), jax.tree.leaves(WITH_VIEW.observe(state))):
        np.testing.assert_array_equal(a, b)


def test_the_view_travels_from_the_command_line_to_the_network_and_stays_for_play():
    """``--exit-distance-view`` reaches HackMatrix's option; the default network's cell layer
    (feed-forward here) then reads 43 channels, and the same parameters answer a single
    observation and a batch alike; the view is part of the agent (kept for play); a
    checkpoint that predates it reads back without it; the toy env and the flat encoder
    refuse it."""
    import pytest
    from purejaxrl import ppo
    from purejaxrl.cli.train import build_parser
    from purejaxrl.config import ConfigError, TrainConfig, validate_config
    from tests.trainer.toy_run import CONFIG as TOY
    assert build_parser().parse_args(["--exit-distance-view"]).exit_distance_view is True
    config = TrainConfig(env_options=dict(exit_distance_view=True), hidden_width=16,
                         cell_features=4, recurrent_core="none")
    env, env_params = ppo.make_env(config)
    assert env.env.exit_distance_view
    network = ppo.make_network(config, env)
    obs, _ = env.reset(jax.random.PRNGKey(0), env_params)
    params = network.init(jax.random.PRNGKey(1), obs)
    kernels = [leaf.shape for path, leaf in jax.tree_util.tree_leaves_with_path(params)
               if "kernel" in jax.tree_util.keystr(path)]
    assert (N_GRID_CHANNELS + 1, 4) in kernels
    other, _ = env.reset(jax.random.PRNGKey(2), env_params)
    batch = jax.tree.map(lambda a, b: jnp.stack([a, b]), obs, other)
    logits, values = network.apply(params, batch)
    assert logits.shape == (2, env.num_actions) and values.shape == (2,)
    single_logits, single_value = network.apply(params, obs)
    np.testing.assert_allclose(single_logits, logits[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(single_value, values[0], rtol=1e-5, atol=1e-6)
    assert config.for_play().agent_env_options()["exit_distance_view"] is True
    older = config.to_dict()
    del older["env_options"]["exit_distance_view"]
    assert TrainConfig.from_dict(older).env_option("exit_distance_view") is False
    with pytest.raises(ConfigError, match="--exit-distance-view needs an env that takes it"):
        ppo.make_env(TOY.with_env_options(exit_distance_view=True))
    with pytest.raises(ConfigError, match="--exit-distance-view needs a board encoder"):
        validate_config(TrainConfig(env_options=dict(exit_distance_view=True), encoder="flat"))
