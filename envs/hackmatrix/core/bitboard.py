"""36-cell boards packed into two uint32 words, for BFS and flood fills in the hot path.

A board is a ``uint32[..., 2]`` array (functions accept leading axes): word 0 holds rows 0..2,
word 1 rows 3..5, with bit ``(row % 3) * 6 + col``. One BFS layer is a handful of word
operations instead of 36-wide (or 36x36) arithmetic, which is what keeps enemy pathfinding
cheap under vmap.
"""

import jax
import jax.numpy as jnp
import numpy as np

from . import loop_width
from .constants import GRID, N_CELLS

_WORD_BITS = 18
_FULL = np.uint32((1 << _WORD_BITS) - 1)
_COL0 = np.uint32(sum(1 << (r * GRID) for r in range(3)))
_COL5 = np.uint32(_COL0 << 5)
_CELL_WORD = np.arange(N_CELLS) // _WORD_BITS
_CELL_BIT = (np.uint32(1) << (np.arange(N_CELLS) % _WORD_BITS).astype(np.uint32)).astype(np.uint32)
# _CELL_MASKS[cell] is the board holding only that cell.
_CELL_MASKS = np.zeros((N_CELLS, 2), np.uint32)
_CELL_MASKS[np.arange(N_CELLS), _CELL_WORD] = _CELL_BIT

EMPTY_BOARD = np.zeros(2, np.uint32)
FULL_BOARD = np.array([_FULL, _FULL], np.uint32)


def bfs_layers(searching, layer, init):
    """``init`` carried through ``layer`` (carry -> carry) while ``searching(carry)``, which is
    checked every ``loop_width.BFS_LAYERS()`` layers (4 on a GPU, 1 on the CPU): ``layer``
    must leave the result of a finished search as it is."""
    per_iteration = loop_width.BFS_LAYERS()

    def layers(carry):
        for _ in range(per_iteration):
            carry = layer(carry)
        return carry

    return jax.lax.while_loop(searching, layers, init)


def from_bool(cells: jax.Array) -> jax.Array:
    """bool[..., 36] -> board uint32[..., 2]."""
    bits = jnp.where(cells, jnp.asarray(_CELL_BIT), jnp.uint32(0))
    bits = bits.reshape(cells.shape[:-1] + (2, _WORD_BITS))
    return jnp.sum(bits, axis=-1, dtype=jnp.uint32)  # distinct bits: sum == or


def to_bool(board: jax.Array) -> jax.Array:
    """board uint32[..., 2] -> bool[..., 36]."""
    words = jnp.repeat(board, _WORD_BITS, axis=-1)
    return (words & jnp.asarray(_CELL_BIT)) != 0


def cell(index: jax.Array) -> jax.Array:
    """Board with the single cell ``index`` (0..35) set; an index outside gives an empty board."""
    index = jnp.asarray(index, jnp.int32)
    inside = (index >= 0) & (index < N_CELLS)
    mask = jnp.asarray(_CELL_MASKS)[jnp.clip(index, 0, N_CELLS - 1)]
    return jnp.where(inside, mask, jnp.uint32(0))


def has(board: jax.Array, index: jax.Array) -> jax.Array:
    """Whether cell ``index`` is set."""
    return jnp.any((board & cell(index)) != 0, axis=-1)


def any_set(board: jax.Array) -> jax.Array:
    return jnp.any(board != 0)


def count(board: jax.Array) -> jax.Array:
    return jnp.sum(jax.lax.population_count(board).astype(jnp.int32))


def shift_up(board: jax.Array) -> jax.Array:
    """Every set cell moved to row + 1 (off the top is dropped)."""
    lo, hi = board[..., 0], board[..., 1]
    return jnp.stack([(lo << 6) & _FULL, ((hi << 6) | (lo >> 12)) & _FULL], axis=-1)


def shift_down(board: jax.Array) -> jax.Array:
    """Every set cell moved to row - 1."""
    lo, hi = board[..., 0], board[..., 1]
    return jnp.stack([((lo >> 6) | (hi << 12)) & _FULL, hi >> 6], axis=-1)


def shift_left(board: jax.Array) -> jax.Array:
    """Every set cell moved to col - 1."""
    return (board & ~_COL0) >> 1


def shift_right(board: jax.Array) -> jax.Array:
    """Every set cell moved to col + 1."""
    return ((board & ~_COL5) << 1) & _FULL


def shift(board: jax.Array, direction: int) -> jax.Array:
    """Shift by a static direction index (0 up, 1 down, 2 left, 3 right)."""
    return (shift_up, shift_down, shift_left, shift_right)[direction](board)


def neighbours(board: jax.Array) -> jax.Array:
    """Cells orthogonally adjacent to any set cell (the set cells themselves excluded only if
    not adjacent to another set cell)."""
    return shift_up(board) | shift_down(board) | shift_left(board) | shift_right(board)


def flood(seed: jax.Array, passable: jax.Array) -> jax.Array:
    """All cells of ``passable`` connected to ``seed`` (seed included as given)."""

    def layer(carry):
        reached, frontier = carry
        new = neighbours(frontier) & passable & ~reached
        return reached | new, new

    reached, _ = bfs_layers(lambda carry: any_set(carry[1]), layer, (seed, seed))
    return reached
