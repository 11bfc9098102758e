"""Policy evaluation on separate envs: each env plays one episode from its own reset.

A policy is ``act(key, obs, env_state) -> action`` for a single env (vmapped here), or a
``RecurrentPolicy`` that also carries a memory per env (a recurrent network's hidden state),
started afresh with each episode. The loop is a
``lax.while_loop`` that stops as soon as every env has finished its first episode (or after
``max_steps``), so short episodes cost short loops.

Every env reports return and length (``summarize_episodes``); an env's metrics
(``envs/contract.Metric``) add their summaries (HackMatrix: win rate, deaths, siphons and
programs per episode, ...). For an env with stages, ``stage_report`` says where games end: for
every stage the share of games that reach it and clear it, how the games that end there end, the
steps (and the per-stage metrics: HackMatrix's programs) spent in it, and what the player still
held when the game ended there (the env's ``episode_resources`` hook names those resources).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.networks import (ActorCritic, greedy_masked, is_recurrent, sample_masked,
                                step_recurrent)

# ``act(key, obs, env_state) -> action`` for one env.
Policy = Callable[[jax.Array, object, object], jax.Array]


@dataclasses.dataclass(frozen=True)
class RecurrentPolicy:
    """A policy with a memory: ``act(key, obs, env_state, memory) -> (action, memory)`` for one
    env; ``initial_memory`` (one env's) is its memory before an episode's first step."""

    act: Callable[[jax.Array, object, object, Any], tuple[jax.Array, Any]]
    initial_memory: Any


def with_memory(policy: Policy | RecurrentPolicy) -> RecurrentPolicy:
    """Any policy as a ``RecurrentPolicy`` (a memoryless one carries an empty memory)."""
    if isinstance(policy, RecurrentPolicy):
        return policy
    return RecurrentPolicy(
        act=lambda key, obs, env_state, memory: (policy(key, obs, env_state), memory),
        initial_memory=())
# How a game ended, in the order a step's outcome is classified (won, died and invalid where
# the env has those metrics).
# "terminated": the env ended the game by none of its own named causes (an env without
# won/died metrics, such as CartPole's fallen pole).
END_CAUSES = ("won", "died", "truncated", "invalid", "terminated", "unfinished")


def network_logits(network: ActorCritic, params):
    """One env's logits under the network: (``logits_of(obs, memory) -> (logits, memory)``,
    the memory at an episode's start). A recurrent network's memory is the core's hidden state;
    a feed-forward network's is empty."""
    if is_recurrent(network):
        def logits_of(obs, hidden):
            # The core steps a batch of envs: this one env is a batch of 1. The memory is
            # zeroed between episodes by the caller, so no step here is flagged a start.
            one = jax.tree.map(lambda x: x[None], obs)
            hidden, logits, _ = step_recurrent(network, params, hidden[None], one,
                                               jnp.zeros(1, bool))
            return logits[0], hidden[0]
        return logits_of, network.initial_hidden(1)[0]
    return (lambda obs, memory: (network.apply(params, obs)[0], memory)), ()


def network_policy(env: TrainerEnv, network: ActorCritic, params,
                   greedy) -> Policy | RecurrentPolicy:
    """The network's policy: argmax over legal actions where ``greedy`` (a Python or traced
    bool), else a sample. A recurrent network's is a ``RecurrentPolicy`` whose memory is the
    core's hidden state (zeros at an episode's start)."""
    logits_of, initial_memory = network_logits(network, params)

    def choose(key, logits, obs):
        mask = env.action_mask(obs)
        return jnp.where(greedy, greedy_masked(logits, mask), sample_masked(key, logits, mask))

    if is_recurrent(network):
        def act_with_memory(key, obs, env_state, hidden):
            logits, hidden = logits_of(obs, hidden)
            return choose(key, logits, obs), hidden
        return RecurrentPolicy(act_with_memory, initial_memory)

    def act(key, obs, env_state):
        return choose(key, logits_of(obs, ())[0], obs)
    return act


def random_policy(env: TrainerEnv) -> Policy:
    """Uniform over the legal actions."""
    def act(key, obs, env_state):
        mask = env.action_mask(obs)
        return sample_masked(key, jnp.zeros(mask.shape, jnp.float32), mask)
    return act


class EpisodeTally:
    """The per-episode accounting of evaluation's loops (``play_episodes`` and the search's
    ``search.play_boards``), so every row of a comparison records the same fields: each of the
    env's metrics (an outcome's value at the end, a count's total); with stages, the stage
    (every game starts at stage 1: the first ``info["stage"]`` comes after a step) and per
    stage (i32[N, num_stages + 1]) the steps (``stage_steps``) and each per-stage metric
    (``stage_<name>``) taken in it; ``end_<name>`` for each of the env's
    ``episode_resources``, read from the state the game's last action was chosen in.

    ``obs`` and ``env_state`` are one env's (shapes and dtypes are read from them)."""

    def __init__(self, env: TrainerEnv, env_params, obs, env_state):
        self.env = env
        self.bins = (env.num_stages + 1) if env.num_stages is not None else 0
        self.per_stage = [m for m in env.metrics if m.per_stage and self.bins]
        step_shapes = jax.eval_shape(
            lambda: env.step(jax.random.PRNGKey(0), env_state, jnp.int32(0), env_params))
        # The metrics' first values give their dtypes: outcomes keep theirs, counts of bools
        # or integers are i32, of floats f32.
        self.metric_dtypes = {}
        for metric in env.metrics:
            value = jax.eval_shape(metric.value, obs, jnp.int32(0), step_shapes[5])
            integral = jnp.issubdtype(value.dtype, jnp.integer) or value.dtype == jnp.bool_
            self.metric_dtypes[metric.name] = (value.dtype if metric.at_end
                                               else jnp.int32 if integral else jnp.float32)
        self.resource_dtypes = ({} if env.episode_resources is None else
                                {name: value.dtype for name, value in jax.eval_shape(
                                    env.episode_resources, env_state).items()})

    def fresh(self, num_envs: int) -> dict:
        """The tally of ``num_envs`` episodes before their first step."""
        tally = {name: jnp.zeros(num_envs, dtype) for name, dtype in self.metric_dtypes.items()}
        if self.bins:
            per_stage = jnp.zeros((num_envs, self.bins), jnp.int32)
            tally.update(stage=jnp.ones(num_envs, jnp.int32), stage_steps=per_stage,
                         **{f"stage_{m.name}": per_stage for m in self.per_stage})
        tally.update({f"end_{name}": jnp.zeros(num_envs, dtype)
                      for name, dtype in self.resource_dtypes.items()})
        return tally

    def update(self, tally: dict, obs, env_state, actions, info, playing: jax.Array,
               done: jax.Array) -> dict:
        """``tally`` after one step of N envs: ``obs`` and ``env_state`` the ones the actions
        were chosen in, ``info`` the step's; only ``playing`` envs count, and ``done`` (bool[N],
        within ``playing``) marks the steps that end an episode."""
        new = {}
        values = {}
        for metric in self.env.metrics:
            value = jax.vmap(metric.value)(obs, actions, info)
            old = tally[metric.name]
            values[metric.name] = value
            new[metric.name] = (jnp.where(playing, value.astype(old.dtype), old) if metric.at_end
                                else old + jnp.where(playing, value, 0).astype(old.dtype))
        if self.bins:
            in_stage = jax.nn.one_hot(jnp.clip(tally["stage"], 0, self.bins - 1), self.bins,
                                      dtype=jnp.int32) * playing[:, None].astype(jnp.int32)
            new["stage"] = jnp.where(playing, info["stage"].astype(jnp.int32), tally["stage"])
            new["stage_steps"] = tally["stage_steps"] + in_stage
            for metric in self.per_stage:
                name = f"stage_{metric.name}"
                new[name] = tally[name] + in_stage * values[metric.name].astype(
                    jnp.int32)[:, None]
        if self.resource_dtypes:
            new.update({f"end_{name}": jnp.where(done, value, tally[f"end_{name}"])
                        for name, value in jax.vmap(self.env.episode_resources)(
                            env_state).items()})
        return new


def _episode_step_keys(loop_key: jax.Array, num_envs: int):
    """One step of ``play_episodes``' key chain: (the next step's loop key, the policy key of
    each env, the step key each env's ``env.step`` gets)."""
    loop_key, act_key, step_key = jax.random.split(loop_key, 3)
    return (loop_key, jax.random.split(act_key, num_envs),
            jax.random.split(step_key, num_envs))


def episode_keys(key: jax.Array, num_envs: int, envs: jax.Array, steps: int):
    """The keys ``play_episodes(..., key, num_envs, ...)`` played the envs ``envs`` (i32[G])
    with, so a recorded game can be re-simulated: reset keys [G] and, for steps 0..``steps``-1,
    the policy keys [G, steps] and the keys ``step_env`` got [G, steps]
    (``env_step_key``). Jittable."""
    reset_key, loop_key = jax.random.split(key)

    def step(loop_key, _):
        loop_key, act_keys, step_keys = _episode_step_keys(loop_key, num_envs)
        return loop_key, (act_keys[envs], jax.vmap(env_step_key)(step_keys[envs]))

    _, (act_keys, env_keys) = lax.scan(step, loop_key, None, length=steps)
    return (jax.random.split(reset_key, num_envs)[envs], jnp.swapaxes(act_keys, 0, 1),
            jnp.swapaxes(env_keys, 0, 1))


def env_step_key(key: jax.Array) -> jax.Array:
    """The key ``step_env`` gets from a step key: gymnax's ``step`` splits it and hands the
    first half to ``step_env`` (the second would reset)."""
    return jax.random.split(key)[0]


def play_episodes(env: TrainerEnv, env_params, policy: Policy | RecurrentPolicy, key: jax.Array,
                  num_envs: int, max_steps: int, record_actions: bool = False) -> dict:
    """Per-env results of one episode each: return, length, truncated, finished (False if
    ``max_steps`` ran out first), actions the mask forbade (must be 0), and the
    ``EpisodeTally``'s fields (the env's metrics, the stage and what was spent in each, the
    resources at the end). Jittable. A ``RecurrentPolicy``'s memory starts as its
    ``initial_memory`` in every env and goes back to it where an episode ends.
    ``record_actions``: the results also hold ``actions`` i32[num_envs, max_steps], each env's
    actions in order (-1 after its episode's end), to re-simulate a game on the keys it was
    played with (``episode_keys``)."""
    policy = with_memory(policy)
    initial_memory = jax.tree.map(lambda x: jnp.broadcast_to(x, (num_envs,) + jnp.shape(x)),
                                  policy.initial_memory)
    reset_key, loop_key = jax.random.split(key)
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(reset_key, num_envs), env_params)
    tally = EpisodeTally(env, env_params, *jax.tree.map(lambda x: x[0], (obs, env_state)))
    zeros_f = jnp.zeros(num_envs, jnp.float32)
    zeros_b = jnp.zeros(num_envs, bool)
    zeros_i = jnp.zeros(num_envs, jnp.int32)
    init = dict(t=jnp.int32(0), key=loop_key, obs=obs, env_state=env_state,
                memory=initial_memory, finished=zeros_b, episode_return=zeros_f, length=zeros_i,
                truncated=zeros_b, masked=zeros_i, **tally.fresh(num_envs))
    if record_actions:
        init["actions"] = jnp.full((num_envs, max_steps), -1, jnp.int32)

    def running(carry):
        return (carry["t"] < max_steps) & ~jnp.all(carry["finished"])

    def step(carry):
        key, act_keys, step_keys = _episode_step_keys(carry["key"], num_envs)
        actions, memory = jax.vmap(policy.act)(act_keys, carry["obs"], carry["env_state"],
                                               carry["memory"])
        obs, env_state, reward, terminated, truncated, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(step_keys, carry["env_state"], actions,
                                              env_params)
        playing = ~carry["finished"]
        done = (terminated | truncated) & playing
        record = lambda old, new: jnp.where(playing, new, old)  # noqa: E731
        legal = jnp.take_along_axis(env.action_mask(carry["obs"]), actions[:, None],
                                    axis=-1)[:, 0]
        ended = terminated | truncated
        memory = jax.tree.map(
            lambda fresh, kept: jnp.where(ended.reshape(ended.shape + (1,) * (kept.ndim - 1)),
                                          fresh, kept), initial_memory, memory)
        new = dict(
            t=carry["t"] + 1, key=key, obs=obs, env_state=env_state, memory=memory,
            finished=carry["finished"] | done,
            episode_return=carry["episode_return"] + jnp.where(playing, reward, 0.0),
            length=carry["length"] + playing.astype(jnp.int32),
            truncated=record(carry["truncated"], truncated & ~terminated),
            masked=carry["masked"] + (playing & ~legal).astype(jnp.int32))
        new.update(tally.update(carry, carry["obs"], carry["env_state"], actions, info,
                                playing, done))
        if record_actions:
            new["actions"] = carry["actions"].at[:, carry["t"]].set(
                jnp.where(playing, actions.astype(jnp.int32), -1))
        return new

    final = lax.while_loop(running, step, init)
    return {name: value for name, value in final.items()
            if name not in ("t", "key", "obs", "env_state", "memory")}


