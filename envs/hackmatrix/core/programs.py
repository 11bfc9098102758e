"""The 23 programs (programs-rewards-observation §2-§4): validity, cost and effects.

``apply_program`` takes the program as a traced index. Instead of branching, every effect is
masked arithmetic over the slot or cell axis keyed by ``program == X``, and effects that touch
the same arrays share one computation (one damage pass, one dead-enemy sweep, one PUSH/PULL
planner), so a vmapped batch mixing programs pays for each effect once.
"""

from flax import struct
import jax
import jax.numpy as jnp
import numpy as np

from .constants import (ANTI_V, ATK_PLUS, BLOCK, CALM, COL, CRASH, CRYPTOG, D_BOM, DAEMON, DEBUG,
                        DELAY, EMPTY, ENEMY_MAX_HP, EXCH, GRID, HACK, N_CELLS, N_PROGRAMS, N_STAGES,
                        POLY, PROGRAM_COST_CREDITS, PROGRAM_COST_ENERGY, PULL, PUSH, REDUC, RESET,
                        ROW, ROW_OF, COL_OF, SCORE, SHOW, SIPH_PLUS, STEP, UNDO, VIRUS, WAIT, WARP)
from .entities import (cell_index, list_rank, damage_enemies, enemies_on, first_in_order,
                       remove_dead_enemies, on_board, remove_enemies, remove_transmissions,
                       transmissions_on)
from .history import undo
from .rng import uniform_below
from .state import Enemies, EnvState, Player, Transmissions


def program_applicable(state: EnvState) -> jax.Array:
    """bool[23]: Swift ``isProgramApplicable`` per program (§2 table). Every list member counts,
    hidden cryptogs and stunned, disabled or hp <= 0 enemies included."""
    e, t, g, p = state.enemies, state.transmissions, state.grid, state.player
    any_enemy = jnp.any(e.active)
    any_transmission = jnp.any(t.active)
    is_block = g.content == BLOCK
    enemy_cells = cell_index(e.row, e.col)
    enemy_on_block = jnp.any(e.active & is_block[jnp.clip(enemy_cells, 0, N_CELLS - 1)]
                             & on_board(e.row, e.col))
    # CRASH: an in-bounds 8-neighbour holds a block, an enemy or a transmission.
    drow = jnp.asarray(ROW_OF) - p.row
    dcol = jnp.asarray(COL_OF) - p.col
    ring = (jnp.abs(drow) <= 1) & (jnp.abs(dcol) <= 1) & ~((drow == 0) & (dcol == 0))
    on_ring = lambda rows, cols, active: jnp.any(  # noqa: E731
        active & (jnp.abs(rows - p.row) <= 1) & (jnp.abs(cols - p.col) <= 1)
        & ~((rows == p.row) & (cols == p.col)))
    crash = (jnp.any(ring & is_block) | on_ring(e.row, e.col, e.active)
             | on_ring(t.row, t.col, t.active))
    reduc = jnp.any(is_block & ~g.siphoned & (g.spawn > 0))
    applicable = [
        any_enemy,  # PUSH
        any_enemy,  # PULL
        crash,  # CRASH
        any_enemy | any_transmission,  # WARP
        any_enemy,  # POLY
        jnp.bool_(True),  # WAIT
        enemy_on_block,  # DEBUG
        jnp.any(e.active & (e.row == p.row)),  # ROW
        jnp.any(e.active & (e.col == p.col)),  # COL
        state.history.size > 0,  # UNDO
        jnp.bool_(True),  # STEP
        jnp.bool_(True),  # SIPH+
        p.credits >= 4,  # EXCH
        ~state.show,  # SHOW
        p.hp < 3,  # RESET (raw value < 3, so also at HP 0: errata O7)
        ~state.calm,  # CALM
        jnp.any(e.active & (e.kind == DAEMON)),  # D_BOM
        any_transmission,  # DELAY
        jnp.any(e.active & (e.kind == VIRUS)),  # ANTI-V
        state.stage < N_STAGES,  # SCORE
        reduc,  # REDUC
        state.atk_uses < 2,  # ATK+
        jnp.any(g.siphoned),  # HACK
    ]
    return jnp.stack([jnp.asarray(a, jnp.bool_) for a in applicable])


def affordable(state: EnvState) -> jax.Array:
    """bool[23]: the player's credits and energy cover each program's cost."""
    p = state.player
    return ((p.credits >= jnp.asarray(PROGRAM_COST_CREDITS))
            & (p.energy >= jnp.asarray(PROGRAM_COST_ENERGY)))


