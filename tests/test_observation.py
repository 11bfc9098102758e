"""Numeric observation (programs-rewards-observation §9, errata O6/O9, decisions R6).

States are built by hand from ``blank_state()``; expected values come from the §9.2 table.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix.core import constants as C
from envs.hackmatrix.core.mask import action_mask
from envs.hackmatrix.observation import (FLAT_SIZE, GRID_SCALES, build_observation, compact,
                                       expand, flatten)
from envs.hackmatrix.core.state import blank_state

OBSERVE = jax.jit(build_observation)
FLATTEN = jax.jit(flatten)
MASK = jax.jit(action_mask)


def put(obj, **fields):
    """``obj.replace`` keeping each field's dtype (so the jitted function is not retraced)."""
    return obj.replace(**{k: jnp.asarray(v, getattr(obj, k).dtype) for k, v in fields.items()})


def with_player(state, **fields):
    return state.replace(player=put(state.player, **fields))


def with_cells(state, field, values):
    """Set grid.<field> at {(row, col): value}."""
    array = np.array(getattr(state.grid, field))
    for (row, col), value in values.items():
        array[row * 6 + col] = value
    return state.replace(grid=put(state.grid, **{field: array}))


def with_enemies(state, enemies):
    """Fill slots 0.. with dicts (kind, row, col, hp and optional seq, stunned, from_siphon)."""
    e = state.enemies
    arrays = {name: np.array(getattr(e, name)) for name in
              ("active", "seq", "kind", "row", "col", "hp", "stunned", "from_siphon")}
    for slot, spec in enumerate(enemies):
        arrays["active"][slot] = True
        arrays["seq"][slot] = spec.get("seq", slot)
        arrays["stunned"][slot] = spec.get("stunned", False)
        arrays["from_siphon"][slot] = spec.get("from_siphon", False)
        for name in ("kind", "row", "col"):
            arrays[name][slot] = spec[name]
        arrays["hp"][slot] = spec.get("hp", C.ENEMY_MAX_HP[spec["kind"]])
    return state.replace(enemies=put(e, **arrays))


def with_transmissions(state, transmissions):
    """Fill slots 0.. with (row, col, turns, seq)."""
    t = state.transmissions
    arrays = {name: np.array(getattr(t, name)) for name in ("active", "seq", "row", "col", "turns")}
    for slot, (row, col, turns, seq) in enumerate(transmissions):
        arrays["active"][slot] = True
        arrays["row"][slot], arrays["col"][slot] = row, col
        arrays["turns"][slot], arrays["seq"][slot] = turns, seq
    return state.replace(transmissions=put(t, **arrays))


def enemy_channels(state, row, col):
    return np.asarray(OBSERVE(state).grid[row, col, 0:7])


def block(state, row, col, *, points=0, program=-1, spawn=0, question=False, siphoned=False):
    state = with_cells(state, "content", {(row, col): C.BLOCK})
    state = with_cells(state, "points", {(row, col): points})
    state = with_cells(state, "program", {(row, col): program})
    state = with_cells(state, "spawn", {(row, col): spawn})
    state = with_cells(state, "question", {(row, col): question})
    return with_cells(state, "siphoned", {(row, col): siphoned})


@pytest.fixture(scope="module")
def base():
    """Player at (0,0) on an empty board, no SHOW."""
    return blank_state()


# ---------------------------------------------------------------------------------------------
# player and programs


def test_player_features_follow_9_2_table_and_may_leave_unit_range(base):
    """§9.2 player vector; player[6] (siphons/10) and player[7] ((attack-1)/2) are not capped
    (errata O6), credits and energy are capped at 1."""
    state = with_player(base, row=2, col=3, hp=2, credits=25, energy=100, data_siphons=12,
                        attack=5)
    state = put(state, stage=3, show=True, calm=True)
    player = np.asarray(OBSERVE(state).player)
    np.testing.assert_allclose(
        player, [2 / 5, 3 / 5, 2 / 3, 0.5, 1.0, 2 / 7, 1.2, 2.0, 1.0, 1.0], atol=1e-6)
    # The env's declared space says so too: these two are unbounded above, the rest in [0, 1]
    # (until stop 81 the space claimed [0, 1] for all, which this observation left).
    from envs.hackmatrix import HackMatrix
    space = HackMatrix().observation_space().spaces["player"]
    assert bool(space.contains(jnp.asarray(player)))
    assert np.isinf(np.asarray(space.high)).nonzero()[0].tolist() == [6, 7]


