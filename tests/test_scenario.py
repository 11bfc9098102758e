"""setState scenarios (programs-rewards-observation §10.5, decisions R10, errata E1/O5)."""

import jax
import numpy as np
import pytest

from envs.hackmatrix.core.constants import (ANTI_V, ATK_PLUS, BLOCK, CRYPTOG, D_BOM, DAEMON,
                                            DATA_SIPHON, EMPTY, EXIT, GLITCH, HACK, POLY,
                                            PROGRAM_NAMES, PUSH, SIPH_PLUS, VIRUS, WARP)
from envs.hackmatrix.swift_io.scenario import ScenarioError, set_state, state_to_scenario
from envs.hackmatrix.core.state import blank_state


def scenario(**fields):
    """A minimal valid scenario (player at (0,0)) plus ``fields``."""
    return {"player": {"row": 0, "col": 0}, **fields}


def cell(row, col):
    return row * 6 + col


def active_in_order(slots):
    """Slot indices of the active members, sorted by list order (seq)."""
    idx = np.flatnonzero(np.asarray(slots.active))
    return idx[np.argsort(np.asarray(slots.seq)[idx])]


# --- defaults and fixed side effects ----------------------------------------------------------

def test_defaults_fresh_player_and_game():
    """§10.5 Preparation: a new default player (hp 3, 0 credits/energy/siphons, attack 1,
    score 0, i.e. no starting bonus), stage 1, turn 0, flags off, nothing owned, empty lists."""
    s = set_state(scenario())
    p = s.player
    assert (int(p.row), int(p.col), int(p.hp), int(p.credits), int(p.energy),
            int(p.data_siphons), int(p.attack), int(p.score)) == (0, 0, 3, 0, 0, 0, 1, 0)
    assert (int(s.stage), int(s.turn), bool(s.show), bool(s.calm)) == (1, 0, False, False)
    assert not np.any(np.asarray(s.program_rank) >= 0)
    assert not np.any(s.enemies.active) and not np.any(s.transmissions.active)
    assert int(s.next_seq) == 0 and int(s.overflow) == 0 and int(s.time) == 0


def test_fixed_side_effects_exit_scheduler_history():
    """§10.5 Fixed side effects: exit always (5,5), scheduler 12/12 whatever turn says,
    nothing pending, STEP off, no ATK+ uses, no siphon centre, empty UNDO history."""
    s = set_state(scenario(turn=7))
    assert int(s.turn) == 7
    assert (int(s.sched_interval), int(s.next_sched_turn)) == (12, 12)
    assert (int(s.exit_row), int(s.exit_col)) == (5, 5)
    content = np.asarray(s.grid.content)
    assert content[cell(5, 5)] == EXIT
    assert np.all(np.delete(content, cell(5, 5)) == EMPTY)  # no data-siphon corners either
    assert int(s.pending_siphon) == 0 and not bool(s.step_active) and int(s.atk_uses) == 0
    assert not np.any(s.grid.siphon_center)
    assert int(s.history.size) == 0


def test_exit_overwrites_block_at_5_5_but_keeps_its_resources_and_siphoned_flag():
    """§10.5: a block or data siphon placed at (5,5) is overwritten by the exit; its resources
    stay (and so does the cell's siphoned flag, which is not part of the content)."""
    s = set_state(scenario(blocks=[{"row": 5, "col": 5, "type": "data", "points": 4,
                                    "siphoned": True}],
                           resources=[{"row": 5, "col": 5, "credits": 2}]))
    c = cell(5, 5)
    assert int(s.grid.content[c]) == EXIT
    assert (int(s.grid.points[c]), int(s.grid.program[c]), int(s.grid.spawn[c])) == (0, -1, 0)
    assert int(s.grid.credits[c]) == 2 and bool(s.grid.siphoned[c])
    s = set_state(scenario(resources=[{"row": 5, "col": 5, "dataSiphon": True}]))
    assert int(s.grid.content[cell(5, 5)]) == EXIT


def test_leaves_match_blank_state_structure_and_capacities():
    """decisions R3: the state has the static shapes and dtypes of ``blank_state`` for the
    requested capacities, so it drops into jitted code without recompiling."""
    s = set_state(scenario(enemies=[{"type": "virus", "row": 1, "col": 1, "hp": 2}]),
                  max_enemies=5, max_transmissions=3, history_size=9)
    ref = blank_state(5, 3, 9)
    assert jax.tree.structure(s) == jax.tree.structure(ref)
    for a, b in zip(jax.tree.leaves(s), jax.tree.leaves(ref)):
        assert (a.shape, a.dtype) == (b.shape, b.dtype)


