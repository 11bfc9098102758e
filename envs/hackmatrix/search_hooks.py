"""The HackMatrix side of search (``purejaxrl/search.py`` is the game-free side): the model the
search steps, the objective it maximises, its leaf values, and the actions it may play.

* **Model.** The game's own ``step_env`` (no auto-reset, so a death or a win is a terminal
  node), on a copy of the state whose UNDO history is emptied and one slot long: the search
  never plays UNDO (``search_actions``), so the ring buffer (about 80% of a state's bytes)
  would only inflate every node of the tree; and a world re-drawn by ``determinize`` keeps the
  true snapshots, which UNDO would reveal. The reward ledger (``undo_pays_once``) goes too: it
  changes only what UNDO pays.
* **Objective.** One point per completed stage (the eighth is the win): stage reached and wins
  are the judge (SPEC §4.4), not the shaped return. Death ends the episode, so it forfeits all
  later points.
* **Leaf values.** ``exit_value``: gamma ** (BFS distance to the exit), the discounted point
  of walking straight to the exit with nothing in the way (later stages not counted), less
  ``HP_WEIGHT`` per missing HP point.
  ``rollout_value``: the scripted heuristic (``baselines``) played for a few steps in the model,
  its points plus ``exit_value`` where it stops (0 if it died).
* **Program bonus.** ``program_bonus``: a hand-set worth of owning programs, added to any
  leaf value, so that a search acquires a program its leaf undervalues (SPEC §4.5). A
  heuristic evaluation term, labelled as such in every row that uses it.
* **Threat cost.** ``threat_cost``: a hand-set price per enemy alive and transmission pending
  (beyond those every stage adds at its start), taken off any leaf value. Enemies and
  transmissions are kept from one stage to the next (game-rules §3.3, §10.1), so the stage-8
  crowd the searches die in is built over every stage, and a critic trained on a policy that
  rarely lives that long does not see it. Measured, the price makes the search faster and
  loses more games on the way, with as many enemies at the stage-8 deaths (SPEC §4.5): a
  probe, kept for what it showed. A heuristic evaluation term, labelled as such in every row
  that uses it.
* **Acquisition in reach.** ``acquisition_in_reach``: from the observation alone, whether a
  siphon now would acquire a program the player does not own; where the search mixes uniform
  into the network's prior only at such nodes (``--search-prior-mix-where acquire``), the
  siphon gets its floor there and every other move stays the network's.
"""

import jax
import jax.numpy as jnp
import numpy as np

from . import baselines, determinize
from .core import bitboard
from .core.constants import (ACTION_SIPHON, BLOCK, N_ACTIONS, N_CELLS, PROGRAM_ACTION_OFFSET,
                             PROGRAM_NAMES, UNDO)
from .core.entities import alive_enemies, cell_index
from .core.rewards import bfs_distance
from .core.sparse import tree_where
from .core.state import EnvState, empty_history
from .env import HackMatrix
from .observation import CH_BLOCK_PROGRAM_TYPE, CH_BLOCK_SIPHONED, GRID, Observation

MAX_HP = 3  # game-rules §1: full health


def search_actions(env: HackMatrix) -> np.ndarray:
    """bool[env.num_actions]: every action but UNDO (see the module docstring); the acquire
    macro, where the env has it, included."""
    return np.arange(env.num_actions) != PROGRAM_ACTION_OFFSET + UNDO


def plan_actions(env: HackMatrix) -> np.ndarray:
    """bool[env.num_actions]: the actions that are one move of a multi-step plan, which the
    rollout search may hold (``RolloutSettings.hold_steps``): the acquire macro, where the
    env has it."""
    return np.arange(env.num_actions) >= N_ACTIONS


LEAF_VALUES = ("exit", "rollout", "zero")


def search_model(env: HackMatrix) -> HackMatrix:
    """The env the search steps: ``env``'s rules and actions (the acquire macro kept) with a
    one-slot UNDO history, no ledger."""
    return HackMatrix(reward_shaping=env.reward_shaping, close_undo_exploit=env.close_undo_exploit,
                      undo_pays_once=False, acquire_macro=env.acquire_macro,
                      acquire_macro_pool=env.acquire_macro_pool,
                      acquire_macro_from_stage=env.acquire_macro_from_stage,
                      exit_distance_view=env.exit_distance_view,
                      max_enemies=env.max_enemies, max_transmissions=env.max_transmissions,
                      history_size=1)