def can_execute(state: EnvState) -> jax.Array:
    """bool[23]: Swift ``canExecuteProgram``: owned, affordable and applicable (§3 step 3)."""
    return state.owned & affordable(state) & program_applicable(state)



_BIG = 2**31 - 1
_ROW_OF_CELL = np.arange(N_CELLS, dtype=np.int32) // GRID
_COL_OF_CELL = np.arange(N_CELLS, dtype=np.int32) % GRID
# Programs whose effect ends with Swift's removeDeadEnemies (§4.5, §4.7-§4.9, §4.17, §4.19, §4.23).
_SWEEPS_DEAD = (POLY, DEBUG, ROW, COL, D_BOM, ANTI_V, HACK)


@struct.dataclass
class ProgramEvents:
    kills: jax.Array  # i32: enemies + transmissions destroyed, counted as in §1.1
    exit_reached: jax.Array  # bool: WARP landed on exitPosition (§3 step 6)
    ends_turn: jax.Array  # bool: WAIT; the caller runs the enemy turn (§3 step 7)


def _first_on_its_cell(rows, cols, active, seq) -> jax.Array:
    """bool[N]: active slots that come first in list order among the active slots on their cell."""
    cells = cell_index(rows, cols)
    earlier_mate = (active[None, :] & (cells[None, :] == cells[:, None])
                    & (seq[None, :] < seq[:, None]))
    return active & ~jnp.any(earlier_mate, axis=1)


def _chebyshev(rows, cols, row, col):
    return jnp.maximum(jnp.abs(rows - row), jnp.abs(cols - col))


def _push_pull_positions(enemies: Enemies, player: Player, pull):
    """Enemy (rows, cols) after PUSH (``pull`` false) or PULL (§4.1, §4.2).

    Plan from the positions before any move: candidates (a) diagonal/primary, (b) row-only if
    sr != 0, (c) col-only if sc != 0, on the board only (PULL also drops the player's cell);
    PUSH takes the largest Manhattan distance, PULL the smallest, the first candidate on ties.
    Apply in list order: an enemy stays when an earlier one already moved into its target. Only
    planners can move into a target, so the first planner of each target cell moves."""
    toward = jnp.where(pull, -1, 1)
    sr = toward * jnp.sign(enemies.row - player.row)
    sc = toward * jnp.sign(enemies.col - player.col)

    def candidate(row, col, listed):
        inside = on_board(row, col)
        on_player = (row == player.row) & (col == player.col)
        distance = jnp.abs(row - player.row) + jnp.abs(col - player.col)
        valid = listed & inside & ~(pull & on_player)
        return row, col, jnp.where(valid, jnp.where(pull, -distance, distance), -_BIG)

    target_row, target_col, best = candidate(enemies.row + sr, enemies.col + sc, True)
    # A later candidate wins only when strictly better: the first one wins ties.
    for row, col, preference in (candidate(enemies.row + sr, enemies.col, sr != 0),
                                 candidate(enemies.row, enemies.col + sc, sc != 0)):
        better = preference > best
        target_row = jnp.where(better, row, target_row)
        target_col = jnp.where(better, col, target_col)
        best = jnp.maximum(best, preference)
    planned = enemies.active & (best > -_BIG)
    moves = planned & _first_on_its_cell(target_row, target_col, planned, enemies.seq)
    return (jnp.where(moves, target_row, enemies.row), jnp.where(moves, target_col, enemies.col))


def _polymorph(enemies: Enemies, bits: jax.Array, enabled) -> Enemies:
    """POLY (§4.5): every enemy gets a type uniform over the three others; its damage carries
    over (hp = maxHP(new) - (maxHP(old) - hp)); a new cryptog's last-known cell is its cell."""
    draw = uniform_below(bits, 3)
    new_kind = draw + (draw >= enemies.kind).astype(jnp.int32)  # skips the current type
    max_hp = jnp.asarray(ENEMY_MAX_HP)
    new_hp = max_hp[new_kind] - (max_hp[enemies.kind] - enemies.hp)
    change = enabled & enemies.active
    becomes_cryptog = change & (new_kind == CRYPTOG)
    return enemies.replace(
        kind=jnp.where(change, new_kind, enemies.kind), hp=jnp.where(change, new_hp, enemies.hp),
        last_row=jnp.where(becomes_cryptog, enemies.row, enemies.last_row),
        last_col=jnp.where(becomes_cryptog, enemies.col, enemies.last_col))


