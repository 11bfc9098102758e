"""Adoption of the oracle lockstep: Swift's draws the mirror takes over instead of reproducing
them (the cells and types of new transmissions, a new stage's board), the support checks each
adopted draw must pass (is it a possible outcome of our rules?), the features that pair it with
the mirror's own draw in the same situation, and ``Notes``: which parts of the mirror are still
guesses because Swift has not revealed them yet.
"""

import dataclasses

import jax
import numpy as np

from ..core.constants import (ACTION_SIPHON, BLOCK, CORNER_CELLS, DATA_SIPHON, EMPTY, EXIT, GRID,
                              IS_CORNER, MAX_BLOCKS, MIN_BLOCKS, N_CELLS, NEW_TRANSMISSION_TURNS,
                              PROGRAM_ACTION_OFFSET, PROGRAM_SPAWN_COST, SIPHON_SCHEDULE_DELAY)

QUESTION_SPAWN_RANGE = (1, 9)  # a question block's spawn count before REDUC (points or cost)
_UNLIKELY = 1e-6  # a Swift outcome rarer than this under the rules fails its support check


@dataclasses.dataclass
class TransmissionNote:
    """What the harness knows of one live transmission of the mirror (keyed by slot)."""

    kind_known: bool = True
    provenance_known: bool = True
    group: int = -1  # the Swift spawn call that made it, while its order in that call is unknown


@dataclasses.dataclass
class Notes:
    """Which parts of the mirror are guesses: transmissions by slot, and unrevealed question
    blocks by cell (the value is the number of REDUC uses since the block was generated)."""

    transmissions: dict = dataclasses.field(default_factory=dict)
    questions: dict = dataclasses.field(default_factory=dict)

    def copy(self) -> "Notes":
        return Notes({slot: dataclasses.replace(note) for slot, note in self.transmissions.items()},
                     dict(self.questions))


def cross_cells(row: int, col: int) -> list:
    """The siphon cross (centre, U, D, L, R) on the board (game-rules §6)."""
    cells = [(row, col), (row + 1, col), (row - 1, col), (row, col - 1), (row, col + 1)]
    return [r * 6 + c for r, c in cells if 0 <= r < 6 and 0 <= c < 6]


def write_head_snapshot(state):
    """The newest snapshot := the current transmissions and grid (the harness edited them after
    the push; the push itself was the end-of-turn state)."""
    history = state.history
    head = int(history.head)

    def put(ring, value):
        ring = np.array(ring)
        ring[head] = value
        return ring

    snapshots = history.snapshots.replace(
        transmissions=jax.tree.map(put, history.snapshots.transmissions, state.transmissions),
        grid=jax.tree.map(put, history.snapshots.grid, state.grid))
    return state.replace(history=history.replace(snapshots=snapshots))


def drop_new_transmissions(state, first_new_seq: int):
    """Remove the transmissions the mirror's own draws created this step (seq >= first_new_seq)."""
    t = state.transmissions
    new = t.active & (t.seq >= first_new_seq)
    return state.replace(transmissions=t.replace(active=t.active & ~new))


def requested_spawns(pre, state, action) -> tuple:
    """(scheduled, siphon) transmissions the enemy turn asked for (§7.2 steps 5-6, §9): the
    scheduled task fired iff it moved nextScheduledTaskTurn; the siphon ones are the pending
    count before the turn (the step's own siphon included)."""
    siphoned = action == ACTION_SIPHON and pre.player.data_siphons > 0
    next_before = int(pre.next_sched_turn) + (SIPHON_SCHEDULE_DELAY if siphoned else 0)
    scheduled = int(int(state.next_sched_turn) != next_before)
    pending = int(pre.pending_siphon)
    if siphoned:
        g = pre.grid
        cross = cross_cells(int(pre.player.row), int(pre.player.col))
        pending += sum(int(g.spawn[c]) for c in cross
                       if g.content[c] == BLOCK and not g.siphoned[c])
    return scheduled, pending


def reorder_within_groups(t, notes, order) -> bool:
    """Give the slots of ``order`` (Swift's list order) the same seqs, permuted, provided that
    only members of one spawn call change places; False otherwise (the comparison reports it)."""
    group = lambda slot: notes.transmissions.get(slot, TransmissionNote()).group  # noqa: E731
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            if (group(a) < 0 or group(a) != group(b)) and t.seq[a] > t.seq[b]:
                return False
    seqs = sorted(int(t.seq[s]) for s in order)
    for slot, seq in zip(order, seqs):
        t.seq[slot] = seq
    return True


