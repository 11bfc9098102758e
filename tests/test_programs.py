"""Program applicability, costs and effects (programs-rewards-observation §1-§4, errata
O2/O5/O7/O8).

States are built by hand from ``blank_state``; expected states are written from the spec rules,
as ``start.replace(...)`` with every changed field spelled out, and compared leaf by leaf.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix.core.constants import (
    ANTI_V, ATK_PLUS, BLOCK, CALM, COL, CRASH, CRYPTOG, D_BOM, DAEMON, DATA_SIPHON, DEBUG, DELAY,
    EMPTY, EXCH, EXIT, GLITCH, HACK, N_PROGRAMS, POLY, PULL, PUSH, REDUC, RESET, ROW, SCORE, SHOW,
    SIPH_PLUS, STEP, UNDO, VIRUS, WAIT, WARP)
from envs.hackmatrix.core.history import push_snapshot
from envs.hackmatrix.core.programs import apply_program, can_execute
from envs.hackmatrix.core.state import blank_state

MAX_HP = {VIRUS: 2, DAEMON: 3, GLITCH: 2, CRYPTOG: 2}  # Enemy.swift › EnemyType.maxHP (§4.5)
# §2 table: (credits, energy) per program.
COST = {PUSH: (0, 2), PULL: (0, 2), CRASH: (3, 2), WARP: (2, 2), POLY: (1, 1), WAIT: (0, 1),
        DEBUG: (3, 0), ROW: (3, 1), COL: (3, 1), UNDO: (1, 0), STEP: (0, 3), SIPH_PLUS: (5, 0),
        EXCH: (4, 0), SHOW: (2, 0), RESET: (0, 4), CALM: (2, 4), D_BOM: (3, 0), DELAY: (1, 2),
        ANTI_V: (3, 0), SCORE: (0, 5), REDUC: (2, 1), ATK_PLUS: (4, 4), HACK: (2, 2)}

_apply = jax.jit(apply_program)
_apply_many_keys = jax.jit(jax.vmap(apply_program, in_axes=(None, None, 0)))
_can_execute = jax.jit(can_execute)
_push_snapshot = jax.jit(push_snapshot)


def run(state, program, seed=0):
    new_state, events = _apply(state, jnp.int32(program), jax.random.PRNGKey(seed))
    return new_state, events


N_KEYS = 2000  # one batch size for every sampled test: one compile


def run_many(state, program, seed=0):
    keys = jax.random.split(jax.random.PRNGKey(seed), N_KEYS)
    return _apply_many_keys(state, jnp.int32(program), keys)


# ---------------------------------------------------------------- state builders

def base(row=2, col=2, credits=20, energy=20, **player):
    """Player at (row, col) owning every program, with money for any of them."""
    s = blank_state(max_enemies=8, max_transmissions=8, history_size=3)
    return s.replace(player=s.player.replace(row=jnp.int32(row), col=jnp.int32(col),
                                             credits=jnp.int32(credits), energy=jnp.int32(energy),
                                             **{k: jnp.int32(v) for k, v in player.items()}),
                     program_rank=jnp.arange(N_PROGRAMS, dtype=jnp.int32))


def _slot_arrays(template, specs, defaults):
    arrays = {name: np.array(getattr(template, name)) for name in template.__dataclass_fields__}
    for index, spec in enumerate(specs):
        spec = {**defaults(spec), **spec}
        slot = spec.pop("slot", index)
        spec.setdefault("seq", index)
        arrays["active"][slot] = True
        for name, value in spec.items():
            arrays[name][slot] = value
    return template.replace(**{k: jnp.asarray(v) for k, v in arrays.items()})


def with_entities(state, enemies=(), transmissions=()):
    """Enemies are dicts (kind, row, col, optional hp, slot, seq, flags); by default slot = seq =
    position in the tuple, enemies before transmissions in ``seq``."""
    enemy_defaults = lambda e: {"hp": MAX_HP[e["kind"]]}  # noqa: E731
    t_defaults = lambda t: {"turns": 1}  # noqa: E731
    transmissions = [{"seq": len(enemies) + i, **t} for i, t in enumerate(transmissions)]
    e = _slot_arrays(state.enemies, enemies, enemy_defaults)
    t = _slot_arrays(state.transmissions, transmissions, t_defaults)
    seqs = [int(x) for x in np.array(e.seq)[np.array(e.active)]] + \
        [int(x) for x in np.array(t.seq)[np.array(t.active)]]
    return state.replace(enemies=e, transmissions=t, next_seq=jnp.int32(max(seqs, default=-1) + 1))


def with_cells(state, **cells):
    """cells: name -> {field: value}, name 'r{row}c{col}'."""
    arrays = {name: np.array(getattr(state.grid, name)) for name in state.grid.__dataclass_fields__}
    for name, fields in cells.items():
        cell = int(name[1]) * 6 + int(name[3])
        for field, value in fields.items():
            arrays[field][cell] = value
    return state.replace(grid=state.grid.replace(**{k: jnp.asarray(v) for k, v in arrays.items()}))


def enemy(kind, row, col, **fields):
    return {"kind": kind, "row": row, "col": col, **fields}


def transmission(row, col, **fields):
    return {"row": row, "col": col, **fields}


def set_slots(entities, **fields):
    """fields: name -> {slot: value}."""
    updates = {}
    for name, by_slot in fields.items():
        array = np.array(getattr(entities, name))
        for slot, value in by_slot.items():
            array[slot] = value
        updates[name] = jnp.asarray(array)
    return entities.replace(**updates)


def paid(state, program):
    credits, energy = COST[program]
    return state.replace(player=state.player.replace(credits=state.player.credits - credits,
                                                     energy=state.player.energy - energy))


def assert_states_equal(actual, expected):
    leaves_a = jax.tree_util.tree_flatten_with_path(actual)[0]
    leaves_e = jax.tree_util.tree_flatten_with_path(expected)[0]
    assert len(leaves_a) == len(leaves_e)
    for (path, a), (_, e) in zip(leaves_a, leaves_e):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(e),
                                      err_msg=jax.tree_util.keystr(path))


def assert_events(events, kills=0, exit_reached=False, ends_turn=False):
    assert int(events.kills) == kills
    assert bool(events.exit_reached) == exit_reached
    assert bool(events.ends_turn) == ends_turn


# ---------------------------------------------------------------- §2 applicability

def _hp(state, hp):
    return state.replace(player=state.player.replace(hp=jnp.int32(hp)))


APPLICABILITY = {
    # program: (a state where it is applicable, a state where it is not)
    PUSH: (with_entities(base(), [enemy(CRYPTOG, 5, 5)]),
           with_entities(base(), [], [transmission(3, 3)])),
    PULL: (with_entities(base(), [enemy(VIRUS, 0, 0, hp=0)]), base()),
    CRASH: (with_cells(base(), r1c1={"content": BLOCK}),  # diagonal block
            with_entities(with_cells(base(), r0c2={"content": BLOCK}), [enemy(VIRUS, 4, 4)])),
    WARP: (with_entities(base(), [], [transmission(5, 0)]), base()),
    POLY: (with_entities(base(), [enemy(DAEMON, 5, 5, stunned=True)]), base()),
    DEBUG: (with_entities(with_cells(base(), r4c4={"content": BLOCK, "siphoned": True}),
                          [enemy(GLITCH, 4, 4)]),
            with_entities(with_cells(base(), r4c4={"content": BLOCK}), [enemy(GLITCH, 4, 3)])),
    ROW: (with_entities(with_cells(base(), r2c3={"content": BLOCK}), [enemy(VIRUS, 2, 5)]),
          with_entities(base(), [enemy(VIRUS, 3, 5)])),
    COL: (with_entities(base(), [enemy(VIRUS, 0, 2)]), with_entities(base(), [enemy(VIRUS, 2, 5)])),
    UNDO: (base().replace(history=base().history.replace(size=jnp.int32(1))), base()),
    EXCH: (base(credits=4), base(credits=3)),
    SHOW: (base(), base().replace(show=jnp.bool_(True))),
    RESET: (_hp(base(), 0), _hp(base(), 3)),  # HP 0 qualifies (errata O7)
    CALM: (base(), base().replace(calm=jnp.bool_(True))),
    D_BOM: (with_entities(base(), [enemy(VIRUS, 1, 1), enemy(DAEMON, 5, 5)]),
            with_entities(base(), [enemy(VIRUS, 1, 1)])),
    DELAY: (with_entities(base(), [], [transmission(4, 4)]),
            with_entities(base(), [enemy(VIRUS, 4, 4)])),
    ANTI_V: (with_entities(base(), [enemy(VIRUS, 4, 4)]),
             with_entities(base(), [enemy(GLITCH, 4, 4)])),
    SCORE: (base().replace(stage=jnp.int32(7)), base().replace(stage=jnp.int32(8))),
    REDUC: (with_cells(base(), r4c4={"content": BLOCK, "spawn": 1}),
            with_cells(base(), r4c4={"content": BLOCK, "spawn": 2, "siphoned": True},
                       r3c3={"content": BLOCK, "spawn": 0})),
    ATK_PLUS: (base().replace(atk_uses=jnp.int32(1)), base().replace(atk_uses=jnp.int32(2))),
    HACK: (with_cells(base(), r0c0={"siphoned": True}), base()),
    # Always applicable: the negative case fails on cost instead.
    WAIT: (base(), base(energy=0)),
    STEP: (base(), base(energy=2)),
    SIPH_PLUS: (base(), base(credits=4)),
}


@pytest.mark.parametrize("program", sorted(APPLICABILITY))
def test_can_execute_follows_the_section_2_table(program):
    """§2 applicability column (plus cost), incl. hidden/stunned/hp<=0 enemies counting."""
    yes, no = APPLICABILITY[program]
    assert bool(_can_execute(yes)[program])
    assert not bool(_can_execute(no)[program])
    not_owned = yes.replace(program_rank=yes.program_rank.at[program].set(-1))
    assert not bool(_can_execute(not_owned)[program])


# ---------------------------------------------------------------- §4.1 PUSH / §4.2 PULL

def test_push_plans_diagonal_row_or_column_candidates_and_keeps_last_known():
    """§4.1: largest Manhattan candidate among on-board (a)/(b)/(c); edge enemies without a
    candidate stay; an enemy on the player's cell keeps its cell; cryptog last-known untouched
    (O8)."""
    start = with_entities(base(), [
        enemy(CRYPTOG, 3, 4, last_row=3, last_col=4),  # (a) (4,5) d=5 beats (4,4), (3,5) d=4
        enemy(VIRUS, 2, 5),  # pushed off the board: no candidate
        enemy(VIRUS, 0, 2),  # same
        enemy(VIRUS, 1, 1),  # (a) (0,0)
        enemy(VIRUS, 5, 3),  # (a), (b) off board: (c) (5,4)
        enemy(VIRUS, 4, 0),  # (a), (c) off board: (b) (5,0)
        enemy(DAEMON, 2, 2),  # on the player's cell: its own cell is the only candidate
    ])
    state, events = run(start, PUSH)
    expected = paid(start, PUSH).replace(enemies=set_slots(
        start.enemies, row={0: 4, 3: 0, 4: 5, 5: 5}, col={0: 5, 3: 0, 4: 4, 5: 0}))
    assert_states_equal(state, expected)
    assert_events(events)


def test_push_onto_a_block_and_a_transmission():
    """§4.1 'Not checked': blocks and transmissions do not stop a push."""
    start = with_entities(with_cells(base(), r4c2={"content": BLOCK, "program": STEP, "spawn": 4}),
                          [enemy(VIRUS, 3, 2), enemy(DAEMON, 1, 2)], [transmission(0, 2)])
    state, events = run(start, PUSH)
    expected = paid(start, PUSH).replace(enemies=set_slots(start.enemies, row={0: 4, 1: 0}))
    assert_states_equal(state, expected)
    assert_events(events)


def test_push_collision_keeps_later_enemy_and_stacks_on_a_non_mover():
    """§4.1 apply step, in list order (seq, not slot): the first planner into (5,5) moves there
    and stacks on the enemy that could not move; the later planner of (5,5) stays (game-rules
    §14.23)."""
    start = with_entities(base(), [
        enemy(VIRUS, 4, 5, slot=0, seq=2),  # plan (5,5): blocked, an earlier enemy moved in
        enemy(GLITCH, 5, 5, slot=1, seq=0),  # corner: no candidate
        enemy(DAEMON, 4, 4, slot=2, seq=1),  # plan (5,5) (d=6): moves first
    ])
    state, events = run(start, PUSH)
    expected = paid(start, PUSH).replace(enemies=set_slots(start.enemies, row={2: 5}, col={2: 5}))
    assert_states_equal(state, expected)
    assert_events(events)


def test_pull_moves_towards_player_and_discards_the_player_cell():
    """§4.2: a diagonal neighbour moves onto the player's row (row-only before col-only); an
    orthogonal neighbour or an enemy on the player's cell stays; far diagonals move diagonally;
    two planners of one cell: the earlier moves, the later stays."""
    start = with_entities(base(), [
        enemy(VIRUS, 3, 3),  # (a) is the player's cell; (b) (2,3) ties (c) (3,2): (b)
        enemy(VIRUS, 2, 3),  # only candidate is the player's cell: stays
        enemy(VIRUS, 5, 5),  # (a) (4,4)
        enemy(VIRUS, 2, 0),  # (2,1)
        enemy(VIRUS, 2, 2),  # on the player: stays
        enemy(VIRUS, 0, 3),  # (a) (1,2) d=1
        enemy(VIRUS, 0, 2),  # (a) (1,2) as well, later in list order: stays
    ])
    state, events = run(start, PULL)
    expected = paid(start, PULL).replace(enemies=set_slots(
        start.enemies, row={0: 2, 2: 4, 5: 1}, col={2: 4, 3: 1, 5: 2}))
    assert_states_equal(state, expected)
    assert_events(events)


# ---------------------------------------------------------------- §4.3 CRASH

def test_crash_clears_the_ring_and_counts_at_most_one_kill_per_cell_and_list():
    """§4.3: blocks in the 8-neighbourhood become empty (resources, siphoned, siphon centre kept);
    every enemy and transmission there is removed, counted via removeEnemy/removeTransmission
    (first match in list order; scheduled counts 0). Player cell, exit, data siphon kept."""
    start = with_cells(base(row=1, col=1),
                       r0c1={"content": BLOCK, "points": 3, "spawn": 3, "credits": 2},
                       r2c2={"content": BLOCK, "program": PUSH, "siphoned": True,
                             "siphon_center": True},
                       r0c2={"content": BLOCK, "program": WARP, "spawn": 5, "question": True},
                       r0c0={"content": EXIT}, r2c0={"content": DATA_SIPHON},
                       r1c1={"content": BLOCK, "points": 2, "spawn": 2},
                       r3c3={"content": BLOCK, "points": 1, "spawn": 1})
    start = with_entities(start, [
        enemy(VIRUS, 1, 2), enemy(DAEMON, 1, 2),  # one kill for the cell
        enemy(GLITCH, 2, 1, slot=2, seq=3), enemy(VIRUS, 2, 1, slot=3, seq=2, from_scheduled=True),
        enemy(VIRUS, 0, 0),  # on the exit: removed, one kill
        enemy(GLITCH, 1, 1),  # on the player's cell: untouched
        enemy(DAEMON, 3, 3),  # outside the ring
    ], [
        transmission(0, 2), transmission(0, 2),  # one kill
        transmission(1, 2),  # shares the cell with two enemies: one more kill
        transmission(2, 0, from_scheduled=True),  # no kill
        transmission(4, 4),
    ])
    state, events = run(start, CRASH)
    cleared = [1, 2, 14]  # cells (0,1), (0,2), (2,2)
    g = start.grid
    expected_grid = g.replace(content=g.content.at[jnp.array(cleared)].set(EMPTY),
                              points=g.points.at[jnp.array(cleared)].set(0),
                              program=g.program.at[jnp.array(cleared)].set(-1),
                              spawn=g.spawn.at[jnp.array(cleared)].set(0),
                              question=g.question.at[jnp.array(cleared)].set(False))
    expected = paid(start, CRASH).replace(
        grid=expected_grid,
        enemies=set_slots(start.enemies, active={0: False, 1: False, 2: False, 3: False, 4: False}),
        transmissions=set_slots(start.transmissions,
                                active={0: False, 1: False, 2: False, 3: False}))
    assert_states_equal(state, expected)
    assert int(state.grid.credits[1]) == 2 and bool(state.grid.siphoned[14])
    assert_events(events, kills=4)


# ---------------------------------------------------------------- §4.4 WARP

def test_warp_onto_the_exit_position_reaches_the_exit():
    """§3 step 6: WARP compares with exitPosition, not the cell content."""
    start = with_entities(base(), [], [transmission(5, 5)])
    state, events = run(start, WARP)
    expected = paid(start, WARP)
    expected = expected.replace(player=expected.player.replace(row=jnp.int32(5), col=jnp.int32(5)),
                                transmissions=set_slots(start.transmissions, active={0: False}))
    assert_states_equal(state, expected)
    assert_events(events, kills=1, exit_reached=True)


def test_warp_onto_an_old_exit_cell_is_not_the_exit():
    """game-rules §14.14: after a cross-stage UNDO the grid's exit cell is stale; WARP checks
    exitPosition only. Landing collects neither the siphon item nor resources (§4.4)."""
    board = with_cells(base(), r0c0={"content": EXIT}, r0c5={"content": DATA_SIPHON, "credits": 3})
    state, events = run(with_entities(board, [enemy(DAEMON, 0, 0, from_scheduled=True)]), WARP)
    assert (int(state.player.row), int(state.player.col)) == (0, 0)
    assert_events(events, kills=0)  # scheduled-task enemy: no kill
    start = with_entities(board, [enemy(VIRUS, 0, 5)])
    state, events = run(start, WARP)
    expected = paid(start, WARP)
    expected = expected.replace(player=expected.player.replace(row=jnp.int32(0), col=jnp.int32(5)),
                                enemies=set_slots(start.enemies, active={0: False}))
    assert_states_equal(state, expected)  # data_siphons, cell credits unchanged
    assert_events(events, kills=1)


def test_warp_can_land_on_a_block():
    """game-rules §14.13: no legality check, so an enemy on a block puts the player on it."""
    start = with_entities(with_cells(base(), r3c1={"content": BLOCK, "points": 2, "spawn": 2}),
                          [enemy(GLITCH, 3, 1)])
    state, events = run(start, WARP)
    expected = paid(start, WARP)
    expected = expected.replace(player=expected.player.replace(row=jnp.int32(3), col=jnp.int32(1)),
                                enemies=set_slots(start.enemies, active={0: False}))
    assert_states_equal(state, expected)
    assert_events(events, kills=1)


def test_warp_removes_every_entity_of_the_picked_kind_on_the_cell():
    """§4.4 + errata O2: an enemy pick removes all enemies on the cell (one kill) and leaves the
    transmission there; a transmission pick leaves both enemies under the player."""
    start = with_entities(base(), [enemy(VIRUS, 3, 4), enemy(DAEMON, 3, 4, from_scheduled=True)],
                          [transmission(3, 4)])
    states, events = run_many(start, WARP)
    assert np.all(np.asarray(states.player.row) == 3) and np.all(np.asarray(states.player.col) == 4)
    enemies_left = np.asarray(states.enemies.active)[:, :2]
    transmission_left = np.asarray(states.transmissions.active)[:, 0]
    enemy_pick = ~enemies_left.any(axis=1)
    assert np.all(enemies_left.all(axis=1) == ~enemy_pick)
    assert np.all(transmission_left == enemy_pick)
    assert np.all(np.asarray(events.kills) == 1)
    assert abs(enemy_pick.mean() - 2 / 3) < 0.04  # 2 of the 3 entities are enemies


def test_warp_target_is_uniform_per_entity():
    """§4.4: uniform over the entity list, not per cell: a cell with two enemies gets 2/5."""
    start = with_entities(base(), [enemy(VIRUS, 0, 1), enemy(GLITCH, 0, 1), enemy(DAEMON, 4, 1)],
                          [transmission(1, 5), transmission(5, 3)])
    n = N_KEYS
    states, _ = run_many(start, WARP, seed=1)
    cells = np.asarray(states.player.row) * 6 + np.asarray(states.player.col)
    targets = [1, 25, 11, 33]
    counts = np.array([np.sum(cells == c) for c in targets])
    assert counts.sum() == n
    expected = n * np.array([2, 1, 1, 1]) / 5
    chi2 = np.sum((counts - expected) ** 2 / expected)
    assert chi2 < 16.3  # df = 3, p = 0.001


# ---------------------------------------------------------------- §4.5 POLY

def test_poly_carries_damage_over_and_kills_a_damaged_daemon():
    """§4.5: hp = maxHP(new) - (maxHP(old) - hp); a 1-HP daemon becomes a 2-HP type at 0 HP and
    removeDeadEnemies counts it (scheduled ones count 0); stun, disable, flags, position kept."""
    start = with_entities(base(), [
        enemy(DAEMON, 1, 4, hp=1),
        enemy(DAEMON, 3, 0, hp=1, from_scheduled=True),
        enemy(GLITCH, 4, 4, hp=1, stunned=True, disabled=1, from_siphon=True),
        enemy(CRYPTOG, 5, 0, last_row=5, last_col=1),
    ])
    states, events = run_many(start, POLY)
    assert np.all(np.asarray(events.kills) == 1)
    e = jax.tree.map(np.asarray, states.enemies)
    assert not e.active[:, :2].any()
    assert e.active[:, 2:4].all()
    for slot, old_kind, damage in ((2, GLITCH, 1), (3, CRYPTOG, 0)):
        kinds = e.kind[:, slot]
        assert np.all(kinds != old_kind)
        assert np.all(e.hp[:, slot] == np.vectorize(MAX_HP.get)(kinds) - damage)
        became_cryptog = kinds == CRYPTOG
        row, col = np.asarray(start.enemies.row)[slot], np.asarray(start.enemies.col)[slot]
        old_last = (np.asarray(start.enemies.last_row)[slot],
                    np.asarray(start.enemies.last_col)[slot])
        assert np.all(np.where(became_cryptog, e.last_row[:, slot] == row,
                               e.last_row[:, slot] == old_last[0]))
        assert np.all(np.where(became_cryptog, e.last_col[:, slot] == col,
                               e.last_col[:, slot] == old_last[1]))
        assert np.all(e.row[:, slot] == row) and np.all(e.col[:, slot] == col)
    assert e.stunned[:, 2].all() and np.all(e.disabled[:, 2] == 1) and e.from_siphon[:, 2].all()
    assert np.any(e.kind[:, 2] == CRYPTOG)  # the last-known branch was exercised


def test_poly_new_type_is_uniform_over_the_three_others():
    """§4.5 / game-rules §13.4: pick(the three other types)."""
    start = with_entities(base(), [enemy(DAEMON, 5, 5)])
    n = N_KEYS
    states, _ = run_many(start, POLY, seed=2)
    kinds = np.asarray(states.enemies.kind)[:, 0]
    counts = np.array([np.sum(kinds == k) for k in (VIRUS, GLITCH, CRYPTOG)])
    assert counts.sum() == n  # never stays a daemon
    chi2 = np.sum((counts - n / 3) ** 2 / (n / 3))
    assert chi2 < 13.8  # df = 2, p = 0.001


# ---------------------------------------------------------------- §4.6 WAIT and the simple ones

def test_index_outside_the_programs_is_a_no_op():
    """Not a Swift rule: -1 (a non-program action in a fused step) must neither pay nor act."""
    start = with_entities(base(hp=2), [enemy(VIRUS, 2, 3)], [transmission(4, 4)])
    state, events = run(start, -1)
    assert_states_equal(state, start)
    assert_events(events)


def test_wait_only_pays_and_ends_the_turn():
    """§4.6: no effect besides 1 energy; the caller runs the enemy turn."""
    start = with_entities(base(), [enemy(VIRUS, 2, 3)], [transmission(4, 4)])
    state, events = run(start, WAIT)
    assert_states_equal(state, paid(start, WAIT))
    assert_events(events, ends_turn=True)


@pytest.mark.parametrize("program, changes", [
    (STEP, lambda s: s.replace(step_active=jnp.bool_(True))),  # §4.11
    (SIPH_PLUS, lambda s: s.replace(player=s.player.replace(data_siphons=jnp.int32(3)))),  # §4.12
    (EXCH, lambda s: s.replace(player=s.player.replace(energy=jnp.int32(24)))),  # §4.13
    (SHOW, lambda s: s.replace(show=jnp.bool_(True))),  # §4.14
    (RESET, lambda s: s.replace(player=s.player.replace(hp=jnp.int32(3)))),  # §4.15
    (CALM, lambda s: s.replace(calm=jnp.bool_(True))),  # §4.16
    (SCORE, lambda s: s.replace(player=s.player.replace(score=jnp.int32(10 + 8 - 3)))),  # §4.20
])
def test_flag_and_counter_programs(program, changes):
    """§4.11-§4.16, §4.20: one field changes (SIPH+ 2->3, EXCH +4 energy, RESET 1->3,
    SCORE +8-stage)."""
    start = base(data_siphons=2, hp=1, score=10).replace(stage=jnp.int32(3))
    start = with_entities(start, [enemy(VIRUS, 2, 3)])
    state, events = run(start, program)
    assert_states_equal(state, changes(paid(start, program)))
    assert_events(events)


# ---------------------------------------------------------------- damaging programs

def test_debug_hits_enemies_on_blocks_with_attack_damage():
    """§4.7: enemies on block cells (siphoned or not) take attackDamage, survivors stunned, then
    removeDeadEnemies, which also removes and counts an hp-0 enemy elsewhere (errata O5)."""
    start = with_cells(base(attack=2), r4c4={"content": BLOCK},
                       r1c3={"content": BLOCK, "siphoned": True})
    start = with_entities(start, [
        enemy(DAEMON, 4, 4),  # 3 -> 1, stunned
        enemy(VIRUS, 1, 3),  # 2 -> 0, killed
        enemy(GLITCH, 4, 3),  # not on a block
        enemy(VIRUS, 0, 0, hp=0),  # already dead (setState)
    ])
    state, events = run(start, DEBUG)
    expected = paid(start, DEBUG).replace(enemies=set_slots(
        start.enemies, hp={0: 1, 1: 0}, stunned={0: True}, active={1: False, 3: False}))
    assert_states_equal(state, expected)
    assert_events(events, kills=2)


def test_row_hits_the_whole_row_through_blocks_and_scheduled_kills_count_zero():
    """§4.8 + §1.1: no line-of-sight check; transmissions untouched; a scheduled enemy's death is
    not a kill."""
    start = with_cells(base(), r2c3={"content": BLOCK})
    start = with_entities(start, [
        enemy(VIRUS, 2, 5),  # behind the block: 2 -> 1, stunned
        enemy(VIRUS, 2, 0, hp=1, from_scheduled=True),  # dies, no kill
        enemy(GLITCH, 2, 1, hp=1),  # dies, one kill
        enemy(VIRUS, 3, 2),  # other row
    ], [transmission(2, 4)])
    state, events = run(start, ROW)
    expected = paid(start, ROW).replace(enemies=set_slots(
        start.enemies, hp={0: 1, 1: 0, 2: 0}, stunned={0: True}, active={1: False, 2: False}))
    assert_states_equal(state, expected)
    assert_events(events, kills=1)


def test_col_hits_the_whole_column():
    """§4.9: every enemy with col = player col takes attackDamage."""
    start = with_entities(base(attack=3), [enemy(DAEMON, 5, 2), enemy(VIRUS, 0, 2, stunned=True),
                                           enemy(VIRUS, 2, 4)])
    state, events = run(start, COL)
    expected = paid(start, COL).replace(enemies=set_slots(
        start.enemies, hp={0: 0, 1: 0}, active={0: False, 1: False}))
    assert_states_equal(state, expected)
    assert_events(events, kills=2)


def test_d_bom_tie_takes_first_in_list_order_and_splash_is_fixed_one():
    """§4.17: nearest daemon (Manhattan), first in list order (seq, not slot) on ties; removed by
    identity; fixed 1 damage (not attackDamage) on the 8 cells around it, survivors stunned; its
    cell-mate is not hit; removeDeadEnemies counts the splash kill."""
    start = with_entities(base(attack=3), [
        enemy(DAEMON, 4, 2, slot=0, seq=1),  # distance 2, later in list order
        enemy(DAEMON, 2, 4, slot=1, seq=0),  # distance 2, first: the target
        enemy(DAEMON, 5, 5, slot=2, seq=2),  # farther
        enemy(VIRUS, 3, 4, slot=3, seq=3),  # splash: 2 -> 1, stunned
        enemy(VIRUS, 2, 5, slot=4, seq=4, hp=1),  # splash: dies
        enemy(GLITCH, 2, 4, slot=5, seq=5),  # shares the daemon's cell: not hit
        enemy(DAEMON, 1, 3, slot=6, seq=6),  # splash: 3 -> 2, stunned
    ], [transmission(3, 3)])
    state, events = run(start, D_BOM)
    expected = paid(start, D_BOM).replace(enemies=set_slots(
        start.enemies, hp={3: 1, 4: 0, 6: 2}, stunned={3: True, 6: True},
        active={1: False, 4: False}))
    assert_states_equal(state, expected)
    assert_events(events, kills=2)


def test_d_bom_scheduled_daemon_is_no_kill():
    """§4.17 step 2: kill +1 unless the daemon came from a scheduled task."""
    start = with_entities(base(), [enemy(DAEMON, 2, 3, from_scheduled=True), enemy(DAEMON, 0, 0)])
    state, events = run(start, D_BOM)
    expected = paid(start, D_BOM).replace(enemies=set_slots(start.enemies, active={0: False}))
    assert_states_equal(state, expected)
    assert_events(events, kills=0)


def test_anti_v_hits_viruses_for_one():
    """§4.19: every virus takes fixed 1 damage and is stunned if it survives."""
    start = with_entities(base(attack=4), [enemy(VIRUS, 0, 0), enemy(VIRUS, 5, 5, hp=1),
                                           enemy(DAEMON, 1, 1)])
    state, events = run(start, ANTI_V)
    expected = paid(start, ANTI_V).replace(enemies=set_slots(
        start.enemies, hp={0: 1, 1: 0}, stunned={0: True}, active={1: False}))
    assert_states_equal(state, expected)
    assert_events(events, kills=1)


def test_hack_hits_enemies_on_siphoned_cells_and_keeps_blocks():
    """§4.23: any siphoned cell (an empty one too); attackDamage + stun; no block destroyed."""
    start = with_cells(base(attack=2), r0c4={"siphoned": True},
                       r1c4={"content": BLOCK, "siphoned": True, "points": 3})
    start = with_entities(start, [enemy(DAEMON, 0, 4), enemy(VIRUS, 1, 4), enemy(VIRUS, 3, 3)])
    state, events = run(start, HACK)
    expected = paid(start, HACK).replace(enemies=set_slots(
        start.enemies, hp={0: 1, 1: 0}, stunned={0: True}, active={1: False}))
    assert_states_equal(state, expected)
    assert_events(events, kills=1)


# ---------------------------------------------------------------- DELAY, REDUC, ATK+

def test_delay_adds_three_turns_to_every_transmission():
    """§4.18."""
    start = with_entities(base(), [], [transmission(1, 1, turns=1), transmission(4, 4, turns=2)])
    start = start.replace(transmissions=set_slots(start.transmissions, turns={5: 7}))  # free slot
    state, events = run(start, DELAY)
    expected = paid(start, DELAY).replace(transmissions=set_slots(start.transmissions,
                                                                  turns={0: 4, 1: 5}))
    assert_states_equal(state, expected)
    assert_events(events)


def test_reduc_lowers_unsiphoned_block_spawn_and_breaks_points_equal_spawn():
    """§4.21: spawn = max(0, spawn - 1) on every unsiphoned block; points untouched."""
    start = with_cells(base(), r1c1={"content": BLOCK, "points": 4, "spawn": 4},
                       r1c3={"content": BLOCK, "program": WARP, "spawn": 1, "question": True},
                       r3c3={"content": BLOCK, "points": 2, "spawn": 0},
                       r4c1={"content": BLOCK, "points": 2, "spawn": 2, "siphoned": True})
    state, events = run(start, REDUC)
    g = start.grid
    expected = paid(start, REDUC).replace(grid=g.replace(spawn=g.spawn.at[7].set(3).at[9].set(0)))
    assert_states_equal(state, expected)
    assert_events(events)


def test_atk_plus_reaches_five_after_the_stage_counter_resets():
    """§4.22 / game-rules §14.16: +1 per use, 2 uses per stage, no cap, damage never reset."""
    state = base(credits=40, energy=40)
    for _ in range(2):
        state, _ = run(state, ATK_PLUS)
    assert int(state.player.attack) == 3 and int(state.atk_uses) == 2
    assert not bool(_can_execute(state)[ATK_PLUS])
    state = state.replace(atk_uses=jnp.int32(0))  # initializeStage of the next stage
    start = state
    for _ in range(2):
        state, events = run(state, ATK_PLUS)
        assert_events(events)
    expected = start.replace(player=start.player.replace(
        attack=jnp.int32(5), credits=start.player.credits - 8, energy=start.player.energy - 8),
        atk_uses=jnp.int32(2))
    assert_states_equal(state, expected)


# ---------------------------------------------------------------- §4.10 UNDO through apply_program

def test_undo_program_cost_is_overwritten_by_restored_credits():
    """§4.10: the 1 credit is paid, then the restore overwrites credits; history pops one."""
    saved = with_entities(base(credits=5, energy=7), [enemy(VIRUS, 3, 3)])
    saved = _push_snapshot(saved)
    later = saved.replace(player=saved.player.replace(credits=jnp.int32(2), energy=jnp.int32(1)))
    state, events = run(later, UNDO)
    assert int(state.player.credits) == 5 and int(state.player.energy) == 7
    assert int(state.history.size) == 0
    assert_events(events)
