"""The rollout search (purejaxrl/rollout_search.py, SPEC §4.5): a candidate's score is its
return along the network's rollout plus the discounted critic where it stops; the candidates
are compared on the same draws of chance; the network's memory travels along each rollout;
on the game it plays only legal actions (never UNDO), finds the one winning move with no
prior knowledge, and is a function of its key. The game-free rules run on tiny in-test envs
(fast); the game's on HackMatrix boards (one compile, extended suite). Its command-line
options are refused with the search's (test_search.py)."""

import functools

from flax import struct
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix import HackMatrix, build_observation
from envs.hackmatrix import search_hooks
from envs.hackmatrix.core.constants import PROGRAM_ACTION_OFFSET, UNDO
from purejaxrl import rollout_search, search
from purejaxrl.env_protocol import TrainerEnv
from tests.trainer.fork_env import Fork, ForkObs, TableCritic
from tests.trainer.test_search import RIGHT, program_board, stack, undo_board, winning_board


def fork_scores(critic, horizon: int, memory=()):
    """(move, scores) of the rollout search at the fork's start maximising the "gain" in the
    critic's units (reward scale 0.5, gamma 0.9), 3 greedy rollouts per candidate."""
    fork = Fork()
    objective = search.critic_objective(TrainerEnv(fork, None), critic, None, "gain",
                                        reward_scale=0.5)
    node = search.feedforward_node(lambda obs: critic.apply(None, obs)[0],
                                   objective["leaf_value"])
    settings = rollout_search.RolloutSettings(num_rollouts=3, horizon=horizon, gamma=0.9)
    find = rollout_search.make_rollout_search(fork, None, settings, node_fn=node,
                                              reward_fn=objective["reward_fn"])
    obs, state = fork.reset(None, None)
    action, scores, _ = jax.jit(find)(jax.random.PRNGKey(0), obs, state, memory)
    return int(action), np.asarray(scores)


@pytest.mark.parametrize("horizon", [0, 3])
def test_a_candidates_score_is_its_return_plus_the_discounted_critic(horizon):
    """Action 0 earns the gain (1 x scale 0.5) and leads to position 1, action 1 earns nothing
    and leads to position 2; both are absorbing. A rollout of horizon H ends H + 1 steps in,
    so the scores are 0.5 + 0.9 ** (H + 1) V(1) and 0.9 ** (H + 1) V(2), and the move is the
    larger."""
    values = [0.0, 0.1, 0.9]
    action, scores = fork_scores(TableCritic(values), horizon)
    tail = 0.9 ** (horizon + 1)
    np.testing.assert_allclose(scores, [0.5 + tail * values[1], tail * values[2]], rtol=1e-5)
    assert action == int(np.argmax(scores))


def test_the_critic_decides_against_the_reward_when_it_is_worth_more():
    """With V(2) = 0.9 one step away (0.81 > 0.5 + 0.09) the search leaves the gain; with a
    longer horizon the critic's worth is discounted further (0.9 ** 5 x 0.9 = 0.53 < 0.5 +
    0.06), and the gain wins: the horizon is part of the objective."""
    assert fork_scores(TableCritic([0.0, 0.1, 0.9]), 0)[0] == 1
    assert fork_scores(TableCritic([0.0, 0.1, 0.9]), 4)[0] == 0


@struct.dataclass
class CoinObs:
    coin: jnp.ndarray
    action_mask: jnp.ndarray


class Coin:
    """One decision whose reward is chance: a coin drawn from the step's key pays 2 or 0 to
    action 0, and the same coin minus 0.01 to action 1. Action 0 is better on every draw."""

    def reset(self, key, params):
        return CoinObs(jnp.int32(0), jnp.ones(2, bool)), jnp.int32(0)

    def step_env(self, key, state, action, params):
        coin = jax.random.bernoulli(key).astype(jnp.float32)
        reward = jnp.where(state == 0, 2.0 * coin - 0.01 * action, 0.0)
        return CoinObs(jnp.int32(1), jnp.ones(2, bool)), jnp.int32(1), reward, jnp.bool_(False), {}