def grid_from_observation(obs, template):
    """(Grid, exit cell, question cells) of a freshly generated board in Swift's observation.
    A question block's content is a guess (data, 1 point, spawn count 9) until revealed."""
    arrays = {name: np.zeros(N_CELLS, np.int32)
              for name in ("content", "points", "spawn", "credits", "energy")}
    program = np.full(N_CELLS, -1, np.int32)
    question, siphoned, centre = (np.zeros(N_CELLS, bool) for _ in range(3))
    exit_cell, questions = -1, []
    for r in range(6):
        for c in range(6):
            cell, view = r * 6 + c, obs["cells"][r][c]
            arrays["content"][cell] = (EXIT if view["isExit"] else
                                       DATA_SIPHON if view["isDataSiphon"] else EMPTY)
            if view["isExit"] and exit_cell < 0:
                exit_cell = cell
            block = view.get("block")
            if block is not None:
                arrays["content"][cell] = BLOCK
                siphoned[cell] = block["isSiphoned"]
                if block["blockType"] == "question":
                    question[cell] = True
                    arrays["points"][cell] = 1
                    arrays["spawn"][cell] = QUESTION_SPAWN_RANGE[1]
                    questions.append(cell)
                elif block["blockType"] == "program":
                    program[cell] = block["programActionIndex"] - PROGRAM_ACTION_OFFSET
                    arrays["spawn"][cell] = block["transmissionSpawnCount"]
                else:
                    arrays["points"][cell] = block["points"]
                    arrays["spawn"][cell] = block["transmissionSpawnCount"]
            arrays["credits"][cell] = view.get("credits", 0)
            arrays["energy"][cell] = view.get("energy", 0)
            centre[cell] = view["siphonCenter"]
    grid = template.replace(program=program, question=question, siphoned=siphoned,
                            siphon_center=centre, **arrays)
    return grid, exit_cell, questions


def spawn_features(state, first_new_seq: int) -> dict:
    """Features of the transmissions a turn spawned (seq >= ``first_new_seq``), to compare the
    mirror's own spawns with Swift's in the same situations: how many share the player's row or
    column (the line-of-fire rule, §3.6) and their distances to the player."""
    t, p = state.transmissions, state.player
    new = np.flatnonzero(t.active & (t.seq >= first_new_seq))
    in_line = sum(int(t.row[s] == p.row or t.col[s] == p.col) for s in new)
    distance = np.zeros(2 * (GRID - 1), np.int64)
    for s in new:
        distance[abs(int(t.row[s]) - int(p.row)) + abs(int(t.col[s]) - int(p.col)) - 1] += 1
    return {"in the player's row or column": np.array([in_line, len(new) - in_line]),
            "distance to the player": distance}


def board_features(state, first_new_seq: int) -> dict:
    """Features of a stage's new board (§3.3-§3.6), as ``spawn_features`` for spawns: block
    count and cells, block kinds, exit corner and the stage-start transmissions."""
    g = state.grid
    blocks = g.content == BLOCK
    count = np.zeros(MAX_BLOCKS + 1, np.int64)
    count[int(np.sum(blocks))] += 1
    exit_corner = np.array([int(g.content[c] == EXIT) for c in CORNER_CELLS])
    kinds = np.array([np.sum(blocks & ~g.question & (g.program < 0)),
                      np.sum(blocks & ~g.question & (g.program >= 0)), np.sum(blocks & g.question)])
    features = {"block count": count, "block cells": blocks.astype(np.int64),
                "block kinds": kinds, "exit corner": exit_corner}
    features.update({f"stage-start transmissions {name}": value
                     for name, value in spawn_features(state, first_new_seq).items()})
    return features


def new_game_problems(obs) -> list:
    """§3.1: the player on a corner with exactly one starting bonus (§1.5)."""
    problems = []
    if (obs["playerRow"], obs["playerCol"]) not in ((0, 0), (0, 5), (5, 0), (5, 5)):
        problems.append(f"new game: player at ({obs['playerRow']},{obs['playerCol']}), "
                        "not a corner")
    bonus = [(obs["credits"], obs["energy"], obs["dataSiphons"]) == b
             for b in ((10, 0, 0), (0, 11, 0), (0, 0, 1))]
    if sum(bonus) != 1:
        problems.append(f"new game: starting bonus credits/energy/siphons "
                        f"{obs['credits']}/{obs['energy']}/{obs['dataSiphons']}")
    return problems


