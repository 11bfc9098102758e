"""The replay simulator and the episode record format, shared by scripts/watch_agent.py (agents)
and scripts/play.py (humans).

Episode e of a run with seed s resets from fold_in(PRNGKey(s), e) and steps with per-step keys
derived from it, so (seed, episode, actions) determine an episode: a record holds them (with
each step's reward and a digest of each state), and a replay re-simulates the actions and fails
unless every state and reward is reproduced. A record may name other keys (``keys``: a game of
an evaluation, board b of N, played with that evaluation's keys); the caller that knows them
passes them to ``run_episode``. The env step is jitted once per env and shared by
every caller, so the persistent compile cache serves watch_agent, its replays and play.py."""

from __future__ import annotations

import functools
import hashlib
import json

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import ENV_VERSION
from ..core.constants import ACTION_SIPHON, N_ACTIONS, PROGRAM_ACTION_OFFSET
from ..core.mask import action_mask
from .render_text import action_name, frame_view

RECORD_FORMAT = "hackmatrix-episode-record"
RECORD_VERSION = 2
# Version 1: no ``keys`` field (every episode watch_agent's, ``episode_keys``).
READABLE_VERSIONS = (1, 2)
# Whose keys a record's episodes were played with: watch_agent's own (``episode_keys``), or an
# evaluation's (``{"scheme": "evaluation", "boards": N}``: episode b is board b of N).
WATCH_KEYS = {"scheme": "watch"}
# Rewards of a replay are recomputed by a differently compiled program (no policy network in
# it), whose float fusion may differ in the last bits; states are compared exactly.
REWARD_TOLERANCE = 1e-5


class ReplayError(Exception):
    """A record that cannot be read, or a replay that does not reproduce it; the message says
    where."""


def state_digest(state) -> str:
    """A short hash of every array of a (host) state: equal digests = equal states."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(state)):
        array = np.ascontiguousarray(leaf)
        digest.update(str((array.dtype, array.shape)).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def jitted_env_step(env):
    """``step(key, state, action, env_params)`` of ``env`` without auto-reset, jitted; also
    reports truncation and the action masks before and after. ``env_params`` is an argument
    (not baked in), so this program is the same for watch_agent, its replays and play.py
    whatever their episode limits, and the persistent compile cache serves all of them."""
    def env_step(key, state, action, env_params):
        _, next_state, reward, terminated, info = env.step_env(key, state, action, env_params)
        truncated = ~terminated & env.is_truncated(next_state, env_params)
        return dict(action=action, state=next_state, reward=reward, terminated=terminated,
                    truncated=truncated, breakdown=info["reward_breakdown"], shot=info["shot"],
                    won=info["won"], died=info["died"], invalid=info["invalid_action"],
                    stage=info["stage"], stage_complete=info["stage_complete"],
                    played=info["action_played"], mask=action_mask(state),
                    next_mask=action_mask(next_state))
    return jax.jit(env_step)


@functools.lru_cache(maxsize=None)
def jitted_reset(env):
    """``reset(key, env_params) -> state`` of ``env``, jitted; shared like ``jitted_env_step``."""
    return jax.jit(lambda key, env_params: env.reset(key, env_params)[1])


class Simulator:
    """Reset, and one step: (with a policy) its probabilities, value and action, or a forced
    action, then the environment step without auto-reset. The policy and the env step are
    separate jitted programs, so replays and play.py reuse the env step's compilation.

    ``policy(params, key, obs, greedy) -> {"action", "value", "probs"}`` decides from the
    observation of the current state (``network_decision`` of scripts/watch_agent.py). A
    policy with a memory (a recurrent network's hidden state) is given its ``initial_memory``:
    it is then called with the memory as a last argument and returns the next one under
    ``"memory"``; each reset starts the memory afresh."""

    def __init__(self, env, env_params, policy=None, params=None, greedy=True,
                 initial_memory=None):
        self.env, self.env_params = env, env_params
        self.params, self.greedy = params, greedy
        self.initial_memory = self.memory = initial_memory
        self._reset = jitted_reset(env)
        self._policy = None if policy is None else jax.jit(
            lambda params, key, state, greedy, *memory: policy(
                params, key, env.observe(state), greedy, *memory))
        self._env_step = jitted_env_step(env)

    def reset(self, key):
        self.memory = self.initial_memory
        return self._reset(key, self.env_params)

    def step(self, keys, state, forced_action=None):
        """``keys``: the policy's key and the env step's key (``step_env``'s)."""
        act_key, env_key = keys
        decision = {}
        if self._policy is not None:
            memory = () if self.initial_memory is None else (self.memory,)
            decision = jax.device_get(self._policy(self.params, act_key, state,
                                                   jnp.bool_(self.greedy), *memory))
            self.memory = decision.pop("memory", self.memory)
        action = forced_action if forced_action is not None else decision["action"]
        out = self._env_step(env_key, state, jnp.int32(action), self.env_params)
        return {**jax.device_get(out), "probs": decision.get("probs"),
                "value": decision.get("value")}


def episode_keys(seed: int, episode: int):
    return jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), episode))