def test_candidates_are_compared_on_the_same_draws_of_chance():
    """Rollout r of every candidate runs on the same keys (common random numbers), so the
    scores of the coin's two actions differ by exactly 0.01 whatever the draws, and the
    search takes action 0 for every key, with a single rollout per candidate."""
    coin = Coin()
    node = search.feedforward_node(lambda obs: jnp.zeros(2), lambda k, o, s: 0.0)
    settings = rollout_search.RolloutSettings(num_rollouts=1, horizon=2, gamma=1.0)
    find = jax.jit(rollout_search.make_rollout_search(coin, None, settings, node_fn=node))
    obs, state = coin.reset(None, None)
    seen = set()
    for seed in range(12):
        action, scores, _ = find(jax.random.PRNGKey(seed), obs, state, ())
        assert int(action) == 0
        assert float(scores[0] - scores[1]) == pytest.approx(0.01, abs=1e-6)
        seen.add(float(scores[0]))
    assert seen == {0.0, 2.0}  # the coin does vary between keys


def test_the_memory_travels_along_each_rollout_and_the_roots_comes_back():
    """The node counts observations; position 2 is worth 0.8 from the seventh observation of
    the episode on. The player has seen 5, the root is the 6th, a rollout's first step the
    7th: against the gain of 0.5 the search moves to position 2 only if the memory went
    root -> rollout, and it hands back the root's (6). From a memory far below, position 2
    is never worth anything and the gain wins."""
    fork = Fork()
    objective = search.critic_objective(TrainerEnv(fork, None), TableCritic([0.0] * 3), None,
                                        "gain", reward_scale=0.5)

    def node_fn(seen, key, obs, state):
        seen = seen + 1
        return seen, jnp.zeros(2), jnp.where((obs.position == 2) & (seen >= 7), 0.8, 0.0)

    settings = rollout_search.RolloutSettings(num_rollouts=2, horizon=0, gamma=0.99)
    find = jax.jit(rollout_search.make_rollout_search(
        fork, None, settings, node_fn=node_fn, reward_fn=objective["reward_fn"]))
    obs, state = fork.reset(None, None)
    action, _, memory = find(jax.random.PRNGKey(0), obs, state, jnp.int32(5))
    assert (int(action), int(memory)) == (1, 6)
    assert int(find(jax.random.PRNGKey(0), obs, state, jnp.int32(-100))[0]) == 0


def test_the_roots_node_sees_a_drawn_world_not_the_true_state():
    """In a fair search the root's network call gets a drawn world (here: the true state
    marked by the world sampler) like every node below it, never the true state: a node whose
    logits read the state ranks action 1 first in a world and action 0 on the true state,
    and with one candidate the ranking alone decides."""
    fork = Fork()

    def node_fn(memory, key, obs, state):
        drawn = state >= 10
        return memory, jnp.where(drawn, jnp.array([0.0, 1.0]), jnp.array([1.0, 0.0])), 0.0

    settings = rollout_search.RolloutSettings(num_rollouts=2, horizon=0, gamma=0.99,
                                              num_candidates=1)
    find = jax.jit(rollout_search.make_rollout_search(
        fork, None, settings, node_fn=node_fn, sample_world=lambda key, state: state + 10,
        reward_fn=lambda reward, info: info["reward_breakdown"]["gain"]))
    obs, state = fork.reset(None, None)
    assert int(find(jax.random.PRNGKey(0), obs, state, ())[0]) == 1


def test_only_the_top_candidates_are_scored_and_only_legal_ones_played():
    """With one candidate the search plays the network's favourite legal action, even where
    the other would score more; the unscored action's score is -inf. An illegal favourite is
    never a candidate."""
    fork = Fork()
    objective = search.critic_objective(TrainerEnv(fork, None), TableCritic([0.0, 0.0, 9.0]),
                                        None, "gain", reward_scale=0.5)
    node = search.feedforward_node(lambda obs: jnp.array([1.0, 0.0]),
                                   objective["leaf_value"])
    settings = rollout_search.RolloutSettings(num_rollouts=1, horizon=0, num_candidates=1)
    find = jax.jit(rollout_search.make_rollout_search(
        fork, None, settings, node_fn=node, reward_fn=objective["reward_fn"]))
    obs, state = fork.reset(None, None)
    action, scores, _ = find(jax.random.PRNGKey(0), obs, state, ())
    assert int(action) == 0 and np.isneginf(np.asarray(scores)[1])
    only_one = ForkObs(obs.position, jnp.array([False, True]))
    assert int(find(jax.random.PRNGKey(0), only_one, state, ())[0]) == 1


