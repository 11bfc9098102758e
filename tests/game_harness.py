"""Shared helpers for scenario tests: one jitted step per test session."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from envs.hackmatrix.env import HackMatrix
from envs.hackmatrix.swift_io.scenario import set_state

ENV = HackMatrix()
PARAMS = ENV.default_params


@functools.cache
def _jitted_step_env(env):
    return jax.jit(env.step_env)


def step(state, action, seed=0, env=ENV):
    """One step without auto-reset: (obs, state, reward, terminated, info)."""
    return _jitted_step_env(env)(jax.random.PRNGKey(seed), state, jnp.int32(action), PARAMS)


def scenario(**fields):
    """A state from a Swift setState scenario; `player` defaults to (0, 0)."""
    fields.setdefault("player", {"row": 0, "col": 0})
    return set_state(fields)


def active_enemies(state):
    """List of dicts for the active enemies in list order."""
    e = jax.device_get(state.enemies)
    order = np.argsort(np.where(e.active, e.seq, np.iinfo(np.int32).max))
    return [dict(kind=int(e.kind[i]), row=int(e.row[i]), col=int(e.col[i]), hp=int(e.hp[i]),
                 disabled=int(e.disabled[i]), stunned=bool(e.stunned[i]),
                 last=(int(e.last_row[i]), int(e.last_col[i])),
                 from_siphon=bool(e.from_siphon[i]), from_scheduled=bool(e.from_scheduled[i]))
            for i in order if e.active[i]]


def active_transmissions(state):
    t = jax.device_get(state.transmissions)
    order = np.argsort(np.where(t.active, t.seq, np.iinfo(np.int32).max))
    return [dict(row=int(t.row[i]), col=int(t.col[i]), turns=int(t.turns[i]), kind=int(t.kind[i]),
                 from_siphon=bool(t.from_siphon[i]), from_scheduled=bool(t.from_scheduled[i]))
            for i in order if t.active[i]]


def breakdown(info):
    return {k: float(v) for k, v in info["reward_breakdown"].items()}


def nonzero_components(info):
    return {k: v for k, v in breakdown(info).items() if v != 0.0}