def watch_episode_keys(seed: int, episode: int):
    """(reset key, ``step_keys(t) -> (policy key, env step key)``) of watch_agent's episode
    ``episode`` of ``seed``."""
    reset_key, run_key = episode_keys(seed, episode)
    return reset_key, lambda t: tuple(jax.random.split(jax.random.fold_in(run_key, t)))


def outcome_of(out) -> str:
    if bool(out["invalid"]):
        return "invalid action"
    if bool(out["won"]):
        return "won"
    if bool(out["died"]):
        return "died"
    return "truncated"


def run_episode(simulator: Simulator, *, seed: int, episode: int, max_steps: int,
                forced_actions=None, reveal=False, top_k=5, on_frame=None, keys=None) -> dict:
    """Play (or, with ``forced_actions``, re-simulate) one episode. Returns its record (actions,
    rewards, state digests), its frames (one per step plus the final position) and summary.
    ``keys``: (reset key, ``step_keys(t)``) where the episode is not watch_agent's own
    (``watch_episode_keys``)."""
    reset_key, step_keys = keys or watch_episode_keys(seed, episode)
    state = simulator.reset(reset_key)
    record = {"episode": episode, "actions": [], "rewards": [], "state_digests": []}
    frames, total, outcome, stage = [], 0.0, None, 1
    siphons, programs = 0, {}
    limit = len(forced_actions) if forced_actions is not None else max_steps
    for t in range(limit):
        forced = None if forced_actions is None else forced_actions[t]
        out = simulator.step(step_keys(t), state, forced)
        action = int(out["action"])
        frame = frame_view(state, reveal=reveal, step=t, action=action, shot=bool(out["shot"]),
                           probs=out.get("probs"), value=out.get("value"),
                           reward=out["reward"], breakdown=out["breakdown"],
                           action_mask=out["mask"], top_k=top_k)
        frame["episode"] = episode
        frames.append(frame)
        if on_frame is not None:
            on_frame(frame)
        state = out["state"]
        record["actions"].append(action)
        record["rewards"].append(float(out["reward"]))
        record["state_digests"].append(state_digest(state))
        total += float(out["reward"])
        stage = int(out["stage"])
        played = int(out["played"])  # the acquire macro's move, where the action is the macro
        siphons += played == ACTION_SIPHON
        if PROGRAM_ACTION_OFFSET <= played < N_ACTIONS:
            name = action_name(played)
            programs[name] = programs.get(name, 0) + 1
        if bool(out["terminated"]) or bool(out["truncated"]):
            outcome = outcome_of(out)
            break
    else:
        outcome = "max steps"  # a replay runs out of actions where the recording hit the cap
    final = frame_view(state, reveal=reveal, step=len(record["actions"]), outcome=outcome)
    final["episode"] = episode
    frames.append(final)
    if on_frame is not None:
        on_frame(final)
    record["outcome"] = outcome
    summary = {"episode": episode, "return": round(total, 4), "length": len(record["actions"]),
               "stage": stage, "outcome": outcome, "siphons": siphons,
               "programs": ", ".join(f"{name} x{count}" for name, count in programs.items()) or "-"}
    return {"record": record, "frames": frames, "summary": summary}


# Outcome codes of ``screen_episodes``: index = code, names as ``outcome_of`` and
# ``run_episode`` write them ("max steps": the screen's step budget ran out first).
SCREEN_OUTCOMES = ("max steps", "won", "died", "invalid action", "truncated")