def summarize_episodes(results: dict, env: TrainerEnv) -> dict:
    """Means over envs (host side): return, length, truncations, unfinished games and masked
    actions for every env, the mean stage for an env with stages, and each metric's summary
    (``Metric.summary``)."""
    results = jax.device_get(results)
    summary = {
        "episodes": int(np.size(results["finished"])),
        "return_mean": float(np.mean(results["episode_return"])),
        "length_mean": float(np.mean(results["length"])),
        "truncation_rate": float(np.mean(results["truncated"])),
        "unfinished": int(np.size(results["finished"]) - np.sum(results["finished"])),
        "masked_actions": int(np.sum(results["masked"])),
    }
    if "stage" in results:
        summary["stage_mean"] = float(np.mean(results["stage"]))
    for metric in env.metrics:
        if metric.summary is not None:
            values = np.asarray(results[metric.name])
            summary[metric.summary] = (values.sum().item() if metric.summary_total
                                       else float(np.mean(values)))
    return summary


def end_causes(results: dict) -> dict:
    """bool[N] per cause in ``END_CAUSES``: exactly one is true for every game (a cause the
    env has no metric for is never true)."""
    finished = np.asarray(results["finished"], bool)
    never = np.zeros(finished.shape, bool)
    flag = lambda name: np.asarray(results[name], bool) if name in results else never  # noqa
    won = flag("won")
    died = flag("died") & ~won
    truncated = np.asarray(results["truncated"], bool) & ~won & ~died
    invalid = flag("invalid") & ~won & ~died & ~truncated
    terminated = finished & ~won & ~died & ~truncated & ~invalid
    return {"won": won, "died": died, "truncated": truncated, "invalid": invalid,
            "terminated": terminated, "unfinished": ~finished}


