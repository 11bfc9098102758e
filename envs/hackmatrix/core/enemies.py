"""The enemy turn (game-rules §7, §9): transmission tick, enemy steps, scheduled task, siphon
spawns, status reset and the UNDO snapshot.

Enemy movement is the hot path. Swift runs a forward BFS per enemy; we use the equivalent
backward formulation on bitboards: the first move of Swift's FIFO BFS (neighbours in U, D, L,
R order, cells marked visited when enqueued) is the first direction whose neighbour lies on a
shortest path to the target (game-rules §7.5), i.e. the first neighbour met by the earliest
layer of a BFS grown from the target. Pass B's answer does not depend on other enemies, so it
is tabulated once per turn for glitches and non-glitches.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import bitboard as bb
from . import history, spawn
from .constants import (BLOCK, CRYPTOG, ENEMY_MAX_HP, ENEMY_SPEED, GLITCH, GRID, MANHATTAN,
                        N_CELLS, NEIGHBOUR, VIRUS)
from .entities import cell_index, list_rank
from .sparse import ragged_loop, tree_where
from .state import Enemies, EnvState

_UNREACHED = 1000
_NEIGHBOUR_SAFE = np.where(NEIGHBOUR >= 0, NEIGHBOUR, 0)
_NEIGHBOUR_VALID = NEIGHBOUR >= 0


def hatch_transmissions(state: EnvState) -> EnvState:
    """Transmission tick (§7.3): counters <= 1 hatch into disabled enemies appended in
    transmission list order; the others count down."""
    t, e = state.transmissions, state.enemies
    hatching = t.active & (t.turns <= 1)
    # Rank of each hatching transmission in list order and of each free enemy slot.
    rank_t = list_rank(hatching, t.seq)
    free = ~e.active
    rank_e = jnp.cumsum(free) - 1
    match = (hatching[:, None] & free[None, :]
             & (rank_t[:, None] == rank_e[None, :]))  # [T, E], at most one per row/column
    filled = jnp.any(match, axis=0)

    def pick(values):
        return jnp.sum(jnp.where(match, values[:, None], 0), axis=0)

    kind = pick(t.kind)
    row, col = pick(t.row), pick(t.col)
    w = lambda new, old: jnp.where(filled, new, old)  # noqa: E731
    is_cryptog = kind == CRYPTOG
    enemies = Enemies(
        active=e.active | filled, seq=w(state.next_seq + pick(rank_t), e.seq), kind=w(kind, e.kind),
        row=w(row, e.row), col=w(col, e.col), hp=w(jnp.asarray(ENEMY_MAX_HP)[kind], e.hp),
        disabled=w(1, e.disabled), stunned=w(False, e.stunned),
        last_row=w(jnp.where(is_cryptog, row, -1), e.last_row),
        last_col=w(jnp.where(is_cryptog, col, -1), e.last_col),
        from_scheduled=w(pick(t.from_scheduled.astype(jnp.int32)) > 0, e.from_scheduled),
        from_siphon=w(pick(t.from_siphon.astype(jnp.int32)) > 0, e.from_siphon))
    n_hatching = jnp.sum(hatching, dtype=jnp.int32)
    n_filled = jnp.sum(filled, dtype=jnp.int32)
    transmissions = t.replace(active=t.active & ~hatching,
                              turns=jnp.where(t.active & ~hatching, t.turns - 1, t.turns))
    return state.replace(enemies=enemies, transmissions=transmissions,
                         next_seq=state.next_seq + n_hatching,
                         overflow=state.overflow + n_hatching - n_filled)


def _distance_field(source: jax.Array, passable: jax.Array) -> jax.Array:
    """i32[..., 36] BFS layer index from ``source`` over ``passable`` (boards with a leading
    class axis), _UNREACHED where not reached."""

    def body(carry):
        visited, frontier, dist, layer = carry
        new = bb.neighbours(frontier) & passable & ~visited
        dist = jnp.where(bb.to_bool(new), layer + 1, dist)
        return visited | new, new, dist, layer + 1

    dist0 = jnp.where(bb.to_bool(source), 0, _UNREACHED)
    _, _, dist, _ = bb.bfs_layers(lambda carry: bb.any_set(carry[1]), body,
                                  (source, source, dist0, jnp.int32(0)))
    return dist


def _pass_b_first_moves(state: EnvState, block_cells: jax.Array) -> jax.Array:
    """i32[2, 36]: pass B's first move (direction 0..3, or -1) from every cell, for
    non-glitches (row 0) and glitches (row 1). Pass B ignores other enemies and
    transmissions, so it only depends on blocks and the player's cell (§7.5 pass B)."""
    target = cell_index(state.player.row, state.player.col)
    passable_cells = jnp.stack([~block_cells, jnp.ones_like(block_cells)])  # [2, 36]
    passable = jax.vmap(bb.from_bool)(passable_cells)
    # the target is exempt from nothing but blocks
    target_ok = jnp.take(passable_cells, target, axis=1)
    source = jnp.where(target_ok[:, None], bb.cell(target)[None, :], jnp.uint32(0))
    dist = _distance_field(source, passable)  # [2, 36]
    nbr_dist = jnp.where(_NEIGHBOUR_VALID[None] & passable_cells[:, _NEIGHBOUR_SAFE],
                         dist[:, _NEIGHBOUR_SAFE], _UNREACHED)  # [2, 36, 4]
    best = jnp.min(nbr_dist, axis=-1, keepdims=True)
    first = jnp.argmax(nbr_dist == best, axis=-1)
    return jnp.where(best[..., 0] < _UNREACHED, first, -1).astype(jnp.int32)


