"""Determinisation: a world drawn from what the player of the numeric observation cannot see.

A search that expands the true ``EnvState`` plays with perfect information: it knows what the
hidden question blocks hold, where the cryptogs out of the player's line stand and what every
transmission will hatch into. ``redraw_hidden`` replaces those fields by draws from the game's
own distributions, conditioned on what the observation shows, and keeps everything the
observation shows (the observation of the world, action mask included, equals the original's:
a proposal that would change it is rejected). What it re-draws (SPEC §4.5):

* **question blocks** (unsiphoned): data or program by a fair coin, data points U{1..9}, a
  program uniform among those no revealed block of the board holds (a stage never holds a
  program twice), spawn count as generation sets it (game-rules §3.4) less the REDUC uses of
  the stage that the revealed blocks show (``reduc_uses``), and 0 where the mask shows REDUC
  exhausted (``reduc_shown_exhausted``);
* **resources under unsiphoned blocks**: none (generated boards never put any there);
* **transmissions**: the enemy type each hatches into, uniform (§3.6), also under SHOW: SHOW
  shows it in the game's own view, but no channel of the numeric observation encodes it
  (programs-rewards-observation §9.2);
* **hidden cryptogs** (live, out of the player's row and column, no SHOW): a cell uniform among
  those where the cryptog would stay hidden and change nothing shown (not in the player's row or
  column, no block, no other enemy, no transmission), distinct cells for distinct cryptogs.
  Their number, hp and status are kept: a player who watched the board saw each transmission
  hatch into nothing visible.

Up to ``attempts`` proposals re-draw all of it, each from its own key; the first whose
observation equals the original's wins (level 0). Else up to ``attempts`` more re-draw all but
the cryptogs' cells (level 1: the mask can pin a cryptog down, e.g. one on a block next to the
player makes that direction legal, and then every hidden cryptog keeps its true cell, a leak
of the free ones' cells). Else the world is the true state (level 2, perfect information: no
re-draw kept the observation; SPEC §4.5 says how rarely either fallback happens).

Kept as they are, because a player who watched every step knows them: turn and scheduler
counters, pending siphon spawns, enemies stacked under the one a cell shows, disabled turns,
the acquisition order of programs, credits and energy above the observation's cap of 50. The
UNDO snapshots are not re-drawn: a search over a re-drawn world must not play UNDO
(``search_hooks.to_model_state`` empties the history).
"""

import jax
import jax.numpy as jnp
import numpy as np

from .core.constants import (BLOCK, CRYPTOG, GRID, N_CELLS, N_ENEMY_TYPES, N_PROGRAMS,
                             PROGRAM_SPAWN_COST, REDUC)
from .core.entities import alive_enemies, cell_index, enemy_visible
from .core.programs import affordable, program_applicable
from .core.rng import uniform_below
from .core.state import EnvState
from .observation import build_observation

DEFAULT_ATTEMPTS = 8
_CELLS = np.arange(N_CELLS, dtype=np.int32)
_PROGRAMS = np.arange(N_PROGRAMS, dtype=np.int32)
# Random sort keys keep their top 26 bits and carry the index in the low 6, so no two tie; an
# excluded entry gets the largest key and sorts last (as in core/generation.py).
_KEY_RANDOM_BITS = np.uint32(0xFFFFFFC0)
_EXCLUDED_KEY = np.uint32(0xFFFFFFFF)


def _random_order(bits: jax.Array, allowed: jax.Array) -> jax.Array:
    """Indices of ``allowed`` entries in uniformly random order, the excluded ones last."""
    index = jnp.arange(allowed.shape[0], dtype=jnp.uint32)
    keys = jnp.where(allowed, (bits & _KEY_RANDOM_BITS) | index, _EXCLUDED_KEY)
    return jnp.argsort(keys).astype(jnp.int32)


def hidden_question_blocks(state: EnvState) -> jax.Array:
    """bool[36]: blocks whose content the observation hides (question, not siphoned)."""
    g = state.grid
    return (g.content == BLOCK) & g.question & ~g.siphoned


def hidden_cryptogs(state: EnvState) -> jax.Array:
    """bool[E]: live cryptogs the observation does not report (out of line, no SHOW)."""
    e, p = state.enemies, state.player
    visible = enemy_visible(e.kind, e.row, e.col, p.row, p.col, state.show)
    return alive_enemies(e) & (e.kind == CRYPTOG) & ~visible