def critic_leaf_problem(trained_options: dict) -> str | None:
    """Why the critic of a network trained under the env options ``trained_options`` (its
    checkpoint's, the training role's included) cannot be the search's leaf value, or None.
    The program potential (``program_potential``) pays gamma * Phi(s') - Phi(s) per step, so
    the critic learned the return less Phi(s); the search's model pays no potential, so every
    leaf would be docked the worth of the programs owned there, the opposite of the shaping."""
    potential = trained_options.get("program_potential") or 0.0
    if potential > 0:
        return (f"the network was trained with program_potential {potential}: its critic "
                "learned the return less the programs' potential, which the search's model "
                "does not pay")
    return None


def to_model_state(state: EnvState) -> EnvState:
    """``state`` as a state of ``search_model``'s env: empty one-slot history, no ledger."""
    history = empty_history(1, state.enemies.active.shape[-1],
                            state.transmissions.active.shape[-1])
    return state.replace(history=history, ledger=None)


def stage_points(reward, info) -> jax.Array:
    """The search's reward: 1 for a completed stage (the winning step included), else 0."""
    del reward
    return info["stage_complete"].astype(jnp.float32)


def exit_distance(state: EnvState):
    """(BFS distance from the player to the exit, reachable) on the state's blocks."""
    blocks = bitboard.from_bool(state.grid.content == BLOCK)
    return bfs_distance(blocks, cell_index(state.player.row, state.player.col),
                        cell_index(state.exit_row, state.exit_col))


# Leaf value lost per missing HP point: a hit the search survives still brings death closer,
# beyond its horizon (SPEC §4.5: 0 -> stage 3.30, 0.1 -> 3.92, 0.3 -> 3.75, 16 simulations).
HP_WEIGHT = 0.1


def exit_value(gamma: float, hp_weight: float = HP_WEIGHT):
    """Leaf value ``gamma ** distance * (1 - hp_weight * missing HP)`` (an exit cut off by
    blocks counts as the longest path, 36 steps)."""
    def value(key, obs, state):
        del key, obs
        distance, reachable = exit_distance(state)
        steps = jnp.where(reachable, distance, N_CELLS).astype(jnp.float32)
        missing = (MAX_HP - state.player.hp).astype(jnp.float32)
        return jnp.float32(gamma) ** steps * (1.0 - hp_weight * missing)
    return value


def zero_value(key, obs, state):
    del key, obs, state
    return jnp.float32(0.0)


def rollout_value(model_env: HackMatrix, model_params, gamma: float, steps: int):
    """Leaf value: the heuristic plays ``steps`` model steps (chance from the search's key);
    its discounted stage points, plus ``exit_value`` where it stops alive."""
    tail = exit_value(gamma)

    def value(key, obs, state):
        def step(index, carry):
            state, obs, total, discount, done = carry
            action = baselines.heuristic_policy(None, obs, state)
            next_obs, next_state, reward, terminated, info = model_env.step_env(
                jax.random.fold_in(key, index), state, action, model_params)
            total = total + jnp.where(done, 0.0, discount * stage_points(reward, info))
            state = tree_where(done, state, next_state)
            obs = tree_where(done, obs, next_obs)
            died = ~done & terminated & ~info["won"]
            won = ~done & info["won"]
            discount = jnp.where(done, discount, discount * gamma)
            # A death's leaf is worth nothing more; a win's, nothing more either.
            discount = jnp.where(died | won, 0.0, discount)
            return state, obs, total, discount, done | terminated

        last, _, total, discount, _ = jax.lax.fori_loop(
            0, steps, step, (state, obs, jnp.float32(0.0), jnp.float32(1.0), jnp.bool_(False)))
        return total + discount * tail(None, None, last)
    return value


def program_bonus(bonuses: dict):
    """Leaf term: the sum of ``bonuses[name]`` over the programs the state owns (names of
    ``constants.PROGRAM_NAMES``; an unknown name is a ValueError). Added to every leaf below an
    acquisition, it makes the acquiring branch worth that much more at the root; once the
    program is owned it is the same at every leaf and changes no choice."""
    unknown = sorted(set(bonuses) - set(PROGRAM_NAMES))
    if unknown:
        raise ValueError(f"unknown programs {', '.join(unknown)}; the programs are "
                         f"{', '.join(PROGRAM_NAMES)}")
    weights = np.zeros(len(PROGRAM_NAMES), np.float32)
    for name, bonus in bonuses.items():
        weights[PROGRAM_NAMES.index(name)] = bonus
    weights = jnp.asarray(weights)

    def value(state):
        return jnp.sum(jnp.where(state.owned, weights, 0.0))
    return value


def threat_count(state: EnvState) -> jax.Array:
    """f32: the enemies alive plus the transmissions pending (each hatches into an enemy)."""
    enemies = jnp.sum(alive_enemies(state.enemies))
    return (enemies + jnp.sum(state.transmissions.active)).astype(jnp.float32)


