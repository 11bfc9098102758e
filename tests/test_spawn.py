"""Transmission spawning (game-rules §3.6, §14 items 18, 21, 22; decisions R2, R3).

Statistical checks use fixed keys and a tolerance of 5 standard errors of the estimated
frequency, so a correct implementation fails with probability below 1e-6 per check.
"""

import math

import jax
import numpy as np
import pytest

from envs.hackmatrix.core.constants import BLOCK, DATA_SIPHON, EXIT, N_ENEMY_TYPES
from envs.hackmatrix.core.spawn import line_of_fire_mask, spawn_empty_mask, spawn_transmissions
from envs.hackmatrix.core.state import blank_state

CAPACITY = 8
N_KEYS = 4000
ALL_CELLS = [(r, c) for r in range(6) for c in range(6)]
DIRECTIONS = ((1, 0), (-1, 0), (0, -1), (0, 1))  # U, D, L, R (game-rules §0)

_masks = jax.jit(jax.vmap(lambda s: (spawn_empty_mask(s), line_of_fire_mask(s))))
_spawn = jax.jit(jax.vmap(
    lambda s, k, n, scheduled, siphon: spawn_transmissions(
        s, k, n, from_scheduled=scheduled, from_siphon=siphon),
    in_axes=(None, 0, None, None, None)))


_BLANK = jax.device_get(blank_state(CAPACITY, CAPACITY, 1))  # numpy leaves: cheap to edit


def make_state(player, blocks=(), enemies=(), transmissions=(), contents=None, siphoned=()):
    """A state (numpy leaves) with the given player cell, block cells, enemy cells
    (row, col[, hp]) and transmission cells; ``contents`` maps extra cells to EXIT / DATA_SIPHON."""
    state = _BLANK
    content = np.zeros(36, np.int32)
    for r, c in blocks:
        content[r * 6 + c] = BLOCK
    for (r, c), value in (contents or {}).items():
        content[r * 6 + c] = value
    is_siphoned = np.zeros(36, bool)
    for r, c in siphoned:
        is_siphoned[r * 6 + c] = True
    grid = state.grid.replace(content=content, siphoned=is_siphoned)

    def slots(cells):
        active = np.zeros(CAPACITY, bool)
        rows, cols, hps = (np.zeros(CAPACITY, np.int32) for _ in range(3))
        for i, cell in enumerate(cells):
            active[i] = True
            rows[i], cols[i] = cell[0], cell[1]
            hps[i] = cell[2] if len(cell) > 2 else 2
        return active, rows, cols, hps

    e_active, e_rows, e_cols, e_hps = slots(enemies)
    t_active, t_rows, t_cols, _ = slots(transmissions)
    seq = np.arange(CAPACITY, dtype=np.int32)
    return state.replace(
        grid=grid,
        player=state.player.replace(row=np.int32(player[0]), col=np.int32(player[1])),
        enemies=state.enemies.replace(active=e_active, seq=seq, row=e_rows, col=e_cols, hp=e_hps),
        transmissions=state.transmissions.replace(
            active=t_active, seq=seq + np.int32(len(enemies)), row=t_rows, col=t_cols,
            turns=np.full(CAPACITY, 2, np.int32)),
        next_seq=np.int32(len(enemies) + len(transmissions)))


def masks_of(state):
    empty, lof = _masks(jax.tree.map(lambda x: np.asarray(x)[None], state))
    return np.asarray(empty[0]), np.asarray(lof[0])