def _pass_a_first_move(target, start, passable, target_ok):
    """Pass A (§7.5): BFS with other enemies and transmissions as obstacles. Returns the first
    direction (0..3) or -1. ``passable`` excludes blocks (non-glitch) and occupied cells."""
    start_neighbours = bb.neighbours(bb.cell(start)) & passable
    source = jnp.where(target_ok, bb.cell(target), jnp.uint32(0))

    def touches_start(frontier):
        return jnp.any((frontier & start_neighbours) != 0)

    def body(carry):
        # The first layer that touches a neighbour of the start is kept (first_touch stays
        # empty until then); the search runs on.
        visited, frontier, first_touch = carry
        new = bb.neighbours(frontier) & passable & ~visited
        first_touch = jnp.where(bb.any_set(first_touch) | ~touches_start(new), first_touch,
                                new)
        return visited | new, new, first_touch

    def searching(carry):
        _, frontier, first_touch = carry
        return bb.any_set(frontier) & ~bb.any_set(first_touch)

    first_touch = jnp.where(touches_start(source), source, jnp.uint32(0))

    _, _, frontier = bb.bfs_layers(searching, body, (source, source, first_touch))
    hits = jnp.stack([bb.has(frontier, _neighbour(start, d)) for d in range(4)])
    return jnp.where(jnp.any(hits), jnp.argmax(hits), -1).astype(jnp.int32)


def _neighbour(cell, direction):
    return jnp.asarray(NEIGHBOUR)[cell, direction]


class _StepConsts(NamedTuple):
    """What one enemy step reads and no enemy's move changes."""
    order: jax.Array  # enemy slots in acting order
    step_index: jax.Array
    player_row: jax.Array
    player_col: jax.Array
    block_cells: jax.Array
    transmission_cells: jax.Array
    first_b: jax.Array


