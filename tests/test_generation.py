"""New game and stage generation (game-rules §1.3-§1.5, §3.1-§3.5, §13.1-§13.2, §14 items
18-22; errata E4; decisions R2).

Statistical checks use fixed keys and a tolerance of 5 standard errors, so a correct
implementation fails with probability below 1e-6 per check. Expected values come from the spec;
the block-layout distribution is compared with a pure-Python transcription of Swift's
draw-by-draw rejection loop.
"""

import math
from collections import deque

import jax
import numpy as np
import pytest

from envs.hackmatrix.core import bitboard as bb
from envs.hackmatrix.core.constants import BLOCK, DATA_SIPHON, EMPTY, EXIT, N_PROGRAMS
from envs.hackmatrix.core.generation import initialize_stage, is_valid_layout, new_game
from envs.hackmatrix.core.spawn import line_of_fire_mask

N_GAMES = 4000
CORNERS = (0, 5, 30, 35)  # (0,0), (0,5), (5,0), (5,5) in canonical order (game-rules §1.1)
DIRECTIONS = ((1, 0), (-1, 0), (0, -1), (0, 1))  # U, D, L, R (game-rules §0)
# game-rules §1.3, by program name in pool order.
SPAWN_COST_BY_NAME = {
    "push": 4, "pull": 4, "crash": 6, "warp": 5, "poly": 3, "wait": 1, "debug": 4, "row": 2,
    "col": 2, "undo": 3, "step": 4, "siph+": 7, "exch": 3, "show": 2, "reset": 2, "calm": 6,
    "d_bom": 4, "delay": 4, "anti-v": 4, "score": 5, "reduc": 3, "atk+": 8, "hack": 4,
}
SPAWN_COST = np.array(list(SPAWN_COST_BY_NAME.values()))

_new_games = jax.jit(jax.vmap(new_game))
_initialize = jax.jit(jax.vmap(initialize_stage, in_axes=(None, 0, None)))
_validate = jax.jit(jax.vmap(
    lambda cells, exit_cell: is_valid_layout(bb.from_bool(cells), exit_cell)))
_line_of_fire = jax.jit(jax.vmap(line_of_fire_mask))


def assert_frequency(successes, n, p, what):
    tolerance = 5 * math.sqrt(p * (1 - p) / n)
    assert abs(successes / n - p) <= tolerance, (
        f"{what}: {successes / n:.4f} vs {p:.4f} ± {tolerance:.4f}")


def keys(seed, n=N_GAMES):
    return jax.random.split(jax.random.PRNGKey(seed), n)


def neighbours(cell):
    row, col = divmod(cell, 6)
    for dr, dc in DIRECTIONS:
        if 0 <= row + dr < 6 and 0 <= col + dc < 6:
            yield (row + dr) * 6 + col + dc


def reference_is_valid(blocks, exit_cell):
    """GridValidator.isValidPlacement as §3.4.1 describes it: BFS from the first walkable cell
    in row-major order, neighbours in U, D, L, R order, the exit marked reached on discovery but
    never enqueued; then every block needs a non-block orthogonal neighbour."""
    walkable = [cell for cell in range(36) if cell not in blocks]
    start = walkable[0]
    reached, queue = {start}, deque([start])
    while queue:
        for n in neighbours(queue.popleft()):
            if n in blocks or n in reached:
                continue
            reached.add(n)
            if n != exit_cell:
                queue.append(n)
    connected = len(reached) == len(walkable)
    siphonable = all(any(n not in blocks for n in neighbours(b)) for b in blocks)
    return connected and siphonable


def reference_stage_one_blocks(rng):
    """Swift's stage-1 block placement draw by draw (§3.1, §3.3, §3.4): player corner, exit
    among the other corners, count U{5..11}, then up to 100 attempts that draw row and col
    until `count` distinct non-corner cells are blocks; the first valid attempt wins."""
    player = CORNERS[rng.integers(4)]
    exit_cell = [c for c in CORNERS if c != player][rng.integers(3)]
    count = rng.integers(5, 12)
    for _ in range(100):
        blocks = set()
        while len(blocks) < count:
            cell = rng.integers(6) * 6 + rng.integers(6)
            if cell not in CORNERS:
                blocks.add(int(cell))
        if reference_is_valid(blocks, exit_cell):
            return blocks
    return set()


