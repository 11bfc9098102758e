"""The step's widened loops (``core/loop_width.py``, SPEC §4.7) give the same answer at any
width: the board searches (flood fill, exit distance, the enemies' distance field and pass A)
whatever the number of layers per iteration (layers past the end of a search change nothing),
and stage generation's block layout whatever the number of attempts checked side by side (the
first valid attempt wins, each from its own key). Checked on random boards and keys against
width 1, the CPU's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix.core import bitboard, enemies, generation, loop_width
from envs.hackmatrix.core.constants import N_CELLS
from envs.hackmatrix.core.rewards import bfs_distance

CASES = 256


def random_cases(seed):
    """Block boards of 0-60% density with random start and target cells (on blocks too)."""
    rng = np.random.default_rng(seed)
    density = rng.uniform(0.0, 0.6, (CASES, 1))
    blocks = rng.uniform(size=(CASES, N_CELLS)) < density
    start = rng.integers(0, N_CELLS, CASES).astype(np.int32)
    target = rng.integers(0, N_CELLS, CASES).astype(np.int32)
    return jnp.asarray(blocks), jnp.asarray(start), jnp.asarray(target)


def all_searches(blocks, start, target):
    """Every search's result per case (vmapped afresh, so the layer count is read again)."""

    def one(cells, start_cell, target_cell):
        board = bitboard.from_bool(cells)
        open_cells = bitboard.from_bool(~cells)
        distance, found = bfs_distance(board, start_cell, target_cell)
        flooded = bitboard.flood(bitboard.cell(start_cell), open_cells)
        field = enemies._distance_field(bitboard.cell(target_cell)[None], open_cells[None])[0]
        first_move = enemies._pass_a_first_move(target_cell, start_cell, open_cells,
                                                ~cells[target_cell])
        return distance, found, flooded, field, first_move

    return jax.device_get(jax.vmap(one)(blocks, start, target))


@pytest.mark.parametrize("layers", [2, 4, 7])
def test_searches_agree_with_one_layer_per_iteration(monkeypatch, layers):
    cases = random_cases(seed=layers)
    monkeypatch.setenv(loop_width.BFS_LAYERS.variable, "1")
    expected = all_searches(*cases)
    monkeypatch.setenv(loop_width.BFS_LAYERS.variable, str(layers))
    assert loop_width.BFS_LAYERS() == layers
    got = all_searches(*cases)
    for name, want, have in zip(("distance", "found", "flood", "field", "pass A"), expected,
                                got):
        np.testing.assert_array_equal(have, want, err_msg=name)
    # The cases exercise what they should: reachable and unreachable targets, and pass A
    # finding a first move and finding none.
    assert 0 < expected[1].sum() < CASES
    assert 0 < (expected[4] >= 0).sum() < CASES


def block_layouts(keys, allowed, block_count, exit_cell):
    return jax.device_get(jax.vmap(generation._place_block_layout, in_axes=(0, 0, 0, 0))(
        keys, allowed, block_count, exit_cell))


@pytest.mark.parametrize("attempts", [3, 8])
def test_block_layouts_agree_with_one_attempt_per_iteration(monkeypatch, attempts):
    """Dense and sparse allowed cells, so some boards need many attempts and some find none
    (an empty board) or are infeasible (fewer allowed cells than blocks)."""
    rng = np.random.default_rng(attempts)
    keys = jax.random.split(jax.random.PRNGKey(attempts), CASES)
    allowed = jnp.asarray(rng.uniform(size=(CASES, N_CELLS)) < rng.uniform(0.3, 1.0, (CASES, 1)))
    block_count = jnp.asarray(rng.integers(4, 20, CASES), jnp.int32)
    exit_cell = jnp.asarray(rng.integers(0, N_CELLS, CASES), jnp.int32)
    monkeypatch.setenv(loop_width.LAYOUT_ATTEMPTS.variable, "1")
    expected = block_layouts(keys, allowed, block_count, exit_cell)
    monkeypatch.setenv(loop_width.LAYOUT_ATTEMPTS.variable, str(attempts))
    assert loop_width.LAYOUT_ATTEMPTS() == attempts
    np.testing.assert_array_equal(block_layouts(keys, allowed, block_count, exit_cell), expected)
    placed = expected.sum(axis=1)
    assert (placed == 0).any() and (placed > 0).any()


def test_the_cpu_runs_every_loop_at_width_one(monkeypatch):
    for width in (loop_width.BFS_LAYERS, loop_width.LAYOUT_ATTEMPTS):
        monkeypatch.delenv(width.variable, raising=False)
        assert jax.default_backend() == "cpu" and width() == 1


def test_a_layer_count_that_is_not_a_positive_integer_is_refused(monkeypatch):
    monkeypatch.setenv(loop_width.BFS_LAYERS.variable, "0")
    with pytest.raises(ValueError, match="expected a positive integer"):
        loop_width.BFS_LAYERS()


# Slow: compiles the env step and two enemy turns (about a minute on 2 cores); the loop's rule
# stays in the default suite (tests/test_sparse.py: each lane loops its own trips).
@pytest.mark.slow
def test_enemy_turn_is_the_same_whatever_the_ragged_block(monkeypatch):
    """The enemy steps loop over each env's own enemies (``sparse.ragged_loop``): lanes sorted
    by enemy count in blocks of 16 give the enemy turn of one block looping to the busiest
    lane, field for field, on mid-game states with 0 to many enemies."""
    from envs.hackmatrix.env import HackMatrix
    from scripts.profile_step import mid_game_states

    env, n = HackMatrix(), 96
    _, state = mid_game_states(env, env.default_params, n, warmup_steps=30, seed=7)
    counts = np.asarray(state.enemies.active.sum(-1))
    assert counts.min() == 0 and counts.max() >= 4

    def turn():
        return jax.device_get(jax.jit(jax.vmap(lambda k, s: enemies.run_enemy_turn(s, k, True)))(
            jax.random.split(jax.random.PRNGKey(9), n), state))

    monkeypatch.setenv(loop_width.RAGGED_MIN_BLOCK.variable, str(n))
    one_block = turn()
    monkeypatch.setenv(loop_width.RAGGED_MIN_BLOCK.variable, "16")
    blocks = turn()
    for (path, want), have in zip(jax.tree_util.tree_leaves_with_path(one_block),
                                  jax.tree.leaves(blocks)):
        np.testing.assert_array_equal(have, want, err_msg=jax.tree_util.keystr(path))
    moved = np.asarray(one_block[0].enemies.row != state.enemies.row).any(-1)
    assert moved.sum() > 0
