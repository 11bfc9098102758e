"""Search with the environment as its own model: Gumbel MuZero (``mctx``) whose recurrent
function is the env's step, batched over boards and jittable. Nothing here knows the game:
the game supplies the model env and the hooks (for HackMatrix: ``envs/hackmatrix/search_hooks.py``
and ``envs/hackmatrix/determinize.py``; SPEC §4.5).

* **Chance.** Every expansion steps the model with a key split from the search's own key, so a
  node's child is one sampled outcome of the step (spawns, the next stage's board); the search
  never sees the keys the evaluation will step the real env with.
* **Hidden information.** ``sample_world(key, env_state)`` draws a world consistent with what
  the player sees; ``num_worlds`` worlds are searched per move, each with its own tree, and
  their root decisions are aggregated (below). Without ``sample_world`` every world is the
  true state: the perfect-information upper bound.
* **Terminal nodes.** The model is stepped with ``step_env`` (no auto-reset); a terminated
  node stays as it was, with reward 0, value 0 and discount 0 below it.
* **Decision.** Each world's tree gives Gumbel MuZero's action (sequential halving at the
  root); the move is the action most worlds chose, ties broken by the completed root Q-values
  averaged over the worlds (a visited action's Q, else the root's value).

``make_search_policy`` returns a ``Policy`` (``act(key, obs, env_state) -> action`` for one
env, as ``purejaxrl.evaluation``'s), ``make_search_teacher`` the move with the search's policy
target (expert iteration, ``purejaxrl/expert_iteration.py``); ``play_boards`` plays one
episode per board with a fixed number of boards in flight, so that an expensive policy is not
run on boards that have ended.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Mapping, NamedTuple, Optional

import jax
from jax import lax
import jax.numpy as jnp
import mctx
import numpy as np

from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.networks import masked_log_probs, step_recurrent

# Masked prior logits: finite (as networks.MASKED_LOGIT), so no inf - inf appears in mctx.
MASKED_LOGIT = -1e9
_VOTE_WEIGHT = 1e6  # a vote outweighs any difference of Q-values


@dataclasses.dataclass(frozen=True)
class SearchSettings:
    """Static search parameters (each distinct value compiles its own program)."""

    num_simulations: int
    num_worlds: int = 1
    gamma: float = 0.99
    max_depth: Optional[int] = None
    max_num_considered_actions: int = 16
    gumbel_scale: float = 1.0
    # Weight of the completed Q-values (min-max normalised per node unless rescale_values is
    # off) against the prior logits, in the selection and in the improved policy: mctx's
    # ``value_scale`` (its default 0.1).
    value_scale: float = 0.1
    # mctx's default min-max normalises each node's completed Q-values to [0, 1], so a
    # difference of any size, however small against the critic's noise, weighs like the
    # largest; False keeps them in the objective's own units (the critic's with a value leaf),
    # so value_scale is then logits per unit (times mctx's visit scale, about 50).
    rescale_values: bool = True

    def __post_init__(self):
        if self.num_simulations < 1:
            raise ValueError(f"num_simulations must be >= 1, got {self.num_simulations}")
        if self.num_worlds < 1:
            raise ValueError(f"num_worlds must be >= 1, got {self.num_worlds}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        if not self.value_scale > 0:
            raise ValueError(f"value_scale must be > 0, got {self.value_scale}")


def uniform_prior(obs) -> jax.Array:
    return jnp.zeros(obs.action_mask.shape[-1:], jnp.float32)


def mix_uniform(logits: jax.Array, mask: jax.Array, share: float,
                group_matrix: Optional[jax.Array] = None) -> jax.Array:
    """Logits of ``(1 - share) x softmax(logits) + share x uniform``, both over the legal
    actions of ``mask`` (illegal ones get the lowest float). With ``group_matrix`` (f32[A, G],
    the env's action groups) the uniform part is over the groups that have a legal action,
    and inside a group it follows the network: every group gets at least ``share / G``, and
    the odds between two actions of one group stay the network's.

    Why: Gumbel MuZero's root choice adds the network's logits to at most about 5 (rescaled
    Q) at mctx's defaults, so an action the network gives 1e-4 can never be chosen, whatever
    the search finds; a share of uniform puts every legal action (or every group) within
    ``log(n / share)`` of the top."""
    if share == 0.0:
        return logits
    legal = mask.astype(bool)
    probs = jnp.exp(masked_log_probs(logits, legal))
    legal_f = legal.astype(jnp.float32)
    if group_matrix is None:
        uniform = legal_f / jnp.maximum(legal_f.sum(), 1.0)
    else:
        group_mass = probs @ group_matrix
        group_legal = legal_f @ group_matrix
        live_groups = jnp.maximum(jnp.sum(group_legal > 0), 1)
        mass = group_matrix @ group_mass  # each action's group's mass
        count = group_matrix @ group_legal
        # Inside a group the network's odds; a group the network gives no mass at all, even.
        within = jnp.where(mass > 0, probs / jnp.where(mass > 0, mass, 1.0),
                           legal_f / jnp.maximum(count, 1.0))
        uniform = jnp.where(legal, within / live_groups, 0.0)
    mixed = (1.0 - share) * probs + share * uniform
    return jnp.where(legal, jnp.log(mixed), jnp.finfo(jnp.float32).min)


def mix_uniform_where(logits: jax.Array, obs, share: float,
                      group_matrix: Optional[jax.Array] = None,
                      mix_where: Optional[Callable] = None) -> jax.Array:
    """``mix_uniform`` of ``obs``'s legal actions, only where ``mix_where(obs)`` (a game's
    predicate on the observation, such as HackMatrix's ``acquisition_in_reach``; None:
    everywhere). Elsewhere the logits are the network's."""
    mixed = mix_uniform(logits, obs.action_mask, share, group_matrix)
    if mix_where is None or share == 0.0:
        return mixed
    return jnp.where(mix_where(obs), mixed, logits)