# --- player and game fields ------------------------------------------------------------------

def test_player_fields_are_set():
    """§10.5: player credits, energy, dataSiphons, attackDamage and score are copied."""
    s = set_state({"player": {"row": 2, "col": 4, "hp": 1, "credits": 11, "energy": 7,
                              "dataSiphons": 3, "attackDamage": 4, "score": 9}})
    p = s.player
    assert (int(p.row), int(p.col), int(p.hp), int(p.credits), int(p.energy),
            int(p.data_siphons), int(p.attack), int(p.score)) == (2, 4, 1, 11, 7, 3, 4, 9)


@pytest.mark.parametrize("hp, expected", [(7, 3), (4, 3), (-1, 3), (0, 0), (2, 2), (3, 3)])
def test_player_hp_outside_0_to_3_becomes_3(hp, expected):
    """§10.5: raw hp 0..3 is kept; anything else becomes 3 (decisions R10: accepted)."""
    s = set_state({"player": {"row": 0, "col": 0, "hp": hp}})
    assert int(s.player.hp) == expected


def test_stage_turn_and_flags():
    """§10.5: stage, turn, showActivated, scheduledTasksDisabled are copied."""
    s = set_state(scenario(stage=6, turn=3, showActivated=True, scheduledTasksDisabled=True))
    assert (int(s.stage), int(s.turn), bool(s.show), bool(s.calm)) == (6, 3, True, True)


def test_stage_9_is_accepted():
    """errata E1 / decisions R10: stage 9 is accepted (it makes the 100-point entry reachable)."""
    assert int(set_state(scenario(stage=9)).stage) == 9


def test_owned_programs_order_unknown_dropped_duplicates_collapse():
    """§10.5: ownedPrograms are action indices in order; unknown ones (4, 28, -1) are dropped;
    duplicates collapse to the first occurrence (our per-program rank)."""
    s = set_state(scenario(ownedPrograms=[9, 5, 28, 4, 9, -1, 27]))
    rank = np.asarray(s.program_rank)
    expected = np.full(23, -1)
    expected[[POLY, PUSH, HACK]] = [0, 1, 2]
    np.testing.assert_array_equal(rank, expected)


# --- enemies and transmissions ---------------------------------------------------------------

def test_enemies_fields_order_and_skipping():
    """§10.5 enemies[]: type case-insensitive; an unknown type skips the entry (even off the
    board); hp exact and unclamped, also <= 0 (errata O5); flags copied; disabled 0; a cryptog's
    last-known position is its position; list order is input order."""
    s = set_state(scenario(enemies=[
        {"type": "DaEmOn", "row": 3, "col": 2, "hp": 7, "stunned": True},
        {"type": "worm", "row": 9, "col": -4, "hp": 1},
        {"type": "cryptog", "row": 1, "col": 4, "hp": 0, "spawnedFromSiphon": True},
        {"type": "VIRUS", "row": 3, "col": 2, "hp": -2, "isFromScheduledTask": True},
        {"type": "glitch", "row": 5, "col": 0, "hp": 2},
    ]))
    e = s.enemies
    order = active_in_order(e)
    assert len(order) == 4
    got = [(int(e.kind[i]), int(e.row[i]), int(e.col[i]), int(e.hp[i]), bool(e.stunned[i]),
            bool(e.from_siphon[i]), bool(e.from_scheduled[i]), int(e.disabled[i]),
            int(e.last_row[i]), int(e.last_col[i])) for i in order]
    assert got == [
        (DAEMON, 3, 2, 7, True, False, False, 0, -1, -1),
        (CRYPTOG, 1, 4, 0, False, True, False, 0, 1, 4),
        (VIRUS, 3, 2, -2, False, False, True, 0, -1, -1),
        (GLITCH, 5, 0, 2, False, False, False, 0, -1, -1),
    ]


