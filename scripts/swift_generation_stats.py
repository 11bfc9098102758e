#!/usr/bin/env python
"""Generation statistics against the real Swift game (issue 14): what our engine draws with its
own randomness must follow Swift's distributions (decisions R2).

    python scripts/swift_generation_stats.py --binary $HACKMATRIX_BINARY --boards 10000 \
        --json stats.json

For every stage, ``--boards`` new boards from each engine, generated the same way:
* stage 1: ``reset`` (random corner, starting bonus, stage-1 board);
* stage k >= 2: setState at stage k-1 with the player at (5,4) next to the exit (5,5) and one data
  siphon, then a step right onto the exit: the stage-k board with the player on corner (5,5).
Swift's boards come through the protocol, ours from the in-process engine (jit + vmap). What the
observation hides is revealed the same way on both sides: the board's player siphons once (on
Swift, a real siphon step; stage 1: only boards whose bonus was the data siphon), which hatches the
stage-start transmissions (their enemy types) and reveals the question blocks of its cross.

Compared per stage: player corner and starting bonus (stage 1), exit corner, block count, cells,
kinds (data / program / question), data points, programs, resources (credits/energy x amount, and
totals), transmission count, cells and enemy types, question contents (points / program). A last
sample set ("spawns") compares the cells and enemy types of in-game spawns from two fixed
scenarios: a scheduled spawn whose line of fire is shaped by an enemy, a block and a transmission,
and four siphon spawns in one call (SHOW active, so the observation names each new transmission's
type, §9.1); another ("outcomes") the frequencies of one step's random outcomes from
fixed scenarios: WARP's target among two enemies and two transmissions, POLY's new type, and
which of two contending daemons moves first (the soak reproduces each outcome, not its law).
One-value-per-board features use a chi-square homogeneity test (sparse tail categories merged to
an expected count of 5). Many-values-per-board features (cells, points, programs, ...) are summed
per board and compared with the chi-square statistic of their totals, its p-value taken from
--permutations random relabellings of the boards (boards are independent, the values within a
board are not, so the plain chi-square would be wrong).

Multiple comparisons: about 15 tests per stage, about 120 in all, each at level 0.001 (so about a
1 in 10 chance that one falls below 0.001 by luck alone). A test below 0.001 is therefore run
again on fresh boards from both engines (--boards again): a genuine difference fails again, a
fluke does not. The run fails (exit 1) only on a confirmed failure. The report also gives a
Kolmogorov-Smirnov test of all p-values against the uniform distribution they follow when the
engines agree.
"""

import argparse
import functools
import json
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before JAX is imported

import jax
import numpy as np
from scipy import stats

from envs.hackmatrix import HackMatrix
from envs.hackmatrix.core.constants import (ACTION_SIPHON, CORNERS, ENEMY_NAMES, GRID,
                                            N_PROGRAMS, N_STAGES, POLY, PROGRAM_ACTION_OFFSET,
                                            WAIT, WARP)
from envs.hackmatrix.swift_io.engines import ProtocolEngine
from envs.hackmatrix.swift_io.protocol import enable_server_compile_cache
from envs.hackmatrix.swift_io.swift_build import add_binary_option, binary_label, check_binary
from envs.hackmatrix.swift_io.raw_observation import raw_observation
from envs.hackmatrix.swift_io.scenario import set_state
from envs.hackmatrix.swift_io.parity_statistics import (LEVEL, chi_square_categorical,
                                                        permutation_chi_square)
from purejaxrl.cli.parsing import ArgumentParser
from purejaxrl.output_paths import add_overwrite_argument, refuse_output_file, write_text

MOVE_RIGHT = 3
SPAWNS = "spawns"  # the sample set of in-game spawns (SPAWN_SCENARIOS)
OUTCOMES = "outcomes"  # the sample set of one step's random outcomes (OUTCOME_SCENARIOS)
BATCH = 2000  # our boards generated per jitted call


def stage_scenario(stage: int) -> dict:
    """setState for the stage before ``stage``: the player next to the exit, with a siphon."""
    return {"player": {"row": GRID - 1, "col": GRID - 2, "dataSiphons": 1}, "stage": stage - 1}


