#!/usr/bin/env python
"""Throughput of HackMatrix: env-only (random valid actions, ``scripts/benchmark_env.py``) and
end-to-end PPO training (the real jitted update of ``purejaxrl.ppo``), for a list of env
counts. Prints a table and appends one JSON line per configuration to a ledger.

    python scripts/benchmark.py --mode both --num-envs 1 256 2048 8192 --num-steps 128
    python scripts/benchmark.py --mode train --num-envs 2048 --devices 1 2 --label cpu-split
    python scripts/benchmark.py --compare abc1234 cpu-split     # ratios B/A per configuration
    python scripts/benchmark.py --mode train --num-envs 65536 --compile-only  # will it fit?

Every train row records ``program_sha256``, a digest of the chunk's lowered program (StableHLO
text, no source locations): two commits whose rows carry the same digest compile the same
program, so a change that sits behind an option that is off can be shown to leave the default
update untouched without timing it; ``--compare`` says ``same`` or ``differs`` per configuration.

``--devices N`` runs each measurement in a subprocess that sees N forced host (CPU) devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=N``) and trains data-parallel over them.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from purejaxrl.backend import choose_platforms, describe_backend

DEFAULT_LEDGER = os.path.join("benchmarks", "results.jsonl")
# Set in the subprocess started for --devices: the measurement runs there, not the device loop.
CHILD_DEVICES_ENV = "HACKMATRIX_BENCH_CHILD_DEVICES"
# What identifies "the same configuration" across two ledger selections in --compare.
CONFIG_KEY_FIELDS = ("benchmark", "env", "num_envs", "num_steps", "device_count", "num_devices",
                     "updates_per_chunk", "hidden_width", "separate_torsos", "compute_dtype",
                     "encoder", "num_minibatches", "num_seeds", "recurrent_core",
                     "sequence_length", "head_width")
# The env's reward the benchmark measures unless told otherwise: Swift's own (its rows before
# --trainer-defaults all did).
BENCHMARK_REWARD_SHAPING = "swift"
# Train-mode options that default to the trainer's own defaults (TrainConfig) when not given.
NETWORK_OPTIONS = ("encoder", "cell_features", "hidden_width", "hidden_depth", "recurrent_core",
                   "core_width", "head_width", "sequence_length")


# ---------------------------------------------------------------------------- measurement
# jax is imported only inside these functions: XLA_FLAGS must be final before the first import.

def program_digest(lowered) -> str:
    """The first 16 hex digits of the SHA-256 of a lowered program's StableHLO text. The text
    carries no source locations (``as_text``'s default), so moving code or renaming a file
    changes nothing; any change to what is computed (an op, a shape, a constant) does."""
    return hashlib.sha256(lowered.as_text().encode()).hexdigest()[:16]


def bench_env(num_envs: int, num_steps: int, repeats: int, seed: int, reward_shaping: str,
              acquire_macro: bool = False) -> dict:
    from purejaxrl import env_throughput
    options = {"reward_shaping": reward_shaping}
    if acquire_macro:  # the random valid actions include the macro
        options["acquire_macro"] = True
    return env_throughput.bench(num_envs, num_steps, repeats, seed, options)


def train_config(args, num_envs: int, num_devices: int):
    """The training config the CLI would build for this batch (auto-scaled minibatches and
    epochs); the horizon (learning-rate anneal) is the default one unless the timed updates
    need more."""
    from purejaxrl.config import TrainConfig, auto_scale_config, validate_config
    network_choice = {name: getattr(args, name) for name in NETWORK_OPTIONS
                      if getattr(args, name) is not None}
    from envs import registry
    from purejaxrl import ppo
    given = {"reward_shaping": args.reward_shaping,
             "acquire_macro": True if args.acquire_macro else None,
             "exit_distance_view": True if args.exit_distance_view else None}
    if not args.trainer_defaults and given["reward_shaping"] is None:
        given["reward_shaping"] = BENCHMARK_REWARD_SHAPING
    env_options = {name: value for name, value in given.items()
                   if value is not None and registry.takes_option(args.env, name)}
    # ppo.config_for_env sets the given options over the env's trainer defaults.
    build = (functools.partial(ppo.config_for_env, args.env) if args.trainer_defaults
             else functools.partial(TrainConfig, env=args.env))
    config = build(env_options=env_options, num_envs=num_envs,
                         num_steps=args.num_steps, separate_torsos=args.separate_torsos,
                         compute_dtype=args.compute_dtype, num_devices=num_devices,
                         seed=args.seed, num_seeds=args.num_seeds,
                         group_entropy_coef=args.group_entropy_coef, sil_coef=args.sil_coef,
                         **network_choice)
    config, _ = auto_scale_config(config.without_unused_fields(), args.num_minibatches,
                                  args.update_epochs)
    updates = args.updates_per_chunk * (args.repeats + 1)
    config = config.replace(total_timesteps=max(config.total_timesteps,
                                                config.batch_size * updates))
    validate_config(config)
    return config


def bench_train(args, num_envs: int) -> dict:
    """Build the trainer, compile one chunk of ``updates_per_chunk`` updates ahead of time
    (trace+lower and XLA compile timed separately), run one warm-up chunk, then time
    ``repeats`` chunks. Trains data-parallel over every local device."""
    import resource

    import jax
    from purejaxrl import env_throughput
    import numpy as np

    from purejaxrl import ppo
    from purejaxrl.networks import parameter_count

    num_devices = jax.local_device_count()
    config = train_config(args, num_envs, num_devices)
    env, env_params, network, optimizer, reward_components = ppo.build(config)
    mesh = ppo.make_mesh(config.num_devices)

    def make_runner():
        return ppo.init_runner_state(config, env, env_params, network, optimizer,
                                     len(reward_components), mesh)
    # --compile-only: shapes alone (no env is reset, no device memory taken).
    runner = jax.eval_shape(make_runner) if args.compile_only else make_runner()
    chunk = ppo.UpdateChunk(config, env, env_params, network, optimizer, reward_components,
                            args.updates_per_chunk, mesh)
    # Trace+lower and XLA compile timed apart; the chunk then runs exactly this executable.
    t0 = time.perf_counter()
    lowered = chunk.lower(runner)
    t1 = time.perf_counter()
    chunk.compile(lowered=lowered)
    t2 = time.perf_counter()
    from purejaxrl.provenance import git_commit
    compiled = {
        "benchmark": "train", "env": config.env, "num_envs": num_envs,
        "num_steps": config.num_steps, "num_devices": config.num_devices,
        "global_batch": config.batch_size, "num_minibatches": config.num_minibatches,
        "minibatch_size": config.minibatch_size, "update_epochs": config.update_epochs,
        "updates_per_chunk": args.updates_per_chunk,
        "hidden_width": config.hidden_width, "hidden_depth": config.hidden_depth,
        "encoder": config.encoder, "cell_features": config.cell_features,
        "recurrent_core": config.recurrent_core, "core_width": config.core_width,
        "head_width": config.head_width, "sequence_length": config.sequence_length,
        "separate_torsos": config.separate_torsos, "compute_dtype": config.compute_dtype,
        "num_seeds": config.num_seeds, "group_entropy_coef": config.group_entropy_coef,
        "sil_coef": config.sil_coef,
        "acquire_macro": bool(config.env_option_values().get("acquire_macro", False)),
        "exit_distance_view": args.exit_distance_view,
        "trainer_defaults": args.trainer_defaults,
        "trace_lower_s": round(t1 - t0, 3), "compile_s": round(t2 - t1, 3),
        "program_sha256": program_digest(lowered),
        # Per device, from XLA's buffer assignment: what a batch needs, known before it runs.
        "xla_memory_mb": chunk.memory_mb(),
        "device": jax.devices()[0].device_kind, "device_count": jax.device_count(),
        "backend": jax.default_backend(), "jax": jax.__version__,
        "commit": git_commit() or "unknown",
        "host": platform.node(), "cpus": os.cpu_count(), "config": config.to_dict(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    if args.compile_only:
        return dict(compiled, benchmark="train-compile")

    def run_chunk(runner):
        start = time.perf_counter()
        runner, metrics = chunk(runner, args.updates_per_chunk)
        metrics = jax.device_get(metrics)  # waits for the chunk, as the training loop does
        return runner, metrics, time.perf_counter() - start

    runner, metrics, _ = run_chunk(runner)  # warm-up
    seconds, invalid, masked = [], 0, 0
    for _ in range(args.repeats):
        runner, metrics, elapsed = run_chunk(runner)
        seconds.append(elapsed)
        invalid += int(ppo.metric_total(metrics, env, "invalid"))
        masked += int(np.sum(metrics.masked_actions_sampled))
    updates_done = int(np.ravel(jax.device_get(runner.update_step))[0])
    # Env steps of every seed: what the program does per second.
    sps = [args.updates_per_chunk * config.batch_size * config.num_seeds / s for s in seconds]
    per_update = [s / args.updates_per_chunk for s in seconds]
    return dict(
        compiled, repeats=args.repeats, updates_done=updates_done,
        parameters=parameter_count(runner.params) // config.num_seeds,
        sps_median=round(statistics.median(sps), 1), sps_min=round(min(sps), 1),
        sps_max=round(max(sps), 1),
        update_s_median=round(statistics.median(per_update), 4),
        update_s_min=round(min(per_update), 4), update_s_max=round(max(per_update), 4),
        invalid_actions=invalid, masked_actions_sampled=masked,
        peak_host_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        peak_device_memory_mb=env_throughput.peak_device_memory_mb())


# ---------------------------------------------------------------------------- ledger and table

def print_header() -> None:
    print(f"{'mode':>5} {'env':>10} {'envs':>6} {'steps':>5} {'dev':>3} {'lower s':>8} "
          f"{'compile s':>9} {'steps/s (median)':>17} {'min..max':>21} {'s/update':>9} "
          f"{'RSS MB':>7} {'network':>18}", flush=True)


def network_label(row: dict) -> str:
    """e.g. ``egocentric8-128x2/mb128`` (train rows), ``-`` for env rows."""
    from purejaxrl.config import BOARD_ENCODERS
    if not row["benchmark"].startswith("train"):
        return "-"
    encoder = row.get("encoder", "flat")
    cells = str(row.get("cell_features", "")) if encoder in BOARD_ENCODERS else ""
    seeds = row.get("num_seeds", 1)
    core = row.get("recurrent_core", "none")
    return (f"{encoder}{cells}-{row['hidden_width']}x{row.get('hidden_depth', 2)}"
            + (f"-{core}{row.get('core_width')}" if core != "none" else "")
            + (f"/L{row['sequence_length']}" if row.get("sequence_length") else "")
            + (f"/heads{row['head_width']}" if row.get("head_width") else "")
            + f"/mb{row['num_minibatches']}" + (f"/{seeds}seeds" if seeds > 1 else ""))


def print_row(row: dict) -> None:
    if row["benchmark"] == "train-compile":
        memory = row["xla_memory_mb"] or {}
        print(f"{'train':>5} {row['env']:>10} {row['num_envs']:>6} {row['num_steps']:>5} "
              f"{row['device_count']:>3} {row['trace_lower_s']:>8.2f} {row['compile_s']:>9.2f} "
              f"compiled only: XLA needs {memory.get('arguments', '?')} MB of arguments + "
              f"{memory.get('temporaries', '?')} MB of temporaries per device "
              f"({network_label(row)})", flush=True)
        return
    per_update = f"{row['update_s_median']:>9.3f}" if "update_s_median" in row else f"{'-':>9}"
    print(f"{row['benchmark']:>5} {row['env']:>10} {row['num_envs']:>6} {row['num_steps']:>5} "
          f"{row['device_count']:>3} {row['trace_lower_s']:>8.2f} {row['compile_s']:>9.2f} "
          f"{row['sps_median']:>17,.0f} {row['sps_min']:>10,.0f}..{row['sps_max']:<10,.0f} "
          f"{per_update} {row['peak_host_rss_mb']:>7.0f} {network_label(row):>18}", flush=True)
    if row.get("invalid_actions") or row.get("masked_actions_sampled") or row.get("nan_reward") \
            or row.get("overflow_episodes") or row.get("max_overflow"):
        print(f"  WARNING: invalid={row.get('invalid_actions')} "
              f"masked={row.get('masked_actions_sampled')} "
              f"overflow={row.get('overflow_episodes', row.get('max_overflow'))} "
              f"nan={row.get('nan_reward')}", file=sys.stderr)


def append_rows(ledger: str, rows: list[dict]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(ledger)), exist_ok=True)
    with open(ledger, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


class LedgerError(Exception):
    """A ledger --compare cannot read; the message names it and why."""


def read_ledger(ledger: str) -> list[dict]:
    """The rows of a JSON-lines ledger, blank lines skipped; ``LedgerError`` where the file
    cannot be read or a line is not a JSON object (a line cut short by an interrupted write)."""
    what = f"--ledger {ledger}"
    try:
        with open(ledger, encoding="utf-8") as f:
            lines = list(f)
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise LedgerError(f"{what}: cannot read it ({reason})") from None
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as error:
            raise LedgerError(f"{what}: line {number} is not JSON ({error})") from None
        if not isinstance(row, dict):
            raise LedgerError(f"{what}: line {number} is not a JSON object")
        rows.append(row)
    return rows


def select_rows(rows: list[dict], selector: str) -> list[dict]:
    """Rows whose --label equals ``selector``, else rows whose git commit starts with it."""
    labelled = [r for r in rows if r.get("label") == selector]
    return labelled or [r for r in rows if str(r.get("commit", "")).startswith(selector)]


# A key field's value in rows written before the field existed.
KEY_DEFAULTS = {"env": "hackmatrix",  # env-only rows of benchmark_env.py carry no "env"
                "recurrent_core": "none", "head_width": 0}


def config_key(row: dict) -> tuple:
    """What makes two rows the same configuration; the recurrent core's width only where there
    is a core (feed-forward rows record a width no network of theirs has)."""
    key = tuple(row.get(name, KEY_DEFAULTS.get(name)) for name in CONFIG_KEY_FIELDS)
    core = row.get("recurrent_core", KEY_DEFAULTS["recurrent_core"])
    return key + ((row.get("core_width") if core != "none" else None),)


def same_program(ra: dict, rb: dict) -> str:
    """'same' or 'differs' by the rows' program digests; '-' if either has none (env rows,
    rows from before the digest)."""
    if not ra.get("program_sha256") or not rb.get("program_sha256"):
        return "-"
    return "same" if ra["program_sha256"] == rb["program_sha256"] else "differs"


def compare(ledger: str, a: str, b: str) -> int:
    try:
        rows = read_ledger(ledger)
    except LedgerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    picked = {}
    for selector in (a, b):
        selected = select_rows(rows, selector)
        if not selected:
            print(f"error: --compare: no ledger row in {ledger} has label or commit {selector!r}",
                  file=sys.stderr)
            return 2
        # The latest row of each configuration wins (re-runs supersede earlier ones).
        picked[selector] = {config_key(r): r for r in selected}
    common = [k for k in picked[a] if k in picked[b]]
    if not common:
        print(f"error: --compare: {a!r} and {b!r} share no configuration", file=sys.stderr)
        return 2
    print(f"B/A with A={a!r}, B={b!r} (steps/s: > 1 is faster; compile: < 1 is faster; "
          f"program: the lowered update's digests, '-' where a row predates them)")
    print(f"{'mode':>5} {'env':>10} {'envs':>6} {'steps':>5} {'dev':>3} {'A steps/s':>12} "
          f"{'B steps/s':>12} {'ratio':>6} {'A compile s':>11} {'B compile s':>11} {'ratio':>6} "
          f"{'program':>8}")
    for key in sorted(common, key=lambda k: tuple(str(x) for x in k)):
        ra, rb = picked[a][key], picked[b][key]
        compile_a = ra["trace_lower_s"] + ra["compile_s"]
        compile_b = rb["trace_lower_s"] + rb["compile_s"]
        # --compile-only rows ran nothing: their steps/s are '-', their compile and program count.
        sps_a, sps_b = ra.get("sps_median"), rb.get("sps_median")
        sps_ratio = f"{sps_b / sps_a:>6.2f}" if sps_a and sps_b is not None else f"{'-':>6}"
        sps_a = f"{sps_a:>12,.0f}" if sps_a is not None else f"{'-':>12}"
        sps_b = f"{sps_b:>12,.0f}" if sps_b is not None else f"{'-':>12}"
        compile_ratio = compile_b / compile_a if compile_a else float("nan")
        print(f"{ra['benchmark']:>5} {key[1]:>10} {ra['num_envs']:>6} {ra['num_steps']:>5} "
              f"{ra['device_count']:>3} {sps_a} {sps_b} "
              f"{sps_ratio} {compile_a:>11.2f} {compile_b:>11.2f} {compile_ratio:>6.2f} "
              f"{same_program(ra, rb):>8}")
    only = [k for k in list(picked[a]) + list(picked[b]) if k not in common]
    if only:
        print(f"({len(only)} configuration(s) measured on one side only, not compared)")
    return 0


# ---------------------------------------------------------------------------- driver

def measure(args, ledger: str | None = None) -> list[dict]:
    """Every configuration of ``args`` in this process (its device count is already fixed).
    Each row goes to ``ledger`` as soon as it is measured, so a later configuration that runs
    out of time or device memory loses only itself."""
    modes = ("env", "train") if args.mode == "both" else (args.mode,)
    rows = []
    for num_envs in args.num_envs:
        for mode in modes:
            if mode == "env":
                row = bench_env(num_envs, args.num_steps, args.repeats, args.seed,
                                args.reward_shaping or BENCHMARK_REWARD_SHAPING,
                                args.acquire_macro)
            else:
                row = bench_train(args, num_envs)
            if args.label:
                row["label"] = args.label
            rows.append(row)
            print_row(row)
            if ledger:
                append_rows(ledger, [row])
    return rows


def measure_in_subprocess(argv: list[str], num_devices: int) -> list[dict]:
    """Re-run this script with N forced host devices; its rows come back as JSON on stdout
    after a marker line (the table it prints passes through)."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        f" --xla_force_host_platform_device_count={num_devices}").strip()
    env[CHILD_DEVICES_ENV] = str(num_devices)
    # The forced devices are host devices: whatever this process chose (choose_platforms may
    # have picked "cuda,cpu"), the child runs on the CPU.
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), *argv], env=env,
                          stdout=subprocess.PIPE, text=True)
    out = proc.stdout
    marker = "\n" + ROWS_MARKER + "\n"
    table, _, payload = out.partition(marker)
    body = table.split("\n", 1)[1] if "\n" in table else ""  # drop the child's header line
    if body.strip():
        print(body.rstrip("\n"), flush=True)
    if proc.returncode != 0 or not payload:
        raise SystemExit(f"the {num_devices}-device measurement failed (exit {proc.returncode})")
    rows = json.loads(payload)
    if rows and rows[0]["device_count"] != num_devices:
        raise SystemExit(f"asked for {num_devices} devices but the subprocess saw "
                         f"{rows[0]['device_count']} (is a non-CPU backend active?)")
    return rows


