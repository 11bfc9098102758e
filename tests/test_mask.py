"""Action mask: Swift getValidActions (programs-rewards-observation §7, §2, errata E3/E6/O7)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix.core import constants as C
from envs.hackmatrix.core.mask import action_mask, direction_valid
from envs.hackmatrix.core.state import blank_state

DIRECTIONS = jax.jit(direction_valid)
MASK = jax.jit(action_mask)
UP, DOWN, LEFT, RIGHT = range(4)


def put(obj, **fields):
    """``obj.replace`` keeping each field's dtype (so the jitted functions are not retraced)."""
    return obj.replace(**{k: jnp.asarray(v, getattr(obj, k).dtype) for k, v in fields.items()})


def with_player(state, **fields):
    return state.replace(player=put(state.player, **fields))


def with_cells(state, field, values):
    array = np.array(getattr(state.grid, field))
    for (row, col), value in values.items():
        array[row * 6 + col] = value
    return state.replace(grid=put(state.grid, **{field: array}))


def with_enemy(state, kind, row, col, hp=None):
    e = state.enemies
    active, kinds, rows, cols, hps = (np.array(x) for x in (e.active, e.kind, e.row, e.col, e.hp))
    slot = int(np.argmin(active))
    active[slot], kinds[slot], rows[slot], cols[slot] = True, kind, row, col
    hps[slot] = C.ENEMY_MAX_HP[kind] if hp is None else hp
    return state.replace(enemies=put(e, active=active, kind=kinds, row=rows, col=cols, hp=hps))


def with_transmission(state, row, col):
    t = state.transmissions
    active, rows, cols, turns = (np.array(x) for x in (t.active, t.row, t.col, t.turns))
    slot = int(np.argmin(active))
    active[slot], rows[slot], cols[slot], turns[slot] = True, row, col, 1
    return state.replace(transmissions=put(t, active=active, row=rows, col=cols, turns=turns))


def owning(state, *programs):
    rank = np.full(C.N_PROGRAMS, -1, np.int32)
    for order, program in enumerate(programs):
        rank[program] = order
    return put(state, program_rank=rank)


def program_valid(state, program):
    return bool(MASK(state)[C.PROGRAM_ACTION_OFFSET + program])


@pytest.fixture(scope="module")
def centre():
    """Player at (2,2) on an empty board."""
    return with_player(blank_state(), row=2, col=2)


# ---------------------------------------------------------------------------------------------
# directions


def test_all_directions_valid_on_open_board(centre):
    """§7: in bounds and not a block -> valid."""
    np.testing.assert_array_equal(DIRECTIONS(centre), [True, True, True, True])


def test_board_edge_is_invalid():
    """§7: the adjacent cell must be on the board (corner (0,0): down and left are off)."""
    np.testing.assert_array_equal(DIRECTIONS(blank_state()), [True, False, False, True])
    corner = with_player(blank_state(), row=5, col=5)
    np.testing.assert_array_equal(DIRECTIONS(corner), [False, True, True, False])


def test_block_invalid_siphoned_block_too(centre):
    """§7 and §1 'Block': a block (siphoned or not) makes the direction invalid."""
    state = with_cells(centre, "content", {(3, 2): C.BLOCK, (2, 1): C.BLOCK})
    state = with_cells(state, "siphoned", {(2, 1): True})
    np.testing.assert_array_equal(DIRECTIONS(state), [False, True, False, True])


def test_block_with_enemy_on_it_is_valid(centre):
    """§7: a block with at least one enemy standing on it is valid (the shot hits it)."""
    state = with_cells(centre, "content", {(3, 2): C.BLOCK})
    state = with_enemy(state, C.GLITCH, 3, 2)
    np.testing.assert_array_equal(DIRECTIONS(state), [True, True, True, True])


def test_block_with_only_a_transmission_is_invalid(centre):
    """errata E6: a transmission on a block does not make the direction valid."""
    state = with_cells(centre, "content", {(1, 2): C.BLOCK})
    state = with_transmission(state, 1, 2)
    np.testing.assert_array_equal(DIRECTIONS(state), [True, False, True, True])