def _enemy_acts(k, carry, consts: _StepConsts):
    """The ``k``-th enemy of the shuffled list acts (§7.4): attacks, or moves by pass A, B or
    C. ``carry`` is (enemies, player hp, attacked this turn, enemies per cell)."""
    enemies, hp, attacked, counts = carry
    n_slots = enemies.active.shape[0]
    sel = jnp.arange(n_slots) == consts.order[k]
    get = lambda values: jnp.sum(jnp.where(sel, values, 0))  # noqa: E731
    kind, row, col = get(enemies.kind), get(enemies.row), get(enemies.col)
    cell = cell_index(row, col)
    player_row, player_col = consts.player_row, consts.player_col
    player_cell = cell_index(player_row, player_col)
    acts = (jnp.any(sel & enemies.active) & (get(enemies.disabled) <= 0)
            & ~jnp.any(sel & enemies.stunned) & ~jnp.any(sel & attacked)
            & (consts.step_index < jnp.asarray(ENEMY_SPEED)[kind]))
    distance = jnp.abs(row - player_row) + jnp.abs(col - player_col)
    attack = acts & (distance == 1)
    move = acts & (distance != 1)
    # Occupied for this enemy: every other enemy's cell and every transmission's cell.
    own = jnp.arange(N_CELLS) == cell
    occupied = ((counts - own.astype(jnp.int32)) > 0) | consts.transmission_cells
    glitch = kind == GLITCH
    walkable = glitch | ~consts.block_cells
    free = walkable & ~occupied
    on_target = cell == player_cell
    # Pass A: BFS around other enemies and transmissions (the target is exempt).
    target_ok = jnp.take(walkable, player_cell)
    dir_a = _pass_a_first_move(player_cell, cell, bb.from_bool(free),
                               move & ~on_target & target_ok)
    # Pass B: geometric shortest path, taken only if its first cell is free.
    dir_b = jnp.take(jnp.where(glitch, consts.first_b[1], consts.first_b[0]), cell)
    cell_b = _neighbour(cell, jnp.maximum(dir_b, 0))
    dir_b = jnp.where((dir_b >= 0) & jnp.take(~occupied, cell_b), dir_b, -1)
    # Pass C: greedy, the free neighbour closest to the player; may retreat (§14 item 8).
    nbrs = jnp.asarray(_NEIGHBOUR_SAFE)[cell]
    nbr_ok = jnp.asarray(_NEIGHBOUR_VALID)[cell] & jnp.take(free, nbrs)
    nbr_dist = jnp.where(nbr_ok, jnp.asarray(MANHATTAN)[nbrs, player_cell], 1000)
    dir_c = jnp.where(jnp.any(nbr_ok), jnp.argmax(nbr_dist == jnp.min(nbr_dist)), -1)
    direction = jnp.where(on_target, dir_c,
                          jnp.where(dir_a >= 0, dir_a, jnp.where(dir_b >= 0, dir_b, dir_c)))
    moves = move & (direction >= 0)
    dest = _neighbour(cell, jnp.maximum(direction, 0))
    new_row = jnp.where(moves, dest // GRID, row)
    new_col = jnp.where(moves, dest % GRID, col)
    # §7.6: a cryptog that moved into the player's row or column is seen there.
    seen = moves & (kind == CRYPTOG) & ((new_row == player_row) | (new_col == player_col))
    enemies = enemies.replace(
        row=jnp.where(sel, new_row, enemies.row), col=jnp.where(sel, new_col, enemies.col),
        last_row=jnp.where(sel & seen, new_row, enemies.last_row),
        last_col=jnp.where(sel & seen, new_col, enemies.last_col))
    counts = counts + jnp.where(moves, (jnp.arange(N_CELLS) == dest).astype(jnp.int32)
                                - own.astype(jnp.int32), 0)
    hp = jnp.where(attack, jnp.maximum(hp - 1, 0), hp)
    return enemies, hp, attacked | (sel & attack), counts


# The enemies of a step act one after another (each sees the others' new cells); under vmap the
# lanes loop in blocks of similar enemy counts, not all to the busiest env's count.
_enemies_act = ragged_loop(_enemy_acts)


def _enemy_step(state: EnvState, key, step_index, attacked, first_b, enabled):
    """One enemy step (§7.4) over a fresh uniform shuffle of the enemy list."""
    e = state.enemies
    n_slots = e.active.shape[0]
    order = jnp.argsort(jnp.where(e.active, jax.random.uniform(key, (n_slots,)), 2.0))
    n_acting = jnp.where(enabled, jnp.sum(e.active, dtype=jnp.int32), 0)
    t = state.transmissions
    transmission_cells = jnp.any(
        t.active[:, None] & (cell_index(t.row, t.col)[:, None] == jnp.arange(N_CELLS)), axis=0)
    consts = _StepConsts(order=order, step_index=jnp.asarray(step_index, jnp.int32),
                         player_row=state.player.row, player_col=state.player.col,
                         block_cells=state.grid.content == BLOCK,
                         transmission_cells=transmission_cells, first_b=first_b)
    counts = jnp.sum(e.active[:, None] & (cell_index(e.row, e.col)[:, None] == jnp.arange(N_CELLS)),
                     axis=0, dtype=jnp.int32)
    enemies, hp, attacked, _ = _enemies_act(n_acting, (e, state.player.hp, attacked, counts),
                                            consts)
    return state.replace(enemies=enemies, player=state.player.replace(hp=hp)), attacked


def run_enemy_turn(state: EnvState, key, enabled) -> tuple[EnvState, jax.Array]:
    """``runEnemyTurn`` for lanes where ``enabled``. Returns (state, ran) where ``ran`` is
    True for a normal (not STEP-skipped) turn."""
    skipped = enabled & state.step_active  # §7.1: STEP skips the whole turn
    ran = enabled & ~state.step_active
    k_steps, k_spawn = jax.random.split(key)

    # Computed for every lane, kept only where ``ran``; the loops inside are gated by ``ran``.
    s = hatch_transmissions(state.replace(turn=state.turn + 1))
    two_steps = jnp.any(s.enemies.active & (s.enemies.kind == VIRUS))
    first_b = _pass_b_first_moves(s, s.grid.content == BLOCK)

    def enemy_step(step_index, carry):  # one loop body for both steps: compiled once
        s, attacked = carry
        acting = ran & ((step_index == 0) | two_steps)
        return _enemy_step(s, jax.random.fold_in(k_steps, step_index), step_index, attacked,
                           first_b, acting)

    s, _ = jax.lax.fori_loop(0, 2, enemy_step, (s, jnp.zeros_like(s.enemies.active)))
    # §9 scheduled task (suppressed, without advancing, under CALM), then §7.2 step 6: the
    # siphon's owed transmissions, in one spawn loop.
    due = ran & ~s.calm & (s.turn >= s.next_sched_turn)
    owed = jnp.where(ran, s.pending_siphon, 0)
    s = spawn.spawn_turn_end_transmissions(s, k_spawn, due.astype(jnp.int32), owed)
    s = s.replace(next_sched_turn=jnp.where(due, s.turn + s.sched_interval, s.next_sched_turn),
                  pending_siphon=jnp.where(ran, 0, s.pending_siphon))
    # §7.2 step 7: disable counters tick, stuns clear.
    e = s.enemies
    s = s.replace(enemies=e.replace(
        disabled=jnp.where(ran & (e.disabled > 0), e.disabled - 1, e.disabled),
        stunned=jnp.where(ran, False, e.stunned)))
    out = tree_where(ran, s, state)
    out = out.replace(step_active=jnp.where(skipped, False, out.step_active))
    return history.push_snapshot(out, ran), ran  # §11: only at the end of a normal enemy turn
