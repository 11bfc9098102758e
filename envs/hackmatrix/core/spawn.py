"""Random transmission spawning (game-rules §3.6), shared by stage start, scheduled tasks and
siphon spawns.

Swift draws up to 100 random cells per pass. Decisions R2 allows the closed form used here: with
``k`` valid cells out of 36, a pass succeeds with probability ``1 - (1 - k/36)^100`` and then
lands on a uniformly chosen valid cell, which is exactly the distribution of "first valid of 100
uniform draws".
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from . import bitboard as bb
from .constants import BLOCK, GRID, N_CELLS, N_ENEMY_TYPES, NEW_TRANSMISSION_TURNS, SPAWN_TRIES
from .entities import append_transmission, cell_index, enemy_cell_mask, transmission_cell_mask
from .rng import uniform_below, unit_interval
from .sparse import ragged_loop
from .state import EnvState, Transmissions

_CELLS = np.arange(N_CELLS, dtype=np.int32)
def spawn_empty_mask(state: EnvState) -> jax.Array:
    """bool[36]: Swift ``isPositionEmpty`` (game-rules §3.6): not the player's cell, no enemy
    (any list member, whatever its hp), no transmission, content not a block. Exit, data siphon,
    siphoned floor and resource cells all count as empty."""
    player_cell = cell_index(state.player.row, state.player.col)
    return ((jnp.asarray(_CELLS) != player_cell)
            & ~enemy_cell_mask(state.enemies)
            & ~transmission_cell_mask(state.transmissions)
            & (state.grid.content != BLOCK))


def line_of_fire_mask(state: EnvState) -> jax.Array:
    """bool[36]: Swift ``isPositionInLineOfFire`` for every cell (game-rules §3.6).

    Walking from the player toward a cell of its row or column, the target is checked first at
    each step, then an enemy or a block on that cell ends the walk. So the first obstacle in each
    direction is itself in line of fire and everything behind it is not. Transmissions do not
    stop this line (unlike real shots, §5.1). The player's own cell is reported as False; it is
    never spawn-empty, so the value there does not matter.
    """
    player_cell = cell_index(state.player.row, state.player.col)
    obstacles = bb.from_bool(enemy_cell_mask(state.enemies) | (state.grid.content == BLOCK))
    origin = bb.cell(player_cell)
    ray = jnp.asarray(bb.EMPTY_BOARD)
    for direction in range(4):
        frontier = bb.shift(origin, direction)
        for _ in range(GRID - 1):
            ray = ray | frontier
            frontier = bb.shift(frontier & ~obstacles, direction)
    return bb.to_bool(ray)


def _pass_success_probability(valid_count: jax.Array) -> jax.Array:
    """Chance that one of 100 uniform cell draws hits one of ``valid_count`` valid cells."""
    miss = 1.0 - valid_count.astype(jnp.float32) / N_CELLS
    return 1.0 - miss ** SPAWN_TRIES


def spawn_transmissions(state: EnvState, key: jax.Array, count, *, from_scheduled=False,
                        from_siphon=False) -> EnvState:
    count = jnp.asarray(count, jnp.int32)
    return _spawn(state, key, count,
                  scheduled_below=jnp.where(from_scheduled, count, 0),
                  siphon_from=jnp.where(from_siphon, 0, count))


def spawn_turn_end_transmissions(state: EnvState, key: jax.Array, n_scheduled,
                                 n_siphon) -> EnvState:
    """§7.2 steps 5-6 in one loop: first the scheduled task's transmissions (from_scheduled),
    then the siphon's owed ones (from_siphon), exactly as two consecutive calls would."""
    n_scheduled = jnp.asarray(n_scheduled, jnp.int32)
    return _spawn(state, key, n_scheduled + n_siphon, scheduled_below=n_scheduled,
                  siphon_from=n_scheduled)


@struct.dataclass
class _Spawning:
    """What a spawn changes (``entities.append_transmission`` reads and writes only these), and
    the cells this call has taken so far."""
    transmissions: Transmissions
    next_seq: jax.Array
    overflow: jax.Array
    taken: jax.Array


class _SpawnConsts(NamedTuple):
    key: jax.Array
    spawn_empty: jax.Array
    out_of_line: jax.Array
    scheduled_below: jax.Array  # the transmissions before this index are from_scheduled
    siphon_from: jax.Array  # those from this index on are from_siphon


def _spawn_one(index, carry: _Spawning, consts: _SpawnConsts) -> _Spawning:
    bits = jax.random.bits(jax.random.fold_in(consts.key, index), (4,), jnp.uint32)
    valid1 = consts.out_of_line & ~carry.taken
    valid2 = consts.spawn_empty & ~carry.taken
    count1 = jnp.sum(valid1, dtype=jnp.int32)
    count2 = jnp.sum(valid2, dtype=jnp.int32)
    use_pass1 = unit_interval(bits[0]) < _pass_success_probability(count1)
    use_pass2 = ~use_pass1 & (unit_interval(bits[1]) < _pass_success_probability(count2))
    found = use_pass1 | use_pass2
    candidates = jnp.where(use_pass1, valid1, valid2)
    n_candidates = jnp.where(use_pass1, count1, count2)
    pick = uniform_below(bits[2], jnp.maximum(n_candidates, 1))
    chosen = candidates & (jnp.cumsum(candidates) == pick + 1)  # the pick-th candidate
    cell = jnp.argmax(chosen).astype(jnp.int32)
    kind = uniform_below(bits[3], N_ENEMY_TYPES)
    spawned = append_transmission(
        carry, found, cell // GRID, cell % GRID, kind, turns=NEW_TRANSMISSION_TURNS,
        from_scheduled=index < consts.scheduled_below, from_siphon=index >= consts.siphon_from)
    return spawned.replace(taken=carry.taken | (chosen & found))


# Under vmap the lanes loop in blocks of similar counts, not all to the busiest env's count.
_spawn_all = ragged_loop(_spawn_one)


def _spawn(state: EnvState, key: jax.Array, count, *, scheduled_below, siphon_from) -> EnvState:
    """Swift ``spawnRandomTransmissions(count)`` (game-rules §3.6).

    For each of ``count`` transmissions in turn: pass 1 looks for a spawn-empty cell out of the
    player's line of fire, pass 2 (only if pass 1 failed) for any spawn-empty cell; a found cell
    gets a transmission with timer 1, a uniform enemy type and its provenance flags, appended
    in list order (a full slot array counts overflow). If both passes fail it is dropped and no
    type is drawn. Cells taken earlier in the same call count as occupied. ``count`` may be
    traced; the loop runs zero iterations when it is 0.
    """
    # Neither the player, the enemies nor the blocks change during the call, and transmissions
    # do not stop the line of fire, so both candidate sets are fixed up front; only the cells
    # taken by this call's own spawns are removed as it goes.
    spawn_empty = spawn_empty_mask(state)
    consts = _SpawnConsts(key=key, spawn_empty=spawn_empty,
                          out_of_line=spawn_empty & ~line_of_fire_mask(state),
                          scheduled_below=jnp.asarray(scheduled_below, jnp.int32),
                          siphon_from=jnp.asarray(siphon_from, jnp.int32))
    init = _Spawning(transmissions=state.transmissions, next_seq=state.next_seq,
                     overflow=state.overflow, taken=jnp.zeros(N_CELLS, jnp.bool_))
    done = _spawn_all(jnp.asarray(count, jnp.int32), init, consts)
    return state.replace(transmissions=done.transmissions, next_seq=done.next_seq,
                         overflow=done.overflow)
