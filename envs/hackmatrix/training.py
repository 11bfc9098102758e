"""HackMatrix's training hooks (``envs/contract.py``): the training rewards, the episode metrics
the trainer logs and evaluation reports, the health signals about stages, and the board view of
the egocentric encoder. ``env.HackMatrix`` exposes them; the trainer never imports this module.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from envs.contract import BoardView, Metric

from .core.constants import (ACTION_SIPHON, BLOCK, GRID, N_ACTIONS, N_CELLS,
                             PROGRAM_ACTION_OFFSET, PROGRAM_SPAWN_COST)
from .core import bitboard
from .core.sparse import tree_where
from .observation import CH_EXIT, Observation, observed_blocks

# The kinds of action (the group-entropy bonus, ``--group-entropy-coef``): the four directions
# (a move, or an attack where an enemy stands), the siphon, the 23 programs. Moves are the
# common choice; siphons and programs are the economy the agent must not stop trying.
ACTION_GROUPS = (("direction", tuple(range(ACTION_SIPHON))),
                 ("siphon", (ACTION_SIPHON,)),
                 ("program", tuple(range(PROGRAM_ACTION_OFFSET, N_ACTIONS))))

# Components of Swift's reward whose episode total is fixed by how the episode ends: damage and
# recovery sum to (final HP - 3), i.e. -3 for every death; the death penalties follow from the
# stage at death. Under discounting they pay only for postponing the end, which is the stalling
# incentive (a policy that survives longer delays them); the "progress" training reward leaves
# them out. Spending resources on programs is not penalised either (only gains count).
TIMING_ONLY_COMPONENTS = ("damage_penalty", "hp_recovery", "death_penalty",
                          "siphon_death_penalty")
GAINS_ONLY_COMPONENTS = ("resource_gain",)


def progress_reward(reward: jax.Array, breakdown: dict) -> jax.Array:
    """The "progress" training reward: the components without the timing-only ones, resource
    spending unpenalised."""
    total = jnp.zeros_like(reward)
    for name, value in breakdown.items():
        if name in TIMING_ONLY_COMPONENTS:
            continue
        total = total + (jnp.maximum(value, 0.0) if name in GAINS_ONLY_COMPONENTS else value)
    return total


# What the "stages" training reward keeps: the progress through the game (the stage payouts,
# the victory) and the potential-style shaping terms whose sum over a game adds up to about
# nothing (the distance to the exit, decisions R7; the programs owned, ``program_potential``).
STAGE_COMPONENTS = ("stage_completion", "victory", "distance_shaping", "program_shaping")


def stages_reward(reward: jax.Array, breakdown: dict) -> jax.Array:
    """The "stages" training reward: only the progress through the game. Kills, data-siphon
    pickups, score, resources and siphon quality pay nothing of their own, so an act is worth
    only what it does for the stages (a program block is siphoned for what the program does
    later, not passed over for a resource cell that pays now)."""
    total = jnp.zeros_like(reward)
    for name in STAGE_COMPONENTS:
        if name in breakdown:
            total = total + breakdown[name]
    return total


# What "stage-count" keeps beside its point per stage: the potential-style shaping terms only.
STAGE_COUNT_SHAPING = ("distance_shaping", "program_shaping")


def stage_count_reward(reward: jax.Array, breakdown: dict) -> jax.Array:
    """The "stage-count" training reward: one point for each stage completed (the winning step
    completes the eighth and pays one point, not Swift's 64 + 500 + 100 x score), with the
    potential-style shaping terms, nothing else. Its undiscounted return is the number of
    stages a game completes, the learning benchmark's own judge (mean stage reached, wins
    being the eighth completion), where Swift's payouts double with each stage and a win pays
    several hundred: under those a policy that trades early deaths for a few more wins earns
    more, and is judged worse."""
    completed = (breakdown["stage_completion"] > 0) | (breakdown["victory"] > 0)
    total = completed.astype(jnp.float32)
    for name in STAGE_COUNT_SHAPING:
        if name in breakdown:
            total = total + breakdown[name]
    return total


TRAINING_REWARDS = {"progress": progress_reward, "stages": stages_reward,
                    "stage-count": stage_count_reward}

# Folded into a new game's key for the start-programs draw, so that the board, the corner and
# the starting bonus are those of the game without the option.
START_PROGRAMS_KEY_TAG = 0x5A27


def start_with_programs(state, key: jax.Array, count: int, share: float,
                        pool: tuple[int, ...] = ()):
    """The start-programs curriculum (a training option; the game starts with none and gains
    programs only by siphoning their blocks: game-rules §3.1, programs-rewards-observation
    §6.1): with probability ``share`` a new game's player owns ``count`` distinct programs,
    uniform among ``pool`` (program indices; empty: all 23), acquired in a uniform order;
    otherwise ``state`` unchanged. Credits and energy are the game's own, so running them is
    still paid for."""
    key = jax.random.fold_in(key, START_PROGRAMS_KEY_TAG)
    k_share, k_pick = jax.random.split(key)
    if pool:
        order = jnp.asarray(pool, jnp.int32)[jax.random.permutation(k_pick, len(pool))[:count]]
    else:
        order = jax.random.permutation(k_pick, state.program_rank.shape[-1])[:count]
    rank = jnp.full_like(state.program_rank, -1).at[order].set(
        jnp.arange(count, dtype=state.program_rank.dtype))
    granted = jax.random.uniform(k_share) < share
    return state.replace(program_rank=jnp.where(granted, rank, state.program_rank))


# Folded into a stage's generation key for the program-block draw, so that the rest of the
# board is that of the game without the option.
PROGRAM_BLOCK_KEY_TAG = 0x9B10


def plant_program_block(state, key: jax.Array, share: float, pool: tuple[int, ...]):
    """The program-block curriculum (a training option): with probability ``share`` a newly
    generated stage board's unsiphoned block nearest the player (Manhattan distance, ties
    uniform) is a visible block of a program drawn uniformly from ``pool`` (program indices,
    not empty), its transmission spawn that program's (game-rules §1.3). Where another block of
    the stage already holds that program, the two blocks swap contents, so the programs of a
    stage stay distinct (game-rules §3.4 step 2.3). The layout, the resources and everything
    else are the board's own; a board without blocks is unchanged. The game places programs
    on 17% of boards' blocks at random (SPEC §4.4); this makes the rare acquisition an agent
    must learn (siphoning one) common and near, without granting the program."""
    key = jax.random.fold_in(key, PROGRAM_BLOCK_KEY_TAG)
    k_share, k_pick, k_tie = jax.random.split(key, 3)
    grid = state.grid
    cells = jnp.arange(N_CELLS)
    distance = (jnp.abs(cells // GRID - state.player.row)
                + jnp.abs(cells % GRID - state.player.col)).astype(jnp.float32)
    candidate = (grid.content == BLOCK) & ~grid.siphoned
    target = jnp.argmin(jnp.where(candidate, distance + jax.random.uniform(k_tie, (N_CELLS,)),
                                  jnp.inf))
    program = jnp.asarray(pool, jnp.int32)[jax.random.randint(k_pick, (), 0, len(pool))]
    holder = grid.program == program
    holder_cell = jnp.argmax(holder)

    def swapped(field):
        return field.at[holder_cell].set(field[target]).at[target].set(field[holder_cell])

    written = grid.replace(points=grid.points.at[target].set(0),
                           program=grid.program.at[target].set(program),
                           spawn=grid.spawn.at[target].set(
                               jnp.asarray(PROGRAM_SPAWN_COST)[program]))
    exchanged = grid.replace(points=swapped(grid.points), program=swapped(grid.program),
                             spawn=swapped(grid.spawn), question=swapped(grid.question))
    planted = tree_where(jnp.any(holder), exchanged, written)
    planted = planted.replace(question=planted.question.at[target].set(False))
    chosen = (jax.random.uniform(k_share) < share) & jnp.any(candidate)
    return state.replace(grid=tree_where(chosen, planted, grid))


PROGRAM_SHAPING = "program_shaping"  # the reward component of the program_potential option


def program_shaping(owned_before, owned_after, terminal, per_program: float, gamma: float):
    """Potential-based shaping on the programs owned (the ``program_potential`` option):
    ``gamma * Phi(after) - Phi(before)``, ``Phi = per_program * programs owned`` (the counts
    before and after the step), and
    ``Phi = 0`` after a terminal step, as for decisions R7's distance potential. Acquiring a
    program pays ``per_program`` at once; holding it costs ``(1 - gamma) * per_program`` a
    step and a death or victory takes the rest back, so over a game the term adds up to about
    nothing and the best policy is the game's (Ng, Harada & Russell 1999): it pays for no act,
    it only moves the credit for owning a program to the step that acquired it, which a
    program's delayed worth (spawned transmissions now, its use stages later) otherwise hides."""
    phi_before = per_program * owned_before.astype(jnp.float32)
    phi_after = jnp.where(terminal, 0.0, per_program * owned_after.astype(jnp.float32))
    return (gamma * phi_after - phi_before).astype(jnp.float32)