def _cross(row: int, col: int) -> list:
    cells = [(row, col), (row + 1, col), (row - 1, col), (row, col - 1), (row, col + 1)]
    return [(r, c) for r, c in cells if 0 <= r < GRID and 0 <= c < GRID]


def _question_content(block: dict) -> int:
    """Index 0..8 for a data block of 1..9 points, 9 + program for a program block."""
    if block["blockType"] == "data":
        return block["points"] - 1
    return 9 + block["programActionIndex"] - PROGRAM_ACTION_OFFSET


# --- collecting boards --------------------------------------------------------------------------

def swift_boards(engine: ProtocolEngine, stage: int, count: int) -> list:
    """``count`` (board observation, revealed) pairs from the Swift binary; ``revealed`` holds the
    hatched enemy types and the question contents of the player's cross, or None when the board's
    player has no siphon (stage 1 without the siphon bonus)."""
    records = []
    for _ in range(count):
        if stage == 1:
            board = engine.reset()
        else:
            engine.set_state(stage_scenario(stage))
            board = engine.step(MOVE_RIGHT).observation
        revealed = None
        if board["dataSiphons"] > 0:
            after = engine.step(ACTION_SIPHON).observation
            hatched = [ENEMY_NAMES.index(e["type"]) for e in engine.internal_state()["enemies"]]
            questions = [_question_content(after["cells"][r][c]["block"])
                         for r, c in _cross(board["playerRow"], board["playerCol"])
                         if board["cells"][r][c].get("block", {}).get("blockType") == "question"]
            revealed = {"types": hatched, "questions": questions}
        records.append((board, revealed))
    return records


@functools.cache
def _steps(env: HackMatrix):
    """One step from one start state for a batch of keys: the new states (compiled once)."""
    params = env.default_params
    return jax.jit(jax.vmap(lambda k, start, action: env.step_env(k, start, action, params)[1],
                            in_axes=(0, None, None)))


@functools.cache
def _generators(env: HackMatrix):
    """(new games, stage advances from a start state) for a batch of keys, compiled once."""
    params = env.default_params
    new_games = jax.jit(jax.vmap(lambda k: env.reset_env(k, params)[1]))
    return new_games, lambda keys, start: _steps(env)(keys, start, np.int32(MOVE_RIGHT))


def jax_boards(env: HackMatrix, stage: int, count: int, key) -> list:
    """The same records from our engine: batches of boards under jit + vmap, hidden values read
    from the state (the same selection as on Swift: the player's cross, boards with a siphon)."""
    new_games, stage_advances = _generators(env)
    start = None if stage == 1 else set_state(stage_scenario(stage))
    records = []
    while len(records) < count:
        key, batch_key = jax.random.split(key)
        keys = jax.random.split(batch_key, BATCH)
        batch = jax.device_get(new_games(keys) if start is None else stage_advances(keys, start))
        batch = batch.replace(history=None)
        for i in range(min(BATCH, count - len(records))):
            state = jax.tree.map(lambda x, i=i: x[i], batch)
            board = raw_observation(state)
            revealed = None
            if board["dataSiphons"] > 0:
                t, g = state.transmissions, state.grid
                types = [int(t.kind[s]) for s in np.flatnonzero(t.active)]
                questions = []
                for r, c in _cross(board["playerRow"], board["playerCol"]):
                    cell = r * GRID + c
                    if board["cells"][r][c].get("block", {}).get("blockType") == "question":
                        questions.append(int(g.points[cell]) - 1 if g.program[cell] < 0
                                         else 9 + int(g.program[cell]))
                revealed = {"types": types, "questions": questions}
            records.append((board, revealed))
    return records


