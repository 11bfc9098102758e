"""The acquire macro (``HackMatrix(acquire_macro=True)``): one extra action, "head for a
program", that plays the next move of a plan an observation alone determines.

Why: agents play the game's 28 actions and never learn to acquire a program (SPEC §4.4), while
owning one (RESET) lifts a trained agent from stage 4.6 to 5.9. Acquiring takes a walk to a
floor data siphon, a walk beside a program block, and a siphon: a chain of different moves
whose value shows stages later, so it is never sampled often enough to be learned. The macro is
one action with one meaning in every state ("go and get a program"), so its value can be
learned from every state where it is offered. It is prior knowledge in the action space (a
scripted option, one primitive a step), not a change of the game: the played action is one of
the game's 28, enemies act as after that action, and a policy that never takes it plays the
game's own action set. Rows of agents trained with it are labelled as such (SPEC §4.4).

The plan, from the observation only (fair: a question block shows no program, so it is never a
target, and nothing hidden is read):
1. Targets: the floor cells beside an unsiphoned block showing a program the player does not
   own (the siphon cross, game-rules §6). None on the board: the macro is not offered.
2. With a data siphon in hand: on a target, siphon; elsewhere, the first move of a shortest
   path (blocks impassable) to the nearest target.
3. Without one: the first move of a shortest path to the nearest floor data siphon (walking
   onto it collects it, game-rules §5); none left on the board: not offered.
Ties between equally short first moves go to the first direction (up, down, left, right). A
first move that the mask refuses (an enemy standing on a block cell never is; a block never
is on a path) makes the macro unavailable rather than illegal.
"""

import jax
import jax.numpy as jnp

from .core import bitboard
from .core.constants import ACTION_SIPHON, DIR_DCOL, DIR_DROW, GRID, N_DIRECTIONS, N_PROGRAMS
from .core.entities import cell_index, on_board
from .observation import (CH_BLOCK_PROGRAM_TYPE, CH_BLOCK_SIPHONED, CH_DATA_SIPHON, Observation,
                          observed_blocks)
from .training import player_cell


def _first_step(passable, targets, start):
    """(direction i32, found bool): the first move of a shortest 4-neighbour path from cell
    ``start`` to the nearest cell of board ``targets`` over board ``passable`` (found is False
    when no target is reachable, or the start is one). A BFS outwards from the targets: the
    layer before the one that reaches the start holds the cells one step nearer."""
    start_board = bitboard.cell(start)

    def searching(carry):
        _, frontier, _, found = carry
        return bitboard.any_set(frontier) & ~found

    def layer(carry):
        reached, frontier, previous, found = carry
        new = bitboard.neighbours(frontier) & passable & ~reached
        # A finished search is left as it is (``bitboard.bfs_layers``).
        return (jnp.where(found, reached, reached | new), jnp.where(found, frontier, new),
                jnp.where(found, previous, frontier),
                found | bitboard.any_set(new & start_board))

    seeds = targets & passable & ~start_board
    _, _, nearer, found = bitboard.bfs_layers(
        searching, layer, (seeds, seeds, jnp.zeros_like(seeds), jnp.bool_(False)))
    row, col = start // GRID, start % GRID
    rows, cols = row + jnp.asarray(DIR_DROW), col + jnp.asarray(DIR_DCOL)
    inside = on_board(rows, cols)
    steps = inside & jax.vmap(bitboard.has, in_axes=(None, 0))(
        nearer, jnp.where(inside, cell_index(rows, cols), 0))
    return jnp.argmax(steps).astype(jnp.int32), found & jnp.any(steps)


def macro_action(obs: Observation, wanted_programs=None) -> tuple[jax.Array, jax.Array]:
    """(offered bool, the game action i32 it plays) for one observation (module docstring);
    ``wanted_programs`` (bool[23], ``constants.PROGRAM_NAMES`` order; None: all) narrows the
    programs it goes for."""
    grid = obs.grid
    row, col = player_cell(obs)
    blocks = observed_blocks(obs)
    shown = grid[..., CH_BLOCK_PROGRAM_TYPE:CH_BLOCK_PROGRAM_TYPE + N_PROGRAMS]
    wanted = obs.programs == 0
    if wanted_programs is not None:
        wanted = wanted & wanted_programs
    wanted_block = ((jnp.sum(shown * wanted, axis=-1) > 0)
                    & (grid[..., CH_BLOCK_SIPHONED] == 0))
    passable = bitboard.from_bool(~blocks.reshape(-1))
    beside_wanted = bitboard.neighbours(bitboard.from_bool(wanted_block.reshape(-1))) & passable
    floor_siphons = bitboard.from_bool(grid[..., CH_DATA_SIPHON].reshape(-1) > 0)
    has_siphon = obs.action_mask[ACTION_SIPHON]
    start = cell_index(row, col)
    on_target = bitboard.has(beside_wanted, start)
    targets = jnp.where(has_siphon, beside_wanted, floor_siphons)
    direction, found = _first_step(passable, targets, start)
    siphon_now = has_siphon & on_target
    action = jnp.where(siphon_now, ACTION_SIPHON, direction).astype(jnp.int32)
    offered = jnp.any(wanted_block) & (siphon_now | (found & obs.action_mask[:N_DIRECTIONS][
        jnp.clip(direction, 0, N_DIRECTIONS - 1)]))
    return offered, action