def network_prior(network, params, uniform_share: float = 0.0,
                  group_matrix: Optional[jax.Array] = None,
                  mix_where: Optional[Callable] = None) -> Callable:
    """Prior logits from an actor-critic ``network`` (``apply(params, obs) -> (logits, value)``),
    mixed with ``uniform_share`` of uniform over the legal actions, or over the action groups
    of ``group_matrix``, where ``mix_where(obs)`` (``mix_uniform_where``)."""
    def prior(obs):
        logits, _ = network.apply(params, obs)
        return mix_uniform_where(logits, obs, uniform_share, group_matrix, mix_where)
    return prior


def critic_objective(env, network, params, training_reward: str,
                     reward_scale: float = 1.0) -> dict:
    """Hooks (``reward_fn``, ``leaf_value``) that make the search maximise what an actor-critic
    was trained on, AlphaZero's way: the reward is ``env``'s training reward
    ``training_reward`` (a ``TrainerEnv`` name) times ``reward_scale`` (the critic's units
    under reward normalisation: ``ppo.reward_scale`` of the run's return statistics), and a
    leaf is worth the critic's value of its observation. Search with the discount the network
    was trained with, so that rewards, values and discounts are one return."""
    def reward_fn(reward, info):
        return env.training_reward(training_reward, jnp.asarray(reward, jnp.float32),
                                   info.get("reward_breakdown", {})) * reward_scale

    def leaf_value(key, obs, state):
        del key, state
        return network.apply(params, obs)[1]
    return dict(reward_fn=reward_fn, leaf_value=leaf_value)