# In-game spawns (§3.6, §7.2 steps 5-6, §9) from fixed scenarios: a scheduled spawn with the
# line of fire shaped by an enemy (it stops the line), a block (it stops the line) and a
# transmission (it does not; the cells behind it stay in line); and a siphon that owes four
# transmissions at once (each one avoids the ones spawned before it). SHOW is active in both so
# that the observation names the type each new transmission hatches into (§9.1); SHOW changes
# only what is shown, not what is drawn (game-rules §3.6: a uniform type at construction).
WAIT_ACTION = PROGRAM_ACTION_OFFSET + WAIT
SPAWN_SCENARIOS = {
    "scheduled spawn": ({"player": {"row": 2, "col": 2, "energy": 5}, "turn": 11,
                         "showActivated": True,
                         "ownedPrograms": [WAIT_ACTION],
                         "enemies": [{"type": "daemon", "row": 4, "col": 2, "hp": 3}],
                         "transmissions": [{"row": 2, "col": 3, "turnsRemaining": 5,
                                            "enemyType": "virus"}],
                         "blocks": [{"row": 0, "col": 2, "type": "data", "points": 2}]},
                        WAIT_ACTION),
    "siphon spawns": ({"player": {"row": 3, "col": 3, "dataSiphons": 1}, "showActivated": True,
                       "enemies": [{"type": "glitch", "row": 3, "col": 0, "hp": 2}],
                       "blocks": [{"row": 4, "col": 3, "type": "data", "points": 4},
                                  {"row": 1, "col": 3, "type": "data", "points": 1,
                                   "spawnCount": 0}]},
                      ACTION_SIPHON),
}


def swift_spawns(engine: ProtocolEngine, scenario: dict, action: int, count: int) -> list:
    """(cell, enemy type) of each transmission that the step spawned, ``count`` times on Swift
    (the type as SHOW names it)."""
    before = {(t["row"], t["col"]) for t in scenario.get("transmissions", [])}
    spawned = []
    for _ in range(count):
        engine.set_state(scenario)
        cells = engine.step(action).observation["cells"]
        spawned.append([(r * GRID + c, ENEMY_NAMES.index(cells[r][c]["transmission"]["enemyType"]))
                        for r in range(GRID) for c in range(GRID)
                        if "transmission" in cells[r][c] and (r, c) not in before])
    return spawned


def jax_spawns(env: HackMatrix, scenario: dict, action: int, count: int, key) -> list:
    """The same from our engine (jit + vmap over keys), the type read from the state."""
    start = set_state(scenario)
    spawned = []
    while len(spawned) < count:
        key, batch_key = jax.random.split(key)
        t = jax.device_get(_steps(env)(jax.random.split(batch_key, BATCH), start,
                                       np.int32(action)).transmissions)
        new = t.active & (t.seq >= int(start.next_seq))
        for i in range(min(BATCH, count - len(spawned))):
            spawned.append([(int(t.row[i, s]) * GRID + int(t.col[i, s]), int(t.kind[i, s]))
                            for s in np.flatnonzero(new[i])])
    return spawned


def spawn_features(spawned: list) -> dict:
    """Per step: the cells taken (0/1 each) and the count of each enemy type hatching."""
    cells = np.zeros((len(spawned), GRID * GRID), np.int64)
    types = np.zeros((len(spawned), len(ENEMY_NAMES)), np.int64)
    for i, chosen in enumerate(spawned):
        for cell, kind in chosen:
            cells[i, cell] = 1
            types[i, kind] += 1
    return {"cells": ("counts", cells), "count": ("categorical", cells.sum(axis=1)),
            "enemy types": ("counts", types)}


# One step's random outcome from fixed scenarios: WARP's target (§4.4: uniform over the enemies
# and transmissions), POLY's new type (§4.5: uniform over the three others) and the enemies'
# shuffled order (§7.4: two daemons contend for one cell, whoever moves first takes it). The
# soak's mirror reproduces Swift's outcome of each (a key search or a fit), so only these
# frequencies test the laws themselves.
WARP_ACTION, POLY_ACTION = PROGRAM_ACTION_OFFSET + WARP, PROGRAM_ACTION_OFFSET + POLY


def _polymorphed_type(obs) -> int:
    """The one enemy's type; none shown is a cryptog out of the player's line (every other
    type is always shown, §9.1)."""
    shown = [ENEMY_NAMES.index(cell["enemy"]["type"]) for row in obs["cells"] for cell in row
             if "enemy" in cell]
    return shown[0] if shown else ENEMY_NAMES.index("cryptog")