def test_programs_vector_marks_owned_action_indices(base):
    """§9.2: programs[i] = 1 iff action 5+i is owned, whatever the acquisition order."""
    rank = np.full(23, -1, np.int32)
    rank[C.HACK], rank[C.WAIT] = 0, 1
    obs = OBSERVE(put(base, program_rank=rank))
    expected = np.zeros(23, np.int32)
    expected[[C.WAIT, C.HACK]] = 1
    np.testing.assert_array_equal(obs.programs, expected)
    assert obs.programs.dtype == jnp.int32


# ---------------------------------------------------------------------------------------------
# enemies (§9.1 'enemy')


def test_enemy_channels_type_hp_stun_siphon(base):
    """Channels 0-6: type one-hot, hp/3, stunned, spawnedFromSiphon of the reported enemy."""
    state = with_enemies(base, [
        dict(kind=C.VIRUS, row=3, col=3, hp=1, stunned=True, from_siphon=True),
        dict(kind=C.DAEMON, row=4, col=2),
        dict(kind=C.GLITCH, row=1, col=5, hp=2),
    ])
    grid = np.asarray(OBSERVE(state).grid)
    np.testing.assert_allclose(grid[3, 3, 0:7], [1, 0, 0, 0, 1 / 3, 1, 1], atol=1e-6)
    np.testing.assert_allclose(grid[4, 2, 0:7], [0, 1, 0, 0, 1, 0, 0], atol=1e-6)
    np.testing.assert_allclose(grid[1, 5, 0:7], [0, 0, 1, 0, 2 / 3, 0, 0], atol=1e-6)
    assert grid[..., 0:7].sum() == pytest.approx((1 + 1 / 3 + 1 + 1) + (1 + 1) + (1 + 2 / 3))


def test_hidden_cryptog_is_invisible(base):
    """A cryptog off the player's row and column, without SHOW, is not reported (§9.1)."""
    state = with_enemies(base, [dict(kind=C.CRYPTOG, row=3, col=3)])
    np.testing.assert_array_equal(enemy_channels(state, 3, 3), np.zeros(7))


@pytest.mark.parametrize("row,col", [(0, 4), (4, 0)])
def test_cryptog_in_player_row_or_column_is_visible(base, row, col):
    """A cryptog sharing the player's row or column is reported (§9.1)."""
    state = with_enemies(base, [dict(kind=C.CRYPTOG, row=row, col=col)])
    np.testing.assert_allclose(enemy_channels(state, row, col), [0, 0, 0, 1, 2 / 3, 0, 0],
                               atol=1e-6)


def test_show_reveals_hidden_cryptog(base):
    """SHOW: player[8] = 1 and every cryptog becomes visible (§9.2 'Effects of SHOW')."""
    state = put(with_enemies(base, [dict(kind=C.CRYPTOG, row=3, col=3)]), show=True)
    obs = OBSERVE(state)
    assert obs.player[8] == 1.0
    np.testing.assert_allclose(obs.grid[3, 3, 0:7], [0, 0, 0, 1, 2 / 3, 0, 0], atol=1e-6)


def test_first_enemy_in_list_order_is_reported_not_first_slot(base):
    """One enemy per cell: the first in list order (smallest seq), not the first slot."""
    state = with_enemies(base, [dict(kind=C.GLITCH, row=2, col=2, seq=7),
                                dict(kind=C.DAEMON, row=2, col=2, seq=3)])
    np.testing.assert_allclose(enemy_channels(state, 2, 2), [0, 1, 0, 0, 1, 0, 0], atol=1e-6)