def network_node(network, params, *, use_prior: bool = True, uniform_share: float = 0.0,
                 group_matrix: Optional[jax.Array] = None,
                 mix_where: Optional[Callable] = None,
                 leaf_value: Optional[Callable] = None,
                 value_bonus: Optional[Callable] = None) -> Callable:
    """``node_fn`` of ``make_recurrent_search_teacher`` for a recurrent actor-critic: the memory
    is its hidden state, stepped on the node's observation; the prior its logits (uniform
    where not ``use_prior``; mixed with ``uniform_share`` of uniform over the actions, or
    over ``group_matrix``'s groups, where ``mix_where(obs)``, ``mix_uniform_where``); the
    value its critic's, or ``leaf_value(key, obs, state)``, plus ``value_bonus(state)`` where
    given."""
    def node(hidden, key, obs, state):
        one = jax.tree.map(lambda x: x[None], obs)
        hidden, logits, value = step_recurrent(network, params, hidden[None], one,
                                               jnp.zeros(1, jnp.bool_))
        logits = (mix_uniform_where(logits[0], obs, uniform_share, group_matrix, mix_where)
                  if use_prior
                  else jnp.zeros_like(logits[0]))
        value = value[0] if leaf_value is None else leaf_value(key, obs, state)
        if value_bonus is not None:
            value = value + value_bonus(state)
        return hidden[0], logits, value
    return node


def with_value_bonus(leaf_value: Callable, value_bonus: Callable) -> Callable:
    """``leaf_value(key, obs, state) + value_bonus(state)``: a game's hand-set leaf term (for
    HackMatrix, ``search_hooks.program_bonus``) on top of any leaf value."""
    def value(key, obs, state):
        return leaf_value(key, obs, state) + value_bonus(state)
    return value


def sum_value_terms(terms) -> Optional[Callable]:
    """One ``value_bonus(state)``: the sum of the leaf terms ``terms`` (callables of the state);
    None where there is none."""
    terms = tuple(terms)
    if not terms:
        return None
    return lambda state: sum(term(state) for term in terms)


def zero_value(key, obs, state) -> jax.Array:
    del key, obs, state
    return jnp.float32(0.0)


def env_reward(reward, info) -> jax.Array:
    del info
    return jnp.asarray(reward, jnp.float32)


def searchable(mask: jax.Array, allowed_actions: Optional[np.ndarray]) -> jax.Array:
    """The legal actions of ``mask`` a search may play: those of ``allowed_actions`` (bool[A];
    None: all), or every legal action where none of them is legal."""
    if allowed_actions is None:
        return mask
    restricted = mask & jnp.asarray(allowed_actions)
    return jnp.where(jnp.any(restricted, axis=-1, keepdims=True), restricted, mask)


def _select(flag: jax.Array, new, old):
    """``new`` where ``flag`` (shape [B]) else ``old``, for pytrees with a leading batch axis."""
    def pick(a, b):
        return jnp.where(flag.reshape(flag.shape + (1,) * (a.ndim - flag.ndim)), a, b)
    return jax.tree.map(pick, new, old)


def make_search_policy(model_env, model_params, settings: SearchSettings, *,
                       node_fn: Optional[Callable] = None, initial_memory=(), **hooks):
    """A policy that searches before every move: ``make_search_teacher``'s move without its
    policy target (``act(key, obs, env_state) -> action``); with a ``node_fn`` (a recurrent
    network's, ``network_node``) a ``RecurrentPolicy`` whose memory is the network's hidden
    state, ``initial_memory`` at an episode's start."""
    if node_fn is None:
        teach = make_search_teacher(model_env, model_params, settings, **hooks)
        return lambda key, obs, env_state: teach(key, obs, env_state)[0]
    from purejaxrl.evaluation import RecurrentPolicy
    teach = make_recurrent_search_teacher(model_env, model_params, settings, node_fn=node_fn,
                                          **hooks)

    def act(key, obs, env_state, memory):
        teaching = teach(key, obs, env_state, memory)
        return teaching.action, teaching.memory
    return RecurrentPolicy(act, initial_memory)


class Teaching(NamedTuple):
    """What one search gives at one state (``make_recurrent_search_teacher``)."""

    action: jax.Array  # i32: the move (aggregated over the worlds)
    target: jax.Array  # f32[A]: the improved policy averaged over the worlds, 0 where illegal
    memory: object  # the root's memory after the observation (the player's)
    # f32: the search's value of the state, in its objective's units: per world the improved
    # policy's mean of the completed root Q-values (what playing the improved policy from
    # here is worth, as the search estimates it), averaged over the worlds.
    value: jax.Array