OUTCOME_SCENARIOS = {
    "WARP target (the player's cell)": (
        {"player": {"row": 0, "col": 0, "credits": 2, "energy": 2},
         "ownedPrograms": [WARP_ACTION],
         "enemies": [{"type": "virus", "row": 3, "col": 3, "hp": 2},
                     {"type": "daemon", "row": 5, "col": 2, "hp": 3}],
         "transmissions": [{"row": 4, "col": 1, "turnsRemaining": 3, "enemyType": "daemon"},
                           {"row": 2, "col": 5, "turnsRemaining": 3, "enemyType": "virus"}]},
        WARP_ACTION, lambda obs: obs["playerRow"] * GRID + obs["playerCol"]),
    "POLY new type": (
        {"player": {"row": 0, "col": 0, "credits": 1, "energy": 1},
         "ownedPrograms": [POLY_ACTION],
         "enemies": [{"type": "daemon", "row": 4, "col": 4, "hp": 2}]},
        POLY_ACTION, _polymorphed_type),
    "enemy order (the first daemon took the contested cell)": (
        {"player": {"row": 0, "col": 0, "energy": 30}, "ownedPrograms": [WAIT_ACTION],
         "blocks": [{"row": 1, "col": 0, "type": "data"}, {"row": 1, "col": 1, "type": "data"}],
         "enemies": [{"type": "daemon", "row": 0, "col": 3, "hp": 3},
                     {"type": "daemon", "row": 1, "col": 2, "hp": 3}]},
        WAIT_ACTION, lambda obs: int("enemy" in obs["cells"][2][2])),
}


def swift_outcomes(engine: ProtocolEngine, scenario: dict, action: int, outcome, count: int
                   ) -> np.ndarray:
    """``outcome(observation)`` after the step, ``count`` times on Swift."""
    values = []
    for _ in range(count):
        engine.set_state(scenario)
        values.append(outcome(engine.step(action).observation))
    return np.asarray(values, np.int64)


def jax_outcomes(env: HackMatrix, scenario: dict, action: int, outcome, count: int, key
                 ) -> np.ndarray:
    """The same from our engine (jit + vmap over keys), read from the same observation."""
    start = set_state(scenario)
    values = []
    while len(values) < count:
        key, batch_key = jax.random.split(key)
        batch = jax.device_get(_steps(env)(jax.random.split(batch_key, BATCH), start,
                                           np.int32(action))).replace(history=None)
        for i in range(min(BATCH, count - len(values))):
            values.append(outcome(raw_observation(jax.tree.map(lambda x, i=i: x[i], batch))))
    return np.asarray(values, np.int64)


# --- features -----------------------------------------------------------------------------------

def features(records: list, stage: int) -> dict:
    """name -> ("categorical", int[n]) or ("counts", int[n, d]) per board."""
    n = len(records)
    block_cells = np.zeros((n, GRID * GRID), np.int64)
    question_cells = np.zeros_like(block_cells)
    transmission_cells = np.zeros_like(block_cells)
    kinds = np.zeros((n, 3), np.int64)
    points = np.zeros((n, 9), np.int64)
    programs = np.zeros((n, N_PROGRAMS), np.int64)
    resources = np.zeros((n, 6), np.int64)
    credits, energy = np.zeros(n, np.int64), np.zeros(n, np.int64)
    exits = np.zeros(n, np.int64)
    corners = np.zeros(n, np.int64)
    bonus = np.zeros(n, np.int64)
    revealed_rows = [i for i, (_, revealed) in enumerate(records) if revealed is not None]
    types = np.zeros((len(revealed_rows), len(ENEMY_NAMES)), np.int64)
    questions = np.zeros((len(revealed_rows), 9 + N_PROGRAMS), np.int64)
    block_types = ("data", "program", "question")
    for i, (board, _) in enumerate(records):
        for row in board["cells"]:
            for cell in row:
                index = cell["row"] * GRID + cell["col"]
                if cell["isExit"]:
                    exits[i] = CORNERS.index((cell["row"], cell["col"]))
                block = cell.get("block")
                if block is not None:
                    block_cells[i, index] = 1
                    kinds[i, block_types.index(block["blockType"])] += 1
                    if block["blockType"] == "question":
                        question_cells[i, index] = 1
                    elif block["blockType"] == "data":
                        points[i, block["points"] - 1] += 1
                    else:
                        programs[i, block["programActionIndex"] - PROGRAM_ACTION_OFFSET] += 1
                if "transmission" in cell:
                    transmission_cells[i, index] = 1
                for offset, name in ((0, "credits"), (3, "energy")):
                    if name in cell:
                        resources[i, offset + cell[name] - 1] += 1
                credits[i] += cell.get("credits", 0)
                energy[i] += cell.get("energy", 0)
        corners[i] = CORNERS.index((board["playerRow"], board["playerCol"]))
        held = [board["credits"] > 0, board["energy"] > 0, board["dataSiphons"] > 0]
        bonus[i] = held.index(True) if stage == 1 else 0
    for j, i in enumerate(revealed_rows):
        revealed = records[i][1]
        for kind in revealed["types"]:
            types[j, kind] += 1
        for content in revealed["questions"]:
            questions[j, content] += 1
    result = {
        "exit corner": ("categorical", exits),
        "block count": ("categorical", block_cells.sum(axis=1)),
        "block cells": ("counts", block_cells),
        "block kinds (data/program/question)": ("counts", kinds),
        "question block cells": ("counts", question_cells),
        "data-block points": ("counts", points),
        "program blocks' programs": ("counts", programs),
        "resources (credits/energy x 1/2/3)": ("counts", resources),
        "credits on the board": ("categorical", credits),
        "energy on the board": ("categorical", energy),
        "transmission count": ("categorical", transmission_cells.sum(axis=1)),
        "transmission cells": ("counts", transmission_cells),
        "transmission enemy types": ("counts", types),
        "question contents (points/program)": ("counts", questions),
    }
    if stage == 1:
        result["player corner"] = ("categorical", corners)
        result["starting bonus"] = ("categorical", bonus)
    return result