def test_transmissions_fields_order_and_skipping():
    """§10.5 transmissions[]: turnsRemaining and enemyType copied (turns <= 0 accepted, errata
    O5); unknown type skips the entry; both provenance flags false; list order = input order."""
    s = set_state(scenario(transmissions=[
        {"row": 2, "col": 2, "turnsRemaining": 3, "enemyType": "Glitch"},
        {"row": 8, "col": 8, "turnsRemaining": 1, "enemyType": "dragon"},
        {"row": 0, "col": 4, "turnsRemaining": 0, "enemyType": "cryptog"},
        {"row": 4, "col": 1, "turnsRemaining": -3, "enemyType": "virus"},
    ]))
    t = s.transmissions
    order = active_in_order(t)
    got = [(int(t.row[i]), int(t.col[i]), int(t.turns[i]), int(t.kind[i]),
            bool(t.from_scheduled[i]), bool(t.from_siphon[i])) for i in order]
    assert got == [(2, 2, 3, GLITCH, False, False), (0, 4, 0, CRYPTOG, False, False),
                   (4, 1, -3, VIRUS, False, False)]


def test_next_seq_follows_created_members():
    """state.py: appended members must come after every setState member in list order."""
    s = set_state(scenario(
        enemies=[{"type": "virus", "row": 1, "col": 1, "hp": 2},
                 {"type": "nope", "row": 1, "col": 1, "hp": 2}],
        transmissions=[{"row": 2, "col": 2, "turnsRemaining": 1, "enemyType": "daemon"}]))
    used = np.concatenate([np.asarray(s.enemies.seq)[np.asarray(s.enemies.active)],
                           np.asarray(s.transmissions.seq)[np.asarray(s.transmissions.active)]])
    assert len(used) == 2 and int(s.next_seq) > used.max()


# --- blocks ------------------------------------------------------------------------------------

def test_data_block_defaults():
    """§10.5: "data" gives points default 5 and spawn default = points; explicit values win."""
    s = set_state(scenario(blocks=[
        {"row": 1, "col": 1, "type": "data"},
        {"row": 1, "col": 2, "type": "data", "points": 3},
        {"row": 1, "col": 3, "type": "data", "points": 4, "spawnCount": 0},
        {"row": 1, "col": 4, "type": "data", "spawnCount": 9},
    ]))
    g = s.grid
    got = [(int(g.content[c]), int(g.points[c]), int(g.spawn[c]), int(g.program[c]),
            bool(g.question[c])) for c in (cell(1, 1), cell(1, 2), cell(1, 3), cell(1, 4))]
    assert got == [(BLOCK, 5, 5, -1, False), (BLOCK, 3, 3, -1, False), (BLOCK, 4, 0, -1, False),
                   (BLOCK, 5, 9, -1, False)]


ALIASES = [("siphplus", SIPH_PLUS), ("siph_plus", SIPH_PLUS), ("dbom", D_BOM), ("d_bomb", D_BOM),
           ("antiv", ANTI_V), ("anti_v", ANTI_V), ("atkplus", ATK_PLUS), ("atk_plus", ATK_PLUS)]
RAW_NAMES = [(name, index) for index, name in enumerate(PROGRAM_NAMES)]


@pytest.mark.parametrize("spelling, program", ALIASES + RAW_NAMES
                         + [("SIPH+", SIPH_PLUS), ("Anti-V", ANTI_V), ("D_BOMB", D_BOM)])
def test_program_type_spellings(spelling, program):
    """§10.5: every raw name (case-insensitive) and the eight aliases parse; the program block
    gets spawn default 2 and points 0 (a given ``points`` is not used for program blocks)."""
    s = set_state(scenario(blocks=[{"row": 2, "col": 3, "type": "program", "programType": spelling,
                                    "points": 6}]))
    c = cell(2, 3)
    assert (int(s.grid.content[c]), int(s.grid.program[c]), int(s.grid.spawn[c]),
            int(s.grid.points[c])) == (BLOCK, program, 2, 0)


def test_program_block_spawn_count_and_ignored_action_index():
    """§10.5: spawnCount overrides the default 2; programActionIndex is ignored."""
    s = set_state(scenario(blocks=[{"row": 2, "col": 3, "type": "program", "programType": "warp",
                                    "spawnCount": 0, "programActionIndex": 27}]))
    assert (int(s.grid.program[cell(2, 3)]), int(s.grid.spawn[cell(2, 3)])) == (WARP, 0)