def _warp_pick(enemies: Enemies, transmissions: Transmissions, bits: jax.Array):
    """WARP target (§4.4): one entry uniform over [enemies in list order, then transmissions in
    list order]. Returns (found, row, col, picked_an_enemy)."""
    enemy_count = jnp.sum(enemies.active, dtype=jnp.int32)
    total = enemy_count + jnp.sum(transmissions.active, dtype=jnp.int32)
    pick = uniform_below(bits, jnp.maximum(total, 1))
    picked_enemy = enemies.active & (list_rank(enemies.active, enemies.seq) == pick)
    picked_transmission = transmissions.active & (
        enemy_count + list_rank(transmissions.active, transmissions.seq) == pick)
    row = (jnp.sum(jnp.where(picked_enemy, enemies.row, 0))
           + jnp.sum(jnp.where(picked_transmission, transmissions.row, 0)))
    col = (jnp.sum(jnp.where(picked_enemy, enemies.col, 0))
           + jnp.sum(jnp.where(picked_transmission, transmissions.col, 0)))
    return total > 0, row, col, pick < enemy_count


def _nearest_daemon(enemies: Enemies, player: Player):
    """Swift ``findNearestEnemy`` over daemons (§4.17): (found, one-hot slot) of the smallest
    Manhattan distance to the player, first in list order on ties."""
    daemons = enemies.active & (enemies.kind == DAEMON)
    distance = jnp.abs(enemies.row - player.row) + jnp.abs(enemies.col - player.col)
    nearest = jnp.min(jnp.where(daemons, distance, _BIG))
    return first_in_order(daemons & (distance == nearest), enemies.seq)


