"""The gymnax 1.0 environment contract around the pure game logic of ``game.py``."""

from functools import partial

from flax import struct
import jax
import jax.numpy as jnp
from gymnax.environments import environment, spaces
import numpy as np

from .core import generation, reward_ledger, rewards
from . import ENV_VERSION, acquire_macro, baselines, observation, training
from .core.constants import (ACTION_SIPHON, GRID, N_ACTIONS, N_PROGRAMS, N_STAGES,
                             PROGRAM_ACTION_OFFSET, UNDO)
from .core.entities import alive_enemies
from .options import TRAINING_OPTIONS, check_values, program_indices
from .core.game import step_game, step_keys
from .core.rewards import player_exit_distance
from .core.sparse import sparse_update, tree_where
from .core.state import (HISTORY_SIZE, MAX_ENEMIES, MAX_TRANSMISSIONS, EnvState, with_snapshots,
                         without_snapshots)

DEFAULT_MAX_STEPS = 1000
REWARD_COMPONENTS = rewards.REWARD_FIELDS
# The components the undo_pays_once option pays once (core/reward_ledger.py).
PAID_ONCE = np.array([name not in reward_ledger.PAID_EVERY_STEP for name in REWARD_COMPONENTS])


@struct.dataclass
class EnvParams(environment.EnvParams):
    max_steps_in_episode: int = DEFAULT_MAX_STEPS  # truncation (decisions R5)
    shaping_gamma: float = 0.99  # gamma of the potential-based shaping (decisions R7)