class Bet:
    """One decision: action 0 pays 0; action 1 pays ``mean + spread x noise`` (a standard
    normal drawn from the step's key): its gain over action 0 on each draw."""

    def __init__(self, mean, spread):
        self.mean, self.spread = mean, spread

    def reset(self, key, params):
        return CoinObs(jnp.int32(0), jnp.ones(2, bool)), jnp.int32(0)

    def step_env(self, key, state, action, params):
        gain = self.mean + self.spread * jax.random.normal(key)
        reward = jnp.where((state == 0) & (action == 1), gain, 0.0)
        return CoinObs(jnp.int32(1), jnp.ones(2, bool)), jnp.int32(1), reward, jnp.bool_(False), {}


def bet_moves(mean, spread, min_gain_z, min_gain=0.0):
    """The moves, over 16 keys, of an 8-rollout search whose network favours action 0."""
    bet = Bet(mean, spread)
    node = search.feedforward_node(lambda obs: jnp.array([1.0, 0.0]),
                                   lambda k, o, s: 0.0)
    settings = rollout_search.RolloutSettings(num_rollouts=8, horizon=0, min_gain_z=min_gain_z,
                                              min_gain=min_gain)
    find = jax.jit(rollout_search.make_rollout_search(bet, None, settings, node_fn=node))
    obs, state = bet.reset(None, None)
    return [int(find(jax.random.PRNGKey(seed), obs, state, ())[0]) for seed in range(16)]


def test_the_gain_guard_keeps_the_favourite_against_noise_and_not_against_a_sure_gain():
    """A bet worth +0.1 with a spread of 1: the mean of 8 draws has a standard error of about
    0.35, so the plain argmax leaves the network's favourite on the keys whose draws happen
    to favour the bet, and a guard of 3 standard errors (a mean gain above about 1) keeps the
    favourite on every key. A gain of 0.5 with a spread of 0.1 is clear on every draw: the
    guard lets the search take it on every key."""
    plain = bet_moves(0.1, 1.0, 0.0)
    assert 0 < sum(plain) < len(plain)  # noise moves the plain argmax both ways
    assert sum(bet_moves(0.1, 1.0, 3.0)) == 0
    assert sum(bet_moves(0.5, 0.1, 3.0)) == 16


def test_the_minimum_gain_keeps_the_favourite_against_a_sure_but_tiny_gain():
    """Where the draws do not differ (spread 0) the standard error is 0 and the z guard lets
    any positive gain through, however small: a sure +0.05 is taken on every key at z = 3.
    A minimum gain of 0.1 (the return's units) keeps the favourite on every key; one of 0.01
    lets the same gain through."""
    assert sum(bet_moves(0.05, 0.0, 3.0)) == 16
    assert sum(bet_moves(0.05, 0.0, 3.0, min_gain=0.1)) == 0
    assert sum(bet_moves(0.05, 0.0, 3.0, min_gain=0.01)) == 16


class Ladder:
    """A plan of three steps: action 0 ("climb", legal below the top rung 3) goes one rung up
    and pays 1 on reaching the top; action 1 ("rest") pays 0.1 at once, on any rung."""

    def reset(self, key, params):
        return CoinObs(jnp.int32(0), jnp.array([True, True])), jnp.int32(0)

    def step_env(self, key, state, action, params):
        rung = jnp.where(action == 0, state + 1, state)
        reward = jnp.where(action == 0, jnp.where(rung == 3, 1.0, 0.0), 0.1)
        mask = jnp.stack([rung < 3, jnp.bool_(True)])
        return CoinObs(rung, mask), rung, reward, jnp.bool_(False), {}


def ladder_scores(hold_steps, plan, favourite):
    """(move, scores) at the ladder's foot: 1 greedy rollout of horizon 4 (5 steps), gamma 1,
    leaves worth 0, the network always preferring ``favourite`` where it is legal."""
    ladder = Ladder()
    logits = jnp.where(jnp.arange(2) == favourite, 1.0, 0.0)
    node = search.feedforward_node(lambda obs: logits, lambda k, o, s: 0.0)
    settings = rollout_search.RolloutSettings(num_rollouts=1, horizon=4, gamma=1.0,
                                              hold_steps=hold_steps)
    find = rollout_search.make_rollout_search(ladder, None, settings, node_fn=node,
                                              plan_actions=np.array(plan))
    obs, state = ladder.reset(None, None)
    action, scores, _ = jax.jit(find)(jax.random.PRNGKey(0), obs, state, ())
    return int(action), np.asarray(scores)