def cells_of(mask):
    return {(i // 6, i % 6) for i in np.flatnonzero(mask)}


def keys(seed, n=N_KEYS):
    return jax.random.split(jax.random.PRNGKey(seed), n)


def spawn(state, key_seed, count, scheduled=False, siphon=False):
    return jax.device_get(_spawn(state, keys(key_seed), count, scheduled, siphon))


def new_transmissions(before, after):
    """Per lane: list of (row, col) of slots that became active, in list order."""
    was = np.asarray(before.transmissions.active)
    t = after.transmissions
    out = []
    for lane in range(t.active.shape[0]):
        new = np.flatnonzero(t.active[lane] & ~was)
        new = new[np.argsort(t.seq[lane, new])]
        out.append([(int(t.row[lane, i]), int(t.col[lane, i])) for i in new])
    return out


def assert_frequency(successes, n, p, what):
    tolerance = 5 * math.sqrt(p * (1 - p) / n)
    assert abs(successes / n - p) <= tolerance, (
        f"{what}: {successes / n:.4f} vs {p:.4f} ± {tolerance:.4f}")


# --- pure-Python references written from the spec ------------------------------------------

def reference_spawn_empty(player, blocks, enemy_cells, transmission_cells):
    """isPositionEmpty (§3.6)."""
    return {cell for cell in ALL_CELLS
            if cell != player and cell not in blocks and cell not in enemy_cells
            and cell not in transmission_cells}


def reference_line_of_fire(player, blocks, enemy_cells):
    """isPositionInLineOfFire (§3.6): walk from the player; target first, then an enemy, then
    a block stops the walk. Transmissions are not consulted."""
    in_line = set()
    for dr, dc in DIRECTIONS:
        r, c = player[0] + dr, player[1] + dc
        while 0 <= r < 6 and 0 <= c < 6:
            in_line.add((r, c))  # the target check comes first
            if (r, c) in enemy_cells or (r, c) in blocks:
                break
            r, c = r + dr, c + dc
    return in_line


# --- masks ---------------------------------------------------------------------------------

def test_spawn_empty_excludes_player_enemies_transmissions_and_blocks_only():
    """§3.6 isPositionEmpty: exit, data siphon, siphoned floor and a siphoned block's
    neighbours are empty; the player, any listed enemy (even at hp 0), transmissions and
    blocks (siphoned or not) are not."""
    state = make_state(player=(2, 2), blocks=[(0, 1), (4, 4)], enemies=[(3, 3, 0), (1, 5)],
                       transmissions=[(5, 0)], contents={(0, 5): EXIT, (0, 0): DATA_SIPHON},
                       siphoned=[(0, 1), (2, 3)])
    empty, _ = masks_of(state)
    assert cells_of(empty) == set(ALL_CELLS) - {(2, 2), (0, 1), (4, 4), (3, 3), (1, 5), (5, 0)}


def test_line_of_fire_hand_made():
    """§3.6: the first block or enemy in each direction is itself in line of fire and hides
    what lies behind it; a transmission does not stop the line; off-axis cells are out."""
    state = make_state(player=(2, 2), blocks=[(2, 4)], enemies=[(4, 2)], transmissions=[(2, 0)],
                       siphoned=[(2, 4)])
    _, lof = masks_of(state)
    assert cells_of(lof) == {(2, 3), (2, 4), (2, 1), (2, 0), (3, 2), (4, 2), (1, 2), (0, 2)}


def test_line_of_fire_adjacent_block_hides_the_rest_of_the_edge():
    """§3.6 / §14 item 22: a corner player behind an adjacent block sees only that block."""
    state = make_state(player=(0, 0), blocks=[(0, 1)])
    _, lof = masks_of(state)
    assert cells_of(lof) == {(0, 1)} | {(r, 0) for r in range(1, 6)}


def test_masks_match_reference_on_random_boards():
    """§3.6 both predicates on 300 random boards against the pure-Python references."""
    rng = np.random.default_rng(11)
    states, expected = [], []
    for _ in range(300):
        player = ALL_CELLS[rng.integers(36)]
        blocks = {cell for cell in ALL_CELLS if cell != player and rng.random() < 0.2}
        enemy_cells = [ALL_CELLS[i] for i in rng.integers(36, size=rng.integers(0, CAPACITY + 1))]
        transmission_cells = [ALL_CELLS[i]
                              for i in rng.integers(36, size=rng.integers(0, CAPACITY + 1))]
        states.append(make_state(player, blocks, enemy_cells, transmission_cells))
        expected.append((reference_spawn_empty(player, blocks, set(enemy_cells),
                                               set(transmission_cells)),
                         reference_line_of_fire(player, blocks, set(enemy_cells))))
    batch = jax.tree.map(lambda *xs: np.stack(xs), *states)
    empty, lof = jax.device_get(_masks(batch))
    for i, (want_empty, want_lof) in enumerate(expected):
        assert cells_of(empty[i]) == want_empty, i
        assert cells_of(lof[i]) == want_lof, i


# --- spawning ------------------------------------------------------------------------------

ROOMY = dict(player=(0, 0), blocks=[(2, 2), (3, 4), (0, 3)], enemies=[(4, 1)],
             transmissions=[(1, 3)])


@pytest.fixture(scope="module")
def roomy_spawns():
    state = make_state(**ROOMY)
    return state, spawn(state, key_seed=1, count=6, scheduled=True, siphon=False)


def test_spawn_places_count_on_distinct_out_of_line_cells(roomy_spawns):
    """§3.6 / §14 item 22: with room, every one of `count` transmissions is placed, on distinct
    spawn-empty cells out of the line of fire, appended in list order (R3)."""
    state, out = roomy_spawns
    empty, lof = masks_of(state)
    allowed = cells_of(empty & ~lof)
    for lane, cells in enumerate(new_transmissions(state, out)):
        assert len(cells) == 6 and len(set(cells)) == 6, lane
        assert set(cells) <= allowed, lane
    t = out.transmissions
    old = np.asarray(state.transmissions.active)
    assert np.all(t.active.sum(axis=1) == old.sum() + 6)
    new = t.active & ~old
    assert np.all(np.sort(np.where(new, t.seq, 99), axis=1)[:, :6] == np.arange(2, 8))
    assert np.all(out.next_seq == 8) and np.all(out.overflow == 0)


def test_spawned_transmissions_have_timer_one_and_given_flags(roomy_spawns):
    """§2.6 / §3.6: timer 1, provenance flags as passed; the existing transmission is untouched."""
    state, out = roomy_spawns
    t = out.transmissions
    new = t.active & ~np.asarray(state.transmissions.active)
    assert np.all(t.turns[new] == 1)
    assert np.all(t.from_scheduled[new]) and not np.any(t.from_siphon[new])
    assert np.all(t.row[:, 0] == 1) and np.all(t.col[:, 0] == 3) and np.all(t.turns[:, 0] == 2)


def test_spawned_types_uniform(roomy_spawns):
    """§2.6: the enemy type is uniform over virus, daemon, glitch, cryptog."""
    state, out = roomy_spawns
    new = out.transmissions.active & ~np.asarray(state.transmissions.active)
    kinds = out.transmissions.kind[new]
    for kind in range(N_ENEMY_TYPES):
        assert_frequency(np.sum(kinds == kind), kinds.size, 1 / N_ENEMY_TYPES, f"type {kind}")


def test_pass1_uniform_over_out_of_line_cells():
    """§3.6: given success, pass 1 is uniform over spawn-empty cells out of line of fire; from
    corner (0,0) on an empty board those are the 25 cells off row 0 and column 0."""
    state = make_state(player=(0, 0))
    placed = [cells[0] for cells in new_transmissions(state, spawn(state, key_seed=2, count=1))]
    assert len(placed) == N_KEYS
    counts = {cell: 0 for cell in ALL_CELLS}
    for cell in placed:
        counts[cell] += 1
    for (r, c), n in counts.items():
        if r == 0 or c == 0:
            assert n == 0, (r, c)
        else:
            assert_frequency(n, N_KEYS, 1 / 25, f"cell {(r, c)}")


def test_pass2_used_when_every_empty_cell_is_in_line():
    """§3.6 pass 2: when no out-of-line cell exists, spawns land uniformly on spawn-empty cells
    (here the 10 cells of row 0 and column 0, all in line of fire)."""
    blocks = [(r, c) for r in range(1, 6) for c in range(1, 6)]
    state = make_state(player=(0, 0), blocks=blocks)
    in_line = {(0, c) for c in range(1, 6)} | {(r, 0) for r in range(1, 6)}
    counts = {cell: 0 for cell in in_line}
    for cells in new_transmissions(state, spawn(state, key_seed=3, count=3)):
        assert len(cells) == 3 and len(set(cells)) == 3 and set(cells) <= in_line
        for cell in cells:
            counts[cell] += 1
    for cell, n in counts.items():
        assert_frequency(n, N_KEYS, 3 / 10, f"cell {cell}")


def test_no_spawn_empty_cell_drops_every_transmission():
    """§3.6 / §14 item 21: with no spawn-empty cell both passes fail and the transmission is
    silently dropped: no slot, no list-order key, no overflow."""
    blocks = [cell for cell in ALL_CELLS if cell != (0, 0)]
    state = make_state(player=(0, 0), blocks=blocks, enemies=[(5, 5)])
    out = spawn(state, key_seed=4, count=4)
    assert not np.any(out.transmissions.active)
    assert np.all(out.next_seq == 1) and np.all(out.overflow == 0)


def test_count_zero_changes_nothing():
    """§3.6 with count 0: the state is returned unchanged."""
    state = make_state(**ROOMY)
    out = spawn(state, key_seed=5, count=0)
    for before, after in zip(jax.tree.leaves(state), jax.tree.leaves(out)):
        assert np.all(np.asarray(after) == np.asarray(before)[None])


def test_single_valid_cell_is_missed_about_six_percent_of_the_time():
    """§3.6 / decisions R2: with one valid cell (in line of fire, so only pass 2 can find it) a
    pass of 100 tries misses with probability (35/36)^100 ~ 6.0%."""
    blocks = [cell for cell in ALL_CELLS if cell not in ((0, 0), (0, 1))]
    state = make_state(player=(0, 0), blocks=blocks)
    dropped = trials = 0
    for seed in range(5):
        lanes = new_transmissions(state, spawn(state, key_seed=100 + seed, count=1))
        assert all(cells in ([], [(0, 1)]) for cells in lanes)
        dropped += sum(not cells for cells in lanes)
        trials += len(lanes)
    assert_frequency(dropped, trials, (35 / 36) ** 100, "drop rate")


def test_pass1_failure_falls_back_to_pass2():
    """§3.6: one out-of-line cell A=(1,1) and one in-line cell B=(0,1). B is taken only when
    pass 1 misses A ((35/36)^100) and pass 2 then picks B among the two (half of
    1-(34/36)^100); both are missed with probability (35/36)^100 (34/36)^100."""
    blocks = [cell for cell in ALL_CELLS if cell not in ((0, 0), (0, 1), (1, 1))]
    state = make_state(player=(0, 0), blocks=blocks)
    miss1, miss2 = (35 / 36) ** 100, (34 / 36) ** 100
    on_b = dropped = trials = 0
    for seed in range(5):
        lanes = new_transmissions(state, spawn(state, key_seed=200 + seed, count=1))
        on_b += sum(cells == [(0, 1)] for cells in lanes)
        dropped += sum(not cells for cells in lanes)
        trials += len(lanes)
    assert_frequency(on_b, trials, miss1 * (1 - miss2) / 2, "in-line cell")
    assert dropped <= 20  # expected 0.0002 * 20000 = 4


def test_spawns_of_one_call_never_share_a_cell():
    """§3.6: transmissions placed earlier in the same call count as occupied, so three free
    cells take at most three of five transmissions, never two on one cell."""
    free = [(2, 2), (3, 3), (4, 4)]
    blocks = [cell for cell in ALL_CELLS if cell != (0, 0) and cell not in free]
    state = make_state(player=(0, 0), blocks=blocks)
    lanes = new_transmissions(state, spawn(state, key_seed=6, count=5))
    assert all(len(cells) == len(set(cells)) <= 3 and set(cells) <= set(free) for cells in lanes)
    assert sum(len(cells) == 3 for cells in lanes) > 0.9 * N_KEYS


def test_full_slot_array_counts_overflow():
    """Decisions R3: an append with no free slot is dropped and counted in `overflow`."""
    existing = [(5, c) for c in range(6)]
    state = make_state(player=(0, 0), transmissions=existing)
    out = spawn(state, key_seed=7, count=4, scheduled=False, siphon=True)
    t = out.transmissions
    assert np.all(t.active.sum(axis=1) == CAPACITY)
    assert np.all(out.overflow == 2) and np.all(out.next_seq == 8)
    assert np.all(t.from_siphon[:, 6:]) and not np.any(t.from_scheduled[:, 6:])