# --- tests --------------------------------------------------------------------------------------

def compare(swift: dict, ours: dict, permutations: int, rng) -> list:
    rows = []
    for name, (kind, values) in swift.items():
        other = ours[name][1]
        if kind == "categorical":
            statistic, dof, p = chi_square_categorical(values, other)
            test = f"chi-square, {dof} dof"
        else:
            statistic, dof, p = permutation_chi_square(values, other, permutations, rng)
            test = f"permutation chi-square, {dof} components"
        if p is None:
            same = np.array_equal(np.unique(values, axis=0), np.unique(other, axis=0))
            test = "one value on both sides" if same else "one value each, different"
        rows.append({"feature": name, "test": test, "statistic": round(statistic, 3),
                     "p": p, "n_swift": int(len(values)), "n_jax": int(len(other)),
                     "swift_mean": _mean(values), "jax_mean": _mean(other)})
    return rows


def _mean(values):
    mean = np.asarray(values, np.float64).mean(axis=0) if len(values) else np.nan
    return np.round(mean, 4).tolist()


# --- the run ------------------------------------------------------------------------------------

def run_stage(swift_engine, env, stage, boards, permutations, seed):
    """Rows of one sample set: a stage's boards (``stage`` 1..8), the in-game spawns
    (``stage`` "spawns") or one step's random outcomes (``stage`` "outcomes")."""
    rng = np.random.default_rng(seed)
    key = jax.random.PRNGKey(seed)
    started = time.time()
    if stage == SPAWNS:
        swift = {f"{name}: {feature}": value for name, (scenario, action) in SPAWN_SCENARIOS.items()
                 for feature, value in spawn_features(
                     swift_spawns(swift_engine, scenario, action, boards)).items()}
    elif stage == OUTCOMES:
        swift = {name: ("categorical", swift_outcomes(swift_engine, *scenario, boards))
                 for name, scenario in OUTCOME_SCENARIOS.items()}
    else:
        swift = features(swift_boards(swift_engine, stage, boards), stage)
    swift_s = time.time() - started
    started = time.time()
    if stage == SPAWNS:
        ours = {f"{name}: {feature}": value for name, (scenario, action) in SPAWN_SCENARIOS.items()
                for feature, value in spawn_features(
                    jax_spawns(env, scenario, action, boards, key)).items()}
    elif stage == OUTCOMES:
        ours = {}
        for name, scenario in OUTCOME_SCENARIOS.items():
            key, outcome_key = jax.random.split(key)
            ours[name] = ("categorical", jax_outcomes(env, *scenario, boards, outcome_key))
    else:
        ours = features(jax_boards(env, stage, boards, key), stage)
    jax_s = time.time() - started
    return compare(swift, ours, permutations, rng), swift_s, jax_s