def test_exit_data_siphon_and_occupied_floor_are_valid(centre):
    """§7: cell type and occupants other than blocks do not matter."""
    state = with_cells(centre, "content", {(3, 2): C.EXIT, (1, 2): C.DATA_SIPHON})
    state = with_enemy(with_transmission(state, 2, 1), C.DAEMON, 2, 3)
    np.testing.assert_array_equal(DIRECTIONS(state), [True, True, True, True])


def test_direction_ignores_line_of_fire_beyond_a_block(centre):
    """§12.1 #3: only the adjacent cell is examined; an enemy further along does not help."""
    state = with_cells(centre, "content", {(3, 2): C.BLOCK})
    state = with_enemy(state, C.VIRUS, 5, 2)
    assert not bool(DIRECTIONS(state)[UP])


# ---------------------------------------------------------------------------------------------
# siphon and layout


def test_siphon_needs_a_data_siphon(centre):
    """§6.2: action 4 valid iff dataSiphons > 0, nothing else matters."""
    assert not bool(MASK(centre)[C.ACTION_SIPHON])
    assert bool(MASK(with_player(centre, data_siphons=1))[C.ACTION_SIPHON])


def test_mask_layout(centre):
    """bool[28]: directions 0-3, siphon 4, programs 5-27; nothing owned -> no program."""
    mask = np.asarray(MASK(with_player(centre, credits=50, energy=50)))
    assert mask.shape == (28,) and mask.dtype == bool
    np.testing.assert_array_equal(mask[:5], [True, True, True, True, False])
    assert not mask[5:].any()


# ---------------------------------------------------------------------------------------------
# programs (canExecuteProgram, §3 step 3 and §2)


def test_wait_needs_ownership_and_one_energy(centre):
    """WAIT (action 10): always applicable, costs 0 C / 1 E."""
    owned = owning(centre, C.WAIT)
    assert program_valid(with_player(owned, energy=1), C.WAIT)
    assert C.PROGRAM_ACTION_OFFSET + C.WAIT == 10
    assert not program_valid(with_player(owned, energy=0), C.WAIT)
    assert not program_valid(with_player(centre, energy=5), C.WAIT)


def test_undo_needs_history_and_one_credit(centre):
    """UNDO (action 14): history non-empty (§5.5 item 2) and credits >= 1."""
    owned = with_player(owning(centre, C.UNDO), credits=1)
    assert not program_valid(owned, C.UNDO)
    with_history = owned.replace(history=put(owned.history, size=1))
    assert program_valid(with_history, C.UNDO)
    assert not program_valid(with_player(with_history, credits=0), C.UNDO)


@pytest.mark.parametrize("hp,valid", [(0, True), (2, True), (3, False)])
def test_reset_applicable_below_three_hp(centre, hp, valid):
    """RESET (action 19): HP < 3, so also at HP 0 (errata O7); costs 4 energy."""
    state = with_player(owning(centre, C.RESET), hp=hp, energy=4)
    assert program_valid(state, C.RESET) == valid
    assert not program_valid(with_player(state, energy=3), C.RESET)


def test_program_costs_need_both_credits_and_energy(centre):
    """CRASH costs 3 C / 2 E (§2) and needs something on an 8-neighbour."""
    state = with_cells(owning(centre, C.CRASH), "content", {(3, 3): C.BLOCK})
    assert program_valid(with_player(state, credits=3, energy=2), C.CRASH)
    assert not program_valid(with_player(state, credits=2, energy=2), C.CRASH)
    assert not program_valid(with_player(state, credits=3, energy=1), C.CRASH)


def test_hidden_cryptog_enables_crash_from_a_diagonal(centre):
    """§7 remark / errata E3: a hidden cryptog on a diagonal neighbour makes CRASH valid."""
    state = with_player(owning(centre, C.CRASH), credits=3, energy=2)
    assert not program_valid(state, C.CRASH)
    assert program_valid(with_enemy(state, C.CRYPTOG, 3, 3), C.CRASH)