def threat_cost(cost: float):
    """Leaf term: ``-cost`` per enemy alive and transmission pending (``threat_count``) beyond
    the stage-start transmissions the game has added so far, 1 + 2 + ... + stage (game-rules
    §3.3 step 8: ``stage`` of them on each new stage, whatever the player did). That count
    is the same at every leaf of a stage, so within a stage the term prices only what the
    player's pace changes (kills, scheduled and siphon spawns); and it rises on an exit by
    exactly the new stage's transmissions, so reaching the exit costs nothing by itself."""
    if not (np.isfinite(cost) and cost >= 0):
        raise ValueError(f"a threat cost must be a finite number >= 0, got {cost}")

    def value(state):
        added_by_stages = (state.stage * (state.stage + 1) // 2).astype(jnp.float32)
        return -jnp.float32(cost) * (threat_count(state) - added_by_stages)
    return value


def acquisition_in_reach(obs: Observation, wanted_programs=None) -> jax.Array:
    """A siphon now would acquire a program the player does not own: the siphon is legal and
    the siphon cross (the player's cell and its 4 orthogonal neighbours, game-rules §2) holds
    an unsiphoned block whose program the observation shows (a question block shows none).
    ``wanted_programs`` (bool[23], ``constants.PROGRAM_NAMES`` order; None: all) narrows the
    programs that count. Observation only, so every world of a fair search agrees on it."""
    row = jnp.round(obs.player[0] * (GRID - 1))
    col = jnp.round(obs.player[1] * (GRID - 1))
    rows = jnp.arange(GRID)[:, None]
    cols = jnp.arange(GRID)[None, :]
    cross = (jnp.abs(rows - row) + jnp.abs(cols - col)) <= 1
    programs = obs.grid[..., CH_BLOCK_PROGRAM_TYPE:CH_BLOCK_PROGRAM_TYPE + len(PROGRAM_NAMES)]
    not_owned = obs.programs == 0
    if wanted_programs is not None:
        not_owned = not_owned & wanted_programs
    wanted = jnp.sum(programs * not_owned, axis=-1) > 0
    unsiphoned = obs.grid[..., CH_BLOCK_SIPHONED] == 0
    return obs.action_mask[ACTION_SIPHON] & jnp.any(cross & wanted & unsiphoned)


DEFAULT_GAMMA = 0.99
ROLLOUT_STEPS = 8


def stage_of(state: EnvState) -> jax.Array:
    """The stage the player is on (1..8): shown to the player (the observation's stage
    feature), so a policy may switch on it (``--search-until-stage``)."""
    return state.stage


# Read from the state each game's last action was chosen in: the programs owned then, so a
# search row can say which programs its games acquired (the game's own start owns none).
FINAL_STATE_VALUES = {"owned": lambda state: state.owned}
FINAL_STATE_LABELS = {"owned": PROGRAM_NAMES}


def make_hooks(env: HackMatrix, *, fair: bool, leaf: str = "exit", gamma: float = DEFAULT_GAMMA,
               attempts: int = determinize.DEFAULT_ATTEMPTS) -> dict:
    """The keyword arguments of ``purejaxrl.search.make_search_policy`` (less the settings and
    the prior) for a search on ``env``: ``fair`` re-draws the hidden fields of every world
    (``determinize``), else the worlds are the true state (perfect information). ``gamma``
    is the search's discount: the leaves' and the model's potential shaping's (a critic's
    gamma for a value leaf: its training paid the shaping at that gamma; until stop 81 the
    model shaped at 0.99 whatever the search's discount)."""
    if leaf not in LEAF_VALUES:
        raise ValueError(f"leaf must be one of {LEAF_VALUES}, got {leaf!r}")
    model = search_model(env)
    model_params = model.default_params.replace(shaping_gamma=gamma)
    values = {"exit": lambda: exit_value(gamma), "zero": lambda: zero_value,
              "rollout": lambda: rollout_value(model, model_params, gamma, ROLLOUT_STEPS)}
    sample_world = None
    if fair:
        def sample_world(key, state):
            return determinize.redraw_hidden(key, state, attempts)[0]
    return dict(model_env=model, model_params=model_params, to_model=to_model_state,
                sample_world=sample_world, reward_fn=stage_points, leaf_value=values[leaf](),
                allowed_actions=search_actions(env))


def model_steps_per_move(leaf: str, simulations: int, worlds: int) -> int:
    """Model env steps one move costs: one per simulation and world, plus the rollouts of
    every evaluated node (the root's included)."""
    steps = simulations * worlds
    if leaf == "rollout":
        steps += (simulations + 1) * worlds * ROLLOUT_STEPS
    return steps