def make_search_teacher(model_env, model_params, settings: SearchSettings, *,
                        prior_fn: Callable = uniform_prior, leaf_value: Callable = zero_value,
                        **hooks):
    """``teach(key, obs, env_state) -> (action, target)``: searches
    ``settings.num_simulations`` simulations in each of ``settings.num_worlds`` worlds, plays
    the aggregated move (module docstring) and gives the policy target of expert iteration:
    Gumbel MuZero's improved policy (softmax of the prior logits plus the transformed completed
    Q-values), averaged over the worlds, zero on illegal actions.

    ``prior_fn(obs) -> logits``; ``leaf_value(key, obs, model_state) -> value``; the other
    hooks are ``make_recurrent_search_teacher``'s."""
    teach = make_recurrent_search_teacher(model_env, model_params, settings,
                                          node_fn=feedforward_node(prior_fn, leaf_value), **hooks)
    return lambda key, obs, env_state: teach(key, obs, env_state, ())[:2]


def feedforward_node(prior_fn: Callable, leaf_value: Callable) -> Callable:
    """``node_fn`` of a network without memory (its memory passes through unchanged):
    ``prior_fn(obs) -> logits``, ``leaf_value(key, obs, model_state) -> value``."""
    def node(memory, key, obs, state):
        return memory, prior_fn(obs), leaf_value(key, obs, state)
    return node


def make_recurrent_search_teacher(model_env, model_params, settings: SearchSettings, *,
                                  node_fn: Callable, reward_fn: Callable = env_reward,
                                  to_model: Callable = lambda s: s,
                                  sample_world: Optional[Callable] = None,
                                  allowed_actions: Optional[np.ndarray] = None):
    """``teach(key, obs, env_state, memory) -> Teaching`` (action, target, memory after obs,
    value): the search of ``make_search_teacher`` whose nodes are evaluated with a memory (a
    recurrent network's hidden state): ``node_fn(memory, key, obs, model_state) -> (memory
    after obs, prior logits, value)``. The root is evaluated from the memory the player
    carries; every child from its parent's memory after the parent's observation, so a path
    through the tree is the sequence of observations the network would see along it. The
    returned memory is the root's (the player's memory after ``obs``).

    ``model_env.step_env(key, state, action, params) -> (obs, state, reward, done, info)`` is
    the model; ``to_model(env_state)`` turns an evaluation state into a model state;
    ``sample_world(key, env_state) -> env_state`` draws a world (None: the true state, perfect
    information); ``reward_fn(reward, info) -> the search's reward``; ``allowed_actions``
    (bool[A]) the actions the search may play (where none of them is legal, every legal
    action is).
    """
    worlds = settings.num_worlds

    def legal_actions(mask):
        return searchable(mask, allowed_actions)

    def recurrent_fn(params, key, action, embedding):
        del params
        state, done, memory = embedding
        step_key, value_key = jax.random.split(key)
        batch = action.shape[0]
        obs, next_state, reward, terminated, info = jax.vmap(
            model_env.step_env, in_axes=(0, 0, 0, None))(
                jax.random.split(step_key, batch), state, action, model_params)
        reward = jnp.where(done, 0.0, jax.vmap(reward_fn)(reward, info))
        next_state = _select(done, state, next_state)
        ended = done | terminated
        legal = legal_actions(obs.action_mask)
        next_memory, logits, value = jax.vmap(node_fn)(
            memory, jax.random.split(value_key, batch), obs, next_state)
        logits = jnp.where(legal, logits, MASKED_LOGIT)
        output = mctx.RecurrentFnOutput(
            reward=reward.astype(jnp.float32),
            discount=jnp.where(ended, 0.0, settings.gamma).astype(jnp.float32),
            prior_logits=logits.astype(jnp.float32),
            value=jnp.where(ended, 0.0, value).astype(jnp.float32))
        return output, (next_state, ended, next_memory)

    def act(key, obs, env_state, memory):
        world_key, value_key, search_key = jax.random.split(key, 3)
        if sample_world is None:
            states = jax.tree.map(lambda x: jnp.broadcast_to(x, (worlds,) + x.shape), env_state)
        else:
            states = jax.vmap(sample_world, in_axes=(0, None))(
                jax.random.split(world_key, worlds), env_state)
        states = jax.vmap(to_model)(states)
        legal = legal_actions(obs.action_mask)
        many = lambda x: jnp.broadcast_to(x, (worlds,) + x.shape)  # noqa: E731
        value_keys = jax.random.split(value_key, worlds)
        # The memory and the prior depend on the observation alone, which every world shares;
        # the value may depend on the world.
        root_memory, logits, _ = node_fn(memory, value_keys[0], obs,
                                         jax.tree.map(lambda x: x[0], states))
        _, _, value = jax.vmap(node_fn)(jax.tree.map(many, memory), value_keys,
                                        jax.tree.map(many, obs), states)
        root = mctx.RootFnOutput(
            prior_logits=many(jnp.where(legal, logits, MASKED_LOGIT).astype(jnp.float32)),
            value=value.astype(jnp.float32),
            embedding=(states, jnp.zeros(worlds, jnp.bool_), jax.tree.map(many, root_memory)))
        output = mctx.gumbel_muzero_policy(
            params=(), rng_key=search_key, root=root, recurrent_fn=recurrent_fn,
            num_simulations=settings.num_simulations, invalid_actions=many(~legal),
            max_depth=settings.max_depth,
            max_num_considered_actions=settings.max_num_considered_actions,
            gumbel_scale=settings.gumbel_scale,
            qtransform=functools.partial(mctx.qtransform_completed_by_mix_value,
                                         value_scale=settings.value_scale,
                                         rescale_values=settings.rescale_values))
        target = jnp.where(legal, jnp.mean(output.action_weights, axis=0), 0.0)
        completed = completed_root_q(output)
        value = jnp.mean(jnp.sum(output.action_weights * completed, axis=-1))
        return Teaching(aggregate_worlds(output, completed, legal), target / jnp.sum(target),
                        root_memory, value)

    return act


