"""The board searches (flood fill, exit distance, the enemies' distance field and pass A) give
the same answer whatever the number of layers each loop iteration takes
(``bitboard.layers_per_iteration``: 4 on a GPU, 1 on the CPU, SPEC §4.7): layers past the end
of a search change nothing. Checked on random boards against one layer per iteration."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix.core import bitboard, enemies
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
    monkeypatch.setenv(bitboard.BFS_LAYERS_VARIABLE, "1")
    expected = all_searches(*cases)
    monkeypatch.setenv(bitboard.BFS_LAYERS_VARIABLE, str(layers))
    assert bitboard.layers_per_iteration() == layers
    got = all_searches(*cases)
    for name, want, have in zip(("distance", "found", "flood", "field", "pass A"), expected,
                                got):
        np.testing.assert_array_equal(have, want, err_msg=name)
    # The cases exercise what they should: reachable and unreachable targets, and pass A
    # finding a first move and finding none.
    assert 0 < expected[1].sum() < CASES
    assert 0 < (expected[4] >= 0).sum() < CASES


def test_the_cpu_takes_one_layer_per_iteration(monkeypatch):
    monkeypatch.delenv(bitboard.BFS_LAYERS_VARIABLE, raising=False)
    assert jax.default_backend() == "cpu" and bitboard.layers_per_iteration() == 1


def test_a_layer_count_that_is_not_a_positive_integer_is_refused(monkeypatch):
    monkeypatch.setenv(bitboard.BFS_LAYERS_VARIABLE, "0")
    with pytest.raises(ValueError, match="expected a positive integer"):
        bitboard.layers_per_iteration()
