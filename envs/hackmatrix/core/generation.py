"""New-game and stage generation (game-rules §3.1-§3.5, §13.1-§13.2, decisions R2).

Random draws follow Swift's distributions, not its draw order (decisions R2). Two closed forms
are used, each with the same distribution as Swift's loop:

* a layout attempt draws a uniformly random set of ``count`` distinct allowed cells at once
  (Swift draws cells one by one and rejects repeats, which gives the same uniform subset);
* block contents are drawn once, for the winning layout only: the validator looks only at which
  cells are blocks, and per-block types are independent of the cells, so drawing them for every
  rejected attempt would not change the result. Programs are assigned to program blocks from a
  uniformly random permutation of the pool, which is the distribution of Swift's "uniform pick
  among programs not yet used in this attempt" in placement order.
"""

import jax
import jax.numpy as jnp
import numpy as np

from . import bitboard as bb
from . import loop_width
from .constants import (BASE_SCHEDULE_INTERVAL, BLOCK, BONUS_CREDITS, BONUS_ENERGY, BONUS_SIPHON,
                        CORNER_CELLS, DATA_SIPHON, EMPTY, EXIT, GRID, IS_CORNER, LAYOUT_ATTEMPTS,
                        MAX_BLOCKS, MIN_BLOCKS, N_CELLS, N_PROGRAMS, PROGRAM_SPAWN_COST)
from .entities import cell_index, enemy_cell_mask, transmission_cell_mask
from .sparse import sparse_update
from .rng import uniform_below, unit_interval
from .spawn import spawn_transmissions
from .state import (HISTORY_SIZE, MAX_ENEMIES, MAX_TRANSMISSIONS, EnvState, Grid, blank_state)

_CELLS = np.arange(N_CELLS, dtype=np.int32)
_PROGRAMS = np.arange(N_PROGRAMS, dtype=np.int32)
# Random sort keys keep their top 26 bits and carry the cell index in the low 6, so no two
# cells ever tie; an excluded cell gets the largest key and sorts last.
_KEY_RANDOM_BITS = np.uint32(0xFFFFFFC0)
_EXCLUDED_KEY = np.uint32(0xFFFFFFFF)
# Resource amount thresholds (game-rules §1.4): u < 0.45 -> 1, u < 0.90 -> 2, else 3.
_AMOUNT_2_FROM, _AMOUNT_3_FROM = 0.45, 0.90
_QUESTION_PROBABILITY = 0.1
_STARTING_CREDITS, _STARTING_ENERGY, _STARTING_SIPHONS = 10, 11, 1


def _lowest_cell(board: jax.Array) -> jax.Array:
    """The board holding only the lowest set cell of ``board`` (row-major first), or empty."""
    low, high = board[0], board[1]
    low_bit = low & (~low + jnp.uint32(1))
    high_bit = high & (~high + jnp.uint32(1))
    return jnp.stack([low_bit, jnp.where(low == 0, high_bit, jnp.uint32(0))])


def is_valid_layout(blocks: jax.Array, exit_cell) -> jax.Array:
    """Swift ``GridValidator.isValidPlacement`` (game-rules §3.4.1) on a board of block cells.

    isPathConnected: a BFS from the first walkable (non-block) cell in row-major order, which
    is (0,0) whenever corners are free, must reach every walkable cell. The exit is marked
    reached when discovered but never expanded, unless it is the BFS start itself; so a pocket
    reachable only through the exit fails, except when the exit is the start corner.
    areAllBlocksSiphonable: every block has an in-bounds orthogonal non-block neighbour (exit
    and data-siphon cells are non-blocks, even when they are the only such neighbour).
    """
    walkable = jnp.asarray(bb.FULL_BOARD) & ~blocks
    start = _lowest_cell(walkable)
    exit_board = bb.cell(exit_cell) & walkable
    # The exit stops the BFS only when it is not the start (the start is always expanded).
    expandable = walkable & ~(exit_board & ~start)
    reached = bb.flood(start, expandable)
    reached = reached | (bb.neighbours(reached) & exit_board)
    connected = jnp.all(reached == walkable)
    siphonable = jnp.all((blocks & ~bb.neighbours(walkable)) == 0)
    return connected & siphonable