@pytest.fixture(scope="module")
def games():
    return jax.device_get(_new_games(keys(0)))


@pytest.fixture(scope="module")
def games_lof(games):
    return np.asarray(_line_of_fire(games))


def player_cells(state):
    return state.player.row * 6 + state.player.col


# --- validator -------------------------------------------------------------------------------

def validate(layouts):
    """layouts: list of (block cell set, exit cell) -> bool array from is_valid_layout. The batch
    is padded to N_GAMES so that every call reuses one compilation."""
    cells = np.zeros((N_GAMES, 36), bool)
    exits = np.full(N_GAMES, 35, np.int32)
    for i, (blocks, exit_cell) in enumerate(layouts):
        cells[i, list(blocks)] = True
        exits[i] = exit_cell
    return np.asarray(_validate(cells, exits))[:len(layouts)]


def cell(row, col):
    return row * 6 + col


def test_validator_rejects_pocket_reachable_only_through_the_exit():
    """§3.4.1: the exit is reached but not expanded, so (4,5), reachable only through the exit
    (5,5), is unreached: rejected. With the exit elsewhere (5,5) is a plain walkable cell."""
    blocks = {cell(3, 5), cell(4, 4)}
    assert validate([(blocks, cell(5, 5)), (blocks, cell(0, 5))]).tolist() == [False, True]
    assert reference_is_valid(blocks, cell(5, 5)) is False


def test_validator_accepts_pocket_behind_exit_at_bfs_start():
    """§3.4.1 asymmetry: an exit at (0,0) is the BFS start and is expanded, so the mirrored
    pocket (1,0), reachable only through (0,0), is accepted."""
    blocks = {cell(2, 0), cell(1, 1)}
    assert validate([(blocks, cell(0, 0))]).tolist() == [True]


def test_validator_accepts_block_whose_only_free_neighbour_is_the_exit():
    """§3.4.1 areAllBlocksSiphonable: the exit counts as a non-block neighbour."""
    blocks = {cell(5, 4), cell(4, 4), cell(5, 3)}
    assert validate([(blocks, cell(5, 5))]).tolist() == [True]


def test_validator_rejects_enclosed_block_and_disconnected_region():
    """§3.4.1: a block surrounded by blocks is not siphonable; a wall that cuts the board in two
    leaves walkable cells unreached."""
    plus = {cell(2, 2), cell(1, 2), cell(3, 2), cell(2, 1), cell(2, 3)}
    wall = {cell(r, 3) for r in range(6)}
    assert validate([(plus, cell(5, 5)), (wall, cell(5, 5))]).tolist() == [False, False]


def test_validator_agrees_with_reference_on_random_layouts():
    """§3.4.1: is_valid_layout equals the pure-Python BFS validator on 3000 random layouts
    (any exit cell, 0-16 blocks anywhere else, corners included)."""
    rng = np.random.default_rng(5)
    layouts = []
    for _ in range(3000):
        exit_cell = int(CORNERS[rng.integers(4)] if rng.random() < 0.7 else rng.integers(36))
        others = [c for c in range(36) if c != exit_cell]
        blocks = set(rng.choice(others, size=rng.integers(0, 17), replace=False).tolist())
        layouts.append((blocks, exit_cell))
    got = validate(layouts)
    want = np.array([reference_is_valid(b, e) for b, e in layouts])
    assert 0.2 < want.mean() < 0.8  # both outcomes well represented
    assert np.array_equal(got, want)


# --- new game --------------------------------------------------------------------------------

def test_new_game_fresh_fields(games):
    """§2.1 / §2.2 / §3.1: stage 1, interval 12, full HP, attack 1, nothing owned or pending."""
    g = games
    assert np.all(g.stage == 1) and np.all(g.turn == 0)
    assert np.all(g.sched_interval == 12) and np.all(g.next_sched_turn == 12)
    assert np.all(g.player.hp == 3) and np.all(g.player.attack == 1) and np.all(g.player.score == 0)
    assert np.all(g.program_rank == -1) and np.all(g.pending_siphon == 0)
    assert not np.any(g.enemies.active) and np.all(g.overflow == 0)
    assert not (np.any(g.show) or np.any(g.calm) or np.any(g.step_active)
                or np.any(g.board_from_undo))
    assert np.all(g.atk_uses == 0) and np.all(g.history.size == 0)