@pytest.mark.parametrize("hold_steps, scores", [(1, [0.4, 0.5]), (3, [1.2, 0.5]),
                                                (5, [1.2, 0.5])])
def test_a_plan_candidate_is_held_while_legal_then_the_network_plays_on(hold_steps, scores):
    """The network rests. Unheld, climbing once then resting scores 4 x 0.1 against resting's
    5 x 0.1, and the search rests. Held for 3 steps, the climb reaches the top (1) and the
    network rests twice (0.2): 1.2, and the search climbs. Held for 5, the climb is illegal
    at the top and the plan stops there: the same 1.2 (no step is lost to an illegal move)."""
    action, found = ladder_scores(hold_steps, [True, False], favourite=1)
    np.testing.assert_allclose(found, scores, rtol=1e-6)
    assert action == int(np.argmax(scores))


def test_only_plan_actions_are_held():
    """The network climbs. Resting is not a plan action, so its rollout is one rest and the
    network's climb to the top (0.1 + 1 + 0.1 = 1.2), not five rests (0.5); climbing, the
    plan, reaches the top either way (1 + 2 x 0.1)."""
    np.testing.assert_allclose(ladder_scores(5, [True, False], favourite=0)[1], [1.2, 1.2],
                               rtol=1e-6)
    np.testing.assert_allclose(ladder_scores(5, [False, True], favourite=0)[1], [1.2, 0.5],
                               rtol=1e-6)


def test_holding_needs_a_plan_action():
    """hold_steps > 1 on an env without plan actions is refused before any work."""
    settings = rollout_search.RolloutSettings(num_rollouts=1, horizon=4, hold_steps=2)
    node = search.feedforward_node(lambda obs: jnp.zeros(2), lambda k, o, s: 0.0)
    for plan in (None, np.zeros(2, bool)):
        with pytest.raises(ValueError, match="plan_actions"):
            rollout_search.make_rollout_search(Ladder(), None, settings, node_fn=node,
                                               plan_actions=plan)


@pytest.mark.parametrize("field, value", [("num_rollouts", 0), ("horizon", -1),
                                          ("num_candidates", 0), ("gamma", 1.5),
                                          ("min_gain_z", -1.0), ("min_gain", -0.1),
                                          ("hold_steps", 0), ("hold_steps", 10)])
def test_settings_refuse_values_out_of_range(field, value):
    with pytest.raises(ValueError, match=field):
        rollout_search.RolloutSettings(**{"num_rollouts": 2, field: value})


# ------------------------------------------------------------------ on the game

SLOW = pytest.mark.slow
ENV = HackMatrix()


@functools.cache
def compiled_game_search():
    """The fair rollout search on HackMatrix with no prior knowledge: uniform logits,
    sampled rollouts of 3 steps, stage points, leaf 0; 2 rollouts per candidate; jitted once."""
    hooks = search_hooks.make_hooks(ENV, fair=True, leaf="zero")
    node = search.feedforward_node(search.uniform_prior, hooks.pop("leaf_value"))
    settings = rollout_search.RolloutSettings(num_rollouts=2, horizon=3, greedy=False)
    find = rollout_search.make_rollout_search(settings=settings, node_fn=node, **hooks)
    return jax.jit(jax.vmap(lambda k, o, s: find(k, o, s, ())[0]))


def game_moves(seed):
    states = stack([winning_board(), program_board(), undo_board(), program_board()])
    obs = jax.vmap(build_observation)(states)
    keys = jax.random.split(jax.random.PRNGKey(seed), 4)
    return np.asarray(compiled_game_search()(keys, obs, states)), np.asarray(obs.action_mask)


@SLOW
def test_on_the_game_the_search_wins_plays_legal_moves_and_repeats_itself():
    """On the winning board (right wins, down and left die) the search moves right; on every
    board its move is legal and never UNDO; the same key gives the same moves."""
    for seed in (0, 1, 2):
        moves, mask = game_moves(seed)
        assert moves[0] == RIGHT
        assert mask[np.arange(4), moves].all()
        assert moves[2] != PROGRAM_ACTION_OFFSET + UNDO
        assert game_moves(seed)[0].tolist() == moves.tolist()

