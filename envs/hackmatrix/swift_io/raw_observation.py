"""Swift's JSON views of a game: the raw observation (programs-rewards-observation §9.1), the
step ``info`` (§10.3, §8.10) and ``getInternalState`` (§10.3); and the other direction, the
numeric encoding of a raw observation (§9.2, ``numeric_observation``).

Host-side Python over one unbatched state (jax or numpy leaves, fetched once with
``host_state``). The headless server and the in-process parity engine both build their replies
here, so the two are compared on exactly the same JSON shape.
"""

import jax
import numpy as np

from ..core.constants import BLOCK, DATA_SIPHON, ENEMY_NAMES, EXIT, GRID, N_PROGRAMS, \
    N_STAGES, PROGRAM_ACTION_OFFSET, PROGRAM_NAMES
from .. import observation as numeric
from ..core.entities import enemy_visible, in_list_order
from ..core.rewards import SWIFT_KEYS


def host_state(state):
    """The state's leaves as numpy, without the UNDO history (no JSON view reads it)."""
    s = jax.device_get(state.replace(history=None))
    if np.ndim(s.grid.content) != 1:
        raise ValueError("the JSON views take a single state, not a batch")
    return s


def owned_program_actions(program_rank) -> list:
    rank = np.asarray(program_rank)
    owned = np.flatnonzero(rank >= 0)
    return [int(i) + PROGRAM_ACTION_OFFSET for i in owned[np.argsort(rank[owned], kind="stable")]]


def _block_json(g, cell: int) -> dict:
    """§9.1 'block': a question block reports its content only when its cell is siphoned."""
    question, siphoned = bool(g.question[cell]), bool(g.siphoned[cell])
    program = int(g.program[cell])
    block_type = "question" if question else ("program" if program >= 0 else "data")
    block = {"blockType": block_type, "isSiphoned": siphoned}
    if not question or siphoned:
        if program >= 0:
            block.update(points=0, programType=PROGRAM_NAMES[program],
                         programActionIndex=program + PROGRAM_ACTION_OFFSET)
        else:
            block["points"] = int(g.points[cell])
        block["transmissionSpawnCount"] = int(g.spawn[cell])
    return block


def raw_observation(s) -> dict:
    """Swift ``ObservationBuilder.build`` (§9.1) of a host state (``host_state``)."""
    p, g, e, t = s.player, s.grid, s.enemies, s.transmissions
    show = bool(s.show)
    player_row, player_col = int(p.row), int(p.col)
    enemy_order = in_list_order(e.active, e.seq)
    transmission_order = in_list_order(t.active, t.seq)
    cryptog_hints = []
    cells = []
    for row in range(GRID):  # row 0 (the bottom) first
        cell_row = []
        for col in range(GRID):
            cell = row * GRID + col
            content = int(g.content[cell])
            obs = {"row": row, "col": col, "isDataSiphon": content == DATA_SIPHON,
                   "isExit": content == EXIT, "siphonCenter": bool(g.siphon_center[cell])}
            # The first enemy in list order on the cell with hp > 0, and only that one.
            here = [i for i in enemy_order
                    if int(e.row[i]) == row and int(e.col[i]) == col and int(e.hp[i]) > 0]
            if here:
                first = here[0]
                kind = int(e.kind[first])
                visible = bool(enemy_visible(kind, int(e.row[first]), int(e.col[first]),
                                             player_row, player_col, show))
                if visible:
                    obs["enemy"] = {"type": ENEMY_NAMES[kind], "hp": int(e.hp[first]),
                                    "isStunned": bool(e.stunned[first]),
                                    "spawnedFromSiphon": bool(e.from_siphon[first])}
                elif int(e.last_row[first]) >= 0:  # errata O9: duplicates possible
                    cryptog_hints.append({"row": int(e.last_row[first]),
                                          "col": int(e.last_col[first])})
            if content == BLOCK:
                obs["block"] = _block_json(g, cell)
            on_cell = [i for i in transmission_order
                       if int(t.row[i]) == row and int(t.col[i]) == col]
            if on_cell:
                first = on_cell[0]
                transmission = {"turnsUntilSpawn": int(t.turns[first])}
                if show:
                    transmission["enemyType"] = ENEMY_NAMES[int(t.kind[first])]
                obs["transmission"] = transmission
            # Resources under an unsiphoned block are hidden (§9.1 'credits / energy').
            if content != BLOCK or bool(g.siphoned[cell]):
                if int(g.credits[cell]) > 0:
                    obs["credits"] = int(g.credits[cell])
                if int(g.energy[cell]) > 0:
                    obs["energy"] = int(g.energy[cell])
            cell_row.append(obs)
        cells.append(cell_row)
    return {
        "playerRow": player_row, "playerCol": player_col, "playerHP": int(p.hp),
        "credits": int(p.credits), "energy": int(p.energy), "stage": int(s.stage),
        "turn": int(s.turn), "dataSiphons": int(p.data_siphons), "baseAttack": int(p.attack),
        "score": int(p.score), "showActivated": show, "scheduledTasksDisabled": bool(s.calm),
        "ownedPrograms": owned_program_actions(s.program_rank), "cells": cells,
        "cryptogHints": cryptog_hints,
    }


