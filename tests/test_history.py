"""UNDO history (programs-rewards-observation §5, game-rules §2.1/§11, decisions R3/R9,
errata E5)."""

import jax
import jax.numpy as jnp
import numpy as np

from envs.hackmatrix.core.constants import BLOCK, CRYPTOG, DAEMON, DATA_SIPHON, EXIT, VIRUS
from envs.hackmatrix.core.history import clear_history, push_snapshot, undo
from envs.hackmatrix.core.state import blank_state

H = 3
_push = jax.jit(push_snapshot)
_undo = jax.jit(undo)
_clear = jax.jit(clear_history)
ON, OFF = jnp.bool_(True), jnp.bool_(False)


def i32(v):
    return jnp.int32(v)


def assert_states_equal(actual, expected):
    leaves_a = jax.tree_util.tree_flatten_with_path(actual)[0]
    leaves_e = jax.tree_util.tree_flatten_with_path(expected)[0]
    assert len(leaves_a) == len(leaves_e)
    for (path, a), (_, e) in zip(leaves_a, leaves_e):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(e),
                                      err_msg=jax.tree_util.keystr(path))


def arr(values, dtype=jnp.int32):
    return jnp.asarray(values, dtype)


def saved_state():
    """A stage-2 state with a distinct value in every §5.2 field and provenance flags set."""
    s = blank_state(max_enemies=4, max_transmissions=4, history_size=H)
    grid = s.grid.replace(
        content=s.grid.content.at[7].set(BLOCK).at[0].set(EXIT).at[30].set(DATA_SIPHON),
        points=s.grid.points.at[7].set(4), spawn=s.grid.spawn.at[7].set(4),
        credits=s.grid.credits.at[8].set(2), energy=s.grid.energy.at[30].set(1),
        siphoned=s.grid.siphoned.at[13].set(True),
        siphon_center=s.grid.siphon_center.at[13].set(True))
    enemies = s.enemies.replace(
        active=arr([True, True, False, False], bool), seq=arr([5, 3, 0, 0]),
        kind=arr([VIRUS, CRYPTOG, 0, 0]), row=arr([1, 4, 0, 0]), col=arr([2, 5, 0, 0]),
        hp=arr([1, 2, 0, 0]), last_row=arr([-1, 4, -1, -1]), last_col=arr([-1, 3, -1, -1]),
        from_scheduled=arr([True, False, False, False], bool),
        from_siphon=arr([False, True, False, False], bool))
    transmissions = s.transmissions.replace(
        active=arr([False, True, False, False], bool), seq=arr([0, 4, 0, 0]),
        row=arr([0, 3, 0, 0]), col=arr([0, 3, 0, 0]), turns=arr([0, 2, 0, 0]),
        kind=arr([0, DAEMON, 0, 0]), from_scheduled=arr([False, True, False, False], bool),
        from_siphon=arr([False, True, False, False], bool))
    player = s.player.replace(row=i32(1), col=i32(1), hp=i32(2), credits=i32(6), energy=i32(5),
                              data_siphons=i32(1), score=i32(9), attack=i32(3))
    return s.replace(grid=grid, player=player, enemies=enemies, transmissions=transmissions,
                     stage=i32(2), turn=i32(4),
                     program_rank=s.program_rank.at[3].set(0).at[9].set(1),
                     show=ON, calm=OFF, atk_uses=i32(1), next_seq=i32(6))


def changed_state(s):
    """Every field different from ``saved_state``, §5.4 fields included."""
    return s.replace(
        grid=s.grid.replace(content=s.grid.content.at[7].set(0),
                            points=s.grid.points.at[7].set(0),
                            credits=s.grid.credits.at[8].set(0),
                            siphoned=s.grid.siphoned.at[20].set(True)),
        player=s.player.replace(row=i32(5), col=i32(0), hp=i32(3), credits=i32(1), energy=i32(0),
                                data_siphons=i32(2), score=i32(12), attack=i32(4)),
        enemies=s.enemies.replace(active=arr([False, True, True, False], bool),
                                  hp=arr([1, 1, 2, 0]),
                                  stunned=arr([False, True, False, False], bool)),
        transmissions=s.transmissions.replace(active=arr([False, False, False, False], bool)),
        stage=i32(2), turn=i32(0), program_rank=s.program_rank.at[5].set(2), show=OFF, calm=ON,
        atk_uses=i32(2), exit_row=i32(0), exit_col=i32(5), step_active=ON, pending_siphon=i32(7),
        sched_interval=i32(9), next_sched_turn=i32(14), next_seq=i32(20), overflow=i32(1),
        time=i32(33))