def _direction(action):
    return (action >= 0) & (action < ACTION_SIPHON)


def _program(action):
    return (action >= PROGRAM_ACTION_OFFSET) & (action < N_ACTIONS)


# The names are those of the metrics files and ledgers written before the trainer was
# separated from the game, so old and new runs compare key for key.
METRICS = (
    Metric("won", lambda obs, action, info: info["won"], at_end=True,
           log="episode/win_rate", summary="win_rate", column="win_rate"),
    Metric("died", lambda obs, action, info: info["died"], at_end=True,
           log="episode/death_rate", summary="death_rate", column="death_rate"),
    Metric("invalid", lambda obs, action, info: info["invalid_action"], log="actions/invalid",
           log_per="total", summary="invalid_actions", summary_total=True,
           column="invalid_actions"),
    # Stage completions on a board UNDO restored from an earlier stage (decisions R9): where
    # the env leaves that loop open, a stage or a win may be bought with it.
    Metric("undo_exploit", lambda obs, action, info: info["undo_exploit_completion"],
           log="undo_exploit_completions", log_per="total",
           alert="UNDO-exploit stage completions",
           summary="undo_exploit_completions_per_episode", column="R9/ep"),
    # Episodes whose env dropped a slot append (capacities; must stay 0).
    Metric("overflow", lambda obs, action, info: info["overflow"] > 0, at_end=True,
           log="env/overflow_episodes", log_per="total", alert="episodes with slot overflow"),
    # The game action played (``info["action_played"]``): the acquire macro's move counts as
    # the move, siphon it plays.
    Metric("moves", lambda obs, action, info: _direction(info["action_played"]) & ~info["shot"],
           log="actions/move_fraction", log_per="step"),
    Metric("shots", lambda obs, action, info: _direction(info["action_played"]) & info["shot"],
           log="actions/shot_fraction", log_per="step"),
    Metric("siphons", lambda obs, action, info: info["action_played"] == ACTION_SIPHON,
           log="actions/siphon_fraction", log_per="step", summary="siphons_per_episode"),
    Metric("programs", lambda obs, action, info: _program(info["action_played"]),
           log="actions/program_fraction", log_per="step", summary="programs_per_episode",
           per_stage=True),
    # The policy's choices of the acquire macro (``HackMatrix(acquire_macro=True)``; 0 without).
    Metric("macros", lambda obs, action, info: action == N_ACTIONS,
           log="actions/macro_fraction", log_per="step", summary="macros_per_episode"),
    # Whether the economy is entered at all: agents that never acquire a program run none
    # (SPEC §4.4). Evaluation reports it per stage (the stage report's end resources).
    Metric("programs_owned", lambda obs, action, info: info["programs_owned"], at_end=True,
           log="episode/programs_owned"),
)


