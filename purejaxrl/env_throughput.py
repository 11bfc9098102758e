"""Env-only throughput of an env of ``envs.registry`` (HackMatrix by default): jit + vmap +
lax.scan of uniformly random valid actions with auto-reset; compile time (trace+lower and XLA
compile separately) and steady-state env steps per second (median and spread of repeated timed
runs after a warm-up). Run by scripts/benchmark_env.py and scripts/benchmark.py --mode env;
importing this module imports JAX, so the caller picks the platform first
(``backend.choose_platforms``).
"""

import os
import platform
import resource
import statistics
import time

import jax
import jax.numpy as jnp

from envs import registry
from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.provenance import git_commit


def random_valid_action(key, mask):
    """Uniform over the valid actions of each env."""
    logits = jnp.where(mask, 0.0, -1e9)
    return jax.random.categorical(key, logits)


# The env metrics whose totals a benchmark reports (where the env has them): actions the env
# refused (must be 0 under the mask) and episodes that overflowed a capacity (must be 0).
CHECKED_METRICS = {"invalid": "invalid_actions", "overflow": "overflow_episodes"}


def make_rollout(env: TrainerEnv, params, num_steps):
    checked = [m for m in env.metrics if m.name in CHECKED_METRICS]

    def rollout(key, obs, state):
        def one_step(carry, key):
            obs, state, stats = carry
            k_act, k_step = jax.random.split(key)
            mask = env.action_mask(obs)
            n = mask.shape[0]
            action = random_valid_action(k_act, mask)
            next_obs, state, reward, terminated, truncated, info = jax.vmap(
                env.step, in_axes=(0, 0, 0, None))(jax.random.split(k_step, n), state, action,
                                                    params)
            done = terminated | truncated
            stats = {
                "episodes": stats["episodes"] + jnp.sum(done),
                "nan": stats["nan"] | jnp.any(jnp.isnan(reward)),
                **{m.name: stats[m.name] + jnp.sum(
                    jax.vmap(m.value)(obs, action, info) & (done if m.at_end else True))
                   for m in checked},
            }
            return (next_obs, state, stats), None

        stats = {"episodes": jnp.int32(0), "nan": jnp.bool_(False),
                 **{m.name: jnp.int32(0) for m in checked}}
        (obs, state, stats), _ = jax.lax.scan(one_step, (obs, state, stats),
                                              jax.random.split(key, num_steps))
        return obs, state, stats

    return rollout


def peak_device_memory_mb():
    """Peak bytes in use on any local device, in MiB, from the runtime allocator's statistics
    (GPU, TPU); None where the backend keeps none (CPU)."""
    import jax
    peaks = []
    for device in jax.local_devices():
        try:
            stats = device.memory_stats()
        except Exception:  # backends without allocator statistics
            stats = None
        if stats and "peak_bytes_in_use" in stats:
            peaks.append(stats["peak_bytes_in_use"])
    return round(max(peaks) / 2**20, 1) if peaks else None


def bench(num_envs, num_steps, repeats, seed, env_kwargs, env_id=registry.DEFAULT_ENV):
    """One benchmark row of ``env_id`` built with the training options ``env_kwargs``."""
    env, params = registry.make(env_id, **env_kwargs)
    env = TrainerEnv(env, params)
    key = jax.random.PRNGKey(seed)
    obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(key, num_envs), params)
    rollout = jax.jit(make_rollout(env, params, num_steps), donate_argnums=(1, 2))
    t0 = time.perf_counter()
    lowered = rollout.lower(key, obs, state)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    obs, state, stats = compiled(jax.random.fold_in(key, 0), obs, state)  # warm-up
    jax.block_until_ready(state)
    times, totals = [], {"episodes": 0, "nan": False, **{name: 0 for name in CHECKED_METRICS}}
    for r in range(repeats):
        start = time.perf_counter()
        obs, state, stats = compiled(jax.random.fold_in(key, r + 1), obs, state)
        jax.block_until_ready(state)
        times.append(time.perf_counter() - start)
        stats = jax.device_get(stats)
        totals["episodes"] += int(stats["episodes"])
        for name in CHECKED_METRICS:
            totals[name] += int(stats.get(name, 0))
        totals["nan"] = totals["nan"] or bool(stats["nan"])
    sps = [num_envs * num_steps / t for t in times]
    return {
        "benchmark": "env", "num_envs": num_envs, "num_steps": num_steps, "repeats": repeats,
        "trace_lower_s": round(t1 - t0, 3), "compile_s": round(t2 - t1, 3),
        "sps_median": round(statistics.median(sps), 1), "sps_min": round(min(sps), 1),
        "sps_max": round(max(sps), 1),
        "us_per_env_step": round(1e6 / statistics.median(sps), 2),
        "peak_host_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "peak_device_memory_mb": peak_device_memory_mb(),
        "episodes_ended": totals["episodes"], "nan_reward": totals["nan"],
        **{key: totals[name] for name, key in CHECKED_METRICS.items()},
        "device": jax.devices()[0].device_kind, "device_count": jax.device_count(),
        "backend": jax.default_backend(), "jax": jax.__version__,
        "commit": git_commit() or "unknown",
        "host": platform.node(), "cpus": os.cpu_count(), "env": env_id, "env_options": env_kwargs,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