def test_undo_restores_section_5_2_and_keeps_section_5_4():
    """§5.2/§5.3: player, turn, programs, SHOW/CALM/ATK+ counters, enemies, transmissions and
    the grid come back; entities are new objects (fresh seq from next_seq in saved list order,
    provenance flags false). §5.4: stage, exit, STEP, pending siphon, scheduler, overflow, time
    stay."""
    saved = saved_state()
    later = changed_state(_push(saved, ON))
    restored = _undo(later, ON)
    # Saved list order: enemy slot 1 (seq 3), enemy slot 0 (seq 5), then the transmission.
    enemies = saved.enemies.replace(seq=arr([21, 20, 0, 0]), from_scheduled=jnp.zeros(4, bool),
                                    from_siphon=jnp.zeros(4, bool))
    transmissions = saved.transmissions.replace(seq=arr([0, 22, 0, 0]),
                                                from_scheduled=jnp.zeros(4, bool),
                                                from_siphon=jnp.zeros(4, bool))
    expected = later.replace(
        player=saved.player, turn=saved.turn, program_rank=saved.program_rank, show=saved.show,
        calm=saved.calm, atk_uses=saved.atk_uses, enemies=enemies, transmissions=transmissions,
        grid=saved.grid, next_seq=i32(23), board_from_undo=OFF,
        history=later.history.replace(head=i32(H - 1), size=i32(0)))
    assert_states_equal(restored, expected)


def test_ring_keeps_the_newest_h_and_pops_newest_first():
    """decisions R3: beyond H the oldest snapshot is dropped; UNDO pops the newest (stack order)."""
    state = saved_state()
    for turn in range(1, 6):
        state = _push(state.replace(turn=i32(turn)), ON)
    assert int(state.history.size) == H
    popped = []
    for _ in range(H):
        state = _undo(state.replace(turn=i32(99)), ON)
        popped.append(int(state.turn))
    assert popped == [5, 4, 3]
    assert int(state.history.size) == 0
    state = _undo(state.replace(turn=i32(99)), ON)  # empty history: nothing to pop
    assert int(state.turn) == 99 and int(state.history.size) == 0

    for turn in (1, 2, 3, 4):
        state = _push(state.replace(turn=i32(turn)), ON)
    state = _undo(state, ON)
    state = _push(state.replace(turn=i32(7)), ON)
    popped = []
    for _ in range(3):
        state = _undo(state, ON)
        popped.append(int(state.turn))
    assert popped == [7, 3, 2]


def test_disabled_push_and_undo_change_nothing():
    """The ``enabled`` flag lets the step call them unconditionally."""
    state = _push(saved_state(), ON)
    assert_states_equal(_push(changed_state(state), OFF), changed_state(state))
    assert_states_equal(_undo(changed_state(state), OFF), changed_state(state))


def test_board_from_undo_marks_a_snapshot_of_an_earlier_stage():
    """decisions R9 / §5.5.3: an UNDO across a stage boundary restores the old board; every
    snapshot pushed on that board is still an old board, so the flag stays set."""
    stage1 = saved_state().replace(stage=i32(1))
    state = _push(_push(stage1, ON).replace(stage=i32(2)), ON)  # second: stage 2, fresh board
    state = _undo(state, ON)
    assert not bool(state.board_from_undo) and int(state.stage) == 2
    state = _undo(state, ON)
    assert bool(state.board_from_undo) and int(state.stage) == 2  # stage is not restored
    state = _undo(_push(state, ON), ON)  # a turn played on the restored board, then UNDO
    assert bool(state.board_from_undo)


def test_clear_history_empties_the_stack():
    """decisions R9 option: the history is cleared, so UNDO has nothing to pop."""
    state = _push(_push(saved_state(), ON), ON)
    assert int(_clear(state, OFF).history.size) == 2
    cleared = _clear(state, ON)
    assert int(cleared.history.size) == 0
    assert_states_equal(_undo(changed_state(cleared), ON), changed_state(cleared))