def _random_layout(key: jax.Array, allowed: jax.Array, block_count: jax.Array) -> jax.Array:
    """Board of ``block_count`` cells drawn uniformly without replacement from ``allowed``
    (the caller guarantees that enough allowed cells exist)."""
    bits = jax.random.bits(key, (N_CELLS,), jnp.uint32)
    sort_key = jnp.where(allowed, (bits & _KEY_RANDOM_BITS) | jnp.asarray(_CELLS, jnp.uint32),
                         _EXCLUDED_KEY)
    threshold = jnp.sort(sort_key)[block_count - 1]
    return bb.from_bool(allowed & (sort_key <= threshold))


def _place_block_layout(key, allowed, block_count, exit_cell):
    """placeBlocksWithValidation's attempt loop (game-rules §3.4, decisions R2): up to 100
    whole-layout attempts, the first valid one wins; an empty board if none is valid, or if
    fewer allowed cells than ``block_count`` exist (where Swift would loop forever). Each
    iteration draws and checks ``loop_width.LAYOUT_ATTEMPTS()`` attempts side by side (8 on a
    GPU, 1 on the CPU), attempt ``i`` always from ``fold_in(key, i)``, so the first valid
    attempt and its layout do not depend on that width."""
    feasible = jnp.sum(allowed, dtype=jnp.int32) >= block_count
    per_iteration = loop_width.LAYOUT_ATTEMPTS()

    def cond(carry):
        attempt, valid, _ = carry
        return feasible & ~valid & (attempt < LAYOUT_ATTEMPTS)

    def attempt_layout(attempt):
        layout = _random_layout(jax.random.fold_in(key, attempt), allowed, block_count)
        return layout, is_valid_layout(layout, exit_cell) & (attempt < LAYOUT_ATTEMPTS)

    def body(carry):
        attempt, _, _ = carry
        if per_iteration == 1:
            layout, valid = attempt_layout(attempt)
        else:
            layouts, valid = jax.vmap(attempt_layout)(attempt + jnp.arange(per_iteration))
            layout, valid = layouts[jnp.argmax(valid)], jnp.any(valid)
        return attempt + per_iteration, valid, layout

    init = (jnp.int32(0), jnp.bool_(False), jnp.asarray(bb.EMPTY_BOARD))
    _, valid, layout = jax.lax.while_loop(cond, body, init)
    return bb.to_bool(jnp.where(valid, layout, jnp.uint32(0)))


def _block_contents(bits: jax.Array, is_block: jax.Array):
    """Per-block payload (game-rules §3.4 step 2.3) from uint32 bits[4, 36]: isData coin,
    isQuestion with p = 0.1, points U{1..9} for data, distinct programs within the stage for
    program blocks. Returns (points, program, spawn, question) cell arrays, 0 / -1 off blocks."""
    is_data = (bits[0] >> jnp.uint32(31)) == 1
    question = is_block & (unit_interval(bits[1]) < _QUESTION_PROBABILITY)
    points = 1 + uniform_below(bits[2], 9)
    data_block = is_block & is_data
    program_block = is_block & ~is_data
    # The i-th program block in row-major order gets the i-th program of a uniformly random
    # permutation of the pool (sort keys made tie-free like the layout keys).
    sort_key = (bits[3, :N_PROGRAMS] & _KEY_RANDOM_BITS) | jnp.asarray(_PROGRAMS, jnp.uint32)
    program_order = jnp.argsort(sort_key).astype(jnp.int32)
    program_index = jnp.cumsum(program_block) - 1
    picks = program_index[:, None] == jnp.asarray(_PROGRAMS)
    program = jnp.where(program_block, jnp.sum(picks * program_order, axis=1), -1)
    program_cost = jnp.sum((program[:, None] == jnp.asarray(_PROGRAMS)) * PROGRAM_SPAWN_COST,
                           axis=1)
    spawn = jnp.where(data_block, points, jnp.where(program_block, program_cost, 0))
    return jnp.where(data_block, points, 0), program, spawn, question