ROWS_MARKER = "=== benchmark rows (json) ==="


def build_parser() -> argparse.ArgumentParser:
    from envs.hackmatrix import SHAPING_MODES
    from purejaxrl.cli.parsing import ArgumentParser, finite_float
    from purejaxrl.config import COMPUTE_DTYPE_CHOICES, ENCODER_CHOICES, RECURRENT_CORE_CHOICES
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("env", "train", "both"), default="both")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 256, 2048, 8192])
    parser.add_argument("--num-steps", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed runs after one warm-up (median and min..max reported)")
    parser.add_argument("--updates-per-chunk", type=int, default=4,
                        help="train mode: PPO updates per timed jitted chunk")
    parser.add_argument("--devices", type=int, nargs="+",
                        help="forced host device counts, each measured in its own subprocess")
    parser.add_argument("--env", choices=("hackmatrix", "toy"), default="hackmatrix",
                        help="train mode's environment (env mode is always hackmatrix)")
    parser.add_argument("--reward-shaping", choices=SHAPING_MODES,
                        help=f"default {BENCHMARK_REWARD_SHAPING} (Swift's reward, the env's "
                             "own), or with --trainer-defaults the trainer's")
    parser.add_argument("--encoder", choices=[e for e in ENCODER_CHOICES if e != "cnn"],
                        help="train mode: the network (default: the trainer's)")
    parser.add_argument("--cell-features", type=int,
                        help="egocentric encoders' per-cell embedding width; attention token width")
    parser.add_argument("--hidden-width", type=int, help="default: the trainer's")
    parser.add_argument("--hidden-depth", type=int, help="default: the trainer's")
    parser.add_argument("--recurrent-core", choices=RECURRENT_CORE_CHOICES,
                        help="train mode: a GRU between torso and heads, or none "
                             "(default: the trainer's, gru)")
    parser.add_argument("--core-width", type=int, help="GRU width (default: the trainer's)")
    parser.add_argument("--head-width", type=int,
                        help="hidden layer of each actor and critic head (default: the "
                             "trainer's, 0: linear heads)")
    parser.add_argument("--sequence-length", type=int,
                        help="GRU: BPTT window in steps (default: the trainer's, 8)")
    parser.add_argument("--num-minibatches", type=int,
                        help="default: auto-scaled for the batch, as the trainer does")
    parser.add_argument("--update-epochs", type=int,
                        help="train mode: epochs per update (default: auto-scaled for the batch, "
                             "as the trainer does); not part of --compare's configuration key, "
                             "so a run with it compares with one without")
    parser.add_argument("--separate-torsos", action=argparse.BooleanOptionalAction,
                        default=False)
    parser.add_argument("--compute-dtype", choices=COMPUTE_DTYPE_CHOICES, default="float32")
    parser.add_argument("--group-entropy-coef", type=finite_float, default=0.0,
                        help="train mode: the group-entropy bonus (default 0: off); not part "
                             "of --compare's configuration key, so a run with it compares "
                             "with one without")
    parser.add_argument("--sil-coef", type=finite_float, default=0.0,
                        help="train mode: self-imitation's weight, with the trainer's replay "
                             "sizes (default 0: off); not part of --compare's configuration "
                             "key, so a run with it compares with one without")
    parser.add_argument("--acquire-macro", action="store_true",
                        help="HackMatrix's acquire macro (one more action; env mode: random "
                             "play takes it too); not part of --compare's configuration key")
    parser.add_argument("--trainer-defaults", action="store_true",
                        help="train mode: the configuration the main command trains, the "
                             "env's trainer defaults over TrainConfig's (HackMatrix: the acquire "
                             "macro and start curriculum over RESET, CRASH and PUSH, the "
                             "stage-count reward, gamma 0.999, lr floor 0.2, potential "
                             "shaping); not part of --compare's configuration key, so it "
                             "compares with the same batch without them")
    parser.add_argument("--exit-distance-view", action="store_true",
                        help="train mode: HackMatrix's exit-distance view (the board encoders "
                             "get each cell's distance to the exit, computed in the network); "
                             "not part of --compare's configuration key")
    parser.add_argument("--compile-only", action="store_true",
                        help="train mode: compile each configuration and report the memory "
                             "XLA assigns per device (the runner state and the temporaries: "
                             "will this batch fit?), without resetting an env or running")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-seeds", type=int, default=1,
                        help="train mode: seeds vmapped in one program (steps/s counts every "
                             "seed's env steps)")
    parser.add_argument("--label", default="", help="tag stored on every row (for --compare)")
    parser.add_argument("--ledger", default=DEFAULT_LEDGER,
                        help="JSON lines file to append to ('' to skip)")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"),
                        help="print B/A ratios of two ledger selections (label or commit prefix)")
    return parser


