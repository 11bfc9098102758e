"""Constants and lookup tables of HackMatrix (game-rules §1, programs-rewards-observation §2).

Cells are indexed row-major, ``cell = row * 6 + col``; row 0 is the bottom of the screen
(game-rules §0). Directions are enumerated Up, Down, Left, Right everywhere (action 0..3).
"""

import numpy as np

GRID = 6
N_CELLS = GRID * GRID
N_PROGRAMS = 23
N_STAGES = 8
# Actions: 0..3 the directions (U, D, L, R), 4 siphon, 5.. the programs in PROGRAM_NAMES order.
N_DIRECTIONS = 4
ACTION_SIPHON = N_DIRECTIONS
PROGRAM_ACTION_OFFSET = ACTION_SIPHON + 1
N_ACTIONS = PROGRAM_ACTION_OFFSET + N_PROGRAMS

# Direction order U, D, L, R (game-rules §0).
DIR_DROW = np.array([1, -1, 0, 0], np.int32)
DIR_DCOL = np.array([0, 0, -1, 1], np.int32)
DIR_NAMES = ("up", "down", "left", "right")

CORNERS = ((0, 0), (0, 5), (5, 0), (5, 5))  # canonical order (game-rules §1.1)
CORNER_CELLS = np.array([r * GRID + c for r, c in CORNERS], np.int32)

# Cell content (game-rules §2.3).
EMPTY, BLOCK, DATA_SIPHON, EXIT = 0, 1, 2, 3

# Enemy types in declaration order (game-rules §1.2).
VIRUS, DAEMON, GLITCH, CRYPTOG = 0, 1, 2, 3
N_ENEMY_TYPES = 4
ENEMY_NAMES = ("virus", "daemon", "glitch", "cryptog")
ENEMY_MAX_HP = np.array([2, 3, 2, 2], np.int32)
ENEMY_SPEED = np.array([2, 1, 1, 1], np.int32)

# Programs in ProgramType.allCases order; action index = 5 + position.
PROGRAM_NAMES = (
    "push", "pull", "crash", "warp", "poly", "wait", "debug", "row", "col", "undo",
    "step", "siph+", "exch", "show", "reset", "calm", "d_bom", "delay", "anti-v",
    "score", "reduc", "atk+", "hack",
)
(PUSH, PULL, CRASH, WARP, POLY, WAIT, DEBUG, ROW, COL, UNDO, STEP, SIPH_PLUS, EXCH, SHOW,
 RESET, CALM, D_BOM, DELAY, ANTI_V, SCORE, REDUC, ATK_PLUS, HACK) = range(N_PROGRAMS)
PROGRAM_COST_CREDITS = np.array(
    [0, 0, 3, 2, 1, 0, 3, 3, 3, 1, 0, 5, 4, 2, 0, 2, 3, 1, 3, 0, 2, 4, 2], np.int32)
PROGRAM_COST_ENERGY = np.array(
    [2, 2, 2, 2, 1, 1, 0, 1, 1, 0, 3, 0, 0, 0, 4, 4, 0, 2, 0, 5, 1, 4, 2], np.int32)
# Transmissions queued when a block holding the program is siphoned (game-rules §1.3).
PROGRAM_SPAWN_COST = np.array(
    [4, 4, 6, 5, 3, 1, 4, 2, 2, 3, 4, 7, 3, 2, 2, 6, 4, 4, 4, 5, 3, 8, 4], np.int32)

# Starting bonus (game-rules §1.5), uniform over this order.
BONUS_CREDITS, BONUS_ENERGY, BONUS_SIPHON = 0, 1, 2

# Scheduler (game-rules §9).
BASE_SCHEDULE_INTERVAL = 12  # 13 - stage at stage 1
MIN_SCHEDULE_INTERVAL = 4
SIPHON_SCHEDULE_DELAY = 5

# Generation (game-rules §3).
MIN_BLOCKS, MAX_BLOCKS = 5, 11
LAYOUT_ATTEMPTS = 100
SPAWN_TRIES = 100
# A new transmission (at a stage start or spawned in game) hatches after this many enemy turns
# (game-rules §1 "Transmission timer at creation", §2.6: every generation path uses 1).
NEW_TRANSMISSION_TURNS = 1

# Rewards (programs-rewards-observation §8.2).
STAGE_REWARD_TABLE = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 100.0], np.float32)

ROW_OF = np.arange(N_CELLS, dtype=np.int32) // GRID
COL_OF = np.arange(N_CELLS, dtype=np.int32) % GRID
IS_CORNER = np.isin(np.arange(N_CELLS), CORNER_CELLS)


def _neighbour_table() -> np.ndarray:
    """NEIGHBOUR[cell, d] = index of the cell one step in direction d, or -1 off-board."""
    table = np.full((N_CELLS, 4), -1, np.int32)
    for cell in range(N_CELLS):
        for d in range(4):
            r, c = ROW_OF[cell] + DIR_DROW[d], COL_OF[cell] + DIR_DCOL[d]
            if 0 <= r < GRID and 0 <= c < GRID:
                table[cell, d] = r * GRID + c
    return table


NEIGHBOUR = _neighbour_table()
# MANHATTAN[a, b] between cells.
MANHATTAN = (np.abs(ROW_OF[:, None] - ROW_OF[None, :])
             + np.abs(COL_OF[:, None] - COL_OF[None, :])).astype(np.int32)
