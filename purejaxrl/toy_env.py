"""A tiny deterministic corridor with HackMatrix's interface, for testing the trainer.

It returns the same structures as ``envs.hackmatrix.HackMatrix`` (an ``Observation``, the same
``info`` keys, 28 masked actions, auto-reset with ``final_observation``), so the trainer runs the
identical code path on both. Every reward depends on where the action was taken, so a trainer
that pairs an action with the wrong observation gets different numbers.

The corridor: cells 0..4 on row 0 of the 6x6 grid, the agent starts on cell 0, the exit is
cell 4. Actions (HackMatrix indices):

| action | legal when | effect | reward (besides the step penalty -0.01) |
|---|---|---|---|
| 3 right | always | move +1; cell 4 = victory (terminated, won) | stage_completion +0.1 per new cell, victory +1 |
| 2 left | cell > 0 | move -1 | 0 |
| 1 down | odd cell | a "shot": no move, ``info["shot"]`` | kills +0.05 * cell |
| 0 up | cell 3 | death (terminated, died) | death_penalty -1 |
| 4 siphon | cell 2, not yet siphoned | siphons once | data_siphon +0.3 |
| 5 (first program) | always | nothing | program_waste -0.02 |
| 6..27 | never | an illegal action ends the episode with reward 0 (decisions R4) | 0 |

Episodes are truncated after ``max_steps_in_episode`` steps.
"""

from __future__ import annotations

from flax import struct
import jax
import jax.numpy as jnp

from envs.hackmatrix import REWARD_COMPONENTS as HACKMATRIX_REWARD_COMPONENTS
from gymnax.environments import spaces

from envs.hackmatrix.core.constants import ACTION_SIPHON, GRID, N_ACTIONS, N_PROGRAMS
from envs.hackmatrix.observation import N_PLAYER_FEATURES, Observation

NUM_ACTIONS = N_ACTIONS
RIGHT = 3
CORRIDOR_LENGTH = 5
EXIT_CELL = CORRIDOR_LENGTH - 1
GRID_CHANNELS = 2  # agent, exit
STEP_PENALTY = -0.01

REWARD_COMPONENTS = HACKMATRIX_REWARD_COMPONENTS  # the same info["reward_breakdown"] keys


@struct.dataclass
class ToyEnvParams:
    max_steps_in_episode: int = 16
    shaping_gamma: float = 0.99  # part of the trainer's contract; the corridor does not shape


@struct.dataclass
class ToyState:
    cell: jax.Array  # i32: agent position 0..4
    best_cell: jax.Array  # i32: furthest cell reached this episode ("stage" = best_cell + 1)
    siphoned: jax.Array  # bool
    time: jax.Array  # i32: steps taken this episode


def action_mask(state: ToyState) -> jax.Array:
    actions = jnp.arange(NUM_ACTIONS)
    return ((actions == RIGHT)
            | ((actions == 2) & (state.cell > 0))
            | ((actions == 1) & (state.cell % 2 == 1))
            | ((actions == 0) & (state.cell == 3))
            | ((actions == ACTION_SIPHON) & (state.cell == 2) & ~state.siphoned)
            | (actions == 5))


def heuristic_policy(key, obs, env_state):
    """The corridor's scripted baseline: always step right, towards the exit."""
    return jnp.int32(RIGHT)


