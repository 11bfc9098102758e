"""Numeric observation (programs-rewards-observation §9.2, decisions R6).

``build_observation`` turns an ``EnvState`` into the encoding the Swift-backed gym env feeds
its agents: the raw JSON observation of §9.1 (with its visibility rules) passed through
``parse_observation``. Everything is masked arithmetic over the [slot, cell] and [cell] axes.
"""

from flax import struct
import jax
import jax.numpy as jnp
import numpy as np

from .core.constants import (BLOCK, DATA_SIPHON, EXIT, GRID, N_CELLS, N_ENEMY_TYPES,
                             N_PROGRAMS, N_STAGES)
from .core.entities import alive_enemies, cell_index, enemy_visible
from .core.mask import action_mask
from .core.state import EnvState

N_PLAYER_FEATURES = 10
# Player features with no upper bound: data siphons / 10 and (attack - 1) / 2 (§9.2, §4.22).
UNCAPPED_PLAYER_FEATURES = (6, 7)
N_GRID_CHANNELS = 42
FLAT_SIZE = N_PLAYER_FEATURES + N_PROGRAMS + N_CELLS * N_GRID_CHANNELS  # 1545

# Grid channels (§9.2).
CH_ENEMY_TYPE = 0  # 0..3 one-hot virus, daemon, glitch, cryptog
CH_ENEMY_HP = 4
CH_ENEMY_STUNNED = 5
CH_ENEMY_FROM_SIPHON = 6
CH_BLOCK_DATA = 7
CH_BLOCK_PROGRAM = 8
CH_BLOCK_QUESTION = 9
CH_BLOCK_POINTS = 10
CH_BLOCK_SIPHONED = 11
CH_BLOCK_PROGRAM_TYPE = 12  # 12..34 one-hot of programActionIndex - 5
CH_BLOCK_SPAWN = 35
CH_TRANSMISSION = 36
CH_CREDITS = 37
CH_ENERGY = 38
CH_DATA_SIPHON = 39
CH_EXIT = 40
CH_SIPHON_CENTER = 41

_BIG = np.iinfo(np.int32).max

# The grid's scaled channels: each is f32(k) / d for an integer count k out of d.
ENEMY_HP_SCALE = 3.0
BLOCK_COUNT_SCALE = 9.0  # points and spawn count
COUNTDOWN_SCALE = 4.0
CELL_RESOURCE_SCALE = 3.0
# Every grid channel is f32(k) / d for a small integer k (one-hots: d = 1), so a rollout can
# store k in int8 and f32(k) / d gives the channel back bit for bit (``compact``/``expand``).
GRID_SCALES = np.ones(N_GRID_CHANNELS, np.float32)
GRID_SCALES[CH_ENEMY_HP] = ENEMY_HP_SCALE
GRID_SCALES[[CH_BLOCK_POINTS, CH_BLOCK_SPAWN]] = BLOCK_COUNT_SCALE
GRID_SCALES[CH_TRANSMISSION] = COUNTDOWN_SCALE
GRID_SCALES[[CH_CREDITS, CH_ENERGY]] = CELL_RESOURCE_SCALE


@struct.dataclass
class Observation:
    player: jax.Array  # f32[10]
    programs: jax.Array  # i32[23]
    grid: jax.Array  # f32[6, 6, 42], [row][col][channel], row 0 at the bottom
    action_mask: jax.Array  # bool[28]: Swift's getValidActions


def flatten(obs: Observation) -> jax.Array:
    """The flat f32[1545] view: player, programs (as float), grid in row, col, channel order."""
    lead = obs.player.shape[:-1]
    return jnp.concatenate([obs.player, obs.programs.astype(jnp.float32),
                            obs.grid.reshape(lead + (-1,))], axis=-1)


def compact(obs: Observation) -> Observation:
    """The observation as a rollout stores it: the grid's integer counts as int8 and the
    programs as int8 (a quarter of the f32 grid's bytes, which are almost all of a stored
    step's); ``expand`` gives ``obs`` back exactly."""
    counts = jnp.round(obs.grid * GRID_SCALES).astype(jnp.int8)
    return obs.replace(grid=counts, programs=obs.programs.astype(jnp.int8))


def expand(stored: Observation) -> Observation:
    """The observation ``compact`` stored, bit for bit: each channel f32(k) / d, as built."""
    return stored.replace(grid=stored.grid.astype(jnp.float32) / GRID_SCALES,
                          programs=stored.programs.astype(jnp.int32))


def observed_blocks(obs: Observation) -> jax.Array:
    """bool[..., 6, 6]: the cells holding a block of any kind (data, program or question), as
    the observation shows them (blocks are never hidden)."""
    grid = obs.grid
    return (grid[..., CH_BLOCK_DATA] + grid[..., CH_BLOCK_PROGRAM]
            + grid[..., CH_BLOCK_QUESTION]) > 0


def _first_per_cell(on_cell: jax.Array, seq: jax.Array) -> jax.Array:
    """bool[S, 36]: for every cell, the one-hot of the first slot (smallest ``seq``) among those
    with ``on_cell[slot, cell]``; an all-false column where no slot qualifies."""
    key = jnp.where(on_cell, seq[:, None], _BIG)
    first = jnp.argmin(key, axis=0)
    return on_cell & (jnp.arange(on_cell.shape[0])[:, None] == first[None, :])


