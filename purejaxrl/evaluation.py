"""Policy evaluation on separate envs: each env plays one episode from its own reset.

A policy is ``act(key, obs, env_state) -> action`` for a single env (vmapped here). The loop is a
``lax.while_loop`` that stops as soon as every env has finished its first episode (or after
``max_steps``), so short episodes cost short loops.

Besides the means (``summarize_episodes``), ``stage_report`` says where games end: for every
stage the share of games that reach it and clear it, how the games that end there end, the steps
and programs spent in it, and what the player still held when the game ended there (an env's
optional ``episode_resources(state)`` hook names those resources).
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
# Stages are counted in bins 0..STAGE_BINS-1 (HackMatrix reaches at most 8, the toy env 5).
STAGE_BINS = 10
# How a game ended, in the order a step's outcome is classified.
END_CAUSES = ("won", "died", "truncated", "invalid", "unfinished")


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
    taken, actions the mask forbade (must be 0); per stage (i32[N, STAGE_BINS]) the steps and
    programs taken in it; and ``end_<name>`` for each of the env's ``episode_resources``, read
    from the state the game's last action was chosen in. Jittable."""
    reset_key, loop_key = jax.random.split(key)
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(reset_key, num_envs), env_params)
    resources = getattr(env, "episode_resources", None)
    zeros_f = jnp.zeros(num_envs, jnp.float32)
    zeros_b = jnp.zeros(num_envs, bool)
    zeros_i = jnp.zeros(num_envs, jnp.int32)
    per_stage = jnp.zeros((num_envs, STAGE_BINS), jnp.int32)
    init = dict(t=jnp.int32(0), key=loop_key, obs=obs, env_state=env_state,
                finished=zeros_b, episode_return=zeros_f, length=zeros_i,
                # Every game starts at stage 1 (the first info["stage"] comes after a step).
                stage=jnp.ones(num_envs, jnp.int32), won=zeros_b, died=zeros_b,
                truncated=zeros_b, invalid=zeros_b, siphons=zeros_i, programs=zeros_i,
                masked=zeros_i, undo_exploit=zeros_i, stage_steps=per_stage,
                stage_programs=per_stage)
    if resources is not None:
        init.update({f"end_{name}": jnp.zeros(num_envs, value.dtype)
                     for name, value in jax.eval_shape(
                         jax.vmap(resources), env_state).items()})

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
        is_program = actions >= PROGRAM_ACTION_OFFSET
        in_stage = jax.nn.one_hot(jnp.clip(carry["stage"], 0, STAGE_BINS - 1), STAGE_BINS,
                                  dtype=jnp.int32) * playing[:, None].astype(jnp.int32)
        ended = {}
        if resources is not None:
            ended = {f"end_{name}": jnp.where(done, value, carry[f"end_{name}"])
                     for name, value in jax.vmap(resources)(carry["env_state"]).items()}
        return dict(
            **ended,
            stage_steps=carry["stage_steps"] + in_stage,
            stage_programs=carry["stage_programs"] + in_stage * is_program[:, None],
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
            programs=count(carry["programs"], is_program),
            masked=count(carry["masked"], ~legal),
            undo_exploit=count(carry["undo_exploit"], info["undo_exploit_completion"]))

    final = lax.while_loop(running, step, init)
    return {name: value for name, value in final.items()
            if name not in ("t", "key", "obs", "env_state")}


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


def end_causes(results: dict) -> dict:
    """bool[N] per cause in ``END_CAUSES``: exactly one is true for every game."""
    won = np.asarray(results["won"], bool)
    finished = np.asarray(results["finished"], bool)
    died = np.asarray(results["died"], bool) & ~won
    truncated = np.asarray(results["truncated"], bool) & ~won & ~died
    invalid = np.asarray(results["invalid"], bool) & ~won & ~died & ~truncated
    return {"won": won, "died": died, "truncated": truncated, "invalid": invalid,
            "unfinished": ~finished}


def stage_report(results: dict, num_stages: int | None = None) -> list[dict]:
    """Where the games end, one row per stage 1..``num_stages`` (default: the highest stage
    any game reached): ``reached`` and ``cleared`` (a share of all games; a stage is cleared by
    moving past it, or by winning on it), ``clear_rate`` (cleared / reached), how many games
    ended on the stage by each of ``END_CAUSES``, and means over the games that reached it of
    the steps and programs spent in it; ``end_<resource>`` means over the games that ended
    there. Host side."""
    results = jax.device_get(results)
    stage = np.asarray(results["stage"])
    games = max(stage.size, 1)
    causes = end_causes(results)
    num_stages = num_stages or int(max(stage.max(initial=1), 1))
    resources = sorted(name for name in results if name.startswith("end_"))
    rows = []
    for k in range(1, num_stages + 1):
        reached = stage >= k
        cleared = (stage > k) | (causes["won"] & (stage == k))
        ends_here = (stage == k) & ~cleared
        mean_over = lambda values, where: (  # noqa: E731
            float(np.mean(values[where])) if np.any(where) else None)
        row = {"stage": k, "reached": float(np.sum(reached)) / games,
               "cleared": float(np.sum(cleared)) / games,
               "clear_rate": (float(np.sum(cleared)) / float(np.sum(reached))
                              if np.any(reached) else None),
               "ended": {cause: int(np.sum(flags & ends_here))
                         for cause, flags in causes.items() if cause != "won"},
               "steps_mean": mean_over(np.asarray(results["stage_steps"])[:, k], reached),
               "programs_mean": mean_over(np.asarray(results["stage_programs"])[:, k], reached)}
        for name in resources:
            row[name] = mean_over(np.asarray(results[name], float), ends_here)
        rows.append(row)
    return rows


def format_stage_report(rows: list[dict]) -> str:
    """The stage report as a text table."""
    resources = sorted({key for row in rows for key in row if key.startswith("end_")})
    header = (f"{'stage':>5}{'reached':>9}{'cleared':>9}{'clear%':>8}"
              + "".join(f"{cause:>11}" for cause in END_CAUSES[1:])
              + f"{'steps':>8}{'programs':>9}"
              + "".join(f"{name:>12}" for name in resources))
    lines = [header]

    def number(value, fmt, width):
        return f"{'-' if value is None else format(value, fmt):>{width}}"

    for row in rows:
        lines.append(
            f"{row['stage']:>5}{number(row['reached'], '.1%', 9)}"
            f"{number(row['cleared'], '.1%', 9)}{number(row['clear_rate'], '.0%', 8)}"
            + "".join(f"{row['ended'][cause]:>11}" for cause in END_CAUSES[1:])
            + number(row["steps_mean"], ".1f", 8) + number(row["programs_mean"], ".2f", 9)
            + "".join(number(row[name], ".2f", 12) for name in resources))
    return "\n".join(lines)


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
