"""Env-only throughput of HackMatrix: jit + vmap + lax.scan of uniformly random valid actions
with auto-reset. Prints compile time (trace+lower and XLA compile separately) and steady-state
env steps per second (median and spread of repeated timed runs after a warm-up), and appends
one JSON line per configuration to --output.

    python scripts/benchmark_env.py --num-envs 1 256 2048 8192 --num-steps 128
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from purejaxrl.backend import choose_platforms, describe_backend  # noqa: E402

choose_platforms()  # before anything imports JAX

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from envs.hackmatrix.env import HackMatrix  # noqa: E402


def random_valid_action(key, mask):
    """Uniform over the valid actions of each env."""
    logits = jnp.where(mask, 0.0, -1e9)
    return jax.random.categorical(key, logits)


def make_rollout(env, params, num_steps):
    def rollout(key, obs, state):
        def one_step(carry, key):
            obs, state, stats = carry
            k_act, k_step = jax.random.split(key)
            n = obs.action_mask.shape[0]
            action = random_valid_action(k_act, obs.action_mask)
            obs, state, reward, terminated, truncated, info = jax.vmap(
                env.step, in_axes=(0, 0, 0, None))(jax.random.split(k_step, n), state, action, params)
            stats = {
                "episodes": stats["episodes"] + jnp.sum(terminated | truncated),
                "invalid": stats["invalid"] + jnp.sum(info["invalid_action"]),
                "overflow": jnp.maximum(stats["overflow"], jnp.max(info["overflow"])),
                "nan": stats["nan"] | jnp.any(jnp.isnan(reward)),
            }
            return (obs, state, stats), None

        stats = {"episodes": jnp.int32(0), "invalid": jnp.int32(0), "overflow": jnp.int32(0),
                 "nan": jnp.bool_(False)}
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


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__)), check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def bench(num_envs, num_steps, repeats, seed, env_kwargs):
    env = HackMatrix(**env_kwargs)
    params = env.default_params
    key = jax.random.PRNGKey(seed)
    obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(jax.random.split(key, num_envs), params)
    rollout = jax.jit(make_rollout(env, params, num_steps), donate_argnums=(1, 2))
    t0 = time.perf_counter()
    lowered = rollout.lower(key, obs, state)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    obs, state, stats = compiled(jax.random.fold_in(key, 0), obs, state)  # warm-up
    jax.block_until_ready(state)
    times, totals = [], {"episodes": 0, "invalid": 0, "overflow": 0, "nan": False}
    for r in range(repeats):
        start = time.perf_counter()
        obs, state, stats = compiled(jax.random.fold_in(key, r + 1), obs, state)
        jax.block_until_ready(state)
        times.append(time.perf_counter() - start)
        stats = jax.device_get(stats)
        totals["episodes"] += int(stats["episodes"])
        totals["invalid"] += int(stats["invalid"])
        totals["overflow"] = max(totals["overflow"], int(stats["overflow"]))
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
        "episodes_ended": totals["episodes"], "invalid_actions": totals["invalid"],
        "max_overflow": totals["overflow"], "nan_reward": totals["nan"],
        "device": jax.devices()[0].device_kind, "device_count": jax.device_count(),
        "backend": jax.default_backend(), "jax": jax.__version__, "commit": git_commit(),
        "host": platform.node(), "cpus": os.cpu_count(), "env_options": env_kwargs,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 256, 2048, 8192])
    parser.add_argument("--num-steps", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/env_results.jsonl",
                        help="JSON lines file to append to ('' to skip)")
    parser.add_argument("--reward-shaping", choices=["swift", "potential"], default="swift")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.num_envs) or args.num_steps < 1 or args.repeats < 1:
        parser.error("--num-envs, --num-steps and --repeats must be positive")
    print(describe_backend(), file=sys.stderr)
    rows = []
    print(f"{'envs':>6} {'steps':>5} {'lower s':>8} {'compile s':>9} {'steps/s (median)':>17} "
          f"{'min..max':>19} {'us/step':>8} {'RSS MB':>7}")
    for n in args.num_envs:
        row = bench(n, args.num_steps, args.repeats, args.seed, {"reward_shaping": args.reward_shaping})
        rows.append(row)
        print(f"{n:>6} {args.num_steps:>5} {row['trace_lower_s']:>8.2f} {row['compile_s']:>9.2f} "
              f"{row['sps_median']:>17,.0f} {row['sps_min']:>9,.0f}..{row['sps_max']:<9,.0f} "
              f"{row['us_per_env_step']:>8.2f} {row['peak_host_rss_mb']:>7.0f}", flush=True)
        if row["invalid_actions"] or row["max_overflow"] or row["nan_reward"]:
            print(f"  WARNING: invalid={row['invalid_actions']} overflow={row['max_overflow']} "
                  f"nan={row['nan_reward']}", file=sys.stderr)
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        print(f"appended {len(rows)} rows to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
