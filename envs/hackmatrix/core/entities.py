"""List operations on the enemy and transmission slot arrays (programs-rewards-observation §1.1).

Every function is pure and shape-static: masks select slots, ``seq`` gives Swift's list order.
"""

import jax
import jax.numpy as jnp
import numpy as np

from .constants import CRYPTOG, ENEMY_MAX_HP, GRID
from .state import Enemies, EnvState, Transmissions

_BIG = jnp.iinfo(jnp.int32).max


def cell_index(row, col):
    return row * GRID + col


def on_board(row, col):
    """Whether (row, col) lies on the 6x6 board (elementwise)."""
    return (row >= 0) & (row < GRID) & (col >= 0) & (col < GRID)


def enemy_visible(kind, row, col, player_row, player_col, show):
    """Whether an enemy is reported (programs-rewards-observation §9.1): a cryptog only in the
    player's row or column or under SHOW, every other kind always. Elementwise, on JAX or numpy
    arrays or Python scalars alike (the observation, the raw observation and the viewers)."""
    return (kind != CRYPTOG) | (row == player_row) | (col == player_col) | show


def in_list_order(active, seq) -> list:
    """Host side: the active slots (of a host array) in Swift's list order."""
    slots = np.flatnonzero(np.asarray(active))
    return [int(i) for i in slots[np.argsort(np.asarray(seq)[slots], kind="stable")]]


def first_in_order(mask: jax.Array, seq: jax.Array):
    """(found, one-hot of the first slot of ``mask`` in list order)."""
    key = jnp.where(mask, seq, _BIG)
    slot = jnp.argmin(key)
    found = jnp.any(mask)
    return found, (jnp.arange(mask.shape[0]) == slot) & found


def list_rank(active: jax.Array, seq: jax.Array) -> jax.Array:
    """i32[N]: position of each active slot in list order (0 = first)."""
    earlier = active[None, :] & (seq[None, :] < seq[:, None])
    return jnp.sum(earlier, axis=1, dtype=jnp.int32)


def _first_free(active: jax.Array):
    free = ~active
    return jnp.any(free), (jnp.arange(active.shape[0]) == jnp.argmax(free)) & free


def append_enemy(state: EnvState, enabled, kind, row, col, *, disabled=0, from_scheduled=False,
                 from_siphon=False) -> EnvState:
    """Append a new enemy at full HP (Enemy.init) when ``enabled``; a full list counts overflow."""
    e = state.enemies
    has_free, slot = _first_free(e.active)
    put = slot & enabled
    kind = jnp.asarray(kind, jnp.int32)
    is_cryptog = kind == CRYPTOG
    w = lambda new, old: jnp.where(put, new, old)  # noqa: E731
    enemies = Enemies(
        active=e.active | put, seq=w(state.next_seq, e.seq), kind=w(kind, e.kind),
        row=w(row, e.row), col=w(col, e.col), hp=w(jnp.asarray(ENEMY_MAX_HP)[kind], e.hp),
        disabled=w(disabled, e.disabled), stunned=w(False, e.stunned),
        last_row=w(jnp.where(is_cryptog, row, -1), e.last_row),
        last_col=w(jnp.where(is_cryptog, col, -1), e.last_col),
        from_scheduled=w(from_scheduled, e.from_scheduled),
        from_siphon=w(from_siphon, e.from_siphon))
    enabled = jnp.asarray(enabled)
    return state.replace(enemies=enemies, next_seq=state.next_seq + (enabled & has_free),
                         overflow=state.overflow + (enabled & ~has_free))


def append_transmission(state: EnvState, enabled, row, col, kind, *, turns=1, from_scheduled=False,
                        from_siphon=False) -> EnvState:
    t = state.transmissions
    has_free, slot = _first_free(t.active)
    put = slot & enabled
    w = lambda new, old: jnp.where(put, new, old)  # noqa: E731
    transmissions = Transmissions(
        active=t.active | put, seq=w(state.next_seq, t.seq), row=w(row, t.row), col=w(col, t.col),
        turns=w(turns, t.turns), kind=w(kind, t.kind),
        from_scheduled=w(from_scheduled, t.from_scheduled),
        from_siphon=w(from_siphon, t.from_siphon))
    enabled = jnp.asarray(enabled)
    return state.replace(transmissions=transmissions,
                         next_seq=state.next_seq + (enabled & has_free),
                         overflow=state.overflow + (enabled & ~has_free))


def remove_enemies(enemies: Enemies, match: jax.Array):
    """Swift ``removeEnemy(where:)``: remove every match; the kill count is 1 iff the first
    match in list order is not from a scheduled task, so at most 1 (§1.1)."""
    match = match & enemies.active
    found, first = first_in_order(match, enemies.seq)
    kill = found & ~jnp.any(first & enemies.from_scheduled)
    return enemies.replace(active=enemies.active & ~match), kill.astype(jnp.int32)


def remove_transmissions(transmissions: Transmissions, match: jax.Array):
    """Swift ``removeTransmission(where:)``: same counting rule as ``remove_enemies``."""
    match = match & transmissions.active
    found, first = first_in_order(match, transmissions.seq)
    kill = found & ~jnp.any(first & transmissions.from_scheduled)
    return transmissions.replace(active=transmissions.active & ~match), kill.astype(jnp.int32)


def alive_enemies(enemies: Enemies) -> jax.Array:
    """bool[E]: the enemies in play with HP left (a killed enemy keeps its slot until
    ``remove_dead_enemies`` clears it)."""
    return enemies.active & (enemies.hp > 0)


def remove_dead_enemies(enemies: Enemies):
    """Swift ``removeDeadEnemies``: remove hp <= 0; counts every removed non-scheduled enemy."""
    dead = enemies.active & (enemies.hp <= 0)
    kills = jnp.sum(dead & ~enemies.from_scheduled, dtype=jnp.int32)
    return enemies.replace(active=enemies.active & ~dead), kills


def damage_enemies(enemies: Enemies, hit: jax.Array, amount) -> Enemies:
    """``takeDamage`` on every hit enemy, stunning those that survive (§1 'Stun')."""
    hit = hit & enemies.active
    hp = jnp.where(hit, jnp.maximum(0, enemies.hp - amount), enemies.hp)
    return enemies.replace(hp=hp, stunned=enemies.stunned | (hit & (hp > 0)))


def enemies_on(enemies: Enemies, row, col) -> jax.Array:
    return enemies.active & (enemies.row == row) & (enemies.col == col)


def transmissions_on(transmissions: Transmissions, row, col) -> jax.Array:
    return transmissions.active & (transmissions.row == row) & (transmissions.col == col)


def enemy_cell_mask(enemies: Enemies) -> jax.Array:
    """bool[36]: cells holding at least one enemy."""
    cells = cell_index(enemies.row, enemies.col)
    return jnp.any(enemies.active[:, None] & (cells[:, None] == jnp.arange(GRID * GRID)), axis=0)


def transmission_cell_mask(transmissions: Transmissions) -> jax.Array:
    cells = cell_index(transmissions.row, transmissions.col)
    return jnp.any(transmissions.active[:, None] & (cells[:, None] == jnp.arange(GRID * GRID)),
                   axis=0)