def test_player_starts_on_a_uniform_corner(games):
    """§3.1 step 2: pick(corners)."""
    cells = player_cells(games)
    assert np.all(np.isin(cells, CORNERS))
    for corner in CORNERS:
        assert_frequency(np.sum(cells == corner), N_GAMES, 1 / 4, f"corner {corner}")


def test_starting_bonus_is_exactly_one_of_three(games):
    """§1.5: credits 10, energy 11 or one data siphon, uniform, nothing else."""
    p = games.player
    credits, energy, siphon = p.credits == 10, p.energy == 11, p.data_siphons == 1
    assert np.all(credits.astype(int) + energy + siphon == 1)
    assert np.all((p.credits == 0) | credits) and np.all((p.energy == 0) | energy)
    assert np.all((p.data_siphons == 0) | siphon)
    for name, hit in (("credits", credits), ("energy", energy), ("siphon", siphon)):
        assert_frequency(np.sum(hit), N_GAMES, 1 / 3, name)


def test_exit_is_uniform_over_the_other_corners(games):
    """§3.2 / §3.3 step 3: the exit is one of the three other corners, uniform in canonical
    order, and exit_row/exit_col name the EXIT cell."""
    g = games
    exit_cells = g.exit_row * 6 + g.exit_col
    player = player_cells(g)
    assert np.all(g.grid.content[np.arange(N_GAMES), exit_cells] == EXIT)
    assert np.all(np.sum(g.grid.content == EXIT, axis=1) == 1)
    rank = np.array([[c for c in CORNERS if c != p].index(e) for p, e in zip(player, exit_cells)])
    for r in range(3):
        assert_frequency(np.sum(rank == r), N_GAMES, 1 / 3, f"exit rank {r}")


def test_data_siphons_on_the_two_remaining_corners(games):
    """§3.2 / §3.3 step 4: the two corners that are neither the player's nor the exit hold data
    siphons; the player's corner is empty; no other cell holds a siphon."""
    content, player = games.grid.content, player_cells(games)
    lanes = np.arange(N_GAMES)
    assert np.all(content[lanes, player] == EMPTY)
    siphon_corners = np.sum(content[:, list(CORNERS)] == DATA_SIPHON, axis=1)
    assert np.all(siphon_corners == 2) and np.all(np.sum(content == DATA_SIPHON, axis=1) == 2)


def test_block_count_uniform_5_to_11(games):
    """§3.4 step 1: count U{5..11}. A zero-block stage (all 100 attempts failed) has
    probability ~1.6e-5 per stage (errata E4)."""
    counts = np.sum(games.grid.content == BLOCK, axis=1)
    assert np.all((counts == 0) | ((counts >= 5) & (counts <= 11)))
    assert np.sum(counts == 0) <= 2
    for n in range(5, 12):
        assert_frequency(np.sum(counts == n), N_GAMES, 1 / 7, f"{n} blocks")


def test_blocks_never_on_corners_and_every_layout_is_valid(games):
    """§3.4: blocks avoid corners; the winning layout passes the validator (JAX and reference)."""
    g = games
    is_block = g.grid.content == BLOCK
    assert not np.any(is_block[:, list(CORNERS)])
    exit_cells = (g.exit_row * 6 + g.exit_col).astype(np.int32)
    assert np.all(np.asarray(_validate(is_block, exit_cells)))
    for lane in range(N_GAMES):
        assert reference_is_valid(set(np.flatnonzero(is_block[lane]).tolist()),
                                  exit_cells[lane]), lane


def test_layout_distribution_matches_swift_rejection_loop(games):
    """§3.4 / decisions R2: whole layouts are resampled until valid (not built constructively).
    Per-cell block frequencies match a draw-by-draw transcription of Swift's loop."""
    rng = np.random.default_rng(3)
    n_reference = 6000
    reference = np.zeros(36)
    for _ in range(n_reference):
        for c in reference_stage_one_blocks(rng):
            reference[c] += 1
    ours = np.sum(games.grid.content == BLOCK, axis=0)
    for c in range(36):
        p1, p2 = ours[c] / N_GAMES, reference[c] / n_reference
        pooled = (ours[c] + reference[c]) / (N_GAMES + n_reference)
        tolerance = 5 * math.sqrt(max(pooled * (1 - pooled), 1e-12)
                                  * (1 / N_GAMES + 1 / n_reference))
        assert abs(p1 - p2) <= tolerance, (c, p1, p2, tolerance)