def test_blocks_that_make_nothing_and_siphoned_marks():
    """§10.5: a program block without a parseable programType, or any other type (question
    included), makes no block; siphoned:true still marks the cell; out-of-bounds entries are
    skipped."""
    s = set_state(scenario(blocks=[
        {"row": 1, "col": 0, "type": "program"},
        {"row": 1, "col": 1, "type": "program", "programType": "fireball", "siphoned": True},
        {"row": 1, "col": 2, "type": "question", "points": 3},
        {"row": 1, "col": 3, "type": "wall", "siphoned": True},
        {"row": 6, "col": 0, "type": "data", "siphoned": True},
        {"row": 0, "col": -1, "type": "data"},
        {"row": 2, "col": 2, "type": "data", "points": 2, "siphoned": True},
    ]))
    g = s.grid
    content, siphoned = np.asarray(g.content), np.asarray(g.siphoned)
    assert np.all(content[[cell(1, 0), cell(1, 1), cell(1, 2), cell(1, 3)]] == EMPTY)
    assert content[cell(2, 2)] == BLOCK and int(g.spawn[cell(2, 2)]) == 2
    assert set(np.flatnonzero(siphoned)) == {cell(1, 1), cell(1, 3), cell(2, 2)}
    assert int(np.sum(content == BLOCK)) == 1 and not np.any(g.question)


# --- resources ---------------------------------------------------------------------------------

def test_resources_amounts_and_replacement():
    """§10.5 resources[]: credits > 0 sets credits, else energy > 0 sets energy; one resource per
    cell, a later entry replaces; an entry with nothing positive changes nothing; OOB skipped."""
    s = set_state(scenario(resources=[
        {"row": 0, "col": 1, "credits": 2, "energy": 3},  # credits win
        {"row": 0, "col": 2, "energy": 3},
        {"row": 0, "col": 2, "credits": 1},  # replaces the energy
        {"row": 0, "col": 3, "credits": 2},
        {"row": 0, "col": 3, "energy": 4},  # replaces the credits
        {"row": 0, "col": 4, "energy": 1},
        {"row": 0, "col": 4, "credits": 0, "energy": 0},  # changes nothing
        {"row": -1, "col": 4, "credits": 3},
    ]))
    g = s.grid
    cells = [cell(0, 1), cell(0, 2), cell(0, 3), cell(0, 4)]
    assert [(int(g.credits[c]), int(g.energy[c])) for c in cells] == [(2, 0), (1, 0), (0, 4),
                                                                       (0, 1)]
    assert int(np.sum(g.credits)) == 3 and int(np.sum(g.energy)) == 5


def test_data_siphon_replaces_block_and_ignores_amounts():
    """§10.5: dataSiphon true (applied after blocks) turns the cell into a data siphon, replacing
    a block there, and ignores the entry's credits and energy; resources already there stay."""
    s = set_state(scenario(
        blocks=[{"row": 3, "col": 3, "type": "data", "points": 7}],
        resources=[{"row": 3, "col": 3, "energy": 2},
                   {"row": 3, "col": 3, "dataSiphon": True, "credits": 3},
                   {"row": 0, "col": 5, "dataSiphon": True}]))
    g, c = s.grid, cell(3, 3)
    assert int(g.content[c]) == DATA_SIPHON
    assert (int(g.points[c]), int(g.spawn[c]), int(g.program[c])) == (0, 0, -1)
    assert (int(g.credits[c]), int(g.energy[c])) == (0, 2)
    assert int(g.content[cell(0, 5)]) == DATA_SIPHON


def test_resources_under_a_block_stay_with_the_block():
    """§10.5: resources without dataSiphon do not change the cell content."""
    s = set_state(scenario(blocks=[{"row": 2, "col": 1, "type": "data", "points": 1}],
                           resources=[{"row": 2, "col": 1, "credits": 3}]))
    assert (int(s.grid.content[cell(2, 1)]), int(s.grid.credits[cell(2, 1)])) == (BLOCK, 3)


# --- R10 validation ----------------------------------------------------------------------------