def game_outcomes(results: dict) -> dict:
    """Board by board (host side; index i is the i-th env of the evaluation's key, the same
    board for every row of a run): how the game ended (one of ``END_CAUSES``), its length and
    return, its stage where the env has stages, and its actions where they were recorded, so
    that two rows can be compared on the same boards and a single game found again (and,
    with its actions, watched: ``watch_agent.py --evaluation``)."""
    results = jax.device_get(results)
    causes = end_causes(results)
    ends = np.full(np.shape(results["finished"]), "unfinished", dtype=object)
    for cause, flags in causes.items():
        ends[flags] = cause
    games = {"end": ends.tolist(), "length": np.asarray(results["length"]).tolist(),
             "return": np.round(np.asarray(results["episode_return"], float), 4).tolist()}
    if "stage" in results:
        games["stage"] = np.asarray(results["stage"]).tolist()
    if "actions" in results:  # recorded (``record_actions``): a replay's input
        games["actions"] = [row[:length].tolist() for row, length
                             in zip(np.asarray(results["actions"]), games["length"])]
    return games


def stage_report(results: dict, num_stages: int | None = None) -> list[dict]:
    """Where the games end, one row per stage 1..``num_stages`` (default: the highest stage
    any game reached): ``reached`` and ``cleared`` (a share of all games; a stage is cleared by
    moving past it, or by winning on it), ``clear_rate`` (cleared / reached), how many games
    ended on the stage by each of ``END_CAUSES``, and means over the games that reached it of
    the steps (``steps_mean``) and of each per-stage metric (``<name>_mean``) spent in it;
    ``end_<resource>`` means over the games that ended there. Host side; [] for an env without
    stages."""
    results = jax.device_get(results)
    if "stage" not in results:
        return []
    stage = np.asarray(results["stage"])
    games = max(stage.size, 1)
    causes = end_causes(results)
    num_stages = num_stages or int(max(stage.max(initial=1), 1))
    resources = sorted(name for name in results if name.startswith("end_"))
    per_stage = [name[len("stage_"):] for name in results
                 if name.startswith("stage_") and name != "stage_steps"]
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
               "steps_mean": mean_over(np.asarray(results["stage_steps"])[:, k], reached)}
        for name in per_stage:
            row[f"{name}_mean"] = mean_over(np.asarray(results[f"stage_{name}"])[:, k], reached)
        for name in resources:
            row[name] = mean_over(np.asarray(results[name], float), ends_here)
        rows.append(row)
    return rows


