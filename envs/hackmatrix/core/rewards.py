"""Rewards: Swift ``RewardCalculator`` and its inputs (programs-rewards-observation §8,
decisions R7).

* ``exit_distance`` / ``bfs_distance``: ``Pathfinding.findDistance`` (§8.5) on bitboards.
* ``siphon_quality``: ``checkForBetterSiphonPosition`` (§8.6), vectorised over all 36 centres.
* ``compute_reward``: the 15 components of §8.2 in float32, in Swift's evaluation order;
  ``total_reward`` sums them left to right in that order.
"""

import dataclasses

from flax import struct
import jax
import jax.numpy as jnp
import numpy as np

from . import bitboard
from .constants import BLOCK, N_CELLS, N_PROGRAMS, NEIGHBOUR, STAGE_REWARD_TABLE
from .entities import cell_index
from .state import EnvState

# ---------------------------------------------------------------------------------------------
# Distance to the exit (§8.5)


def bfs_distance(block_board: jax.Array, start_cell, target_cell):
    """(distance i32, reachable bool) of Swift ``Pathfinding.findDistance``.

    4-neighbour BFS over the 6x6 board: start == target gives 0; a neighbour equal to the
    target is accepted before the block test, so a target on a block is reachable; every
    other block cell (siphoned or not) is impassable; enemies, transmissions and the player
    are ignored and the start cell is never tested. Unreachable gives (0, False).
    Layered BFS: layer k is the set of cells at distance k, so the first layer that contains
    the target gives the distance (the layers after it no longer count).
    """
    start = bitboard.cell(start_cell)
    target = bitboard.cell(target_cell)
    # The target is tested before the block test, so it is passable even on a block.
    passable = (jnp.asarray(bitboard.FULL_BOARD) & ~block_board) | target

    def searching(carry):
        _, frontier, _, found = carry
        return bitboard.any_set(frontier) & ~found

    def next_layer(carry):
        reached, frontier, distance, found = carry
        layer = bitboard.neighbours(frontier) & passable & ~reached
        return (reached | layer, layer, distance + (~found).astype(jnp.int32),
                found | bitboard.any_set(layer & target))

    at_target = bitboard.any_set(start & target)
    _, _, distance, found = bitboard.bfs_layers(
        searching, next_layer, (start, start, jnp.int32(0), at_target))
    return jnp.where(found, distance, 0), found


def exit_distance(block_board: jax.Array, start_cell, target_cell) -> jax.Array:
    """i32 BFS distance of §8.5, with "no path" read as 0 as at both Swift call sites."""
    return bfs_distance(block_board, start_cell, target_cell)[0]


def player_exit_distance(state: EnvState) -> jax.Array:
    """``oldDistanceToExit`` / the post-step distance: player position to ``exitPosition`` on
    the state's grid (§8.1, §8.5); unreachable gives 0."""
    blocks = bitboard.from_bool(state.grid.content == BLOCK)
    return exit_distance(blocks, cell_index(state.player.row, state.player.col),
                         cell_index(state.exit_row, state.exit_col))


# ---------------------------------------------------------------------------------------------
# Siphon quality (§8.6)


def _cross_table() -> np.ndarray:
    """CROSS[p] = the cells of p's siphon cross (centre, U, D, L, R), -1 where off-board."""
    return np.concatenate([np.arange(N_CELLS, dtype=np.int32)[:, None], NEIGHBOUR], axis=1)


_CROSS = _cross_table()  # [36, 5]
_CROSS_VALID = _CROSS >= 0
_CROSS_SAFE = np.where(_CROSS_VALID, _CROSS, 0)
# IN_CROSS[p, c]: cell c lies in the cross centred on p (a symmetric relation).
_IN_CROSS = np.zeros((N_CELLS, N_CELLS), bool)
for _p in range(N_CELLS):
    _IN_CROSS[_p, _CROSS[_p][_CROSS_VALID[_p]]] = True
_NO_DATA = np.iinfo(np.int32).max  # sorts after every real points value