def test_block_kind_shares(games):
    """§3.4: per block, visible data 45%, visible program 45%, question-data 5%,
    question-program 5%."""
    g = games.grid
    is_block = g.content == BLOCK
    data = is_block & (g.program < 0)
    program = is_block & (g.program >= 0)
    n = int(is_block.sum())
    for name, mask, p in (("data", data & ~g.question, 0.45),
                          ("program", program & ~g.question, 0.45),
                          ("question data", data & g.question, 0.05),
                          ("question program", program & g.question, 0.05)):
        assert_frequency(np.sum(mask), n, p, name)


def test_block_payloads(games):
    """§1.3 / §3.4: data blocks carry points U{1..9} and spawn = points; program blocks carry a
    program and spawn = its cost; non-block cells carry no payload."""
    g = games.grid
    is_block = g.content == BLOCK
    data = is_block & (g.program < 0)
    program = is_block & (g.program >= 0)
    assert np.all(g.spawn[data] == g.points[data])
    assert np.all(g.points[program] == 0) and np.all(g.program[program] < N_PROGRAMS)
    assert np.all(g.spawn[program] == SPAWN_COST[g.program[program]])
    assert np.all(g.points[~is_block] == 0) and np.all(g.program[~is_block] == -1)
    assert np.all(g.spawn[~is_block] == 0) and not np.any(g.question[~is_block])
    assert not np.any(g.siphoned) and not np.any(g.siphon_center)
    points = g.points[data]
    for value in range(1, 10):
        assert_frequency(np.sum(points == value), points.size, 1 / 9, f"points {value}")


def test_programs_distinct_within_a_stage_and_uniform(games):
    """§3.4: programs are drawn without replacement within a stage, uniformly from the pool."""
    g = games.grid
    for lane in range(N_GAMES):
        programs = g.program[lane][g.program[lane] >= 0]
        assert len(set(programs.tolist())) == len(programs), lane
    programs = g.program[g.program >= 0]
    for p in range(N_PROGRAMS):
        assert_frequency(np.sum(programs == p), programs.size, 1 / N_PROGRAMS, f"program {p}")


def test_resources_on_empty_and_siphon_cells_only(games):
    """§3.5: every EMPTY or DATA_SIPHON cell (the player's corner included) holds 1-3 credits or
    energy, never both; blocks and the exit hold none."""
    g = games.grid
    gets = (g.content == EMPTY) | (g.content == DATA_SIPHON)
    has_credits, has_energy = g.credits > 0, g.energy > 0
    assert np.all((has_credits ^ has_energy) == gets)
    amount = g.credits + g.energy
    assert np.all((amount[gets] >= 1) & (amount[gets] <= 3))
    player = player_cells(games)
    assert np.all(amount[np.arange(N_GAMES), player] > 0)


def test_resource_amount_and_kind_distribution(games):
    """§1.4: amount 1 / 2 / 3 with 45% / 45% / 10%; credits vs energy a fair coin."""
    g = games.grid
    gets = (g.content == EMPTY) | (g.content == DATA_SIPHON)
    amount = (g.credits + g.energy)[gets]
    for value, p in ((1, 0.45), (2, 0.45), (3, 0.10)):
        assert_frequency(np.sum(amount == value), amount.size, p, f"amount {value}")
    assert_frequency(np.sum(g.credits[gets] > 0), amount.size, 0.5, "credits")


def test_stage_one_transmission(games, games_lof):
    """§3.3 step 8 / §3.6 / §14 item 22: one transmission (count = stage), timer 1, no flags,
    on a spawn-empty cell out of the player's line of fire (such cells always exist at stage 1),
    type uniform."""
    t, g = games.transmissions, games.grid
    assert np.all(t.active.sum(axis=1) == 1) and np.all(t.active[:, 0])
    assert np.all(t.turns[:, 0] == 1) and np.all(t.seq[:, 0] == 0) and np.all(games.next_seq == 1)
    assert not np.any(t.from_scheduled) and not np.any(t.from_siphon)
    cells = t.row[:, 0] * 6 + t.col[:, 0]
    lanes = np.arange(N_GAMES)
    assert np.all(g.content[lanes, cells] != BLOCK) and np.all(cells != player_cells(games))
    assert not np.any(games_lof[lanes, cells])
    for kind in range(4):
        assert_frequency(np.sum(t.kind[:, 0] == kind), N_GAMES, 1 / 4, f"type {kind}")