def format_stage_report(rows: list[dict]) -> str:
    """The stage report as a text table."""
    resources = sorted({key for row in rows for key in row if key.startswith("end_")})
    per_stage = [key[:-len("_mean")] for key in (rows[0] if rows else {})
                 if key.endswith("_mean") and key != "steps_mean"]
    header = (f"{'stage':>5}{'reached':>9}{'cleared':>9}{'clear%':>8}"
              + "".join(f"{cause:>11}" for cause in END_CAUSES[1:])
              + f"{'steps':>8}" + "".join(f"{name:>9}" for name in per_stage)
              + "".join(f"{name:>{_column(name)}}" for name in resources))
    lines = [header]

    def number(value, fmt, width):
        return f"{'-' if value is None else format(value, fmt):>{width}}"

    for row in rows:
        lines.append(
            f"{row['stage']:>5}{number(row['reached'], '.1%', 9)}"
            f"{number(row['cleared'], '.1%', 9)}{number(row['clear_rate'], '.0%', 8)}"
            + "".join(f"{row['ended'][cause]:>11}" for cause in END_CAUSES[1:])
            + number(row["steps_mean"], ".1f", 8)
            + "".join(number(row[f"{name}_mean"], ".2f", 9) for name in per_stage)
            + "".join(number(row[name], ".2f", _column(name)) for name in resources))
    return "\n".join(lines)