def siphon_quality(state: EnvState):
    """(optimal bool, missed_credits i32, missed_energy i32) of Swift
    ``checkForBetterSiphonPosition``, evaluated on the board before the siphon (§8.6).

    Yield at a centre p: empty if p holds a block; otherwise, over the in-bounds cross cells
    that are not yet siphoned, the multiset of data points (question blocks by their hidden
    content), the set of unowned programs, and the credits and energy lying on non-block
    cells. Data multisets are compared as sorted 5-lists, program sets as bool[23].
    """
    g = state.grid
    is_block = g.content == BLOCK
    unsiphoned = ~g.siphoned
    holds_data = is_block & (g.program < 0) & unsiphoned
    holds_new_program = is_block & (g.program >= 0) & unsiphoned & ~state.owned[
        jnp.clip(g.program, 0, N_PROGRAMS - 1)]
    floor = ~is_block & unsiphoned

    # Per centre and cross slot: [36, 5] with the centre-on-block rule applied.
    counted = jnp.asarray(_CROSS_VALID) & ~is_block[:, None]
    take = lambda per_cell: per_cell[jnp.asarray(_CROSS_SAFE)] & counted  # noqa: E731
    data_points = jnp.sort(jnp.where(take(holds_data), g.points[jnp.asarray(_CROSS_SAFE)],
                                     _NO_DATA), axis=1)  # [36, 5]
    programs = jnp.any(take(holds_new_program)[:, :, None]
                       & (g.program[jnp.asarray(_CROSS_SAFE)][:, :, None]
                          == jnp.arange(N_PROGRAMS)), axis=1)  # [36, 23]
    floor_here = take(floor)
    credits = jnp.sum(jnp.where(floor_here, g.credits[jnp.asarray(_CROSS_SAFE)], 0), axis=1)
    energy = jnp.sum(jnp.where(floor_here, g.energy[jnp.asarray(_CROSS_SAFE)], 0), axis=1)

    here = jnp.arange(N_CELLS) == cell_index(state.player.row, state.player.col)
    pick = lambda per_centre: jnp.sum(  # noqa: E731
        jnp.where(here.reshape((N_CELLS,) + (1,) * (per_centre.ndim - 1)), per_centre, 0),
        axis=0)
    data0, credits0, energy0 = pick(data_points), pick(credits), pick(energy)
    programs0 = pick(programs.astype(jnp.int32)) > 0

    # Which centres are compared. With data or unowned programs in the current yield, only
    # non-block centres whose cross reaches every unsiphoned block of the player's cross
    # (the intersection of the per-block candidate lists); otherwise every non-block cell.
    current_has_content = jnp.any(data0 != _NO_DATA) | jnp.any(programs0)
    player_cross = jnp.any(here[:, None] & jnp.asarray(_IN_CROSS), axis=0)
    must_reach = player_cross & is_block & unsiphoned
    reaches_all = jnp.all(jnp.asarray(_IN_CROSS) | ~must_reach[None, :], axis=1)
    compared = ~is_block & (reaches_all | ~current_has_content)

    better = (compared
              & jnp.all(data_points == data0[None, :], axis=1)
              & jnp.all(programs == programs0[None, :], axis=1)
              & (credits >= credits0) & (energy >= energy0)
              & ((credits > credits0) | (energy > energy0)))
    optimal = ~jnp.any(better)
    # Independent maxima over the strictly better centres (possibly different ones).
    missed_credits = jnp.where(optimal, 0, jnp.max(jnp.where(better, credits, credits0)) - credits0)
    missed_energy = jnp.where(optimal, 0, jnp.max(jnp.where(better, energy, energy0)) - energy0)
    return optimal, missed_credits.astype(jnp.int32), missed_energy.astype(jnp.int32)


# ---------------------------------------------------------------------------------------------
# The reward (§8.2)


