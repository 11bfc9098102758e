"""Build game states from Swift ``setState`` scenarios (programs-rewards-observation §10.5).

Host-side Python/numpy, not jitted: a scenario is a JSON-like ``dict`` as the Swift headless
protocol sends it; ``set_state`` parses and validates all of it first and only then builds the
``EnvState`` (so a bad scenario never yields a half-built state), and ``state_to_scenario``
goes back from a state to the settable fields.

Input Swift would crash or corrupt itself on is refused with ``ScenarioError`` naming the field
(decisions R10); input Swift accepts and handles consistently is accepted with Swift's semantics
(errata E1, O5).
"""

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..core.constants import (BLOCK, CRYPTOG, DATA_SIPHON, ENEMY_NAMES, EMPTY, EXIT, GRID,
                              N_PROGRAMS, PROGRAM_ACTION_OFFSET, PROGRAM_NAMES)
from ..core.entities import in_list_order
from .raw_observation import owned_program_actions
from ..core.state import HISTORY_SIZE, MAX_ENEMIES, MAX_TRANSMISSIONS, EnvState, blank_state

# The exit setState always creates (§10.5 "Fixed side effects").
SCENARIO_EXIT = (GRID - 1, GRID - 1)
# Accepted stages: 1..8 as in play, plus 9, which Swift handles consistently (errata E1).
MIN_STAGE, MAX_STAGE = 1, 9
DEFAULT_DATA_POINTS = 5
DEFAULT_PROGRAM_SPAWN = 2

_INT32_MIN, _INT32_MAX = int(np.iinfo(np.int32).min), int(np.iinfo(np.int32).max)

# HeadlessGame.swift › parseProgramType: raw names (case-insensitive) plus these aliases.
_PROGRAM_ALIASES = {
    "siphplus": "siph+", "siph_plus": "siph+", "dbom": "d_bom", "d_bomb": "d_bom",
    "antiv": "anti-v", "anti_v": "anti-v", "atkplus": "atk+", "atk_plus": "atk+",
}
_PROGRAM_BY_NAME = {name: index for index, name in enumerate(PROGRAM_NAMES)}
_PROGRAM_BY_NAME.update({alias: _PROGRAM_BY_NAME[raw] for alias, raw in _PROGRAM_ALIASES.items()})
_ENEMY_BY_NAME = {name: index for index, name in enumerate(ENEMY_NAMES)}


class ScenarioError(ValueError):
    """A scenario the game cannot represent; the message starts with the offending field."""


# --- field readers (JSON decoding, with Swift's Codable strictness) -----------------------------

