"""A tiny deterministic corridor for testing the trainer: gymnax's API and every optional hook of
``envs/contract.py`` (action mask, reward breakdown, a training reward, metrics, stages, a
heuristic, a board view), each in a few lines. Every reward depends on where the action was
taken, so a trainer that pairs an action with the wrong observation gets different numbers.

The corridor: cells 0..4, the agent starts on cell 0, the exit is cell 4.

| action | legal when | effect | reward component (besides ``step_penalty`` -0.01) |
|---|---|---|---|
| 3 right | always | move +1; cell 4 = victory (terminated, won) | ``progress`` +0.1 per new cell, ``victory`` +1 |
| 2 left | cell > 0 | move -1 | 0 |
| 1 down | odd cell | a shot: no move | ``shot`` +0.05 * cell |
| 0 up | cell 3 | death (terminated, died) | ``death`` -1 |
| 4 siphon | cell 2, not yet siphoned | siphons once | ``siphon`` +0.3 |
| 5 wait | always | nothing | ``wait`` -0.02 |
| 6, 7 | never | an illegal action ends the episode with reward 0 | 0 |

Episodes are truncated after ``max_steps_in_episode`` steps. The stage is the furthest cell
reached + 1 (stages 1..5; the win is on the last).
"""  # noqa: E501 (the table's rows cannot be wrapped)

from __future__ import annotations

from flax import struct
import jax
import jax.numpy as jnp
from gymnax.environments import environment, spaces

from envs.contract import BoardView, Metric

NUM_ACTIONS = 8
UP, DOWN, LEFT, RIGHT, SIPHON, WAIT = range(6)
CORRIDOR_LENGTH = 5
EXIT_CELL = CORRIDOR_LENGTH - 1
BOARD_CHANNELS = 2  # agent, exit
STEP_PENALTY = -0.01
REWARD_COMPONENTS = ("step_penalty", "progress", "victory", "death", "shot", "siphon", "wait")


@struct.dataclass
class ToyEnvParams(environment.EnvParams):
    max_steps_in_episode: int = 16


@struct.dataclass
class ToyState(environment.EnvState):
    cell: jax.Array  # i32: agent position 0..4
    best_cell: jax.Array  # i32: furthest cell reached this episode
    siphoned: jax.Array  # bool
    time: jax.Array  # i32: steps taken this episode


@struct.dataclass
class ToyObservation:
    board: jax.Array  # f32[1, 5, 2]: the corridor as a one-row board (agent, exit)
    # f32[3]: cell / 4, siphoned, best cell / 4: everything the reward depends on, so a test can
    # compute the reward from (observation, action).
    features: jax.Array
    action_mask: jax.Array  # bool[8]


def action_mask(state: ToyState) -> jax.Array:
    actions = jnp.arange(NUM_ACTIONS)
    return ((actions == RIGHT)
            | ((actions == LEFT) & (state.cell > 0))
            | ((actions == DOWN) & (state.cell % 2 == 1))
            | ((actions == UP) & (state.cell == 3))
            | ((actions == SIPHON) & (state.cell == 2) & ~state.siphoned)
            | (actions == WAIT))


def _without_death(reward, breakdown):
    """The "progress" training reward: the death penalty only pays for postponing the end."""
    del reward
    return sum(breakdown[name] for name in REWARD_COMPONENTS if name != "death")