def _terminal(inputs: rewards.RewardInputs, events) -> jax.Array:
    """Invalid actions, death and victory end the episode (decisions R4)."""
    return ~events.success | inputs.player_died | events.game_won


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
    history at every stage start (decisions R9, off by default); ``undo_pays_once`` pays a
    reward that UNDO took back only once (``core/reward_ledger.py``; a training option, off by
    default: Swift pays it again); ``start_programs`` K > 0 starts a share
    ``start_programs_share`` of new games with K random programs owned (a curriculum, off by
    default: the game starts with none; ``training.start_with_programs``), drawn from
    ``start_programs_pool`` (program names of ``constants.PROGRAM_NAMES``; empty: all 23);
    ``program_potential`` c > 0 adds the potential-based term ``gamma * Phi(s') - Phi(s)``,
    ``Phi = c * programs owned`` (of ``program_potential_pool``'s names only, if given; 0
    after a terminal step), as the reward component
    ``program_shaping`` (a training option, off by default; ``training.program_shaping``);
    ``program_block_pool`` (program names; empty: off, the default) makes a share
    ``program_block_share`` of generated stage boards hold a visible block of one of its
    programs as the block nearest the player (a curriculum; ``training.plant_program_block``);
    ``explore_pool`` (program names; empty: all 23) narrows ``exploration_target`` to the
    siphons that would acquire one of its programs (the trainer's ``--explore-share``);
    ``acquire_macro`` adds action 28, "head for a program", which plays the next move of a
    plan read from the observation (``acquire_macro``: prior knowledge in the action space,
    off by default; the mask gains its entry, bool[29]), for the programs of
    ``acquire_macro_pool`` only where it names some, and offered only from stage
    ``acquire_macro_from_stage`` on (1: every stage); ``exit_distance_view`` gives the
    board-view encoders one more channel per cell, its path distance to the exit read from the
    observation (``training.exit_distance_map``: prior knowledge in the agent's view, off by
    default; the observation itself is unchanged); slot capacities.
    """

    # The trainer's hooks (envs/contract.py); the stage ones are num_stages and
    # episode_resources below.
    version = ENV_VERSION
    training_options = TRAINING_OPTIONS
    training_rewards = training.TRAINING_REWARDS
    metrics = training.METRICS
    action_groups = training.ACTION_GROUPS

    def __init__(self, *, reward_shaping: str = "swift", close_undo_exploit: bool = False,
                 undo_pays_once: bool = False, start_programs: int = 0,
                 start_programs_share: float = 0.5, start_programs_pool: tuple[str, ...] = (),
                 program_potential: float = 0.0, program_potential_pool: tuple[str, ...] = (),
                 program_block_pool: tuple[str, ...] = (), program_block_share: float = 0.5,
                 explore_pool: tuple[str, ...] = (), acquire_macro: bool = False,
                 acquire_macro_pool: tuple[str, ...] = (), acquire_macro_from_stage: int = 1,
                 exit_distance_view: bool = False, max_enemies: int = MAX_ENEMIES,
                 max_transmissions: int = MAX_TRANSMISSIONS, history_size: int = HISTORY_SIZE):
        check_values(dict(
            reward_shaping=reward_shaping, start_programs=start_programs,
            start_programs_share=start_programs_share, start_programs_pool=start_programs_pool,
            program_potential=program_potential, program_potential_pool=program_potential_pool,
            program_block_pool=program_block_pool, program_block_share=program_block_share,
            explore_pool=explore_pool, acquire_macro=acquire_macro,
            acquire_macro_pool=acquire_macro_pool,
            acquire_macro_from_stage=acquire_macro_from_stage))
        if history_size < 1 or max_enemies < 1 or max_transmissions < 1:
            raise ValueError("capacities must be positive")
        # Indices, once: the names stay the option's value (hash, equality).
        self._start_pool_indices = program_indices(start_programs_pool)
        self._potential_pool_indices = program_indices(program_potential_pool)
        self._block_pool_indices = program_indices(program_block_pool)
        self._explore_pool_indices = program_indices(explore_pool)
        macro_pool_indices = program_indices(acquire_macro_pool)
        self.reward_shaping = reward_shaping
        self.close_undo_exploit = close_undo_exploit
        self.undo_pays_once = undo_pays_once
        self.start_programs = start_programs
        self.start_programs_share = start_programs_share
        self.start_programs_pool = tuple(start_programs_pool)
        self.program_potential = float(program_potential)
        self.program_potential_pool = tuple(program_potential_pool)
        self.program_block_pool = tuple(program_block_pool)
        self.program_block_share = float(program_block_share)
        self.explore_pool = tuple(explore_pool)
        self.acquire_macro = bool(acquire_macro)
        self.acquire_macro_pool = tuple(acquire_macro_pool)
        self.acquire_macro_from_stage = acquire_macro_from_stage
        self.exit_distance_view = bool(exit_distance_view)
        # bool[23] of the programs the macro goes for (None: every program not owned).
        self._macro_wanted = (np.isin(np.arange(N_PROGRAMS), macro_pool_indices)
                              if acquire_macro_pool else None)
        # bool[23] of the pool's programs (None: every program counts).
        self._explore_wanted = (np.isin(np.arange(N_PROGRAMS), self._explore_pool_indices)
                                if explore_pool else None)
        # info["reward_breakdown"] keys, in summing order.
        self.reward_components = REWARD_COMPONENTS + (
            (training.PROGRAM_SHAPING,) if self.program_potential else ())
        self.max_enemies = max_enemies
        self.max_transmissions = max_transmissions
        self.history_size = history_size
        self._sparse_new_boards = sparse_update(self._new_boards)
        self._sparse_macro_move = sparse_update(self._macro_move)

    def _config(self):
        return (self.reward_shaping, self.close_undo_exploit, self.undo_pays_once,
                self.start_programs, self.start_programs_share, self.start_programs_pool,
                self.program_potential, self.program_potential_pool,
                self.program_block_pool, self.program_block_share, self.explore_pool,
                self.acquire_macro, self.acquire_macro_pool, self.acquire_macro_from_stage,
                self.exit_distance_view, self.max_enemies,
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
        return N_ACTIONS + 1 if self.acquire_macro else N_ACTIONS

    def observe(self, state: EnvState) -> observation.Observation:
        """The observation of ``state``; with ``acquire_macro`` its mask gains the macro's
        entry (``acquire_macro.macro_action``)."""
        obs = observation.build_observation(state)
        if not self.acquire_macro:
            return obs
        offered, _ = self._macro(state, obs)
        return obs.replace(action_mask=jnp.concatenate([obs.action_mask, offered[None]]))

    def played_action(self, state: EnvState, action) -> jax.Array:
        """The game action ``action`` plays in ``state``: itself, or with ``acquire_macro``
        the macro's move for action 28 (28, which fails, where the macro is not offered)."""
        if not self.acquire_macro:
            return action
        action = jnp.asarray(action, jnp.int32)
        # The plan is a BFS the mask has already paid for; most steps do not take the macro,
        # so only the lanes that do plan again (sparse_update: the cost follows them).
        return self._sparse_macro_move(action == N_ACTIONS, action, state)

    def _macro_move(self, action, state: EnvState) -> jax.Array:
        """The game action the macro plays in ``state`` (28, which fails, where it is not
        offered); ``action`` is the macro's, replaced."""
        offered, move = self._macro(state, observation.build_observation(state))
        return jnp.where(offered, move, action).astype(jnp.int32)

    def _macro(self, state: EnvState, obs: observation.Observation):
        """(offered, move) of the acquire macro in ``state``, whose observation is ``obs``:
        the plan's (``acquire_macro.macro_action``), offered only from stage
        ``acquire_macro_from_stage`` on (the stage is shown to the player)."""
        offered, move = acquire_macro.macro_action(obs, self._macro_wanted)
        if self.acquire_macro_from_stage > 1:
            offered = offered & (state.stage >= self.acquire_macro_from_stage)
        return offered, move

    def new_game(self, key) -> EnvState:
        state, k_stage = generation.new_game_before_stage(
            key, max_enemies=self.max_enemies, max_transmissions=self.max_transmissions,
            history_size=self.history_size)
        state = self._generate_stage(state, k_stage)
        return self._with_start_programs(state, key).replace(ledger=self.fresh_ledger())

    def _generate_stage(self, state: EnvState, key) -> EnvState:
        """A stage's board (``generation.generate_stage``), under the program-block option
        where it is on (static: nothing more without it)."""
        board = generation.generate_stage(state, key)
        if not self.program_block_pool:
            return board
        return training.plant_program_block(board, key, self.program_block_share,
                                            self._block_pool_indices)

    def _with_start_programs(self, state: EnvState, key) -> EnvState:
        """A new game's state under the start-programs option (static: nothing without it)."""
        if self.start_programs == 0:
            return state
        return training.start_with_programs(
            state, key, self.start_programs, self.start_programs_share,
            self._start_pool_indices)

    def _potential_programs(self, owned):
        """How many of the programs the potential counts are owned (all, or its pool's)."""
        if self._potential_pool_indices:
            owned = owned[..., jnp.asarray(self._potential_pool_indices)]
        return jnp.sum(owned, axis=-1)

    def fresh_ledger(self):
        """A new episode's reward ledger (``undo_pays_once``), else None."""
        if not self.undo_pays_once:
            return None
        return reward_ledger.empty_ledger(self.history_size, len(REWARD_COMPONENTS))

    def _new_boards(self, carry, k_stage, key_reset, advance, reset):
        """One lane's new boards after a step: the next stage's (game-rules §3.3) where the
        step completed a stage, then a new game's where the episode ended (auto-reset), in
        that order when both happen (a stage completed on the truncating step). Both come from
        one ``generate_stage`` in a loop of one pass per board, so the step's graph holds a
        single stage generator. Returns the next state, and for the ended episode its last
        observation, exit distance and overflow count (measured on the advanced board)."""
        state, _ = carry
        fresh, k_fresh = generation.new_game_before_stage(
            key_reset, max_enemies=self.max_enemies, max_transmissions=self.max_transmissions,
            history_size=self.history_size)
        # A new game's history is empty (size 0): the snapshot slots are never read, so the
        # old arrays are kept instead of being gathered, cleared and scattered.
        fresh = self._with_start_programs(without_snapshots(fresh), key_reset)

        def one_board(loop):
            phase, last, _ = loop  # phase 0: the stage advance, 1: the new game
            new_game = phase == 1
            source = tree_where(new_game, fresh, last)
            board = self._generate_stage(source.replace(history=None),
                                         jnp.where(new_game, k_fresh, k_stage))
            board = board.replace(history=source.history)
            return phase + 1, tree_where(new_game, last, board), board

        first, end = jnp.where(advance, 0, 1), jnp.where(reset, 2, 1)
        _, last, following = jax.lax.while_loop(lambda loop: loop[0] < end, one_board,
                                                (first, state, state))
        return following, (self.observe(last), player_exit_distance(last),
                           last.overflow)

    def reset_env(self, key, params: EnvParams):
        state = self.new_game(key)
        return self.observe(state), state

    def step_env(self, key, state: EnvState, action, params: EnvParams):
        """One step without auto-reset (Swift's headless ``done`` semantics)."""
        action = self.played_action(state, action)
        stepped, inputs, events = self._play(state, action, key)
        state_next, last_state, _, inputs = self._advance_or_reset(
            stepped, inputs, events, key, key, jnp.zeros_like(events.exit_reached))
        reward, info, ledger = self._outcome(state, action, last_state, inputs, events, params)
        state_next = state_next.replace(ledger=ledger)
        return (self.observe(state_next), state_next, reward,
                _terminal(inputs, events), info)

    def _play(self, state: EnvState, action, key):
        """The game's step (``core.game.step_game``: the rules, a stage advance's board left
        to ``_advance_or_reset``) and the episode clock."""
        # The reward ledger is not the game's: ``_outcome`` keeps it (None in ``stepped``).
        stepped, inputs, events = step_game(state.replace(ledger=None), action, key,
                                            close_undo_exploit=self.close_undo_exploit)
        return stepped.replace(time=stepped.time + 1), inputs, events

    def _advance_or_reset(self, stepped: EnvState, inputs, events, key_step, key_reset, done):
        """The one stage-advance-or-reset path of ``step_env`` and ``step``: the next stage's
        board where the step completed a stage, a new game where the episode ended (``done``,
        auto-reset; never in ``step_env``), both from one sparse pass (``_new_boards``). The
        exit distance the reward reads is measured here, on the board the step ends on.

        Returns (next state, the state the step ended on (the ended episode's overflow where
        it ended), the ended episode's last observation, the reward inputs with
        ``new_distance``)."""
        advance = events.exit_reached & ~events.game_won
        snapshots = stepped.history.snapshots
        ended_shapes = jax.eval_shape(lambda s: (self.observe(s),
                                                 player_exit_distance(s), s.overflow), stepped)
        carry = (without_snapshots(stepped), jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype),
                                                          ended_shapes))
        state_next, (ended_obs, ended_distance, ended_overflow) = self._sparse_new_boards(
            advance | done, carry, step_keys(key_step)[1], key_reset, advance, done)
        state_next = with_snapshots(state_next, snapshots)
        # Where the episode goes on, the next state is the board the step ends on.
        new_distance = jnp.where(done, ended_distance, player_exit_distance(state_next))
        last_state = stepped.replace(overflow=jnp.where(done, ended_overflow,
                                                        state_next.overflow))
        return state_next, last_state, ended_obs, inputs.replace(new_distance=new_distance)

    def is_truncated(self, state: EnvState, params: EnvParams):
        return state.time >= params.max_steps_in_episode

    def _outcome(self, before: EnvState, action, state: EnvState, inputs, events, params):
        """(reward, info, the reward ledger after the step) of a step from ``before`` that
        ended on ``state``; the ledger is None without ``undo_pays_once``."""
        breakdown = rewards.compute_reward(inputs, shaping=self.reward_shaping,
                                           gamma=params.shaping_gamma)
        ledger = None
        if self.undo_pays_once:
            # A state built without one (a setState scenario) has paid nothing yet.
            ledger = before.ledger if before.ledger is not None else self.fresh_ledger()
            paid, ledger = reward_ledger.pay_once(
                ledger, jnp.stack([getattr(breakdown, name) for name in REWARD_COMPONENTS]),
                jnp.asarray(PAID_ONCE),
                undid=events.success & (action == PROGRAM_ACTION_OFFSET + UNDO),
                popped_slot=before.history.head, pushed=events.enemy_turn_ran,
                pushed_slot=state.history.head)
            breakdown = rewards.RewardBreakdown(
                **{name: paid[index] for index, name in enumerate(REWARD_COMPONENTS)})
        paid = {name: getattr(breakdown, name) for name in REWARD_COMPONENTS}
        reward = rewards.total_reward(breakdown)
        programs_owned = jnp.sum(state.owned, axis=-1).astype(jnp.int32)
        if self.program_potential:
            # After the ledger: a potential's difference is not a gain UNDO could farm (it
            # restores the programs owned, and with them the potential).
            paid[training.PROGRAM_SHAPING] = training.program_shaping(
                self._potential_programs(before.owned), self._potential_programs(state.owned),
                _terminal(inputs, events), self.program_potential, params.shaping_gamma)
            reward = reward + paid[training.PROGRAM_SHAPING]
        info = {
            "reward_breakdown": paid,
            "invalid_action": ~events.success,
            "stage_complete": events.exit_reached,
            "won": events.game_won,
            "died": inputs.player_died,
            "stage": state.stage,
            "shot": events.shot,
            "kills": events.kills,
            "undo_exploit_completion": events.undo_exploit_completion,
            "overflow": state.overflow,
            "programs_owned": programs_owned,
            # The game action played: the action itself, or the acquire macro's move.
            "action_played": jnp.asarray(action, jnp.int32),
        }
        return reward, info, ledger

    @partial(jax.jit, static_argnames=("self",))
    def step(self, key, state: EnvState, action, params: EnvParams | None = None):
        """gymnax 1.0 step with auto-reset: equal to ``step_env(key_step, ...)`` followed by
        ``reset(key_reset)`` where the episode ended (``key_step, key_reset = split(key)``),
        tested lane for lane. Unlike gymnax's default, boards are generated only where needed:
        the stage advances and the resets of a step share one sparse pass (under vmap only
        those lanes iterate) and one stage generator in the compiled graph."""
        if params is None:
            params = self.default_params
        key_step, key_reset = jax.random.split(key)
        action = self.played_action(state, action)
        stepped, inputs, events = self._play(state, action, key_step)
        terminated = _terminal(inputs, events)
        truncated = ~terminated & self.is_truncated(stepped, params)
        done = terminated | truncated
        state_next, last_state, ended_obs, inputs = self._advance_or_reset(
            stepped, inputs, events, key_step, key_reset, done)
        obs = self.observe(state_next)
        reward, info, ledger = self._outcome(state, action, last_state, inputs, events, params)
        if ledger is not None:  # a new episode starts a new ledger
            ledger = tree_where(done, self.fresh_ledger(), ledger)
        state_next = state_next.replace(ledger=ledger)
        info = {**info, "terminated": terminated, "truncated": truncated,
                "final_observation": tree_where(done, ended_obs, obs)}
        return obs, state_next, reward, terminated, truncated, info

    num_stages = N_STAGES  # the stage a won game ends on (evaluation's per-stage tables)

    def episode_resources(self, state: EnvState) -> dict:
        """What the player holds in ``state`` and what it faces (evaluation reports it at the
        end of a game, from the state the last action was chosen in: the HP, credits and
        energy left unspent, how many programs were owned; the enemies alive, those of them
        that the player's own siphons spawned, and the transmissions still to hatch: whether
        the deaths come from what siphoning adds to the board)."""
        e = state.enemies
        alive = alive_enemies(e)
        return {"hp": state.player.hp, "credits": state.player.credits,
                "energy": state.player.energy,
                "programs_owned": jnp.sum(state.owned).astype(jnp.int32),
                "enemies": jnp.sum(alive).astype(jnp.int32),
                "siphon_enemies": jnp.sum(alive & e.from_siphon).astype(jnp.int32),
                "transmissions": jnp.sum(state.transmissions.active).astype(jnp.int32)}

    def action_mask(self, obs: observation.Observation) -> jax.Array:
        return obs.action_mask

    def compact_observation(self, obs: observation.Observation) -> observation.Observation:
        return observation.compact(obs)

    def expand_observation(self, stored: observation.Observation) -> observation.Observation:
        return observation.expand(stored)

    def flat_observation(self, obs: observation.Observation) -> jax.Array:
        return observation.flatten(obs)

    def board_view(self, obs: observation.Observation):
        return training.board_view(obs, exit_distance=self.exit_distance_view)

    def exploration_target(self, obs: observation.Observation) -> tuple[jax.Array, jax.Array]:
        """A siphon that would acquire a program not owned (``search_hooks.
        acquisition_in_reach``): a trained policy all but never takes it (SPEC §4.4), so
        ``--explore-share`` takes it for the policy in a share of the states where it is in
        reach (of the ``explore_pool`` programs only, where one is given)."""
        return (self.search_hooks.acquisition_in_reach(obs, self._explore_wanted),
                jnp.int32(ACTION_SIPHON))

    def heuristic_policy(self, key, obs, state: EnvState):
        return baselines.heuristic_policy(key, obs, state)

    def health_metrics(self, totals: dict) -> dict:
        return training.health_metrics(totals)

    @property
    def search_hooks(self):
        """The search's side of the game (``search_hooks`` imports this module)."""
        from . import search_hooks
        return search_hooks

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(self.num_actions)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Dict:
        player_high = np.ones(observation.N_PLAYER_FEATURES, np.float32)
        player_high[list(observation.UNCAPPED_PLAYER_FEATURES)] = np.inf
        return spaces.Dict({
            "player": spaces.Box(0.0, player_high, (observation.N_PLAYER_FEATURES,),
                                 jnp.float32),
            "programs": spaces.Box(0, 1, (N_PROGRAMS,), jnp.int32),
            "grid": spaces.Box(0.0, 1.0, (GRID, GRID, observation.N_GRID_CHANNELS), jnp.float32),
            "action_mask": spaces.Box(0, 1, (self.num_actions,), jnp.bool_),
        })