class ToyCorridor:
    """gymnax-style API with HackMatrix's 6-tuple ``step`` (auto-resetting)."""

    num_actions = NUM_ACTIONS
    reward_components = REWARD_COMPONENTS
    num_stages = CORRIDOR_LENGTH  # "stage" = furthest cell + 1; the win is on the last

    def __init__(self, reward_shaping: str = "swift", close_undo_exploit: bool = False,
                 undo_pays_once: bool = False):
        # Accepted so the trainer's factory passes the same options to both environments.
        self.reward_shaping = reward_shaping
        self.close_undo_exploit = close_undo_exploit
        self.undo_pays_once = undo_pays_once

    @property
    def default_params(self) -> ToyEnvParams:
        return ToyEnvParams()

    def observation_space(self, params: ToyEnvParams | None = None) -> spaces.Dict:
        return spaces.Dict({
            "player": spaces.Box(0.0, 1.0, (N_PLAYER_FEATURES,), jnp.float32),
            "programs": spaces.Box(0, 1, (N_PROGRAMS,), jnp.int32),
            "grid": spaces.Box(0.0, 1.0, (GRID, GRID, GRID_CHANNELS), jnp.float32),
            "action_mask": spaces.Box(0, 1, (NUM_ACTIONS,), jnp.bool_),
        })

    def observation(self, state: ToyState) -> Observation:
        cells = jnp.arange(GRID * GRID).reshape(GRID, GRID)
        grid = jnp.stack([cells == state.cell, cells == EXIT_CELL], axis=-1).astype(jnp.float32)
        # player[0] = cell / 4, player[1] = siphoned, player[2] = best cell / 4: everything the
        # reward depends on, so a test can compute the reward from (observation, action).
        player = (jnp.zeros(N_PLAYER_FEATURES, jnp.float32).at[0].set(state.cell / EXIT_CELL)
                  .at[1].set(state.siphoned.astype(jnp.float32))
                  .at[2].set(state.best_cell / EXIT_CELL))
        return Observation(player=player, programs=jnp.zeros(N_PROGRAMS, jnp.int32), grid=grid,
                           action_mask=action_mask(state))

    def reset(self, key: jax.Array, params: ToyEnvParams):
        del key  # deterministic
        state = ToyState(cell=jnp.int32(0), best_cell=jnp.int32(0), siphoned=jnp.bool_(False),
                         time=jnp.int32(0))
        return self.observation(state), state

    def step_env(self, state: ToyState, action: jax.Array, params: ToyEnvParams):
        """One step without auto-reset."""
        action = jnp.asarray(action, jnp.int32)
        invalid = ~action_mask(state)[action]
        cell = state.cell + jnp.where(action == RIGHT, 1, 0) - jnp.where(action == 2, 1, 0)
        cell = jnp.where(invalid, state.cell, cell)
        won = ~invalid & (cell == EXIT_CELL)
        died = ~invalid & (action == 0)
        new_best = cell > state.best_cell
        valid = (~invalid).astype(jnp.float32)
        breakdown = {name: jnp.float32(0.0) for name in REWARD_COMPONENTS}
        breakdown["step_penalty"] = STEP_PENALTY * valid
        breakdown["stage_completion"] = 0.1 * (new_best & ~invalid)
        breakdown["victory"] = 1.0 * won
        breakdown["death_penalty"] = -1.0 * died
        breakdown["kills"] = 0.05 * state.cell * (~invalid & (action == 1))
        breakdown["data_siphon"] = 0.3 * (~invalid & (action == ACTION_SIPHON))
        breakdown["program_waste"] = -0.02 * (~invalid & (action == 5))
        breakdown = {k: jnp.asarray(v, jnp.float32) for k, v in breakdown.items()}
        reward = sum(breakdown[name] for name in REWARD_COMPONENTS)
        next_state = ToyState(cell=cell, best_cell=jnp.maximum(state.best_cell, cell),
                              siphoned=state.siphoned | (~invalid & (action == ACTION_SIPHON)),
                              time=state.time + 1)
        terminated = won | died | invalid
        truncated = ~terminated & (next_state.time >= params.max_steps_in_episode)
        info = {
            "reward_breakdown": breakdown,
            "invalid_action": invalid,
            "stage_complete": new_best & ~invalid,
            "won": won,
            "died": died,
            "stage": next_state.best_cell + 1,
            "undo_exploit_completion": jnp.bool_(False),
            "shot": ~invalid & (action == 1),
            "overflow": jnp.int32(0),  # no slot capacities to overflow
        }
        return self.observation(next_state), next_state, reward, terminated, truncated, info

    def step(self, key: jax.Array, state: ToyState, action: jax.Array, params: ToyEnvParams):
        obs_step, state_step, reward, terminated, truncated, info = self.step_env(
            state, action, params)
        obs_reset, state_reset = self.reset(key, params)
        done = terminated | truncated
        pick = lambda a, b: jax.tree.map(lambda x, y: jnp.where(done, x, y), a, b)
        info = dict(info, final_observation=obs_step)
        return (pick(obs_reset, obs_step), pick(state_reset, state_step), reward, terminated,
                truncated, info)