def checked_stage(swift_engine, env, stage, boards, permutations, seed):
    """(rows, confirmed failures, Swift seconds, JAX seconds) of one stage. A feature below
    LEVEL is tested again on fresh boards (``confirmation_p``); it fails only if it is below
    LEVEL again, or if a feature that has one value per engine has different ones."""
    rows, swift_s, jax_s = run_stage(swift_engine, env, stage, boards, permutations, seed)
    failures, again = [], None
    for row in rows:
        if row["p"] is None:
            if row["test"] != "one value on both sides":
                failures.append(row["feature"])
            continue
        if row["p"] < LEVEL:
            if again is None:
                again = run_stage(swift_engine, env, stage, boards, permutations, seed + 1000)[0]
            row["confirmation_p"] = next(r["p"] for r in again if r["feature"] == row["feature"])
            if row["confirmation_p"] is None or row["confirmation_p"] < LEVEL:
                failures.append(row["feature"])
    return rows, failures, swift_s, jax_s


def main(argv=None) -> int:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_binary_option(parser)
    parser.add_argument("--boards", type=int, default=10_000, help="boards per stage and engine")
    parser.add_argument("--stages", nargs="+", default=[str(s) for s in range(1, N_STAGES + 1)]
                        + [SPAWNS, OUTCOMES], help=f"stages 1..{N_STAGES} and/or '{SPAWNS}' "
                        f"(in-game spawns from fixed scenarios) and/or '{OUTCOMES}' (WARP's "
                        "target, POLY's type and the enemies' order from fixed scenarios)")
    parser.add_argument("--permutations", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="PATH", default=None, help="write the JSON report here")
    add_overwrite_argument(parser)
    args = parser.parse_args(argv)
    check_binary(parser, args.binary)
    if refuse_output_file(args.json, "--json", args.overwrite):
        return 2
    valid = [str(s) for s in range(1, N_STAGES + 1)] + [SPAWNS, OUTCOMES]
    if any(s not in valid for s in args.stages):
        parser.error(f"--stages takes {' '.join(valid)}")
    stages = [s if s in (SPAWNS, OUTCOMES) else int(s) for s in args.stages]
    enable_server_compile_cache()
    env = HackMatrix()
    report = {"binary": binary_label(args.binary), "boards_per_stage": args.boards,
              "permutations": args.permutations, "level": LEVEL, "stages": {}}
    failures = []
    with ProtocolEngine([args.binary, "--headless-cli"]) as swift:
        for index, stage in enumerate(stages):
            rows, failed, swift_s, jax_s = checked_stage(swift, env, stage, args.boards,
                                                         args.permutations, args.seed + index)
            failures += [(stage, feature) for feature in failed]
            report["stages"][str(stage)] = {"rows": rows, "swift_seconds": round(swift_s, 1),
                                            "jax_seconds": round(jax_s, 1)}
            print(f"{'stage ' if stage not in (SPAWNS, OUTCOMES) else ''}{stage}: "
                  f"{args.boards} samples each "
                  f"(Swift {swift_s:.0f} s, JAX {jax_s:.0f} s)", flush=True)
            for row in rows:
                note = f"  (again: {row['confirmation_p']:.4f})" if "confirmation_p" in row else ""
                p = "" if row["p"] is None else f"p = {row['p']:.4f}"
                print(f"  {row['feature']:<40} {row['test']:<38} {p}{note}", flush=True)
    p_values = [row["p"] for stage in report["stages"].values() for row in stage["rows"]
                if row["p"] is not None]
    uniformity = stats.kstest(p_values, "uniform")
    report["p_values"] = {"count": len(p_values), "min": min(p_values),
                          "below_level": sum(p < LEVEL for p in p_values),
                          "ks_uniform_p": float(uniformity.pvalue)}
    report["confirmed_failures"] = [list(f) for f in failures]
    print(f"{len(p_values)} tests, min p = {min(p_values):.4f}, "
          f"{report['p_values']['below_level']} below {LEVEL} before confirmation, "
          f"{len(failures)} confirmed; KS of the p-values against uniform: "
          f"p = {uniformity.pvalue:.3f}")
    if args.json:
        write_text(args.json, json.dumps(report, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
