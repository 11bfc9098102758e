"""The gymnax 1.0 environment contract around the pure game logic of ``game.py``."""

from functools import partial
import dataclasses

from flax import struct
import jax
import jax.numpy as jnp
from gymnax.environments import environment, spaces

from . import generation, observation, rewards
from .constants import N_ACTIONS
from .game import step_game
from .sparse import sparse_update
from .state import HISTORY_SIZE, MAX_ENEMIES, MAX_TRANSMISSIONS, EnvState

SHAPING_MODES = ("swift", "potential")
DEFAULT_MAX_STEPS = 1000
REWARD_COMPONENTS = tuple(f.name for f in dataclasses.fields(rewards.RewardBreakdown))


@struct.dataclass
class EnvParams(environment.EnvParams):
    max_steps_in_episode: int = DEFAULT_MAX_STEPS  # truncation (decisions R5)
    shaping_gamma: float = 0.99  # gamma of the potential-based shaping (decisions R7)


class HackMatrix(environment.Environment[EnvState, EnvParams]):
    """HackMatrix, the Swift game's rules in JAX.

    Actions (28): 0-3 move or shoot up/down/left/right (up = row + 1), 4 siphon, 5-27 the
    programs in ``constants.PROGRAM_NAMES`` order. Observation: ``observation.Observation``
    (player f32[10], programs i32[23], grid f32[6,6,42], action_mask bool[28]); its flat view
    (``observation.flatten``) has length 1545. Invalid actions, death and victory terminate;
    ``max_steps_in_episode`` truncates. ``step`` auto-resets and returns the ended episode's
    last observation in ``info["final_observation"]``.

    Static options (constructor): ``reward_shaping`` "swift" (Swift's one-directional distance
    bonus, the default) or "potential" (decisions R7); ``close_undo_exploit`` clears the UNDO
    history at every stage start (decisions R9, off by default); slot capacities.
    """

    def __init__(self, *, reward_shaping: str = "swift", close_undo_exploit: bool = False,
                 max_enemies: int = MAX_ENEMIES, max_transmissions: int = MAX_TRANSMISSIONS,
                 history_size: int = HISTORY_SIZE):
        if reward_shaping not in SHAPING_MODES:
            raise ValueError(f"reward_shaping must be one of {SHAPING_MODES}, got {reward_shaping!r}")
        if history_size < 1 or max_enemies < 1 or max_transmissions < 1:
            raise ValueError("capacities must be positive")
        self.reward_shaping = reward_shaping
        self.close_undo_exploit = close_undo_exploit
        self.max_enemies = max_enemies
        self.max_transmissions = max_transmissions
        self.history_size = history_size
        self._sparse_reset = sparse_update(self._reset_observed)

    def _config(self):
        return (self.reward_shaping, self.close_undo_exploit, self.max_enemies,
                self.max_transmissions, self.history_size)

    def __hash__(self):
        return hash(self._config())

    def __eq__(self, other):
        return isinstance(other, HackMatrix) and self._config() == other._config()

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    @property
    def name(self) -> str:
        return "HackMatrix"

    @property
    def num_actions(self) -> int:
        return N_ACTIONS

    def new_game(self, key) -> EnvState:
        return generation.new_game(key, max_enemies=self.max_enemies,
                                   max_transmissions=self.max_transmissions,
                                   history_size=self.history_size)

    def _reset_observed(self, carry, key):
        state = self.new_game(key)
        # A new game's history is empty (size 0): the snapshot slots are never read, so the
        # old arrays are kept instead of being gathered, cleared and scattered.
        return state.replace(history=state.history.replace(snapshots=None)), \
            observation.build_observation(state)

    def reset_env(self, key, params: EnvParams):
        state = self.new_game(key)
        return observation.build_observation(state), state

    def step_env(self, key, state: EnvState, action, params: EnvParams):
        state, inputs, events = step_game(state, action, key,
                                          close_undo_exploit=self.close_undo_exploit)
        state = state.replace(time=state.time + 1)
        breakdown = rewards.compute_reward(inputs, shaping=self.reward_shaping,
                                           gamma=params.shaping_gamma)
        reward = rewards.total_reward(breakdown)
        terminated = ~events.success | inputs.player_died | events.game_won
        info = {
            "reward_breakdown": {name: getattr(breakdown, name) for name in REWARD_COMPONENTS},
            "invalid_action": ~events.success,
            "stage_complete": events.exit_reached,
            "won": events.game_won,
            "died": inputs.player_died,
            "stage": state.stage,
            "shot": events.shot,
            "kills": events.kills,
            "undo_exploit_completion": events.undo_exploit_completion,
            "overflow": state.overflow,
        }
        return observation.build_observation(state), state, reward, terminated, info

    def is_truncated(self, state: EnvState, params: EnvParams):
        return state.time >= params.max_steps_in_episode

    @partial(jax.jit, static_argnames=("self",))
    def step(self, key, state: EnvState, action, params: EnvParams | None = None):
        """gymnax 1.0 step with auto-reset. Unlike gymnax's default, the reset's stage
        generation only runs (under vmap: only iterates) where an episode ended."""
        if params is None:
            params = self.default_params
        key_step, key_reset = jax.random.split(key)
        obs_st, state_st, reward, terminated, info = self.step_env(key_step, state, action, params)
        truncated = ~terminated & self.is_truncated(state_st, params)
        done = terminated | truncated
        # Under vmap only the lanes whose episode ended build a new game (sparse_update).
        snapshots = state_st.history.snapshots
        carry = (state_st.replace(history=state_st.history.replace(snapshots=None)), obs_st)
        state_next, obs = self._sparse_reset(done, carry, key_reset)
        state_next = state_next.replace(history=state_next.history.replace(snapshots=snapshots))
        info = {**info, "terminated": terminated, "truncated": truncated,
                "final_observation": obs_st}
        return obs, state_next, reward, terminated, truncated, info

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(N_ACTIONS)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Dict:
        return spaces.Dict({
            "player": spaces.Box(0.0, 1.0, (observation.N_PLAYER_FEATURES,), jnp.float32),
            "programs": spaces.Box(0, 1, (23,), jnp.int32),
            "grid": spaces.Box(0.0, 1.0, (6, 6, observation.N_GRID_CHANNELS), jnp.float32),
            "action_mask": spaces.Box(0, 1, (N_ACTIONS,), jnp.bool_),
        })
