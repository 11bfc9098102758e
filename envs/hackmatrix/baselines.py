"""Scripted HackMatrix baselines, next to the game whose rules they reuse (as pgx's baselines).

A baseline is a policy ``act(key, obs, env_state) -> action`` for a single env, the signature of
``purejaxrl.evaluation``'s policies, so the evaluation loop runs it like a network."""

import jax
import jax.numpy as jnp

from .core import bitboard, game, rewards
from .core.constants import ACTION_SIPHON, BLOCK, DIR_DCOL, DIR_DROW, N_DIRECTIONS
from .core.entities import cell_index, on_board


def heuristic_policy(key, obs, env_state):
    """Shoot whatever is in line, else walk the BFS shortest path to the exit, else siphon, else
    the first legal action.

    "In line" and "shortest path" reuse the environment's own rules: ``game.direction_action``
    reports whether a direction would shoot (game-rules §5), ``rewards.bfs_distance`` is Swift's
    ``findDistance`` (§8.5: blocks impassable, enemies ignored)."""
    del key
    mask = obs.action_mask
    directions = jnp.arange(N_DIRECTIONS)
    shoots = jax.vmap(lambda d: game.direction_action(env_state, d).shot)(directions)
    player = env_state.player
    rows, cols = player.row + jnp.asarray(DIR_DROW), player.col + jnp.asarray(DIR_DCOL)
    inside = on_board(rows, cols)
    blocks = bitboard.from_bool(env_state.grid.content == BLOCK)
    exit_cell = cell_index(env_state.exit_row, env_state.exit_col)
    distance, reachable = jax.vmap(lambda c: rewards.bfs_distance(blocks, c, exit_cell))(
        jnp.where(inside, cell_index(rows, cols), 0))
    shoot_ok = mask[:N_DIRECTIONS] & shoots
    move_ok = mask[:N_DIRECTIONS] & ~shoots & inside & reachable
    best_move = jnp.argmin(jnp.where(move_ok, distance, jnp.iinfo(jnp.int32).max))
    fallback = jnp.where(mask[ACTION_SIPHON], ACTION_SIPHON, jnp.argmax(mask))
    return jnp.where(jnp.any(shoot_ok), jnp.argmax(shoot_ok),
                     jnp.where(jnp.any(move_ok), best_move, fallback)).astype(jnp.int32)
