"""The action mask: Swift ``GameState.getValidActions`` (programs-rewards-observation §7)."""

import jax
import jax.numpy as jnp

from .constants import BLOCK, DIR_DCOL, DIR_DROW, GRID, N_CELLS
from .entities import enemy_cell_mask, on_board
from .programs import can_execute
from .state import EnvState


def direction_valid(state: EnvState) -> jax.Array:
    """bool[4] in U, D, L, R order: the adjacent cell is on the board and is either not a block
    or has at least one enemy standing on it (§7). Transmissions, line of fire and the cell
    type (exit, data siphon) play no part, so a transmission on a block leaves the direction
    invalid even though Swift would shoot it (errata E6)."""
    p = state.player
    rows = p.row + jnp.asarray(DIR_DROW)
    cols = p.col + jnp.asarray(DIR_DCOL)
    inside = on_board(rows, cols)
    target = (rows * GRID + cols)[:, None] == jnp.arange(N_CELLS)  # [4, 36] one-hot
    # Every list member counts, hp <= 0 and hidden cryptogs included (Swift checks the list).
    passable = (state.grid.content != BLOCK) | enemy_cell_mask(state.enemies)
    return inside & jnp.any(target & passable, axis=1)


def action_mask(state: EnvState) -> jax.Array:
    """bool[28]: directions (§7), siphon iff dataSiphons > 0 (§6.2), programs by
    ``canExecuteProgram`` (§3 step 3)."""
    siphon = (state.player.data_siphons > 0)[None]
    return jnp.concatenate([direction_valid(state), siphon, can_execute(state)])