def screen_episodes(env, env_params, policy, params, *, seed: int, episodes: int,
                    max_steps: int, greedy: bool = True, initial_memory=None,
                    batch: int = 256) -> dict:
    """Outcome, stage and length of episodes 0..episodes-1 of ``seed``, played ``batch`` at a
    time without frames, with ``run_episode``'s keys and ``Simulator``'s policy form, so an
    episode it finds can be watched one at a time (watch_agent's ``--only``). Returns numpy
    arrays ``outcome`` (codes of ``SCREEN_OUTCOMES``), ``stage`` and ``length``, one per
    episode. The network runs on a batch here and on one observation there, so the last bits
    of its floats may differ; a near-tie can then go the other way (the caller checks)."""
    batch = max(1, min(batch, episodes))

    def decide(key, state, memory):
        extra = () if initial_memory is None else (memory,)
        decision = policy(params, key, env.observe(state), jnp.bool_(greedy), *extra)
        return decision["action"].astype(jnp.int32), decision.get("memory", memory)

    @jax.jit
    def play(indices):
        reset_keys, run_keys = jax.vmap(lambda e: episode_keys(seed, e))(indices).transpose(
            1, 0, 2)
        states = jax.vmap(lambda key: env.reset(key, env_params)[1])(reset_keys)
        memory = jax.tree.map(lambda x: jnp.broadcast_to(x, (batch,) + jnp.shape(x)),
                              initial_memory if initial_memory is not None else jnp.zeros(()))
        zeros = jnp.zeros(batch, jnp.int32)
        init = (jnp.int32(0), states, memory, jnp.zeros(batch, bool), zeros,
                jnp.ones(batch, jnp.int32), zeros)

        def running(carry):
            t, _, _, done, *_ = carry
            return (t < max_steps) & ~jnp.all(done)

        def step(carry):
            t, states, memory, done, outcome, stage, length = carry
            act_keys, env_keys = jax.vmap(
                lambda key: jax.random.split(jax.random.fold_in(key, t)))(run_keys).transpose(
                1, 0, 2)
            actions, memory = jax.vmap(decide)(act_keys, states, memory)
            _, states, _, terminated, info = jax.vmap(
                env.step_env, in_axes=(0, 0, 0, None))(env_keys, states, actions, env_params)
            truncated = ~terminated & jax.vmap(env.is_truncated, in_axes=(0, None))(
                states, env_params)
            playing = ~done
            # outcome_of's order: an invalid action first, then a win, then a death.
            code = jnp.select([info["invalid_action"], info["won"], info["died"]],
                              [SCREEN_OUTCOMES.index(name)
                               for name in ("invalid action", "won", "died")],
                              SCREEN_OUTCOMES.index("truncated"))
            ends = playing & (terminated | truncated)
            return (t + 1, states, memory, done | ends, jnp.where(ends, code, outcome),
                    jnp.where(playing, info["stage"], stage),
                    length + playing.astype(jnp.int32))

        *_, outcome, stage, length = lax.while_loop(running, step, init)
        return outcome, stage, length

    results = {"outcome": [], "stage": [], "length": []}
    for start in range(0, episodes, batch):
        # The last batch is padded with the next episodes' indices (played, then dropped), so
        # every batch has the one compiled shape.
        outcome, stage, length = jax.device_get(
            play(jnp.arange(start, start + batch, dtype=jnp.int32)))
        keep = min(batch, episodes - start)
        for name, value in (("outcome", outcome), ("stage", stage), ("length", length)):
            results[name].append(np.asarray(value)[:keep])
    return {name: np.concatenate(parts) for name, parts in results.items()}


def verify_replay(recorded: dict, replayed: dict) -> None:
    """Raise ReplayError at the first step whose state or reward differs from the record."""
    episode = recorded["episode"]
    got = replayed["record"]
    if len(got["actions"]) != len(recorded["actions"]):
        raise ReplayError(f"replay of episode {episode} ended after {len(got['actions'])} steps, "
                         f"the record has {len(recorded['actions'])}")
    for t, (want_digest, got_digest) in enumerate(zip(recorded["state_digests"],
                                                      got["state_digests"])):
        if want_digest != got_digest:
            raise ReplayError(f"replay of episode {episode} diverged at step {t}: the state after "
                             f"action {recorded['actions'][t]} differs from the record")
        want_reward, got_reward = recorded["rewards"][t], got["rewards"][t]
        if abs(want_reward - got_reward) > REWARD_TOLERANCE * max(1.0, abs(want_reward)):
            raise ReplayError(f"replay of episode {episode} diverged at step {t}: reward "
                             f"{got_reward!r} != recorded {want_reward!r}")
    if got["outcome"] != recorded.get("outcome", got["outcome"]):
        raise ReplayError(f"replay of episode {episode} ended as {got['outcome']!r}, the record "
                         f"says {recorded['outcome']!r}")


def record_text(*, env_options: dict, seed: int, policy, episodes: list,
                keys: dict = None) -> str:
    """The records of ``run_episode`` results (``episodes``) as one replayable file's text;
    ``keys``: whose keys they were played with (default watch_agent's)."""
    return json.dumps({"format": RECORD_FORMAT, "format_version": RECORD_VERSION,
                       "env_version": ENV_VERSION, "env_options": env_options, "seed": seed,
                       "keys": keys or WATCH_KEYS, "policy": policy, "episodes": episodes},
                      indent=1)


def load_record(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError) as error:  # ValueError: not JSON, or not UTF-8 text
        raise ReplayError(f"cannot read record {path}: {error}") from None
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
        raise ReplayError(f"{path} is not a watch_agent episode record")
    if record.get("format_version") not in READABLE_VERSIONS:
        raise ReplayError(f"{path} has record version {record.get('format_version')}, "
                         f"expected one of {READABLE_VERSIONS}")
    record.setdefault("keys", WATCH_KEYS)
    saved, current = record.get("env_version"), ENV_VERSION
    if saved is not None and current is not None and saved != current:
        raise ReplayError(f"{path} was recorded on environment version {saved!r}, this code is "
                         f"version {current!r}: it cannot be replayed exactly")
    return record