def reduc_uses(state: EnvState) -> jax.Array:
    """i32: how many times REDUC lowered the spawn counts of this stage's blocks, as far as the
    revealed unsiphoned blocks show it (each use lowers every unsiphoned block's count by one,
    down to 0: a lower bound once a revealed count reached 0). A block's count starts at its
    points (data) or its program's cost (game-rules §3.4)."""
    g = state.grid
    revealed = (g.content == BLOCK) & ~g.question & ~g.siphoned
    program_cost = jnp.asarray(PROGRAM_SPAWN_COST)[jnp.clip(g.program, 0, N_PROGRAMS - 1)]
    original = jnp.where(g.program >= 0, program_cost, g.points)
    return jnp.max(jnp.where(revealed, original - g.spawn, 0), initial=0)


def reduc_shown_exhausted(state: EnvState) -> jax.Array:
    """bool: the action mask shows that no unsiphoned block has a spawn count above 0: REDUC is
    owned and affordable, so its mask entry (``programs.can_execute``) is its applicability
    (game-rules §2: some unsiphoned block's count above 0), and that is off."""
    return state.owned[REDUC] & affordable(state)[REDUC] & ~program_applicable(state)[REDUC]


def _redraw_blocks(key: jax.Array, state: EnvState) -> EnvState:
    """Question-block contents and resources under unsiphoned blocks, re-drawn."""
    g = state.grid
    hidden = hidden_question_blocks(state)
    bits = jax.random.bits(key, (4, N_CELLS), jnp.uint32)
    is_data = (bits[0] >> jnp.uint32(31)) == 1
    points = 1 + uniform_below(bits[1], 9)
    revealed_programs = (g.content == BLOCK) & ~hidden & (g.program >= 0)
    taken = jnp.any(revealed_programs[:, None] & (g.program[:, None] == jnp.asarray(_PROGRAMS)),
                    axis=0)
    order = _random_order(bits[2, :N_PROGRAMS], ~taken)
    # The i-th hidden program block (row-major) takes the i-th free program of the order.
    program_blocks = hidden & ~is_data
    rank = jnp.cumsum(program_blocks) - 1
    enough = rank < jnp.sum(~taken)
    program_blocks = program_blocks & enough  # a 24th program block would be a data block
    program = jnp.where(program_blocks, order[jnp.clip(rank, 0, N_PROGRAMS - 1)], -1)
    data_blocks = hidden & ~program_blocks
    spawn = jnp.where(data_blocks, points,
                      jnp.asarray(PROGRAM_SPAWN_COST)[jnp.clip(program, 0, N_PROGRAMS - 1)])
    spawn = jnp.maximum(spawn - reduc_uses(state), 0)
    # REDUC's legality shows whether any unsiphoned block still has a count above 0, wherever
    # the player owns it and can pay for it; shown exhausted, every hidden count is 0 (the
    # revealed blocks bound the uses only from below, so their cuts alone leave counts that
    # would make REDUC legal in every proposal and the world the true state).
    spawn = jnp.where(reduc_shown_exhausted(state), 0, spawn)
    under_block = (g.content == BLOCK) & ~g.siphoned
    grid = g.replace(
        points=jnp.where(hidden, jnp.where(data_blocks, points, 0), g.points),
        program=jnp.where(hidden, program, g.program),
        spawn=jnp.where(hidden, spawn, g.spawn),
        credits=jnp.where(under_block, 0, g.credits),
        energy=jnp.where(under_block, 0, g.energy))
    return state.replace(grid=grid)


def _redraw_transmission_kinds(key: jax.Array, state: EnvState) -> EnvState:
    t = state.transmissions
    kind = uniform_below(jax.random.bits(key, t.kind.shape, jnp.uint32), N_ENEMY_TYPES)
    return state.replace(transmissions=t.replace(kind=jnp.where(t.active, kind, t.kind)))