def _resources(bits: jax.Array, content: jax.Array):
    """placeResources (game-rules §3.5, §1.4) from uint32 bits[2, 36]: every EMPTY or
    DATA_SIPHON cell gets 1, 2 or 3 (45/45/10) of credits or energy (fair coin).
    Returns (credits, energy)."""
    gets = (content == EMPTY) | (content == DATA_SIPHON)
    roll = unit_interval(bits[0])
    amount = (1 + (roll >= _AMOUNT_2_FROM).astype(jnp.int32)
              + (roll >= _AMOUNT_3_FROM).astype(jnp.int32))
    is_credits = (bits[1] >> jnp.uint32(31)) == 1
    return jnp.where(gets & is_credits, amount, 0), jnp.where(gets & ~is_credits, amount, 0)


def _pick_exit(bits: jax.Array, player_cell: jax.Array) -> jax.Array:
    """Exit cell: uniform among the corners other than the player's, in canonical order
    (game-rules §3.3 step 3)."""
    corners = jnp.asarray(CORNER_CELLS)
    free = corners != player_cell
    pick = uniform_below(bits, jnp.sum(free, dtype=jnp.int32))
    chosen = free & (jnp.cumsum(free) == pick + 1)
    return jnp.sum(jnp.where(chosen, corners, 0))


def generate_stage(state: EnvState, key: jax.Array) -> EnvState:
    """Swift ``initializeStage`` (game-rules §3.3 steps 1-8) on every lane: a caller that needs
    it on some lanes only gates it itself (``initialize_stage``, ``HackMatrix._new_boards``).

    The caller sets ``stage`` and ``sched_interval`` beforehand. Enemies and transmissions are
    kept; stage-start transmissions (count = stage) are appended after the new grid exists.
    """
    k_draws, k_layout, k_spawn = jax.random.split(key, 3)
    # One bits draw for everything outside the two loops: rows 0-3 block contents, 4-5
    # resources, row 6 holds the exit pick (word 0) and the block count (word 1).
    bits = jax.random.bits(k_draws, (7, N_CELLS), jnp.uint32)
    cells = jnp.asarray(_CELLS)
    player_cell = cell_index(state.player.row, state.player.col)

    # Steps 3-4: exit on one of the other corners, data siphons on the corners left over.
    exit_cell = _pick_exit(bits[6, 0], player_cell)
    is_exit = cells == exit_cell
    is_siphon = jnp.asarray(IS_CORNER) & (cells != player_cell) & ~is_exit

    # Step 6 (§3.4): never on corners or on cells holding an enemy or a transmission.
    allowed = (~jnp.asarray(IS_CORNER) & ~enemy_cell_mask(state.enemies)
               & ~transmission_cell_mask(state.transmissions))
    block_count = MIN_BLOCKS + uniform_below(bits[6, 1], MAX_BLOCKS - MIN_BLOCKS + 1)
    is_block = _place_block_layout(k_layout, allowed, block_count, exit_cell)
    points, program, spawn, question = _block_contents(bits[0:4], is_block)
    content = jnp.where(is_block, BLOCK, jnp.where(is_exit, EXIT, jnp.where(
        is_siphon, DATA_SIPHON, EMPTY))).astype(jnp.int32)

    # Step 7 (§3.5).
    credits, energy = _resources(bits[4:6], content)

    # Step 2: a fresh grid (siphon markers of the previous stage are gone).
    no_marks = jnp.zeros(N_CELLS, jnp.bool_)
    grid = Grid(content=content, points=points, program=program, spawn=spawn, question=question,
                credits=credits, energy=energy, siphoned=no_marks, siphon_center=no_marks)

    false = jnp.bool_(False)
    state = state.replace(
        grid=grid,
        # Step 1.
        turn=jnp.int32(0), next_sched_turn=state.sched_interval, show=false, calm=false,
        step_active=false, atk_uses=jnp.int32(0), board_from_undo=false,
        exit_row=exit_cell // GRID, exit_col=exit_cell % GRID,
    )
    # Step 8: `stage` new transmissions, no provenance flags.
    return spawn_transmissions(state, k_spawn, state.stage)