def test_enemies_with_hp_zero_are_skipped(base):
    """Only enemies with hp > 0 are candidates (§9.1, errata O5): the first live one shows,
    and a cell whose only enemy has hp <= 0 shows none."""
    state = with_enemies(base, [dict(kind=C.DAEMON, row=2, col=2, hp=0, seq=1),
                                dict(kind=C.GLITCH, row=2, col=2, hp=1, seq=2),
                                dict(kind=C.VIRUS, row=4, col=4, hp=-1, seq=3)])
    np.testing.assert_allclose(enemy_channels(state, 2, 2), [0, 0, 1, 0, 1 / 3, 0, 0], atol=1e-6)
    np.testing.assert_array_equal(enemy_channels(state, 4, 4), np.zeros(7))


def test_hidden_first_cryptog_hides_visible_enemy_on_same_cell(base):
    """If the first live enemy is a hidden cryptog, the cell shows no enemy even though a
    visible virus shares it (§9.1)."""
    state = with_enemies(base, [dict(kind=C.VIRUS, row=3, col=3, seq=5),
                                dict(kind=C.CRYPTOG, row=3, col=3, seq=2)])
    np.testing.assert_array_equal(enemy_channels(state, 3, 3), np.zeros(7))
    # Once the cryptog is dead (hp 0) the virus is the first live enemy and shows.
    dead = state.replace(enemies=put(state.enemies, hp=np.where(
        np.arange(state.enemies.hp.shape[0]) == 1, 0, state.enemies.hp)))
    np.testing.assert_allclose(enemy_channels(dead, 3, 3), [1, 0, 0, 0, 2 / 3, 0, 0], atol=1e-6)


def test_inactive_slots_are_ignored(base):
    """A slot that is not a list member is never reported."""
    state = with_enemies(base, [dict(kind=C.DAEMON, row=2, col=2)])
    state = state.replace(enemies=put(state.enemies, active=np.zeros(32, bool)))
    np.testing.assert_array_equal(enemy_channels(state, 2, 2), np.zeros(7))


# ---------------------------------------------------------------------------------------------
# blocks (§9.1 'block')


def test_data_block_channels(base):
    """Data block: ch 7, points/9 (ch 10), spawn/9 (ch 35), not siphoned (ch 11 = 0)."""
    grid = np.asarray(OBSERVE(block(base, 2, 3, points=6, spawn=6)).grid)
    expected = np.zeros(42)
    expected[7], expected[10], expected[35] = 1, 6 / 9, 6 / 9
    np.testing.assert_allclose(grid[2, 3], expected, atol=1e-6)


def test_program_block_channels(base):
    """Program block: ch 8, program one-hot at 12 + (actionIndex - 5), points 0, spawn/9."""
    grid = np.asarray(OBSERVE(block(base, 1, 4, program=C.DEBUG, spawn=4)).grid)
    expected = np.zeros(42)
    expected[8], expected[12 + C.DEBUG], expected[35] = 1, 1, 4 / 9
    np.testing.assert_allclose(grid[1, 4], expected, atol=1e-6)


def test_siphoned_block_and_siphoned_floor(base):
    """ch 11 = isSiphoned for blocks only; a siphoned floor cell shows nothing but its
    siphonCenter (ch 41) (§9.2)."""
    state = block(base, 2, 2, points=3, spawn=0, siphoned=True)
    state = with_cells(state, "siphoned", {(2, 1): True})
    state = with_cells(state, "siphon_center", {(2, 1): True})
    grid = np.asarray(OBSERVE(state).grid)
    expected = np.zeros(42)
    expected[7], expected[10], expected[11] = 1, 3 / 9, 1
    np.testing.assert_allclose(grid[2, 2], expected, atol=1e-6)
    floor = np.zeros(42)
    floor[41] = 1
    np.testing.assert_array_equal(grid[2, 1], floor)