def _field(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _object(value, path: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise ScenarioError(f"{path or 'scenario'}: expected a JSON object, got {value!r}")
    return value


def _as_int(value, path: str) -> int:
    # JSON numbers with an integral value (3 or 3.0) decode as Int; booleans and strings do not.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScenarioError(f"{path}: expected an integer, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ScenarioError(f"{path}: expected an integer, got {value!r}")
        value = int(value)
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ScenarioError(f"{path}: {value} does not fit in a 32-bit integer")
    return value


def _int(obj: Mapping, key: str, path: str, default=None, *, required=False):
    value = obj.get(key)
    if value is None:  # absent and null both read as "not given" (decodeIfPresent)
        if required:
            raise ScenarioError(f"{_field(path, key)}: required integer is missing")
        return default
    return _as_int(value, _field(path, key))


def _bool(obj: Mapping, key: str, path: str) -> bool:
    value = obj.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ScenarioError(f"{_field(path, key)}: expected true or false, got {value!r}")
    return value


def _str(obj: Mapping, key: str, path: str, *, required=False):
    value = obj.get(key)
    if value is None:
        if required:
            raise ScenarioError(f"{_field(path, key)}: required string is missing")
        return None
    if not isinstance(value, str):
        raise ScenarioError(f"{_field(path, key)}: expected a string, got {value!r}")
    return value


def _list(obj: Mapping, key: str):
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScenarioError(f"{key}: expected a JSON array, got {value!r}")
    return value


def _non_negative(value, path: str):
    if value is not None and value < 0:
        raise ScenarioError(f"{path}: {value} is negative (must be >= 0)")
    return value


def _on_board(row: int, col: int) -> bool:
    return 0 <= row < GRID and 0 <= col < GRID


def _require_on_board(row: int, col: int, path: str):
    for key, value in (("row", row), ("col", col)):
        if not 0 <= value < GRID:
            raise ScenarioError(f"{path}.{key}: {value} is off the board (0..{GRID - 1})")


def parse_program_type(name: str):
    """Program index 0..22 for a setState ``programType`` spelling, or None (§10.5)."""
    return _PROGRAM_BY_NAME.get(name.lower())


def parse_enemy_type(name: str):
    """Enemy type index for a setState type name (case-insensitive), or None (§10.5)."""
    return _ENEMY_BY_NAME.get(name.lower())


def _capacity_error(field: str, count: int, capacity: int, argument: str) -> ScenarioError:
    return ScenarioError(
        f"{field}: {count} entries exceed the capacity of {capacity} slots; raise it with "
        f"{argument}={count} (or more) in set_state / the environment's static configuration")


# --- set_state ------------------------------------------------------------------------------------

def set_state(scenario: dict, *, max_enemies: int = MAX_ENEMIES,
              max_transmissions: int = MAX_TRANSMISSIONS,
              history_size: int = HISTORY_SIZE) -> EnvState:
    """The state Swift's ``HeadlessGame.setState`` builds from ``scenario`` (§10.5).

    A fresh game with an empty grid, no enemies, transmissions or history, and a default player
    (hp 3, 0 credits/energy/siphons, attack 1, score 0: the random starting bonus is discarded)
    receives the scenario's fields; the exit is always (5,5), the scheduler is at 12/12 whatever
    ``turn`` says, nothing is pending and no UNDO history exists.

    The one representational difference: the state stores an acquisition rank per program, so
    duplicates in ``ownedPrograms`` (which Swift keeps in its list) collapse to their first
    occurrence. Nothing in the game or the numeric observation depends on duplicates.

    Raises ``ScenarioError`` (naming the field) for wrong JSON types, missing required keys and
    the values of decisions R10: positions off the board, stage outside 1..9, negative amounts or
    counts, and more enemies or transmissions than the slot capacity.
    """
    scenario = _object(scenario, "")
    player = _parse_player(scenario)
    stage = _int(scenario, "stage", "", 1)
    if not MIN_STAGE <= stage <= MAX_STAGE:
        raise ScenarioError(f"stage: {stage} is outside {MIN_STAGE}..{MAX_STAGE}")
    turn = _non_negative(_int(scenario, "turn", "", 0), "turn")
    show = _bool(scenario, "showActivated", "")
    calm = _bool(scenario, "scheduledTasksDisabled", "")
    program_rank = _parse_owned_programs(scenario)
    enemies = _parse_enemies(scenario)
    transmissions = _parse_transmissions(scenario)
    if len(enemies) > max_enemies:
        raise _capacity_error("enemies", len(enemies), max_enemies, "max_enemies")
    if len(transmissions) > max_transmissions:
        raise _capacity_error("transmissions", len(transmissions), max_transmissions,
                              "max_transmissions")
    grid = _build_grid(_parse_blocks(scenario), _parse_resources(scenario))
    return _assemble(player, stage, turn, show, calm, program_rank, enemies, transmissions, grid,
                     max_enemies, max_transmissions, history_size)


def _parse_player(scenario: Mapping) -> dict:
    if scenario.get("player") is None:
        raise ScenarioError("player: required object is missing")
    obj = _object(scenario["player"], "player")
    row = _int(obj, "row", "player", required=True)
    col = _int(obj, "col", "player", required=True)
    _require_on_board(row, col, "player")
    hp = _int(obj, "hp", "player", 3)
    amounts = {key: _non_negative(_int(obj, key, "player", default), f"player.{key}")
               for key, default in (("credits", 0), ("energy", 0), ("dataSiphons", 0),
                                    ("attackDamage", 1), ("score", 0))}
    # PlayerHealth(rawValue:) ?? .full: anything outside 0..3 is full health (§10.5).
    return dict(row=row, col=col, hp=hp if 0 <= hp <= 3 else 3, credits=amounts["credits"],
                energy=amounts["energy"], data_siphons=amounts["dataSiphons"],
                attack=amounts["attackDamage"], score=amounts["score"])


def _parse_owned_programs(scenario: Mapping) -> np.ndarray:
    rank = np.full(N_PROGRAMS, -1, np.int32)
    next_rank = 0
    for i, value in enumerate(_list(scenario, "ownedPrograms")):
        program = _as_int(value, f"ownedPrograms[{i}]") - PROGRAM_ACTION_OFFSET
        # Unknown action indices are dropped; a duplicate keeps its first rank.
        if 0 <= program < N_PROGRAMS and rank[program] < 0:
            rank[program] = next_rank
            next_rank += 1
    return rank


def _parse_enemies(scenario: Mapping) -> list:
    enemies = []
    for i, value in enumerate(_list(scenario, "enemies")):
        path = f"enemies[{i}]"
        obj = _object(value, path)
        name = _str(obj, "type", path, required=True)
        row = _int(obj, "row", path, required=True)
        col = _int(obj, "col", path, required=True)
        hp = _int(obj, "hp", path, required=True)  # exact, unclamped (errata O5)
        flags = {key: _bool(obj, key, path)
                 for key in ("stunned", "spawnedFromSiphon", "isFromScheduledTask")}
        kind = parse_enemy_type(name)
        if kind is None:  # an unknown type skips the entry before anything else is used
            continue
        _require_on_board(row, col, path)
        enemies.append(dict(kind=kind, row=row, col=col, hp=hp, stunned=flags["stunned"],
                            from_siphon=flags["spawnedFromSiphon"],
                            from_scheduled=flags["isFromScheduledTask"]))
    return enemies


def _parse_transmissions(scenario: Mapping) -> list:
    transmissions = []
    for i, value in enumerate(_list(scenario, "transmissions")):
        path = f"transmissions[{i}]"
        obj = _object(value, path)
        row = _int(obj, "row", path, required=True)
        col = _int(obj, "col", path, required=True)
        turns = _int(obj, "turnsRemaining", path, required=True)  # <= 0 hatches next tick (O5)
        kind = parse_enemy_type(_str(obj, "enemyType", path, required=True))
        if kind is None:
            continue
        _require_on_board(row, col, path)
        transmissions.append(dict(kind=kind, row=row, col=col, turns=turns))
    return transmissions


def _parse_blocks(scenario: Mapping) -> list:
    blocks = []
    for i, value in enumerate(_list(scenario, "blocks")):
        path = f"blocks[{i}]"
        obj = _object(value, path)
        row = _int(obj, "row", path, required=True)
        col = _int(obj, "col", path, required=True)
        kind = _str(obj, "type", path, required=True)
        points = _non_negative(_int(obj, "points", path), f"{path}.points")
        spawn = _non_negative(_int(obj, "spawnCount", path), f"{path}.spawnCount")
        siphoned = _bool(obj, "siphoned", path)
        program_name = _str(obj, "programType", path)
        _int(obj, "programActionIndex", path)  # decoded (so its type is checked), then ignored
        if not _on_board(row, col):
            continue
        block = None
        # Block types are matched exactly: §10.5 case-folds only enemy and program names.
        if kind == "data":
            points = DEFAULT_DATA_POINTS if points is None else points
            block = dict(program=-1, points=points, spawn=points if spawn is None else spawn)
        elif kind == "program" and program_name is not None:
            program = parse_program_type(program_name)
            if program is not None:
                block = dict(program=program, points=0,
                             spawn=DEFAULT_PROGRAM_SPAWN if spawn is None else spawn)
        blocks.append(dict(cell=row * GRID + col, block=block, siphoned=siphoned))
    return blocks


def _parse_resources(scenario: Mapping) -> list:
    resources = []
    for i, value in enumerate(_list(scenario, "resources")):
        path = f"resources[{i}]"
        obj = _object(value, path)
        row = _int(obj, "row", path, required=True)
        col = _int(obj, "col", path, required=True)
        credits = _non_negative(_int(obj, "credits", path, 0), f"{path}.credits")
        energy = _non_negative(_int(obj, "energy", path, 0), f"{path}.energy")
        data_siphon = _bool(obj, "dataSiphon", path)
        if _on_board(row, col):
            resources.append(dict(cell=row * GRID + col, credits=credits, energy=energy,
                                  data_siphon=data_siphon))
    return resources


def _build_grid(blocks: list, resources: list) -> dict:
    content = np.full(GRID * GRID, EMPTY, np.int32)
    points = np.zeros(GRID * GRID, np.int32)
    program = np.full(GRID * GRID, -1, np.int32)
    spawn = np.zeros(GRID * GRID, np.int32)
    credits = np.zeros(GRID * GRID, np.int32)
    energy = np.zeros(GRID * GRID, np.int32)
    siphoned = np.zeros(GRID * GRID, bool)

    def clear_block(cell):
        points[cell], program[cell], spawn[cell] = 0, -1, 0

    for entry in blocks:
        cell, block = entry["cell"], entry["block"]
        if block is not None:  # an entry that makes no block leaves the cell as it was
            content[cell] = BLOCK
            points[cell], program[cell] = block["points"], block["program"]
            spawn[cell] = block["spawn"]
        if entry["siphoned"]:
            siphoned[cell] = True
    # Resources come after blocks (§10.5).
    for entry in resources:
        cell = entry["cell"]
        if entry["data_siphon"]:  # replaces a block; the entry's amounts are ignored
            content[cell] = DATA_SIPHON
            clear_block(cell)
        elif entry["credits"] > 0:
            credits[cell], energy[cell] = entry["credits"], 0
        elif entry["energy"] > 0:
            credits[cell], energy[cell] = 0, entry["energy"]
    # No exit can be set, so Swift turns (5,5) into the exit; that cell's resources stay.
    exit_cell = SCENARIO_EXIT[0] * GRID + SCENARIO_EXIT[1]
    content[exit_cell] = EXIT
    clear_block(exit_cell)
    return dict(content=content, points=points, program=program, spawn=spawn, credits=credits,
                energy=energy, siphoned=siphoned)


def _slot_array(entries: list, key: str, capacity: int, fill, dtype) -> jax.Array:
    array = np.full(capacity, fill, dtype)
    array[:len(entries)] = [entry[key] for entry in entries]
    return jnp.asarray(array)


def _assemble(player, stage, turn, show, calm, program_rank, enemies, transmissions, grid,
              max_enemies, max_transmissions, history_size) -> EnvState:
    state = blank_state(max_enemies, max_transmissions, history_size)
    i32 = lambda value: jnp.asarray(value, jnp.int32)  # noqa: E731
    n_enemies, n_transmissions = len(enemies), len(transmissions)
    for enemy in enemies:  # Enemy.init: a cryptog's last-known position is its position
        is_cryptog = enemy["kind"] == CRYPTOG
        enemy["last_row"] = enemy["row"] if is_cryptog else -1
        enemy["last_col"] = enemy["col"] if is_cryptog else -1
    e = lambda key, fill=0, dtype=np.int32: _slot_array(enemies, key, max_enemies, fill, dtype)  # noqa: E731
    enemy_slots = state.enemies.replace(
        active=jnp.arange(max_enemies) < n_enemies,
        seq=jnp.arange(max_enemies, dtype=jnp.int32),  # list order = input order
        kind=e("kind"), row=e("row"), col=e("col"), hp=e("hp"),
        stunned=e("stunned", False, bool), last_row=e("last_row", -1), last_col=e("last_col", -1),
        from_scheduled=e("from_scheduled", False, bool), from_siphon=e("from_siphon", False, bool))
    t = lambda key: _slot_array(transmissions, key, max_transmissions, 0, np.int32)  # noqa: E731
    transmission_slots = state.transmissions.replace(
        active=jnp.arange(max_transmissions) < n_transmissions,
        seq=n_enemies + jnp.arange(max_transmissions, dtype=jnp.int32),
        kind=t("kind"), row=t("row"), col=t("col"), turns=t("turns"))
    return state.replace(
        grid=state.grid.replace(**{key: jnp.asarray(value) for key, value in grid.items()}),
        player=state.player.replace(**{key: i32(value) for key, value in player.items()}),
        enemies=enemy_slots, transmissions=transmission_slots,
        stage=i32(stage), turn=i32(turn), program_rank=jnp.asarray(program_rank),
        show=jnp.asarray(show), calm=jnp.asarray(calm),
        exit_row=i32(SCENARIO_EXIT[0]), exit_col=i32(SCENARIO_EXIT[1]),
        next_seq=i32(n_enemies + n_transmissions))


# --- state_to_scenario ---------------------------------------------------------------------------

def state_to_scenario(state: EnvState) -> dict:
    """The setState scenario of an (unbatched) state's settable fields.

    ``set_state(state_to_scenario(s))`` reproduces the player, stage, turn, flags, owned
    programs (in acquisition order), enemies and transmissions (in list order, with their hp,
    stun and provenance flags), blocks, siphoned cells, floor data siphons and resources.
    Not settable, hence not reproduced: an exit other than (5,5) (setState always puts it there),
    siphon centres, disabled turns, cryptog last-known positions, the scheduler, pending siphon
    spawns, STEP, ATK+ uses and the UNDO history. A question block is written as the data or
    program block it hides, with an extra ``"question": true`` key that setState ignores.
    """
    s = jax.device_get(state)
    if np.ndim(s.grid.content) != 1:
        raise ValueError("state_to_scenario takes a single state, not a batch")
    p = s.player
    scenario = {
        "player": {"row": int(p.row), "col": int(p.col), "hp": int(p.hp),
                   "credits": int(p.credits), "energy": int(p.energy),
                   "dataSiphons": int(p.data_siphons), "attackDamage": int(p.attack),
                   "score": int(p.score)},
        "stage": int(s.stage), "turn": int(s.turn), "showActivated": bool(s.show),
        "scheduledTasksDisabled": bool(s.calm),
        "ownedPrograms": owned_program_actions(s.program_rank),
    }
    e = s.enemies
    scenario["enemies"] = [
        {"type": ENEMY_NAMES[int(e.kind[i])], "row": int(e.row[i]), "col": int(e.col[i]),
         "hp": int(e.hp[i]), "stunned": bool(e.stunned[i]),
         "spawnedFromSiphon": bool(e.from_siphon[i]),
         "isFromScheduledTask": bool(e.from_scheduled[i])}
        for i in in_list_order(e.active, e.seq)]
    t = s.transmissions
    scenario["transmissions"] = [
        {"row": int(t.row[i]), "col": int(t.col[i]), "turnsRemaining": int(t.turns[i]),
         "enemyType": ENEMY_NAMES[int(t.kind[i])]}
        for i in in_list_order(t.active, t.seq)]
    scenario["blocks"], scenario["resources"] = _cells_to_scenario(s.grid)
    return scenario


def _cells_to_scenario(g):
    blocks, resources = [], []
    for cell in range(GRID * GRID):
        row, col = divmod(cell, GRID)
        where = {"row": row, "col": col}
        siphoned = bool(g.siphoned[cell])
        if int(g.content[cell]) == BLOCK:
            entry = dict(where, spawnCount=int(g.spawn[cell]), siphoned=siphoned)
            if int(g.program[cell]) >= 0:
                entry.update(type="program", programType=PROGRAM_NAMES[int(g.program[cell])])
            else:
                entry.update(type="data", points=int(g.points[cell]))
            if bool(g.question[cell]):
                entry["question"] = True
            blocks.append(entry)
        elif siphoned:  # a type that makes no block still marks the cell siphoned (§10.5)
            blocks.append(dict(where, type="none", siphoned=True))
        if int(g.content[cell]) == DATA_SIPHON:
            resources.append(dict(where, dataSiphon=True))
        if int(g.credits[cell]) > 0:
            resources.append(dict(where, credits=int(g.credits[cell])))
        elif int(g.energy[cell]) > 0:
            resources.append(dict(where, energy=int(g.energy[cell])))
    return blocks, resources