class ToyCorridor(environment.Environment[ToyState, ToyEnvParams]):
    """The corridor of the module docstring, auto-resetting (gymnax's ``step``)."""

    reward_components = REWARD_COMPONENTS
    training_rewards = {"progress": _without_death}
    num_stages = CORRIDOR_LENGTH
    metrics = (
        Metric("won", lambda obs, action, info: info["won"], at_end=True,
               log="episode/win_rate", summary="win_rate", column="win_rate"),
        Metric("died", lambda obs, action, info: info["died"], at_end=True,
               log="episode/death_rate", summary="death_rate", column="death_rate"),
        Metric("invalid", lambda obs, action, info: info["invalid_action"],
               log="actions/invalid", log_per="total", summary="invalid_actions",
               summary_total=True, column="invalid_actions"),
        Metric("moves", lambda obs, action, info: (action == UP) | (action == LEFT)
               | (action == RIGHT),
               log="actions/move_fraction", log_per="step"),
        Metric("shots", lambda obs, action, info: action == DOWN, log="actions/shot_fraction",
               log_per="step"),
        Metric("siphons", lambda obs, action, info: action == SIPHON,
               log="actions/siphon_fraction", log_per="step", summary="siphons_per_episode"),
        Metric("waits", lambda obs, action, info: action == WAIT, log="actions/wait_fraction",
               log_per="step", summary="waits_per_episode", per_stage=True),
    )

    # A partition of the 8 actions into kinds (the group-entropy bonus).
    action_groups = (("move", (LEFT, RIGHT)), ("siphon", (SIPHON,)),
                     ("other", (UP, DOWN, WAIT, 6, 7)))

    @property
    def default_params(self) -> ToyEnvParams:
        return ToyEnvParams()

    @property
    def name(self) -> str:
        return "toy"

    def action_space(self, params: ToyEnvParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(NUM_ACTIONS)

    def observation_space(self, params: ToyEnvParams | None = None) -> spaces.Dict:
        return spaces.Dict({
            "board": spaces.Box(0.0, 1.0, (1, CORRIDOR_LENGTH, BOARD_CHANNELS), jnp.float32),
            "features": spaces.Box(0.0, 1.0, (3,), jnp.float32),
            "action_mask": spaces.Box(0, 1, (NUM_ACTIONS,), jnp.bool_),
        })

    def observation(self, state: ToyState) -> ToyObservation:
        cells = jnp.arange(CORRIDOR_LENGTH)
        board = jnp.stack([cells == state.cell, cells == EXIT_CELL], -1).astype(jnp.float32)
        features = jnp.stack([state.cell / EXIT_CELL, state.siphoned.astype(jnp.float32),
                              state.best_cell / EXIT_CELL]).astype(jnp.float32)
        return ToyObservation(board=board[None], features=features,
                              action_mask=action_mask(state))

    # Hooks (envs/contract.py)
    def action_mask(self, obs: ToyObservation) -> jax.Array:
        return obs.action_mask

    def exploration_target(self, obs: ToyObservation) -> tuple[jax.Array, jax.Array]:
        """The siphon, wherever it is legal (cell 2, once)."""
        return obs.action_mask[SIPHON], jnp.int32(SIPHON)

    def board_view(self, obs: ToyObservation) -> BoardView:
        return BoardView(grid=obs.board, row=jnp.int32(0),
                         col=jnp.argmax(obs.board[0, :, 0]).astype(jnp.int32),
                         features=(obs.features, obs.action_mask))

    def heuristic_policy(self, key, obs, state):
        """The scripted baseline: always step right, towards the exit."""
        return jnp.int32(RIGHT)

    def reset_env(self, key: jax.Array, params: ToyEnvParams):
        del key  # deterministic
        state = ToyState(cell=jnp.int32(0), best_cell=jnp.int32(0), siphoned=jnp.bool_(False),
                         time=jnp.int32(0))
        return self.observation(state), state

    def step_env(self, key, state: ToyState, action: jax.Array, params: ToyEnvParams):
        """One step without auto-reset."""
        action = jnp.asarray(action, jnp.int32)
        invalid = ~action_mask(state)[action]
        valid = ~invalid
        cell = state.cell + jnp.where(action == RIGHT, 1, 0) - jnp.where(action == LEFT, 1, 0)
        cell = jnp.where(invalid, state.cell, cell)
        won = valid & (cell == EXIT_CELL)
        died = valid & (action == UP)
        new_best = valid & (cell > state.best_cell)
        breakdown = {
            "step_penalty": STEP_PENALTY * valid,
            "progress": 0.1 * new_best,
            "victory": 1.0 * won,
            "death": -1.0 * died,
            "shot": 0.05 * state.cell * (valid & (action == DOWN)),
            "siphon": 0.3 * (valid & (action == SIPHON)),
            "wait": -0.02 * (valid & (action == WAIT)),
        }
        breakdown = {name: jnp.asarray(value, jnp.float32) for name, value in breakdown.items()}
        reward = sum(breakdown[name] for name in REWARD_COMPONENTS)
        next_state = ToyState(cell=cell, best_cell=jnp.maximum(state.best_cell, cell),
                              siphoned=state.siphoned | (valid & (action == SIPHON)),
                              time=state.time + 1)
        info = {"reward_breakdown": breakdown, "invalid_action": invalid,
                "stage_complete": new_best, "won": won, "died": died,
                "stage": next_state.best_cell + 1}
        return self.observation(next_state), next_state, reward, won | died | invalid, info