def _cryptog_cells(state: EnvState, hidden: jax.Array) -> jax.Array:
    """bool[36]: where a hidden cryptog may be put without showing or hiding anything."""
    e, p, t = state.enemies, state.player, state.transmissions
    cells = jnp.asarray(_CELLS)
    others = e.active & ~hidden
    enemy_here = jnp.any(others[:, None] & (cell_index(e.row, e.col)[:, None] == cells), axis=0)
    transmission_here = jnp.any(t.active[:, None] & (cell_index(t.row, t.col)[:, None] == cells),
                                axis=0)
    out_of_line = (cells // GRID != p.row) & (cells % GRID != p.col)
    return out_of_line & (state.grid.content != BLOCK) & ~enemy_here & ~transmission_here


def _move_cryptogs(key: jax.Array, state: EnvState, hidden: jax.Array) -> EnvState:
    """The hidden cryptogs on distinct cells drawn uniformly from ``_cryptog_cells``; a cryptog
    beyond the number of such cells keeps its cell."""
    e = state.enemies
    allowed = _cryptog_cells(state, hidden)
    order = _random_order(jax.random.bits(key, (N_CELLS,), jnp.uint32), allowed)
    rank = jnp.cumsum(hidden) - 1
    moved = hidden & (rank < jnp.sum(allowed))
    cell = order[jnp.clip(rank, 0, N_CELLS - 1)]
    return state.replace(enemies=e.replace(row=jnp.where(moved, cell // GRID, e.row),
                                           col=jnp.where(moved, cell % GRID, e.col)))


# Float features are multiples of 1/50, 1/9, 1/4 or 1/3 at least 0.02 apart; the same value
# may differ in its last bit between two programs (XLA turns x / 50 into x * 0.02 in some).
OBSERVATION_TOLERANCE = 1e-5


def same_observation(a, b) -> jax.Array:
    """Whether two observations are equal (floats to ``OBSERVATION_TOLERANCE``)."""
    def equal(x, y):
        if jnp.issubdtype(x.dtype, jnp.floating):
            return jnp.all(jnp.abs(x - y) <= OBSERVATION_TOLERANCE)
        return jnp.all(x == y)
    return jnp.all(jnp.stack([equal(x, y) for x, y in zip(jax.tree.leaves(a),
                                                          jax.tree.leaves(b))]))


def _redraw(key: jax.Array, state: EnvState, hidden: jax.Array, move_cryptogs: bool):
    """One proposal: blocks, transmission types and (``move_cryptogs``) the hidden cryptogs'
    cells re-drawn from ``key``."""
    k_blocks, k_kinds, k_cells = jax.random.split(key, 3)
    world = _redraw_transmission_kinds(k_kinds, _redraw_blocks(k_blocks, state))
    return _move_cryptogs(k_cells, world, hidden) if move_cryptogs else world


# What ``redraw_hidden``'s level says was re-drawn.
LEVELS = ("everything", "all but the cryptogs' cells", "nothing: the true state")


def redraw_hidden(key: jax.Array, state: EnvState, attempts: int = DEFAULT_ATTEMPTS):
    """(world, level): a state with the hidden fields re-drawn (module docstring) and the same
    observation as ``state``. ``level`` (i32, an index of ``LEVELS``) says how much was
    re-drawn: 0 everything, 1 everything but the cryptogs' cells, 2 nothing (no proposal kept
    the observation: the world is the true state). Single state; vmap for batches."""
    truth = build_observation(state)
    hidden = hidden_cryptogs(state)
    keys = jax.random.split(key, 2 * attempts)
    moved = jax.vmap(lambda k: _redraw(k, state, hidden, True))(keys[:attempts])
    kept = jax.vmap(lambda k: _redraw(k, state, hidden, False))(keys[attempts:])
    candidates = jax.tree.map(lambda a, b, true: jnp.concatenate([a, b, true[None]]),
                              moved, kept, state)
    same = jax.vmap(lambda s: same_observation(build_observation(s), truth))(candidates)
    first = jnp.argmax(same.at[-1].set(True))
    world = jax.tree.map(lambda x: x[first], candidates)
    return world, (first // attempts).astype(jnp.int32)


def worlds_differ(a: EnvState, b: EnvState) -> jax.Array:
    """Whether two states differ in a field ``redraw_hidden`` may change (for its tests and
    statistics)."""
    fields = (a.grid.points, a.grid.program, a.grid.spawn, a.grid.credits, a.grid.energy,
              a.transmissions.kind, a.enemies.row, a.enemies.col)
    others = (b.grid.points, b.grid.program, b.grid.spawn, b.grid.credits, b.grid.energy,
              b.transmissions.kind, b.enemies.row, b.enemies.col)
    return jnp.any(jnp.stack([jnp.any(x != y) for x, y in zip(fields, others)]))
