"""Policy evaluation on separate envs: each env plays one episode from its own reset.

A policy is ``act(key, obs, env_state) -> action`` for a single env (vmapped here). The loop is a
``lax.while_loop`` that stops as soon as every env has finished its first episode (or after
``max_steps``), so short episodes cost short loops.
"""

from __future__ import annotations

from typing import Callable

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from envs.hackmatrix.core.constants import ACTION_SIPHON, PROGRAM_ACTION_OFFSET
from envs.hackmatrix import baselines
from purejaxrl import toy_env
from purejaxrl.networks import ActorCritic, greedy_masked, sample_masked

Policy = Callable[[jax.Array, object, object], jax.Array]


def network_policy(network: ActorCritic, params, greedy) -> Policy:
    """The network's policy: argmax over legal actions where ``greedy`` (a Python or traced
    bool), else a sample."""
    def act(key, obs, env_state):
        logits, _ = network.apply(params, obs)
        return jnp.where(greedy, greedy_masked(logits, obs.action_mask),
                         sample_masked(key, logits, obs.action_mask))
    return act


def random_policy(key, obs, env_state):
    """Uniform over the legal actions."""
    return sample_masked(key, jnp.zeros(obs.action_mask.shape, jnp.float32), obs.action_mask)


def play_episodes(env, env_params, policy: Policy, key: jax.Array, num_envs: int,
                  max_steps: int) -> dict:
    """Per-env results of one episode each: return, length, stage at the end, won, died,
    truncated, finished (False if ``max_steps`` ran out first), siphon and program actions
    taken, actions the mask forbade (must be 0). Jittable."""
    reset_key, loop_key = jax.random.split(key)
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(reset_key, num_envs), env_params)
    zeros_f = jnp.zeros(num_envs, jnp.float32)
    zeros_b = jnp.zeros(num_envs, bool)
    init = dict(t=jnp.int32(0), key=loop_key, obs=obs, env_state=env_state,
                finished=zeros_b, episode_return=zeros_f, length=jnp.zeros(num_envs, jnp.int32),
                stage=jnp.zeros(num_envs, jnp.int32), won=zeros_b, died=zeros_b,
                truncated=zeros_b, invalid=zeros_b, siphons=jnp.zeros(num_envs, jnp.int32),
                programs=jnp.zeros(num_envs, jnp.int32), masked=jnp.zeros(num_envs, jnp.int32),
                undo_exploit=jnp.zeros(num_envs, jnp.int32))

    def running(carry):
        return (carry["t"] < max_steps) & ~jnp.all(carry["finished"])

    def step(carry):
        key, act_key, step_key = jax.random.split(carry["key"], 3)
        actions = jax.vmap(policy)(jax.random.split(act_key, num_envs), carry["obs"],
                                   carry["env_state"])
        obs, env_state, reward, terminated, truncated, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(jax.random.split(step_key, num_envs),
                                              carry["env_state"], actions, env_params)
        playing = ~carry["finished"]
        done = (terminated | truncated) & playing
        record = lambda old, new: jnp.where(playing, new, old)
        count = lambda old, event: old + (playing & event).astype(jnp.int32)
        legal = jnp.take_along_axis(carry["obs"].action_mask, actions[:, None], axis=-1)[:, 0]
        return dict(
            t=carry["t"] + 1, key=key, obs=obs, env_state=env_state,
            finished=carry["finished"] | done,
            episode_return=carry["episode_return"] + jnp.where(playing, reward, 0.0),
            length=carry["length"] + playing.astype(jnp.int32),
            stage=record(carry["stage"], info["stage"]),
            won=record(carry["won"], info["won"]),
            died=record(carry["died"], info["died"]),
            truncated=record(carry["truncated"], truncated & ~terminated),
            invalid=carry["invalid"] | (playing & info["invalid_action"]),
            siphons=count(carry["siphons"], actions == ACTION_SIPHON),
            programs=count(carry["programs"], actions >= PROGRAM_ACTION_OFFSET),
            masked=count(carry["masked"], ~legal),
            undo_exploit=count(carry["undo_exploit"], info["undo_exploit_completion"]))

    final = lax.while_loop(running, step, init)
    return {name: final[name] for name in ("episode_return", "length", "stage", "won", "died",
                                           "truncated", "invalid", "finished", "siphons",
                                           "programs", "masked", "undo_exploit")}


def summarize_episodes(results: dict) -> dict:
    """Means over envs (host side)."""
    results = jax.device_get(results)
    return {
        "episodes": int(np.size(results["won"])),
        "win_rate": float(np.mean(results["won"])),
        "death_rate": float(np.mean(results["died"])),
        "stage_mean": float(np.mean(results["stage"])),
        "return_mean": float(np.mean(results["episode_return"])),
        "length_mean": float(np.mean(results["length"])),
        "truncation_rate": float(np.mean(results["truncated"])),
        "invalid_actions": int(np.sum(results["invalid"])),
        "unfinished": int(np.size(results["finished"]) - np.sum(results["finished"])),
        "siphons_per_episode": float(np.mean(results["siphons"])),
        "programs_per_episode": float(np.mean(results["programs"])),
        "masked_actions": int(np.sum(results["masked"])),
        # Stage completions on a board UNDO restored from an earlier stage (decisions R9):
        # where the env leaves that loop open, a stage or a win may be bought with it.
        "undo_exploit_completions_per_episode": float(np.mean(results["undo_exploit"])),
    }


def make_policy_comparison(env, env_params, policies: list[Policy], num_envs: int,
                           max_steps: int):
    """Jitted ``play(policy_index, key)``: the policies share one compiled env loop (the index
    is an unbatched operand, so ``lax.switch`` runs only the chosen policy)."""
    def play(policy_index, key):
        def chosen(key, obs, env_state):
            return lax.switch(policy_index, policies, key, obs, env_state)
        return play_episodes(env, env_params, chosen, key, num_envs, max_steps)
    return jax.jit(play)


def make_training_evaluator(env, env_params, network: ActorCritic, num_envs: int,
                            max_steps: int):
    """``evaluate(params, key) -> {"greedy": ..., "sampled": ...}`` per-env results; one
    compile serves both modes (``greedy`` is a traced flag)."""
    @jax.jit
    def play(params, key, greedy):
        return play_episodes(env, env_params, network_policy(network, params, greedy), key,
                             num_envs, max_steps)

    def evaluate(params, key):
        greedy_key, sampled_key = jax.random.split(key)
        return {"greedy": play(params, greedy_key, jnp.bool_(True)),
                "sampled": play(params, sampled_key, jnp.bool_(False))}
    return evaluate


def heuristic_policy(env_name: str) -> Policy | None:
    """The scripted baseline of an environment."""
    return {"toy": toy_env.heuristic_policy, "hackmatrix": baselines.heuristic_policy}.get(env_name)