def board_problems(fn, state, obs, exit_cell) -> list:
    """Is Swift's new board a possible output of stage generation (game-rules §3.3-§3.5)?"""
    g = state.grid
    problems = []
    player = int(state.player.row) * 6 + int(state.player.col)
    corners = [int(c) for c in CORNER_CELLS]
    others = [c for c in corners if c not in (player, exit_cell)]
    if exit_cell not in corners or exit_cell == player or int(np.sum(g.content == EXIT)) != 1:
        problems.append(f"board: exit at cell {exit_cell} (player at {player})")
    if [int(g.content[c]) for c in others] != [DATA_SIPHON] * 2 or g.content[player] != EMPTY:
        problems.append(f"board: corners {[int(g.content[c]) for c in corners]}")
    blocks = g.content == BLOCK
    count = int(np.sum(blocks))
    e, t = state.enemies, state.transmissions
    occupied = np.zeros(N_CELLS, bool)
    occupied[(e.row * 6 + e.col)[e.active]] = True
    occupied[(t.row * 6 + t.col)[t.active]] = True
    if count and not MIN_BLOCKS <= count <= MAX_BLOCKS:
        problems.append(f"board: {count} blocks")
    if np.any(blocks & (IS_CORNER | occupied)):
        problems.append("board: a block on a corner or under an enemy or transmission")
    if count and not bool(fn.layout_valid(blocks, np.int32(exit_cell))):
        problems.append("board: the block layout fails GridValidator")
    visible = blocks & ~g.question
    data, program = visible & (g.program < 0), visible & (g.program >= 0)
    if np.any(data & ((g.points < 1) | (g.points > 9) | (g.spawn != g.points))):
        problems.append("board: a data block's points or spawn count")
    if np.any(program & (g.spawn != PROGRAM_SPAWN_COST[np.maximum(g.program, 0)])):
        problems.append("board: a program block's spawn count")
    if len(set(g.program[program].tolist())) != int(np.sum(program)):
        problems.append("board: a program twice")
    floor = (g.content == EMPTY) | (g.content == DATA_SIPHON)
    amount = g.credits + g.energy
    if np.any(floor & ((amount < 1) | (amount > 3) | ((g.credits > 0) & (g.energy > 0)))) or \
            np.any(~floor & ~blocks & (amount > 0)):
        problems.append("board: resources")
    if np.any(g.siphoned) or np.any(g.siphon_center):
        problems.append("board: siphon marks on a new board")
    return problems


def spawn_problems(fn, before, cells, requested, countdowns=None) -> list:
    """Are Swift's new transmissions a possible output of spawnRandomTransmissions (§3.6)? Each
    on a spawn-empty cell; in the line of fire only if pass 1 (100 tries for an empty cell out of
    it) plausibly failed; fewer than asked only if both passes plausibly failed; each new one's
    countdown (``countdowns``: Swift's turnsUntilSpawn, in ``cells``' order) the one every
    generation path gives (``NEW_TRANSMISSION_TURNS``: the mirror adopts Swift's, so only this
    check sees a wrong one)."""
    spawn_empty, line_of_fire = (np.asarray(m) for m in fn.spawn_masks(before))
    problems = []
    wrong = [(cell, turns) for cell, turns in zip(cells, countdowns or [])
             if turns != NEW_TRANSMISSION_TURNS]
    if wrong:
        problems.append(f"spawn: a new transmission's countdown is not "
                        f"{NEW_TRANSMISSION_TURNS}: {wrong}")
    chosen = [r * 6 + c for r, c in cells]
    if any(not spawn_empty[c] for c in chosen):
        problems.append(f"spawn: a transmission on a cell that is not spawn-empty: {cells}")
    out_of_line = int(np.sum(spawn_empty & ~line_of_fire)) - len(chosen)
    in_line = sum(bool(line_of_fire[c]) for c in chosen)
    if in_line and (1 - max(out_of_line, 0) / N_CELLS) ** (100 * in_line) < _UNLIKELY:
        problems.append(f"spawn: {in_line} in the line of fire with {out_of_line} cells out of it")
    missing = requested - len(chosen)
    free = int(np.sum(spawn_empty)) - len(chosen)
    if missing < 0 or (missing and (1 - max(free, 0) / N_CELLS) ** (100 * missing) < _UNLIKELY):
        problems.append(f"spawn: {len(chosen)} transmissions for {requested} asked, "
                        f"{free} cells free")
    return problems