BAD_SCENARIOS = [
    ({"player": {"row": 6, "col": 0}}, "player.row: 6 is off the board (0..5)"),
    ({"player": {"row": 0, "col": -1}}, "player.col: -1 is off the board (0..5)"),
    (scenario(enemies=[{"type": "virus", "row": 0, "col": 1, "hp": 2},
                       {"type": "glitch", "row": 2, "col": 2, "hp": 2},
                       {"type": "daemon", "row": 7, "col": 2, "hp": 3}]),
     "enemies[2].row: 7 is off the board (0..5)"),
    (scenario(transmissions=[{"row": 1, "col": 6, "turnsRemaining": 1, "enemyType": "virus"}]),
     "transmissions[0].col: 6 is off the board"),
    (scenario(stage=0), "stage: 0 is outside 1..9"),
    (scenario(stage=10), "stage: 10 is outside 1..9"),
    (scenario(turn=-1), "turn: -1 is negative"),
    ({"player": {"row": 0, "col": 0, "credits": -1}}, "player.credits: -1 is negative"),
    ({"player": {"row": 0, "col": 0, "energy": -2}}, "player.energy: -2 is negative"),
    ({"player": {"row": 0, "col": 0, "dataSiphons": -1}}, "player.dataSiphons: -1 is negative"),
    ({"player": {"row": 0, "col": 0, "score": -5}}, "player.score: -5 is negative"),
    ({"player": {"row": 0, "col": 0, "attackDamage": -1}}, "player.attackDamage: -1 is negative"),
    (scenario(blocks=[{"row": 1, "col": 1, "type": "data", "points": -3}]),
     "blocks[0].points: -3 is negative"),
    (scenario(blocks=[{"row": 1, "col": 1, "type": "data", "spawnCount": -1}]),
     "blocks[0].spawnCount: -1 is negative"),
    (scenario(resources=[{"row": 1, "col": 1, "energy": -1}]),
     "resources[0].energy: -1 is negative"),
    # Wrong JSON types and missing required keys.
    ({}, "player: required object is missing"),
    ({"player": {"col": 0}}, "player.row: required integer is missing"),
    ({"player": {"row": "3", "col": 0}}, "player.row: expected an integer"),
    ({"player": {"row": True, "col": 0}}, "player.row: expected an integer"),
    ({"player": {"row": 1.5, "col": 0}}, "player.row: expected an integer"),
    ({"player": [0, 0]}, "player: expected a JSON object"),
    (scenario(stage="2"), "stage: expected an integer"),
    (scenario(showActivated=1), "showActivated: expected true or false"),
    (scenario(ownedPrograms=[5, "push"]), "ownedPrograms[1]: expected an integer"),
    (scenario(ownedPrograms=5), "ownedPrograms: expected a JSON array"),
    (scenario(enemies=[{"type": "virus", "row": 1, "col": 1}]),
     "enemies[0].hp: required integer is missing"),
    (scenario(enemies=[{"type": 3, "row": 1, "col": 1, "hp": 1}]),
     "enemies[0].type: expected a string"),
    (scenario(enemies=[{"type": "virus", "row": 1, "col": 1, "hp": 1, "stunned": "yes"}]),
     "enemies[0].stunned: expected true or false"),
    (scenario(transmissions=[{"row": 1, "col": 1, "enemyType": "virus"}]),
     "transmissions[0].turnsRemaining: required integer is missing"),
    (scenario(blocks=[{"row": 1, "col": 1}]), "blocks[0].type: required string is missing"),
    (scenario(blocks=[{"row": 1, "col": 1, "type": "program", "programType": 7}]),
     "blocks[0].programType: expected a string"),
    (scenario(resources=[{"row": 1, "col": 1, "dataSiphon": "true"}]),
     "resources[0].dataSiphon: expected true or false"),
    (scenario(enemies=[{"type": "virus", "row": 1, "col": 1, "hp": 2 ** 40}]),
     "enemies[0].hp: 1099511627776 does not fit"),
    ("not a scenario", "scenario: expected a JSON object"),
]