@struct.dataclass
class RewardInputs:
    """What ``RewardCalculator.calculate`` reads (§8.1). ``old_*`` are taken before the action;
    the unprefixed values after everything (action, stage completion, enemy turn), with
    ``stage`` after any increment. Distances are Swift distances (no path = 0)."""

    old_score: jax.Array
    old_hp: jax.Array
    old_credits: jax.Array
    old_energy: jax.Array
    old_distance: jax.Array  # player to exitPosition on the pre-action grid
    new_distance: jax.Array  # post-step position to the post-step exitPosition, post-step grid
    success: jax.Array  # the action did not fail
    stage_advanced: jax.Array
    game_won: jax.Array
    player_died: jax.Array
    total_kills: jax.Array  # i32, §1.1 counting, player's action only
    data_siphon_collected: jax.Array  # moved onto a data-siphon cell
    siphon_used: jax.Array
    siphon_optimal: jax.Array
    missed_credits: jax.Array
    missed_energy: jax.Array
    reset_wasteful: jax.Array  # RESET with old HP exactly 2 (§3 step 2)
    died_to_siphon_enemy: jax.Array  # §8.7
    score: jax.Array
    hp: jax.Array
    credits: jax.Array
    energy: jax.Array
    stage: jax.Array


@struct.dataclass
class RewardBreakdown:
    """The 15 float32 components, declared in Swift's evaluation order (§8.2)."""

    step_penalty: jax.Array
    stage_completion: jax.Array
    score_gain: jax.Array
    kills: jax.Array
    data_siphon: jax.Array
    distance_shaping: jax.Array
    victory: jax.Array
    death_penalty: jax.Array
    resource_gain: jax.Array
    resource_holding: jax.Array
    damage_penalty: jax.Array
    hp_recovery: jax.Array
    siphon_quality: jax.Array
    program_waste: jax.Array
    siphon_death_penalty: jax.Array


# The component names in Swift's order: the one list of them (the env's REWARD_COMPONENTS and
# info["reward_breakdown"], the toy env, the viewers and the logger all read it).
REWARD_FIELDS = tuple(field.name for field in dataclasses.fields(RewardBreakdown))

# Our field -> Swift's info.reward_breakdown key (§8.10); Swift does not report step_penalty.
SWIFT_KEYS = {
    "stage_completion": "stage",
    "score_gain": "score",
    "kills": "kills",
    "data_siphon": "dataSiphon",
    "distance_shaping": "distance",
    "victory": "victory",
    "death_penalty": "death",
    "resource_gain": "resourceGain",
    "resource_holding": "resourceHolding",
    "damage_penalty": "damagePenalty",
    "hp_recovery": "hpRecovery",
    "siphon_quality": "siphonQuality",
    "program_waste": "programWaste",
    "siphon_death_penalty": "siphonDeathPenalty",
}

DISTANCE_REWARD = 0.05


def _f32(x) -> jax.Array:
    return jnp.asarray(x, jnp.float32)


def _swift_distance_shaping(inputs: RewardInputs) -> jax.Array:
    """§8.5: delta is 0 on death, the old distance when the exit was reached, else old - new;
    only a positive delta pays, 0.05 per cell."""
    delta = jnp.where(inputs.player_died, 0,
                      jnp.where(inputs.stage_advanced, inputs.old_distance,
                                inputs.old_distance - inputs.new_distance))
    return _f32(jnp.maximum(delta, 0)) * _f32(DISTANCE_REWARD)


def _potential_distance_shaping(inputs: RewardInputs, gamma: float) -> jax.Array:
    """gamma * Phi(s') - Phi(s) with Phi = -0.05 * distance (decisions R7); Phi(s') = 0 on a
    terminal step (death or victory)."""
    terminal = inputs.player_died | inputs.game_won
    phi_old = -_f32(DISTANCE_REWARD) * _f32(inputs.old_distance)
    phi_new = jnp.where(terminal, _f32(0.0), -_f32(DISTANCE_REWARD) * _f32(inputs.new_distance))
    return _f32(gamma) * phi_new - phi_old