@pytest.mark.parametrize("content", [dict(points=7, spawn=7), dict(program=C.WARP, spawn=5)])
def test_question_block_hides_its_content(base, content):
    """A question block reports only isQuestion (ch 9) and isSiphoned: no type, points,
    program or spawn (§9.1, §12.2 'Observation')."""
    grid = np.asarray(OBSERVE(block(base, 3, 1, question=True, **content)).grid)
    expected = np.zeros(42)
    expected[9] = 1
    np.testing.assert_array_equal(grid[3, 1], expected)


def test_siphoned_question_block_reports_its_content(base):
    """The Swift rule shows a question block's points and spawn once its cell is siphoned
    (§9.1; unreachable in play because siphoning reveals the block)."""
    grid = np.asarray(OBSERVE(block(base, 3, 1, question=True, points=7, spawn=7,
                                    siphoned=True)).grid)
    expected = np.zeros(42)
    expected[9], expected[10], expected[11], expected[35] = 1, 7 / 9, 1, 7 / 9
    np.testing.assert_allclose(grid[3, 1], expected, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# transmissions, resources, cell content


def test_transmission_countdown_first_in_order_and_unclipped_below(base):
    """ch 36 = min(turns/4, 1) of the first transmission in list order on the cell; a
    negative countdown reads negative (errata O6)."""
    state = with_transmissions(base, [(2, 2, 9, 4), (2, 2, 2, 1), (4, 1, 3, 5), (5, 0, -2, 6)])
    grid = np.asarray(OBSERVE(state).grid)
    assert grid[2, 2, 36] == pytest.approx(0.5)  # seq 1 (turns 2) beats seq 4 (turns 9)
    assert grid[4, 1, 36] == pytest.approx(0.75)
    assert grid[5, 0, 36] == pytest.approx(-0.5)
    assert np.count_nonzero(grid[..., 36]) == 3
    state = with_transmissions(base, [(1, 1, 9, 0)])
    assert OBSERVE(state).grid[1, 1, 36] == pytest.approx(1.0)


def test_resources_visible_on_floor_and_under_siphoned_blocks_only(base):
    """ch 37/38 = amount/3 when the cell has no block or is siphoned (§9.1)."""
    state = with_cells(base, "credits", {(0, 2): 2, (3, 3): 3, (4, 4): 3})
    state = with_cells(state, "energy", {(1, 1): 3, (0, 2): 0})
    state = block(state, 3, 3, points=1, spawn=1)  # unsiphoned: hidden
    state = block(state, 4, 4, points=1, siphoned=True)  # siphoned: shown
    grid = np.asarray(OBSERVE(state).grid)
    assert grid[0, 2, 37] == pytest.approx(2 / 3)
    assert grid[1, 1, 38] == pytest.approx(1.0)
    assert grid[3, 3, 37] == 0.0
    assert grid[4, 4, 37] == pytest.approx(1.0)


def test_data_siphon_exit_and_siphon_center_follow_cell_content(base):
    """ch 39 isDataSiphon, ch 40 isExit from the cell content (not exitPosition), ch 41."""
    state = with_cells(base, "content", {(0, 5): C.DATA_SIPHON, (5, 0): C.EXIT})
    state = put(state, exit_row=5, exit_col=5)  # exitPosition no longer matches the content
    state = with_cells(state, "siphon_center", {(3, 2): True})
    grid = np.asarray(OBSERVE(state).grid)
    assert grid[0, 5, 39] == 1.0 and grid[..., 39].sum() == 1.0
    assert grid[5, 0, 40] == 1.0 and grid[..., 40].sum() == 1.0
    assert grid[3, 2, 41] == 1.0 and grid[..., 41].sum() == 1.0


# ---------------------------------------------------------------------------------------------
# layout


def test_flat_vector_length_and_order(base):
    """Flat f32[1545] = player (10), programs (23), grid in row, col, channel order (§9.2)."""
    rank = np.full(23, -1, np.int32)
    rank[C.CALM] = 0
    state = with_player(put(base, program_rank=rank), row=1, col=2)
    state = with_cells(state, "credits", {(4, 3): 3})
    obs = OBSERVE(state)
    flat = np.asarray(FLATTEN(obs))
    assert flat.shape == (FLAT_SIZE,) == (1545,)
    assert flat.dtype == np.float32
    np.testing.assert_array_equal(flat[:10], obs.player)
    assert flat[10 + C.CALM] == 1.0 and flat[10:33].sum() == 1.0
    assert flat[33 + (4 * 6 + 3) * 42 + 37] == pytest.approx(1.0)
    assert flat[33:].sum() == pytest.approx(1.0)
    assert obs.grid.shape == (6, 6, 42)


def test_observation_carries_the_action_mask(base):
    """The observation's mask is Swift's getValidActions (§7, decisions R6)."""
    state = with_player(base, data_siphons=1)
    obs = OBSERVE(state)
    np.testing.assert_array_equal(obs.action_mask, MASK(state))
    assert obs.action_mask.shape == (28,) and bool(obs.action_mask[4])


def test_build_observation_vmaps(base):
    """Pure and shape-static: a batch of states gives a batch of observations."""
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), with_player(base, row=3))
    obs = jax.vmap(build_observation)(batch)
    assert obs.grid.shape == (2, 6, 6, 42)
    np.testing.assert_allclose(obs.player[:, 0], [0.6, 0.6])