def hand_over(first, second, switch: Callable):
    """A policy that plays ``first`` where ``switch(obs, env_state)`` is False and ``second``
    where it is True (for example the search before a stage, the network's own move from it
    on). Both are ``Policy``s, or both ``RecurrentPolicy``s with the same memory (a recurrent
    network's hidden state after the observation, which the tree search hands on as the
    network does), so the player's memory carries across the switch. Both are computed and
    one is kept (vmapped, a ``lax.cond`` would compute both anyway)."""
    from purejaxrl.evaluation import RecurrentPolicy, with_memory
    if isinstance(first, RecurrentPolicy) or isinstance(second, RecurrentPolicy):
        first, second = with_memory(first), with_memory(second)
    else:
        def act(key, obs, env_state):
            return jnp.where(switch(obs, env_state), second(key, obs, env_state),
                             first(key, obs, env_state))
        return act

    def act_with_memory(key, obs, env_state, memory):
        chosen = switch(obs, env_state)
        first_action, first_memory = first.act(key, obs, env_state, memory)
        second_action, second_memory = second.act(key, obs, env_state, memory)
        return (jnp.where(chosen, second_action, first_action),
                jax.tree.map(lambda b, a: jnp.where(chosen, b, a), second_memory, first_memory))
    return RecurrentPolicy(act_with_memory, first.initial_memory)