def _column(name: str) -> int:
    return max(12, len(name) + 2)


def make_policy_comparison(env, env_params, policies: list[Policy | RecurrentPolicy],
                           num_envs: int, max_steps: int, record_actions: bool = False):
    """Jitted ``play(policy_index, key)``: the policies share one compiled env loop (the index
    is an unbatched operand, so ``lax.switch`` runs only the chosen policy). The loop carries
    every policy's memory (``lax.switch``'s branches must return the same structure); the
    chosen one updates its own. ``record_actions``: ``play_episodes``'."""
    with_memories = [with_memory(policy) for policy in policies]

    def branch(index):
        def act(key, obs, env_state, memories):
            action, memory = with_memories[index].act(key, obs, env_state, memories[index])
            return action, memories[:index] + (memory,) + memories[index + 1:]
        return act

    def play(policy_index, key):
        def act(key, obs, env_state, memories):
            return lax.switch(policy_index, [branch(i) for i in range(len(policies))], key,
                              obs, env_state, memories)
        chosen = RecurrentPolicy(act, tuple(p.initial_memory for p in with_memories))
        return play_episodes(env, env_params, chosen, key, num_envs, max_steps,
                             record_actions)
    return jax.jit(play)


def make_training_evaluator(env: TrainerEnv, env_params, network: ActorCritic, num_envs: int,
                            max_steps: int):
    """``evaluate(params, key) -> {"greedy": ..., "sampled": ...}`` per-env results on the same
    boards (one key: the two modes compare game by game, as in ``evaluate.py``); one compile
    serves both modes (``greedy`` is a traced flag)."""
    @jax.jit
    def play(params, key, greedy):
        return play_episodes(env, env_params, network_policy(env, network, params, greedy), key,
                             num_envs, max_steps)

    def evaluate(params, key):
        return {"greedy": play(params, key, jnp.bool_(True)),
                "sampled": play(params, key, jnp.bool_(False))}
    return evaluate