# ---------------------------------------------------------------------------------------------
# the stored form of a rollout (compact / expand)

COMPACT = jax.jit(compact)
EXPAND = jax.jit(expand)


def assert_bitwise_equal(actual, expected):
    for got, want in zip(jax.tree.leaves(actual), jax.tree.leaves(expected)):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes()


def test_every_grid_channel_is_an_integer_count_over_its_scale():
    """The codec's premise, for every channel and every count an int8 holds: a channel built
    as f32(k) / d (d its scale) is stored as k and read back as the same float32, -0 and
    fractions such as 1/3 and 1/9 included."""
    counts = np.arange(-128, 128, dtype=np.int8)
    for scale in np.unique(GRID_SCALES):
        built = counts.astype(np.float32) / scale
        stored = np.round(built * scale).astype(np.int8)
        np.testing.assert_array_equal(stored, counts)
        assert (stored.astype(np.float32) / scale).tobytes() == built.tobytes()
    assert sorted(set(GRID_SCALES.tolist())) == [1.0, 3.0, 4.0, 9.0]


def test_compact_observation_is_a_quarter_and_expands_bit_for_bit(base):
    """A board that sets every scaled channel (enemy HP 1-3, points and spawn counts, a
    negative countdown, cell credits and energy) with programs owned: the stored grid is
    int8 and ``expand`` gives the observation back bit for bit."""
    state = with_enemies(base, [dict(kind=C.DAEMON, row=1, col=1, hp=3),
                                dict(kind=C.VIRUS, row=1, col=2, hp=1, stunned=True),
                                dict(kind=C.GLITCH, row=4, col=4, hp=2, from_siphon=True)])
    state = block(state, 3, 3, points=7, spawn=9)
    state = block(state, 2, 4, program=C.WARP, spawn=5)
    state = block(state, 5, 5, points=1, spawn=1, siphoned=True)
    state = with_transmissions(state, [(0, 3, 3, 0), (5, 0, -2, 1), (4, 1, 9, 2)])
    state = with_cells(state, "credits", {(0, 2): 2, (5, 5): 3})
    state = with_cells(state, "energy", {(0, 5): 1})
    rank = np.full(23, -1, np.int32)
    rank[C.HACK], rank[C.WAIT] = 0, 1
    state = put(state, program_rank=rank)
    obs = OBSERVE(state)
    stored = COMPACT(obs)
    assert stored.grid.dtype == jnp.int8 and stored.programs.dtype == jnp.int8
    assert stored.grid.nbytes * 4 == obs.grid.nbytes
    values = set(np.unique(np.asarray(obs.grid)).tolist())
    scaled = {np.float32(k) / np.float32(d) for k, d in
              ((1, 3), (2, 3), (7, 9), (1, 9), (5, 9), (3, 4), (-2, 4))}
    assert scaled <= values, scaled - values  # the scaled channels are set
    assert_bitwise_equal(EXPAND(stored), obs)