def hold_plans(policy, plan_actions, hold_steps: int, legal: Callable):
    """A ``RecurrentPolicy`` that plays ``policy``, except that once it chooses a plan action
    (``plan_actions``: bool[A], one move of a multi-step plan; HackMatrix: the acquire macro)
    that action is played again on the next ``hold_steps - 1`` steps while ``legal(obs)``
    allows it, so a plan a search starts is carried to its end instead of being dropped for
    a move the next search prefers. ``policy`` is still computed every step and its memory
    kept (a recurrent network's hidden state follows the observations, whatever is played);
    vmapped, the held step costs what a searched one does."""
    from purejaxrl.evaluation import RecurrentPolicy, with_memory
    inner = with_memory(policy)
    plans = jnp.asarray(plan_actions, bool)

    def act(key, obs, env_state, memory):
        inner_memory, remaining, held = memory
        action, inner_memory = inner.act(key, obs, env_state, inner_memory)
        holding = (remaining > 0) & legal(obs)[held]
        chosen = jnp.where(holding, held, action).astype(jnp.int32)
        starts = ~holding & plans[chosen]
        remaining = jnp.where(holding, remaining - 1,
                              jnp.where(starts, hold_steps - 1, 0)).astype(jnp.int32)
        return chosen, (inner_memory, remaining, chosen)

    return RecurrentPolicy(act, (inner.initial_memory, jnp.int32(0), jnp.int32(0)))


def completed_root_q(output) -> jax.Array:
    """Per world, the root's completed Q-values (f32[W, A]): a visited action's Q, else the
    root's value."""
    tree = output.search_tree
    root = jnp.full(tree.node_values.shape[:1], tree.ROOT_INDEX)
    visited = tree.children_visits[:, tree.ROOT_INDEX] > 0
    return jnp.where(visited, tree.qvalues(root), tree.node_values[:, tree.ROOT_INDEX, None])


def aggregate_worlds(output, completed: jax.Array, legal: jax.Array) -> jax.Array:
    """The move from per-world search outputs and their ``completed_root_q`` (module
    docstring: votes, then mean Q)."""
    num_actions = legal.shape[-1]
    votes = jnp.sum(jax.nn.one_hot(output.action, num_actions), axis=0)
    score = votes * _VOTE_WEIGHT + jnp.mean(completed, axis=0)
    return jnp.argmax(jnp.where(legal, score, -jnp.inf)).astype(jnp.int32)


def board_key_roots(key: jax.Array, num_boards: int):
    """The keys ``play_boards`` plays with, from an evaluation's ``key``: every board's reset
    key, and the roots that board b's policy key and env step key at step t are folded from
    (``board_step_key``)."""
    reset_key, loop_key = jax.random.split(key)
    act_root, step_root = jax.random.split(loop_key)
    return jax.random.split(reset_key, num_boards), act_root, step_root


def board_step_key(root: jax.Array, board, t) -> jax.Array:
    return jax.random.fold_in(jax.random.fold_in(root, board), t)


def board_env_step_key(step_root: jax.Array, board, t) -> jax.Array:
    """The key ``step_env`` got at step t of board b in ``play_boards``
    (``evaluation.env_step_key`` of the step key)."""
    from purejaxrl.evaluation import env_step_key
    return env_step_key(board_step_key(step_root, board, t))


# play_boards' tail: once every board is handed out and at most 1/TAIL_SHRINK of the lanes
# still play, the games in play move to that many lanes (as long as it is at least
# TAIL_MIN_LANES), so the last long games do not pay for the lanes that have finished. Each
# width compiles the policy again (a search: 45-100 s on a CPU); on the stored 64-board rows
# 64 then 8 lanes cost about half the lane-steps of 64 alone, and a third width (16 then 4)
# would save under a tenth more for another compile.
TAIL_SHRINK = 8
TAIL_MIN_LANES = 2