def _player_features(state: EnvState) -> jax.Array:
    p = state.player
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return jnp.stack([
        f32(p.row) / 5.0,
        f32(p.col) / 5.0,
        f32(p.hp) / 3.0,
        jnp.minimum(f32(p.credits) / 50.0, 1.0),
        jnp.minimum(f32(p.energy) / 50.0, 1.0),
        (f32(state.stage) - 1.0) / float(N_STAGES - 1),
        f32(p.data_siphons) / 10.0,  # not capped (§9.2)
        (f32(p.attack) - 1.0) / 2.0,  # not capped: ATK+ grows across stages (§4.22)
        f32(state.show),
        f32(state.calm),
    ])


def _enemy_channels(state: EnvState) -> jax.Array:
    """f32[36, 7]: channels 0-6 (§9.1 'enemy')."""
    e, p = state.enemies, state.player
    cells = jnp.arange(N_CELLS)
    # Only live enemies are candidates: the first with hp > 0 is the one reported.
    live_on_cell = alive_enemies(e)[:, None] & (cell_index(e.row, e.col)[:, None] == cells)
    reported = _first_per_cell(live_on_cell, e.seq)  # [E, 36]
    # A cryptog is reported only in the player's row or column or under SHOW; when the first
    # live enemy is a hidden cryptog the cell shows no enemy at all, even if a visible one
    # shares it (§9.1), so visibility is applied after choosing the first enemy.
    visible = enemy_visible(e.kind, e.row, e.col, p.row, p.col, state.show)
    shown = (reported & visible[:, None]).astype(jnp.float32)  # [E, 36]
    type_onehot = (e.kind[:, None] == jnp.arange(N_ENEMY_TYPES)).astype(jnp.float32)  # [E, 4]
    per_slot = jnp.concatenate([
        type_onehot,
        (e.hp.astype(jnp.float32) / ENEMY_HP_SCALE)[:, None],
        e.stunned.astype(jnp.float32)[:, None],
        e.from_siphon.astype(jnp.float32)[:, None],
    ], axis=1)  # [E, 7]
    # A masked sum rather than a matmul: exact on accelerators whose f32 matmuls use TF32.
    return jnp.sum(shown[:, :, None] * per_slot[:, None, :], axis=0)


def _transmission_channel(state: EnvState) -> jax.Array:
    """f32[36]: channel 36, the countdown of the first transmission on the cell."""
    t = state.transmissions
    on_cell = t.active[:, None] & (cell_index(t.row, t.col)[:, None] == jnp.arange(N_CELLS))
    first = _first_per_cell(on_cell, t.seq).astype(jnp.float32)
    # min(turns / 4, 1) with no lower clip: a countdown below 0 reads negative (errata O6).
    countdown = jnp.minimum(t.turns.astype(jnp.float32) / COUNTDOWN_SCALE, 1.0)
    return jnp.sum(first * countdown[:, None], axis=0)


def _cell_channels(state: EnvState) -> jax.Array:
    """f32[36, 35]: channels 7-41 except 36, from the grid arrays alone."""
    g = state.grid
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    is_block = g.content == BLOCK
    is_question = is_block & g.question
    holds_program = is_block & (g.program >= 0)
    holds_data = is_block & (g.program < 0)
    # A question block reports points, program and spawn count only when its cell is
    # siphoned; in practice never, because siphoning reveals it (§9.1 'block').
    revealed = is_block & (~is_question | g.siphoned)
    program_onehot = (revealed & holds_program)[:, None] & (
        g.program[:, None] == jnp.arange(N_PROGRAMS))
    # Resources under an unsiphoned block are hidden; under a siphoned block they show (§9.1).
    resources_visible = ~is_block | g.siphoned
    return jnp.concatenate([
        f32(holds_data & ~is_question)[:, None],  # 7
        f32(holds_program & ~is_question)[:, None],  # 8
        f32(is_question)[:, None],  # 9
        jnp.where(revealed & holds_data, f32(g.points) / BLOCK_COUNT_SCALE, 0.0)[:, None],  # 10
        f32(is_block & g.siphoned)[:, None],  # 11: siphoned floor cells are not observable
        f32(program_onehot),  # 12..34
        jnp.where(revealed, f32(g.spawn) / BLOCK_COUNT_SCALE, 0.0)[:, None],  # 35
    ], axis=1), jnp.stack([
        jnp.where(resources_visible, f32(g.credits) / CELL_RESOURCE_SCALE, 0.0),  # 37
        jnp.where(resources_visible, f32(g.energy) / CELL_RESOURCE_SCALE, 0.0),  # 38
        f32(g.content == DATA_SIPHON),  # 39
        f32(g.content == EXIT),  # 40: cell content, not exitPosition
        f32(g.siphon_center),  # 41
    ], axis=1)


def build_observation(state: EnvState) -> Observation:
    """The numeric observation of §9.2 with every visibility rule of §9.1, plus the mask (§7)."""
    blocks, floor = _cell_channels(state)
    grid = jnp.concatenate([
        _enemy_channels(state), blocks, _transmission_channel(state)[:, None], floor,
    ], axis=1).reshape(GRID, GRID, N_GRID_CHANNELS)
    return Observation(player=_player_features(state),
                       programs=state.owned.astype(jnp.int32),
                       grid=grid,
                       action_mask=action_mask(state))