def json_float(value) -> float:
    """A float32 reward component as the double nearest its shortest float32 decimal, so that
    0.04 goes out as 0.04 rather than 0.03999999910593033 (Swift computes in double)."""
    return float(str(np.float32(value)))


def step_info(reward_breakdown: dict, invalid_action: bool, stage_complete: bool,
              dead: bool) -> dict:
    """``HeadlessGame.buildInfoDict`` (§10.3): Swift's 14 breakdown keys (§8.10, no step
    penalty) and the three flags, each present only when true."""
    info = {"reward_breakdown": {swift: json_float(reward_breakdown[name])
                                 for name, swift in SWIFT_KEYS.items()}}
    if invalid_action:
        info["invalid_action"] = True
    if stage_complete:
        info["stage_complete"] = True
    if dead:
        info["death"] = True
    return info


def internal_state(s) -> dict:
    """``getInternalState`` (§10.3): the scheduler and every enemy in list order (hidden
    cryptogs and hp <= 0 members included)."""
    e = s.enemies
    return {
        "scheduledTaskInterval": int(s.sched_interval),
        "nextScheduledTaskTurn": int(s.next_sched_turn),
        "pendingSiphonTransmissions": int(s.pending_siphon),
        "turnCount": int(s.turn),
        "enemies": [{"row": int(e.row[i]), "col": int(e.col[i]),
                     "type": ENEMY_NAMES[int(e.kind[i])], "hp": int(e.hp[i]),
                     "disabledTurns": int(e.disabled[i]), "isStunned": bool(e.stunned[i]),
                     "spawnedFromSiphon": bool(e.from_siphon[i]),
                     "isFromScheduledTask": bool(e.from_scheduled[i])}
                    for i in in_list_order(e.active, e.seq)],
    }


NO_GAME_INTERNAL_STATE = {"scheduledTaskInterval": 0, "nextScheduledTaskTurn": 0,
                          "pendingSiphonTransmissions": 0, "turnCount": 0, "enemies": []}


_BLOCK_TYPES = ("data", "program", "question")


def numeric_observation(raw: dict) -> dict:
    """The §9.2 encoding of a raw observation (as the Swift-backed gym env computes it from the
    JSON): {"player": f32[10], "programs": i32[23], "grid": f32[6, 6, 42]}. The parity harness
    compares it with ``observation.build_observation`` of the same game (decisions R6)."""
    player = np.array([
        raw["playerRow"] / 5.0, raw["playerCol"] / 5.0, raw["playerHP"] / 3.0,
        min(raw["credits"] / 50.0, 1.0), min(raw["energy"] / 50.0, 1.0),
        (raw["stage"] - 1) / float(N_STAGES - 1), raw["dataSiphons"] / 10.0,
        (raw["baseAttack"] - 1) / 2.0, float(raw["showActivated"]),
        float(raw["scheduledTasksDisabled"])], np.float32)
    programs = np.zeros(N_PROGRAMS, np.int32)
    for action in raw["ownedPrograms"]:
        if PROGRAM_ACTION_OFFSET <= action < PROGRAM_ACTION_OFFSET + N_PROGRAMS:
            programs[action - PROGRAM_ACTION_OFFSET] = 1
    grid = np.zeros((GRID, GRID, numeric.N_GRID_CHANNELS), np.float32)
    for row, cells in enumerate(raw["cells"]):
        for col, cell in enumerate(cells):
            channels = grid[row, col]
            enemy = cell.get("enemy")
            if enemy is not None:
                channels[numeric.CH_ENEMY_TYPE + ENEMY_NAMES.index(enemy["type"])] = 1.0
                channels[numeric.CH_ENEMY_HP] = enemy["hp"] / 3.0
                channels[numeric.CH_ENEMY_STUNNED] = float(enemy["isStunned"])
                channels[numeric.CH_ENEMY_FROM_SIPHON] = float(enemy["spawnedFromSiphon"])
            block = cell.get("block")
            if block is not None:
                channels[numeric.CH_BLOCK_DATA + _BLOCK_TYPES.index(block["blockType"])] = 1.0
                channels[numeric.CH_BLOCK_POINTS] = block.get("points", 0) / 9.0
                channels[numeric.CH_BLOCK_SIPHONED] = float(block["isSiphoned"])
                program = block.get("programActionIndex", 0) - PROGRAM_ACTION_OFFSET
                if 0 <= program < N_PROGRAMS:
                    channels[numeric.CH_BLOCK_PROGRAM_TYPE + program] = 1.0
                channels[numeric.CH_BLOCK_SPAWN] = block.get("transmissionSpawnCount", 0) / 9.0
            transmission = cell.get("transmission")
            if transmission is not None:
                channels[numeric.CH_TRANSMISSION] = min(transmission["turnsUntilSpawn"] / 4.0, 1.0)
            channels[numeric.CH_CREDITS] = cell.get("credits", 0) / 3.0
            channels[numeric.CH_ENERGY] = cell.get("energy", 0) / 3.0
            channels[numeric.CH_DATA_SIPHON] = float(cell["isDataSiphon"])
            channels[numeric.CH_EXIT] = float(cell["isExit"])
            channels[numeric.CH_SIPHON_CENTER] = float(cell["siphonCenter"])
    return {"player": player, "programs": programs, "grid": grid}