def lane_widths(lanes: int) -> list[int]:
    """The lane counts ``play_boards`` plays its phases with: ``lanes``, then each a
    ``TAIL_SHRINK``-th of the last while at least ``TAIL_MIN_LANES``."""
    widths = [lanes]
    while widths[-1] // TAIL_SHRINK >= TAIL_MIN_LANES:
        widths.append(widths[-1] // TAIL_SHRINK)
    return widths


def play_boards(env: TrainerEnv, env_params, policy, key: jax.Array, num_boards: int,
                max_steps: int, boards_in_flight: int,
                final_state_values: Mapping[str, Callable] = None,
                on_progress: Callable = None, record_actions: bool = False) -> dict:
    """One episode per board, ``boards_in_flight`` at a time: a board that ends hands its lane
    to the next board, so the policy runs only on boards in play; once every board is handed
    out and few still play, they move to fewer lanes (``lane_widths``: each phase a loop of
    its own width, compiled apart). The boards are ``play_episodes``'s (same ``key``: the same
    reset keys), so the rows of a comparison face the same starting boards. The policy's key
    and the env's step key of board b at step t are folded from (b, t) alone, so the results
    depend neither on ``boards_in_flight`` nor on the lanes a board moves to.

    ``policy`` is a ``Policy`` or a ``RecurrentPolicy`` (its memory starts from
    ``initial_memory`` on every board). Returns per-board arrays with ``play_episodes``'s keys
    (the same ``evaluation.EpisodeTally``, so a search row has the stage report of every
    other row), and ``final_state_values``: name -> ``value(env_state)``, recorded from the
    state the episode's last action was chosen in, as ``episode_resources`` is.
    ``on_progress(finished, won)``, if given, is called on the host (``jax.debug.callback``,
    unordered) after each step in which a board ended, with the boards finished and won so far:
    a long search can report as it goes. ``record_actions``: the results also hold
    ``actions`` i32[num_boards, max_steps], each board's actions in order (-1 after its end),
    so that a game can be re-simulated (``recorded_games.game_keys``) and watched. Jittable."""
    from purejaxrl.evaluation import EpisodeTally, with_memory
    policy = with_memory(policy)
    final_state_values = dict(final_state_values or {})
    widths = lane_widths(min(boards_in_flight, num_boards))
    board_keys, act_root, step_root = board_key_roots(key, num_boards)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    # Placeholders: every lane loads its first board in the loop, so the program holds one
    # reset per phase (one stage generator: seconds of compile time each).
    obs, env_state = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), jax.eval_shape(
        reset, board_keys[:widths[0]], env_params))
    tally = EpisodeTally(env, env_params, *jax.tree.map(lambda x: x[0], (obs, env_state)))
    final_shapes = {name: jax.eval_shape(value, jax.tree.map(lambda x: x[0], env_state))
                    for name, value in final_state_values.items()}

    def fresh_episode(lanes: int) -> dict:
        return {"episode_return": jnp.zeros(lanes, jnp.float32),
                **{name: jnp.zeros(lanes, jnp.int32) for name in ("length", "masked")},
                **{name: jnp.zeros(lanes, bool) for name in ("truncated", "finished")},
                **tally.fresh(lanes),
                **{name: jnp.zeros((lanes,) + shape.shape, shape.dtype)
                   for name, shape in final_shapes.items()}}

    def first_memory(lanes: int):
        return jax.tree.map(lambda x: jnp.broadcast_to(x, (lanes,) + jnp.shape(x)),
                            policy.initial_memory)

    results = {name: jnp.zeros((num_boards,) + value.shape[1:], value.dtype)
               for name, value in fresh_episode(1).items()}
    if record_actions:
        results["actions"] = jnp.full((num_boards, max_steps), -1, jnp.int32)
    lanes = widths[0]
    carry = dict(obs=obs, env_state=env_state, memory=first_memory(lanes),
                 board=jnp.arange(lanes, dtype=jnp.int32),
                 load=jnp.ones(lanes, bool), next_board=jnp.int32(lanes),
                 episode=fresh_episode(lanes), results=results)

    def step(carry):
        lanes = carry["board"].shape[0]
        fresh, memory_at_start = fresh_episode(lanes), first_memory(lanes)
        board, episode, load = carry["board"], carry["episode"], carry["load"]
        safe_board = jnp.maximum(board, 0)

        def refill(_):
            new_obs, new_state = reset(board_keys[safe_board], env_params)
            return (_select(load, new_obs, carry["obs"]),
                    _select(load, new_state, carry["env_state"]))

        obs, env_state = lax.cond(jnp.any(load), refill,
                                  lambda _: (carry["obs"], carry["env_state"]), None)
        memory = _select(load, memory_at_start, carry["memory"])  # a new board, a fresh memory
        playing = board >= 0
        t = episode["length"]
        actions, memory = jax.vmap(policy.act)(
            jax.vmap(board_step_key, (None, 0, 0))(act_root, safe_board, t), obs, env_state,
            memory)
        next_obs, next_state, reward, terminated, truncated, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(
                jax.vmap(board_step_key, (None, 0, 0))(step_root, safe_board, t), env_state,
                actions,
                env_params)
        legal = jnp.take_along_axis(env.action_mask(obs), actions[:, None], axis=-1)[:, 0]
        done = terminated | truncated
        episode = dict(
            episode_return=episode["episode_return"] + reward,
            length=t + 1, truncated=truncated & ~terminated,
            masked=episode["masked"] + (~legal).astype(jnp.int32), finished=done,
            **tally.update(episode, obs, env_state, actions, info, playing, done & playing),
            **{name: jax.vmap(value)(env_state) for name, value in final_state_values.items()})
        ends = playing & (done | (t + 1 >= max_steps))
        target = jnp.where(ends, board, num_boards)  # out of range: dropped
        results = {name: carry["results"][name].at[target].set(value, mode="drop")
                   for name, value in episode.items()}
        if record_actions:
            played_at = jnp.where(playing, board, num_boards)  # out of range: dropped
            results["actions"] = carry["results"]["actions"].at[played_at, t].set(
                actions.astype(jnp.int32), mode="drop")
        # Ended lanes take the next boards, in lane order; the reset happens next iteration.
        new_board = carry["next_board"] + jnp.cumsum(ends) - 1
        load = ends & (new_board < num_boards)
        board = jnp.where(ends, jnp.where(load, new_board, -1), board)
        next_board = carry["next_board"] + jnp.sum(ends, dtype=jnp.int32)
        if on_progress is not None:
            def report():
                # Every board handed out is in play or finished.
                finished = (jnp.minimum(next_board, num_boards)
                            - jnp.sum(board >= 0, dtype=jnp.int32))
                won = jnp.sum(results["won"], dtype=jnp.int32) if "won" in results else 0
                jax.debug.callback(on_progress, finished, won)
            # The counts are taken only in the steps that end a board.
            lax.cond(jnp.any(ends), report, lambda: None)
        return dict(obs=next_obs, env_state=next_state, memory=memory, board=board, load=load,
                    next_board=next_board, episode=_select(ends, fresh, episode),
                    results=results)

    for phase, lanes in enumerate(widths):
        narrower = widths[phase + 1] if phase + 1 < len(widths) else 0

        def running(carry, narrower=narrower):
            in_play = jnp.sum(carry["board"] >= 0)
            # A narrower phase takes over once no board is left to hand out and the boards
            # in play fit its lanes.
            fits = (carry["next_board"] >= num_boards) & (in_play <= narrower)
            return (in_play > 0) & ~fits

        carry = lax.while_loop(running, step, carry)
        if narrower:
            # The lanes in play first (in lane order), cut to the narrower width; the lanes
            # dropped have ended (board -1) and hold nothing the results lack.
            keep = jnp.argsort(carry["board"] < 0, stable=True)[:narrower]
            per_lane = {name: carry[name] for name in
                        ("obs", "env_state", "memory", "board", "load", "episode")}
            carry = dict(carry, **jax.tree.map(lambda x: x[keep], per_lane))
    return carry["results"]


def stage_reached_shares(results: dict, num_stages: int) -> dict:
    """Host side: the share of episodes that reached stage k (k = 2..num_stages) and the
    share won, from per-episode results (``stage`` is the stage an episode ended on)."""
    stage = np.asarray(jax.device_get(results["stage"]))
    won = np.asarray(jax.device_get(results["won"]))
    shares = {str(k): float(np.mean(stage >= k)) for k in range(2, num_stages + 1)}
    shares["won"] = float(np.mean(won))
    return shares
