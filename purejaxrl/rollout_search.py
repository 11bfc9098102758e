"""Monte-Carlo rollout search: one step of policy improvement by simulation (Tesauro and
Galperin, NIPS 1996), with the environment as its own model. Nothing here knows the game: the
game supplies the model, its worlds and its objective through the same hooks as
``purejaxrl/search.py``'s tree search (SPEC §4.5).

Before every move, each of the ``num_candidates`` legal actions the network ranks highest is
played in the model, then the network plays on for ``horizon`` steps (its greedy move, or a
sample of its policy), and the return to there, plus the discounted critic's value where the
rollout stops alive, is the candidate's score; ``num_rollouts`` rollouts per candidate are
averaged, and the move is the candidate with the best mean.

Why it complements the tree search: the tree's child is one sampled outcome of the step
(spawns, the next stage's board), so at 16 simulations most of its Q-values rest on one draw
of chance; here every candidate's score is a mean over ``num_rollouts`` draws. And the tree's
root choice adds the network's logits to the values, so an action the network all but never
plays (HackMatrix's acquiring siphon) is never chosen whatever lies below it; here every
candidate is scored by its rollouts alone, the prior only ranks which are tried.

* **Chance and hidden information.** Rollout ``r`` runs in its own world, re-drawn from what the
  player sees (``sample_world``; None: the true state, perfect information), with its own
  chance keys; the candidates share rollout ``r``'s world and keys (common random numbers),
  so two candidates are compared on the same draws and their difference is not the draws'.
  None of it is the evaluation's randomness: every key is split from the search's own.
* **Terminal states.** The model is stepped with ``step_env`` (no auto-reset); after a
  rollout's episode ends it earns nothing more and its value is 0.
* **Memory.** A recurrent network's hidden state (``node_fn``'s memory) starts every rollout
  from the player's memory after the root's observation and is stepped on each observation
  along it, so a rollout is the observation sequence the network would see; the memory handed
  back is the root's.
* **Plans held.** A candidate among the env's ``plan_actions`` (HackMatrix: the acquire macro,
  one move of a multi-step plan) is played again at every step of its rollouts while it stays
  legal, up to ``hold_steps`` steps in all, before the network plays on: its score is then the
  worth of carrying the plan out, not of its first step followed by the network's own moves
  (which rarely continue a plan the network seldom starts). Only the candidate is held; the
  move played is its first step, and the next move is searched afresh.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from purejaxrl.search import env_reward, searchable


@dataclasses.dataclass(frozen=True)
class RolloutSettings:
    """Static parameters of the rollout search (each distinct value compiles its own program)."""

    num_rollouts: int
    horizon: int = 8
    num_candidates: int = 8
    gamma: float = 0.99
    greedy: bool = True  # the network's greedy move along a rollout, else a sample
    # Leave the network's favourite only for a candidate whose mean paired gain over it is
    # more than this many standard errors (0: the best mean, whatever its margin) and more
    # than ``min_gain`` in the return's units: where the draws barely differ (no chance in
    # reach) the standard error is about 0 and the z guard alone lets any gain through.
    min_gain_z: float = 0.0
    min_gain: float = 0.0
    hold_steps: int = 1  # a plan candidate's steps before the network plays on (1: none)

    def __post_init__(self):
        if self.num_rollouts < 1:
            raise ValueError(f"num_rollouts must be >= 1, got {self.num_rollouts}")
        if self.horizon < 0:
            raise ValueError(f"horizon must be >= 0, got {self.horizon}")
        if self.num_candidates < 1:
            raise ValueError(f"num_candidates must be >= 1, got {self.num_candidates}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        if not self.min_gain_z >= 0.0:
            raise ValueError(f"min_gain_z must be >= 0, got {self.min_gain_z}")
        if not self.min_gain >= 0.0:
            raise ValueError(f"min_gain must be >= 0, got {self.min_gain}")
        if not 1 <= self.hold_steps <= self.horizon + 1:
            raise ValueError(f"hold_steps must be in 1..horizon + 1 = {self.horizon + 1}, "
                             f"got {self.hold_steps}")
        if self.min_gain_z > 0.0 and self.num_rollouts < 2:
            raise ValueError("min_gain_z needs num_rollouts >= 2 (a standard error)")

    def model_steps_per_move(self, num_actions: int) -> int:
        """Model steps of one move (every candidate is rolled out, legal or not)."""
        return min(self.num_candidates, num_actions) * self.num_rollouts * (self.horizon + 1)


def make_rollout_search(model_env, model_params, settings: RolloutSettings, *,
                        node_fn: Callable, reward_fn: Callable = env_reward,
                        to_model: Callable = lambda s: s,
                        sample_world: Optional[Callable] = None,
                        allowed_actions: Optional[np.ndarray] = None,
                        plan_actions: Optional[np.ndarray] = None):
    """``search(key, obs, env_state, memory) -> (action, scores, memory after obs)``.

    ``node_fn(memory, key, obs, model_state) -> (memory after obs, logits, value)`` is the
    network (``search.network_node``'s contract: the logits rank the candidates and play the
    rollouts, the value ends them); the other hooks are
    ``search.make_recurrent_search_teacher``'s. ``scores`` (f32[A]) are the candidates' mean
    returns, -inf for the actions not scored. ``plan_actions`` (bool[A]): the candidates held
    for ``settings.hold_steps`` steps (see the module docstring)."""
    rollouts = settings.num_rollouts
    if settings.hold_steps > 1 and (plan_actions is None or not np.any(plan_actions)):
        raise ValueError("hold_steps > 1 needs plan_actions: the env has no action to hold")
    is_plan = None if plan_actions is None else jnp.asarray(plan_actions, bool)

    def legal_actions(mask):
        return searchable(mask, allowed_actions)

    def model_step(key, state, action):
        return model_env.step_env(key, state, action, model_params)

    def rollout(keys, state, memory, first_action):
        """One rollout's return: ``first_action`` (held while it is a legal plan action, up
        to ``hold_steps`` steps), then the network to ``horizon + 1`` steps in all, then its
        value (``keys``: one per step, and one for each node's value)."""
        def advance(carry, step):
            state, obs, memory, total, discount, done, action, holding = carry
            (step_key, node_key, policy_key), index = step
            next_obs, next_state, reward, terminated, info = model_step(step_key, state, action)
            total = total + jnp.where(done, 0.0, discount * reward_fn(reward, info))
            ended = done | terminated
            state = jax.tree.map(lambda new, old: jnp.where(done, old, new), next_state, state)
            obs = jax.tree.map(lambda new, old: jnp.where(done, old, new), next_obs, obs)
            memory, logits, value = node_fn(memory, node_key, obs, state)
            legal = legal_actions(obs.action_mask)
            logits = jnp.where(legal, logits, -jnp.inf)
            action = (jnp.argmax(logits) if settings.greedy
                      else jax.random.categorical(policy_key, logits)).astype(jnp.int32)
            # A plan stops at its first step where it is not legal, and does not resume.
            holding = holding & (index + 1 < settings.hold_steps) & legal[first_action]
            action = jnp.where(holding, first_action, action)
            return (state, obs, memory, total, discount * settings.gamma, ended, action,
                    holding), value

        # The first observation comes from the first step: a placeholder of its shape.
        obs_shape = jax.eval_shape(lambda: model_step(keys[0, 0], state, first_action)[0])
        no_obs = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), obs_shape)
        holding = jnp.bool_(False) if is_plan is None else is_plan[first_action]
        init = (state, no_obs, memory, jnp.float32(0.0), jnp.float32(1.0), jnp.bool_(False),
                first_action, holding)
        steps = (keys, jnp.arange(settings.horizon + 1))
        (_, _, _, total, discount, done, _, _), values = jax.lax.scan(advance, init, steps)
        return total + jnp.where(done, 0.0, discount * values[-1])

    def search(key, obs, env_state, memory):
        world_key, node_key, rollout_key = jax.random.split(key, 3)
        legal = legal_actions(obs.action_mask)
        if sample_world is None:
            worlds = jax.tree.map(lambda x: jnp.broadcast_to(x, (rollouts,) + x.shape),
                                  env_state)
        else:
            worlds = jax.vmap(sample_world, in_axes=(0, None))(
                jax.random.split(world_key, rollouts), env_state)
        worlds = jax.vmap(to_model)(worlds)
        # The root's node sees a drawn world, never the true state (a fair row's node_fn
        # that read the state would otherwise see what the player cannot).
        root_memory, logits, _ = node_fn(memory, node_key, obs,
                                         jax.tree.map(lambda x: x[0], worlds))
        ranked = jnp.where(legal, logits, -jnp.inf)
        _, chosen = jax.lax.top_k(ranked, min(settings.num_candidates, legal.shape[-1]))
        valid = legal[chosen]
        # Keys [rollouts, horizon + 1, 3]: rollout r's, the same for every candidate.
        keys = jax.random.split(rollout_key, rollouts * (settings.horizon + 1) * 3).reshape(
            rollouts, settings.horizon + 1, 3, -1)
        per_world = jax.vmap(rollout, in_axes=(0, 0, None, None))
        returns = jax.vmap(per_world, in_axes=(None, None, None, 0))(
            keys, worlds, root_memory, chosen)  # [candidates, rollouts]
        means = jnp.where(valid, jnp.mean(returns, axis=1), -jnp.inf)
        # The paired gain over the favourite (candidate 0) on the same draws, and its
        # standard error: a guard against the winner's curse of an argmax over noisy means.
        gains = returns - returns[:1]
        spread = jnp.std(gains, axis=1, ddof=1) if rollouts > 1 else jnp.zeros(len(gains))
        clear = jnp.mean(gains, axis=1) > jnp.maximum(
            settings.min_gain, settings.min_gain_z * spread / jnp.sqrt(rollouts))
        eligible = valid & (clear | (jnp.arange(len(gains)) == 0))
        action = chosen[jnp.argmax(jnp.where(eligible, means, -jnp.inf))].astype(jnp.int32)
        scores = jnp.full(legal.shape, -jnp.inf).at[chosen].set(means)
        return action, scores, root_memory

    return search


def make_rollout_policy(model_env, model_params, settings: RolloutSettings, *,
                        node_fn: Callable, initial_memory=(), **hooks):
    """The rollout search as an evaluation policy: a ``RecurrentPolicy`` whose memory is the
    network's (``initial_memory`` at an episode's start; ``()`` for a feed-forward one)."""
    from purejaxrl.evaluation import RecurrentPolicy
    search = make_rollout_search(model_env, model_params, settings, node_fn=node_fn, **hooks)

    def act(key, obs, env_state, memory):
        action, _, memory = search(key, obs, env_state, memory)
        return action, memory
    return RecurrentPolicy(act, initial_memory)