def stage_completions(stage_hist: np.ndarray, wins: float) -> float:
    """Stages completed by the finished episodes: an episode that ended on stage s completed
    s - 1 stages, and a victory also completed the last one (the stage stays 8, game-rules
    §10.1)."""
    stages = np.arange(len(stage_hist))
    return float((stage_hist * np.maximum(stages - 1, 0)).sum() + wins)


def health_metrics(totals: dict) -> dict:
    """Learning-health signals that return alone hides (return can be farmed): stage
    completions per finished episode, env steps per stage completed, and distance shaping
    earned per stage completed. A policy that farms the shaping or survives without
    progressing shows a rising ``steps_per_stage`` and ``shaping_per_stage``."""
    completions = stage_completions(totals["stage_hist"], float(totals["won"]))
    shaping = totals["breakdown"].get("distance_shaping")

    def ratio(numerator, denominator):
        return float(numerator) / denominator if denominator > 0 and numerator is not None \
            else None
    return {"progress/stages_completed_per_episode": ratio(completions, totals["episodes"]),
            "progress/steps_per_stage": ratio(totals["length_sum"], completions),
            "progress/shaping_per_stage": ratio(shaping, completions)}


def player_cell(obs: Observation) -> tuple[jax.Array, jax.Array]:
    """(row, col) i32 of the player, read back from player[0] = row / 5 and player[1] = col / 5
    (programs-rewards-observation §9.2)."""
    scaled = jnp.round(obs.player[..., :2] * (GRID - 1)).astype(jnp.int32)
    scaled = jnp.clip(scaled, 0, GRID - 1)
    return scaled[..., 0], scaled[..., 1]