_initialize_stage_sparse = sparse_update(generate_stage)


def initialize_stage(state: EnvState, key: jax.Array, enabled) -> EnvState:
    """Swift ``initializeStage`` (game-rules §3.3 steps 1-8) in lanes where ``enabled``; other
    lanes are returned unchanged. Under vmap only the enabled lanes are generated
    (``sparse.sparse_update``), so a batch pays for the stages it actually starts.

    The caller sets ``stage`` and ``sched_interval`` beforehand. Enemies and transmissions are
    kept; stage-start transmissions (count = stage) are appended after the new grid exists.
    """
    # The history is neither read nor written: keeping it out of the sparse carry saves its
    # gather/scatter (compile time and memory traffic).
    out = _initialize_stage_sparse(jnp.asarray(enabled, jnp.bool_), state.replace(history=None),
                                   key)
    return out.replace(history=state.history)


def new_game(key: jax.Array, *, max_enemies: int = MAX_ENEMIES,
             max_transmissions: int = MAX_TRANSMISSIONS,
             history_size: int = HISTORY_SIZE) -> EnvState:
    """Swift ``GameState.init`` (game-rules §3.1, §13.1): fresh state, player on a uniform
    corner, one starting bonus uniform over credits 10 / energy 11 / data siphons 1, then stage
    1 generated with scheduled-task interval 12."""
    return generate_stage(*new_game_before_stage(key, max_enemies=max_enemies,
                                                 max_transmissions=max_transmissions,
                                                 history_size=history_size))


def new_game_before_stage(key: jax.Array, *, max_enemies: int = MAX_ENEMIES,
                          max_transmissions: int = MAX_TRANSMISSIONS,
                          history_size: int = HISTORY_SIZE) -> tuple[EnvState, jax.Array]:
    """``new_game`` up to its stage generation: (the fresh state, the generation key), so that
    a caller can share one ``generate_stage`` between new games and stage advances."""
    k_draws, k_stage = jax.random.split(key)
    bits = jax.random.bits(k_draws, (2,), jnp.uint32)
    state = blank_state(max_enemies, max_transmissions, history_size)
    corner = jnp.asarray(CORNER_CELLS)[uniform_below(bits[0], len(CORNER_CELLS))]
    bonus = uniform_below(bits[1], 3)
    player = state.player.replace(
        row=corner // GRID, col=corner % GRID,
        credits=jnp.where(bonus == BONUS_CREDITS, _STARTING_CREDITS, 0).astype(jnp.int32),
        energy=jnp.where(bonus == BONUS_ENERGY, _STARTING_ENERGY, 0).astype(jnp.int32),
        data_siphons=jnp.where(bonus == BONUS_SIPHON, _STARTING_SIPHONS, 0).astype(jnp.int32))
    state = state.replace(player=player, stage=jnp.int32(1),
                          sched_interval=jnp.int32(BASE_SCHEDULE_INTERVAL))
    # The blank transmission list is a compile-time constant; without this barrier XLA
    # constant-folds the first spawn's free-slot search over the whole vmapped batch, which
    # costs seconds of compile time and nothing at run time.
    state = state.replace(transmissions=jax.lax.optimization_barrier(state.transmissions))
    return state, k_stage