@pytest.mark.parametrize("bad, message", BAD_SCENARIOS)
def test_r10_rejections_name_the_field(bad, message):
    """decisions R10: unreachable input raises ScenarioError whose message names the field."""
    with pytest.raises(ScenarioError) as info:
        set_state(bad)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_capacity_errors_name_the_capacity_and_the_argument():
    """decisions R3/R10: more members than slots is refused, saying how to raise the capacity;
    entries with an unknown type do not count."""
    enemies = [{"type": "virus", "row": 1, "col": c, "hp": 2} for c in range(3)]
    with pytest.raises(ScenarioError, match=r"enemies: 3 entries exceed the capacity of 2"
                                            r".*max_enemies"):
        set_state(scenario(enemies=enemies), max_enemies=2)
    set_state(scenario(enemies=enemies[:2] + [{"type": "elf", "row": 1, "col": 2, "hp": 1}]),
              max_enemies=2)
    transmissions = [{"row": 2, "col": c, "turnsRemaining": 1, "enemyType": "virus"}
                     for c in range(2)]
    with pytest.raises(ScenarioError, match=r"transmissions: 2 entries exceed the capacity of 1"
                                            r".*max_transmissions"):
        set_state(scenario(transmissions=transmissions), max_transmissions=1)


@pytest.mark.parametrize("accepted", [
    scenario(enemies=[{"type": "daemon", "row": 1, "col": 1, "hp": 40}]),
    scenario(enemies=[{"type": "virus", "row": 1, "col": 1, "hp": -3}]),
    scenario(transmissions=[{"row": 1, "col": 1, "turnsRemaining": -2, "enemyType": "virus"}]),
    {"player": {"row": 0, "col": 0, "hp": -9, "attackDamage": 0}},
    {"player": {"row": 3.0, "col": 0}, "stage": 9, "unknownKey": {"ignored": True}},
    scenario(enemies=None, blocks=None, ownedPrograms=None),
])
def test_values_swift_handles_consistently_are_accepted(accepted):
    """decisions R10 / errata O5: enemy hp above max or <= 0, countdowns <= 0, hp outside 0..3,
    integral JSON numbers, null optionals and unknown keys are accepted."""
    set_state(accepted)


# --- round trip --------------------------------------------------------------------------------

RICH = {
    "player": {"row": 2, "col": 3, "hp": 2, "credits": 6, "energy": 9, "dataSiphons": 2,
               "attackDamage": 3, "score": 12},
    "stage": 4, "turn": 5, "showActivated": True, "scheduledTasksDisabled": False,
    "ownedPrograms": [14, 5, 26],
    "enemies": [{"type": "cryptog", "row": 4, "col": 1, "hp": 1, "stunned": True},
                {"type": "virus", "row": 4, "col": 1, "hp": 2, "spawnedFromSiphon": True},
                {"type": "daemon", "row": 0, "col": 5, "hp": 5, "isFromScheduledTask": True}],
    "transmissions": [{"row": 3, "col": 0, "turnsRemaining": 2, "enemyType": "glitch"}],
    "blocks": [{"row": 1, "col": 1, "type": "data", "points": 8, "spawnCount": 3},
               {"row": 1, "col": 2, "type": "program", "programType": "hack", "siphoned": True},
               {"row": 2, "col": 0, "type": "none", "siphoned": True}],
    "resources": [{"row": 1, "col": 1, "credits": 2}, {"row": 5, "col": 0, "dataSiphon": True},
                  {"row": 5, "col": 0, "energy": 3}, {"row": 5, "col": 5, "credits": 1}],
}


def test_round_trip_reproduces_the_state():
    """set_state(state_to_scenario(s)) rebuilds every leaf of a setState-built state."""
    first = set_state(RICH)
    second = set_state(state_to_scenario(first))
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(second)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_state_to_scenario_values():
    """state_to_scenario lists programs in acquisition order, members in list order and
    writes a question block as its content marked ``question``."""
    s = set_state(RICH)
    out = state_to_scenario(s)
    assert out["ownedPrograms"] == [14, 5, 26]
    assert [e["type"] for e in out["enemies"]] == ["cryptog", "virus", "daemon"]
    assert out["enemies"][2]["hp"] == 5 and out["enemies"][2]["isFromScheduledTask"]
    assert out["transmissions"] == [{"row": 3, "col": 0, "turnsRemaining": 2,
                                     "enemyType": "glitch"}]
    hidden = s.replace(grid=s.grid.replace(question=s.grid.question.at[cell(1, 1)].set(True)))
    block = [b for b in state_to_scenario(hidden)["blocks"] if (b["row"], b["col"]) == (1, 1)]
    assert block == [{"row": 1, "col": 1, "type": "data", "points": 8, "spawnCount": 3,
                      "siphoned": False, "question": True}]