def exit_distance_map(obs: Observation) -> jax.Array:
    """f32[6, 6]: each cell's 4-neighbour path distance to the exit over the cells without a
    block, read from the observation (blocks and the exit are always shown, so nothing hidden
    is used), divided by 36; 1 where no path leads to the exit (block cells included).
    Enemies, transmissions and the player do not block a path (Swift's ``findDistance``, the
    distance of the potential shaping, ``core.rewards.bfs_distance``)."""
    grid = obs.grid
    blocks = observed_blocks(obs).reshape(-1)
    exit_board = bitboard.from_bool(grid[..., CH_EXIT].reshape(-1) > 0)
    passable = bitboard.from_bool(~blocks) | exit_board

    def searching(carry):
        _, frontier, _ = carry
        return bitboard.any_set(frontier)

    def layer(carry):
        # distance counts, per cell, the layers that have not reached it yet; a finished
        # search (empty frontier) is left as it is (``bitboard.bfs_layers``).
        reached, frontier, distance = carry
        new = bitboard.neighbours(frontier) & passable & ~reached
        grew = bitboard.any_set(new)
        reached = reached | new
        distance = distance + (grew & ~bitboard.to_bool(reached)).astype(jnp.int32)
        return reached, new, distance

    start = (exit_board, exit_board, (~bitboard.to_bool(exit_board)).astype(jnp.int32))
    reached, _, distance = bitboard.bfs_layers(searching, layer, start)
    scaled = jnp.where(bitboard.to_bool(reached), distance.astype(jnp.float32) / N_CELLS, 1.0)
    return scaled.reshape(GRID, GRID)


def board_view(obs: Observation, exit_distance: bool = False) -> BoardView:
    """The 6x6 grid around the player, with the player features, the owned programs and the
    action mask beside it; with ``exit_distance`` the grid gains one last channel, each cell's
    ``exit_distance_map``."""
    row, col = player_cell(obs)
    grid = obs.grid
    if exit_distance:
        grid = jnp.concatenate([grid, exit_distance_map(obs)[..., None].astype(grid.dtype)],
                               axis=-1)
    return BoardView(grid=grid, row=row, col=col,
                     features=(obs.player, obs.programs, obs.action_mask))