def without_devices_flag(argv: list[str]) -> list[str]:
    out, skipping = [], False
    for item in argv:
        if item == "--devices" or item.startswith("--devices="):
            skipping = item == "--devices"
            continue
        if skipping and not item.startswith("--"):
            continue
        skipping = False
        out.append(item)
    return out


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    choose_platforms()  # before JAX is imported (the parser's choices come from the config)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.compare:
        return compare(args.ledger or DEFAULT_LEDGER, *args.compare)
    if args.compile_only and args.mode != "train":
        parser.error("--compile-only needs --mode train")
    if args.acquire_macro and args.env != "hackmatrix":
        parser.error("--acquire-macro needs --env hackmatrix")
    if args.trainer_defaults and args.mode == "env":
        parser.error("--trainer-defaults is a training configuration: it needs --mode train "
                     "or both")
    from purejaxrl.config import BOARD_ENCODERS
    if args.exit_distance_view and (args.env != "hackmatrix" or args.mode != "train"
                                    or args.encoder not in (None,) + BOARD_ENCODERS):
        parser.error("--exit-distance-view needs --env hackmatrix, --mode train and a board "
                     "encoder (it changes the network's input, not the env's step)")
    if any(n < 1 for n in args.num_envs) or args.num_steps < 1 or args.repeats < 1 \
            or args.updates_per_chunk < 1 or any(d < 1 for d in args.devices or []) \
            or args.num_seeds < 1:
        parser.error("--num-envs, --num-steps, --repeats, --updates-per-chunk, --devices and "
                     "--num-seeds must be positive")
    from purejaxrl.output_paths import refuse_ledger_file
    if not os.environ.get(CHILD_DEVICES_ENV) and refuse_ledger_file(args.ledger):
        return 2  # a directory, or a place that takes no file: refused before any measurement
    import jax
    from purejaxrl.config import ConfigError

    if args.mode != "env":
        # The configurations run in order and the first that fails ends the run (the rows
        # before it are in the ledger): where the first one fails, so would every train option
        # that is bad whatever the batch (--hidden-width 0), and nothing would be measured
        # but --mode both's first env row. Refused before any work instead.
        try:
            train_config(args, args.num_envs[0], (args.devices or [jax.local_device_count()])[0])
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2

    if os.environ.get(CHILD_DEVICES_ENV):  # inside measure_in_subprocess: measure and hand back
        print_header()
        print(describe_backend(), file=sys.stderr)
        try:
            rows = measure(args)
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print("\n" + ROWS_MARKER)
        print(json.dumps(rows), flush=True)
        return 0

    print_header()
    if args.devices:
        child_argv = without_devices_flag(argv)
        rows = []
        for n in args.devices:
            measured = measure_in_subprocess(child_argv, n)
            if args.ledger:
                append_rows(args.ledger, measured)
            rows.extend(measured)
    else:
        print(describe_backend(), file=sys.stderr)
        try:
            rows = measure(args, args.ledger)
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    if args.ledger:
        print(f"appended {len(rows)} rows to {args.ledger}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