def apply_program(state: EnvState, program, key: jax.Array):
    """Pay for ``program`` (0..22, traced) and apply its effect (§3 steps 4-6, §4).

    The caller has checked ``can_execute``. Returns the new state and ``ProgramEvents``; the
    caller runs the enemy turn when ``ends_turn`` (WAIT), completes the stage on
    ``exit_reached`` (WARP) and computes RESET's waste flag from the HP before the action.
    An index outside 0..22 (e.g. -1 for a non-program action in a fused step) changes nothing."""
    program = jnp.asarray(program, jnp.int32)
    is_program = (program >= 0) & (program < N_PROGRAMS)
    cost_credits = jnp.where(is_program, jnp.asarray(PROGRAM_COST_CREDITS)[program % N_PROGRAMS], 0)
    cost_energy = jnp.where(is_program, jnp.asarray(PROGRAM_COST_ENERGY)[program % N_PROGRAMS], 0)
    is_ = lambda p: program == p  # noqa: E731
    # One draw of random bits serves POLY (one per enemy slot) and WARP (the last word).
    bits = jax.random.bits(key, (state.enemies.active.shape[0] + 1,), jnp.uint32)
    state = state.replace(player=state.player.replace(  # §3 step 4
        credits=state.player.credits - cost_credits, energy=state.player.energy - cost_energy))
    # UNDO right after paying, so the restore overwrites the credit (§4.10). Every effect below
    # is disabled for UNDO and UNDO for them, so the order is otherwise free; restoring from the
    # input arrays (not from the effects' outputs) also keeps the compiled graph small.
    state = undo(state, enabled=is_(UNDO))
    player, grid = state.player, state.grid
    enemies, transmissions = state.enemies, state.transmissions
    kills = jnp.int32(0)

    # PUSH / PULL share one planner.
    row, col = _push_pull_positions(enemies, player, is_(PULL))
    pushes = is_(PUSH) | is_(PULL)
    enemies = enemies.replace(row=jnp.where(pushes, row, enemies.row),
                              col=jnp.where(pushes, col, enemies.col))

    enemies = _polymorph(enemies, bits[:-1], is_(POLY))

    # D_BOM step 2: the chosen daemon is removed by identity before the splash.
    has_daemon, daemon = _nearest_daemon(enemies, player)
    bombed = is_(D_BOM) & daemon
    bomb_row = jnp.sum(jnp.where(daemon, enemies.row, 0))
    bomb_col = jnp.sum(jnp.where(daemon, enemies.col, 0))
    kills += jnp.any(bombed & ~enemies.from_scheduled)
    enemies = enemies.replace(active=enemies.active & ~bombed)

    # One damage pass for every damaging program (§4.24); survivors are stunned.
    cells = jnp.clip(cell_index(enemies.row, enemies.col), 0, N_CELLS - 1)
    hit = ((is_(DEBUG) & (grid.content[cells] == BLOCK))
           | (is_(ROW) & (enemies.row == player.row))
           | (is_(COL) & (enemies.col == player.col))
           | (is_(HACK) & grid.siphoned[cells])
           | (is_(ANTI_V) & (enemies.kind == VIRUS))
           # D_BOM splash: the 8 cells around the daemon, not the daemon's own cell.
           | (is_(D_BOM) & has_daemon
              & (_chebyshev(enemies.row, enemies.col, bomb_row, bomb_col) == 1)))
    fixed_one = is_(ANTI_V) | is_(D_BOM)
    enemies = damage_enemies(enemies, hit, jnp.where(fixed_one, 1, player.attack))

    sweeps = jnp.any(program == jnp.asarray(_SWEEPS_DEAD))
    swept, dead_kills = remove_dead_enemies(enemies)
    enemies = enemies.replace(active=jnp.where(sweeps, swept.active, enemies.active))
    kills += jnp.where(sweeps, dead_kills, 0)

    # CRASH (§4.3): per 8-neighbour cell, removeEnemy and removeTransmission count at most 1 each.
    crash_enemies = is_(CRASH) & enemies.active & (
        _chebyshev(enemies.row, enemies.col, player.row, player.col) == 1)
    kills += jnp.sum(crash_enemies & ~enemies.from_scheduled & _first_on_its_cell(
        enemies.row, enemies.col, enemies.active, enemies.seq), dtype=jnp.int32)
    enemies = enemies.replace(active=enemies.active & ~crash_enemies)
    crash_transmissions = is_(CRASH) & transmissions.active & (
        _chebyshev(transmissions.row, transmissions.col, player.row, player.col) == 1)
    kills += jnp.sum(crash_transmissions & ~transmissions.from_scheduled & _first_on_its_cell(
        transmissions.row, transmissions.col, transmissions.active, transmissions.seq),
        dtype=jnp.int32)
    transmissions = transmissions.replace(active=transmissions.active & ~crash_transmissions)

    # WARP (§4.4): remove every entity of the picked kind on the landing cell.
    found, warp_row, warp_col, picked_enemy = _warp_pick(enemies, transmissions, bits[-1])
    warps = is_(WARP) & found
    enemies, enemy_kill = remove_enemies(
        enemies, warps & picked_enemy & enemies_on(enemies, warp_row, warp_col))
    transmissions, transmission_kill = remove_transmissions(
        transmissions, warps & ~picked_enemy & transmissions_on(transmissions, warp_row, warp_col))
    kills += enemy_kill + transmission_kill

    transmissions = transmissions.replace(turns=jnp.where(
        is_(DELAY) & transmissions.active, transmissions.turns + 3, transmissions.turns))

    # Grid: CRASH empties neighbouring blocks (resources, isSiphoned, siphonCenter kept);
    # REDUC lowers the spawn count of unsiphoned blocks, not their points.
    is_block = grid.content == BLOCK
    crashed = is_(CRASH) & is_block & (
        _chebyshev(_ROW_OF_CELL, _COL_OF_CELL, player.row, player.col) == 1)
    reduced = is_(REDUC) & is_block & ~grid.siphoned
    grid = grid.replace(
        content=jnp.where(crashed, EMPTY, grid.content),
        points=jnp.where(crashed, 0, grid.points),
        program=jnp.where(crashed, -1, grid.program),
        spawn=jnp.where(crashed, 0, jnp.where(reduced, jnp.maximum(grid.spawn - 1, 0), grid.spawn)),
        question=grid.question & ~crashed)

    player = player.replace(
        row=jnp.where(warps, warp_row, player.row),
        col=jnp.where(warps, warp_col, player.col),
        hp=jnp.where(is_(RESET), 3, player.hp),
        energy=player.energy + jnp.where(is_(EXCH), 4, 0),
        data_siphons=player.data_siphons + is_(SIPH_PLUS),  # not the pickup reward flag (§4.12)
        score=player.score + jnp.where(is_(SCORE), N_STAGES - state.stage, 0),
        attack=player.attack + is_(ATK_PLUS))  # no cap (§4.22)

    state = state.replace(
        player=player, grid=grid, enemies=enemies, transmissions=transmissions,
        step_active=state.step_active | is_(STEP),
        show=state.show | is_(SHOW),
        calm=state.calm | is_(CALM),
        atk_uses=state.atk_uses + is_(ATK_PLUS))

    events = ProgramEvents(
        kills=kills,
        exit_reached=warps & (warp_row == state.exit_row) & (warp_col == state.exit_col),
        ends_turn=is_(WAIT))
    return state, events


assert N_PROGRAMS == 23