# --- later stages ------------------------------------------------------------------------------

def with_entities(base, enemy_cells, transmission_cells):
    """``base`` with enemies (virus, hp 2) and transmissions (timer 2) on the given cells, in
    list order enemies first."""
    e_cap, t_cap = base.enemies.active.shape[0], base.transmissions.active.shape[0]

    def slots(cells, capacity):
        active = np.zeros(capacity, bool)
        rows, cols = np.zeros(capacity, np.int32), np.zeros(capacity, np.int32)
        for i, c in enumerate(cells):
            active[i], rows[i], cols[i] = True, c // 6, c % 6
        return active, rows, cols

    e_active, e_rows, e_cols = slots(enemy_cells, e_cap)
    t_active, t_rows, t_cols = slots(transmission_cells, t_cap)
    n_e = len(enemy_cells)
    enemies = base.enemies.replace(active=e_active, row=e_rows, col=e_cols,
                                   hp=np.full(e_cap, 2, np.int32),
                                   seq=np.arange(e_cap, dtype=np.int32))
    transmissions = base.transmissions.replace(
        active=t_active, row=t_rows, col=t_cols, turns=np.full(t_cap, 2, np.int32),
        seq=np.arange(t_cap, dtype=np.int32) + n_e)
    return base.replace(enemies=enemies, transmissions=transmissions,
                        next_seq=np.int32(n_e + len(transmission_cells)))