def compute_reward(inputs: RewardInputs, *, shaping: str = "swift",
                   gamma: float = 0.99) -> RewardBreakdown:
    """Swift ``RewardCalculator.calculate`` (§8.2) in float32; all zeros for a failed action
    (§8.9).

    ``shaping`` selects the distance component only; every other component is identical:

    * ``"swift"`` (default, parity): max(old - new, 0) * 0.05 with the §8.5 rules. It is
      one-directional and can be farmed: a step closer nets +0.04, a step back -0.01, so a
      round trip pays +0.03.
    * ``"potential"`` (decisions R7): gamma * Phi(s') - Phi(s) with Phi(s) = -0.05 * d(s), d
      the Swift BFS distance (unreachable = 0). Phi(s') uses ``new_distance`` (on a stage
      advance that is the distance on the new board) and is 0 on a terminal step (death or
      victory). Over any cycle of states the discounted shaping telescopes to
      (gamma^n - 1) * Phi(s_0), so repeating a cycle cannot accumulate reward; with
      gamma = 1 a cycle's shaping sums to exactly 0. With gamma < 1 the undiscounted sum over
      a cycle is (1 - gamma) * 0.05 * sum(d), far below the -0.01 step penalty per step on
      a 6x6 board for the default gamma.
    """
    if shaping == "swift":
        distance = _swift_distance_shaping(inputs)
    elif shaping == "potential":
        distance = _potential_distance_shaping(inputs, gamma)
    else:
        raise ValueError(f"unknown shaping {shaping!r}: expected 'swift' or 'potential'")

    table = jnp.asarray(STAGE_REWARD_TABLE)
    stage = jnp.asarray(inputs.stage, jnp.int32)
    # Stage completion pays table[k - 1] with k = stage - 1 when 1 <= k <= 8 (§8.2 #1): 64 on
    # the winning step because the stage stays 8 (§8.4); 100 only from stage 9 (errata E1).
    k = stage - 1
    completion = jnp.where(inputs.stage_advanced & (k >= 1) & (k <= 8),
                           table[jnp.clip(k - 1, 0, 7)], _f32(0.0))
    # Death: -0.5 * sum(table[0 .. stage - 2]); stage 1 gives -0.0 (§8.3).
    death = jnp.where(inputs.player_died,
                      _f32(-0.5) * jnp.sum(jnp.where(jnp.arange(8) < stage - 1, table, 0.0)),
                      _f32(0.0))
    hp_change = jnp.asarray(inputs.hp - inputs.old_hp, jnp.int32)
    siphon_penalty = _f32(-0.5) * (_f32(inputs.missed_credits) * _f32(0.05)
                                   + _f32(inputs.missed_energy) * _f32(0.05))

    components = dict(
        step_penalty=_f32(-0.01),
        stage_completion=completion,
        score_gain=_f32(inputs.score - inputs.old_score) * _f32(0.5),
        kills=_f32(inputs.total_kills) * _f32(0.3),
        data_siphon=jnp.where(inputs.data_siphon_collected, _f32(1.0), _f32(0.0)),
        distance_shaping=distance,
        victory=jnp.where(inputs.game_won, _f32(500.0) + _f32(inputs.score) * _f32(100.0),
                          _f32(0.0)),
        death_penalty=death,
        resource_gain=(_f32(inputs.credits - inputs.old_credits) * _f32(0.05)
                       + _f32(inputs.energy - inputs.old_energy) * _f32(0.05)),
        resource_holding=jnp.where(inputs.stage_advanced,
                                   _f32(inputs.credits) * _f32(0.01)
                                   + _f32(inputs.energy) * _f32(0.01), _f32(0.0)),
        damage_penalty=jnp.where(hp_change < 0, _f32(-hp_change) * _f32(-1.0), _f32(0.0)),
        hp_recovery=jnp.where(hp_change > 0, _f32(hp_change) * _f32(1.0), _f32(0.0)),
        siphon_quality=jnp.where(inputs.siphon_used & ~inputs.siphon_optimal, siphon_penalty,
                                 _f32(0.0)),
        program_waste=jnp.where(inputs.reset_wasteful, _f32(-0.3), _f32(0.0)),
        siphon_death_penalty=jnp.where(inputs.died_to_siphon_enemy, _f32(-10.0), _f32(0.0)),
    )
    success = jnp.asarray(inputs.success, jnp.bool_)
    return RewardBreakdown(**{name: jnp.where(success, _f32(components[name]), _f32(0.0))
                              for name in REWARD_FIELDS})


def total_reward(breakdown: RewardBreakdown) -> jax.Array:
    """RewardBreakdown.total: one left-to-right float32 sum in Swift's order (§8.2)."""
    total = getattr(breakdown, REWARD_FIELDS[0])
    for name in REWARD_FIELDS[1:]:
        total = total + getattr(breakdown, name)
    return total