@pytest.fixture(scope="module")
def mid_game(games):
    """A stage-3 state: player on the old exit corner, stale per-stage flags set, siphon marks
    on the old grid, enemies and transmissions (one on a corner) left from earlier stages."""
    base = jax.tree.map(lambda x: np.asarray(x)[0], games)
    exit_cell = int(base.exit_row * 6 + base.exit_col)
    base = base.replace(
        player=base.player.replace(row=np.int32(exit_cell // 6), col=np.int32(exit_cell % 6)),
        stage=np.int32(3), sched_interval=np.int32(10), turn=np.int32(9),
        next_sched_turn=np.int32(30), show=np.bool_(True), calm=np.bool_(True),
        step_active=np.bool_(True), atk_uses=np.int32(2),
        board_from_undo=np.bool_(True), pending_siphon=np.int32(4),
        grid=base.grid.replace(siphoned=np.ones(36, bool), siphon_center=np.ones(36, bool)))
    free_corner = [c for c in CORNERS if c != exit_cell][0]
    return with_entities(base, enemy_cells=[cell(2, 2), cell(3, 1), cell(1, 4), free_corner],
                         transmission_cells=[cell(4, 3), cell(2, 4)])


@pytest.fixture(scope="module")
def mid_game_next(mid_game):
    return jax.device_get(_initialize(mid_game, keys(1), True))


def test_initialize_stage_resets_per_stage_fields(mid_game, mid_game_next):
    """§3.3 step 1: turn 0, next scheduled turn = interval, SHOW/CALM/STEP off, ATK+ uses 0;
    stage, interval, pending siphon spawns and the player are kept; step 2: fresh grid."""
    s = mid_game_next
    assert (np.all(s.turn == 0) and np.all(s.next_sched_turn == 10)
            and np.all(s.sched_interval == 10))
    assert not (np.any(s.show) or np.any(s.calm) or np.any(s.step_active)
                or np.any(s.board_from_undo))
    assert np.all(s.atk_uses == 0) and np.all(s.stage == 3) and np.all(s.pending_siphon == 4)
    assert not np.any(s.grid.siphoned) and not np.any(s.grid.siphon_center)
    for before, after in zip(jax.tree.leaves(mid_game.player), jax.tree.leaves(s.player)):
        assert np.all(after == before)


def test_initialize_stage_keeps_entities_and_avoids_them_with_blocks(mid_game, mid_game_next):
    """§3.3 step 1 / §3.4: enemies and transmissions are kept as they are; blocks are never
    placed on a cell holding an enemy or a transmission (nor on corners)."""
    s = mid_game_next
    for before, after in zip(jax.tree.leaves(mid_game.enemies), jax.tree.leaves(s.enemies)):
        assert np.all(after == before)
    for name in ("row", "col", "turns", "seq"):
        assert np.all(getattr(s.transmissions, name)[:, :2]
                      == getattr(mid_game.transmissions, name)[:2])
    occupied = [cell(2, 2), cell(3, 1), cell(1, 4), cell(4, 3), cell(2, 4)]
    assert not np.any(s.grid.content[:, occupied] == BLOCK)
    assert not np.any(s.grid.content[:, list(CORNERS)] == BLOCK)
    exit_cells = (s.exit_row * 6 + s.exit_col).astype(np.int32)
    assert np.all(np.asarray(_validate(s.grid.content == BLOCK, exit_cells)))


def test_initialize_stage_exit_and_transmissions(mid_game, mid_game_next):
    """§3.3 steps 3 and 8, §3.6: the exit is uniform over the corners other than the player's;
    `stage` (= 3) new transmissions are appended on distinct free cells out of line of fire."""
    s = mid_game_next
    player = int(mid_game.player.row * 6 + mid_game.player.col)
    exit_cells = s.exit_row * 6 + s.exit_col
    for corner in CORNERS:
        if corner == player:
            assert np.all(exit_cells != corner)
        else:
            assert_frequency(np.sum(exit_cells == corner), N_GAMES, 1 / 3, f"exit {corner}")
    t = s.transmissions
    assert np.all(t.active.sum(axis=1) == 5) and np.all(s.next_seq == 9)
    new_cells = t.row[:, 2:5] * 6 + t.col[:, 2:5]
    assert np.all(t.active[:, 2:5]) and np.all(t.turns[:, 2:5] == 1)
    assert np.all(t.seq[:, 2:5] == np.arange(6, 9))
    lof = np.asarray(_line_of_fire(s))
    occupied = {cell(2, 2), cell(3, 1), cell(1, 4), cell(4, 3), cell(2, 4), player}
    for lane in range(N_GAMES):
        cells = new_cells[lane].tolist()
        assert len(set(cells)) == 3 and not set(cells) & occupied, lane
        assert (not np.any(s.grid.content[lane, cells] == BLOCK)
                and not np.any(lof[lane, cells])), lane


def test_initialize_stage_disabled_lanes_unchanged(mid_game):
    """The `enabled` gate: a disabled lane returns the state exactly as given."""
    out = jax.device_get(_initialize(mid_game, keys(2), False))
    for before, after in zip(jax.tree.leaves(mid_game), jax.tree.leaves(out)):
        assert np.all(np.asarray(after) == np.asarray(before)[None])


def crowded(games, free_cells):
    """Stage-2 state whose interior is full of enemies except ``free_cells``."""
    base = jax.tree.map(lambda x: np.asarray(x)[0], games).replace(stage=np.int32(2))
    interior = [c for c in range(36) if c not in CORNERS and c not in free_cells]
    return with_entities(base, enemy_cells=interior, transmission_cells=[])


def test_no_valid_layout_or_too_few_cells_gives_no_blocks(games):
    """§3.4 step 3 / §14 items 19-20 / decisions R2: the only 5 free interior cells form an
    invalid layout ((0,1) and (1,0) wall off corner (0,0)): a count of 5 fails all 100 attempts
    and any larger count cannot be placed (Swift would hang): no blocks ever, and every
    non-exit cell gets resources (§3.5)."""
    state = crowded(games, free_cells=[cell(0, 1), cell(1, 0), cell(2, 2), cell(3, 3), cell(4, 4)])
    out = jax.device_get(_initialize(state, keys(3), True))
    assert not np.any(out.grid.content == BLOCK)
    has_resources = (out.grid.credits + out.grid.energy) > 0
    assert np.all(has_resources == (out.grid.content != EXIT))


def test_five_free_cells_valid_layout_used_when_count_is_five(games):
    """§3.4 with exactly 5 free interior cells forming a valid layout: blocks appear exactly when
    the count draw is 5 (probability 1/7), and then on those 5 cells."""
    free = [cell(2, 2), cell(2, 3), cell(3, 2), cell(3, 3), cell(1, 4)]
    out = jax.device_get(_initialize(crowded(games, free_cells=free), keys(4), True))
    is_block = out.grid.content == BLOCK
    with_blocks = np.any(is_block, axis=1)
    assert np.all(is_block[with_blocks][:, free])
    assert np.all(is_block[with_blocks].sum(axis=1) == 5)
    assert_frequency(np.sum(with_blocks), N_GAMES, 1 / 7, "lanes with blocks")
