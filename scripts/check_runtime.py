#!/usr/bin/env python
"""Preflight for a new machine: can it run HackMatrix training? One line per check,
``PASS name (time)`` or ``FAIL name: reason``; exits non-zero if any check failed.

    python scripts/check_runtime.py                       # whatever backend jax picks
    python scripts/check_runtime.py --expect-devices 8    # fail loudly if fewer are visible
    python scripts/check_runtime.py --force-host-devices 2  # CPU: fake 2 devices (all-reduce)

Checks: the distributed runtime (as the trainer starts it: on a TPU pod slice run this on every
host at once, like the training command); backend and devices (``--expect-devices`` counts every
device of every process); a jitted MLP forward+backward; a jitted conv forward+backward; an
all-reduce (psum) over every device; one full PPO update of the real training config (tiny batch
by default, no logging, no checkpoint); the persistent compile cache directory is writable.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback

from envs.compile_cache import DEFAULT_COMPILE_CACHE_DIR
from purejaxrl.backend import choose_platforms, platform_choice
from purejaxrl.cli.parsing import ArgumentParser



class CheckFailed(Exception):
    """A check's expectation did not hold; the message is the reason printed after FAIL."""


def check_distributed(args) -> str:
    from purejaxrl import distributed
    started = distributed.initialize(args.distributed, args.coordinator_address,
                                     args.num_processes, args.process_id)
    import jax
    if not started:
        return "single process"
    return f"jax.distributed: process {jax.process_index()} of {jax.process_count()}"


def check_devices(args) -> str:
    import jax
    devices = jax.devices()
    kinds = sorted({d.device_kind for d in devices})
    detail = (f"backend {jax.default_backend()}, {len(devices)} device(s) "
              f"({', '.join(kinds)}), {jax.local_device_count()} local, jax {jax.__version__}; "
              f"{platform_choice() or 'JAX chose'}")
    if args.expect_devices and len(devices) < args.expect_devices:
        raise CheckFailed(f"expected at least {args.expect_devices} devices but jax sees only "
                          f"{len(devices)} ({detail}); check the driver, CUDA_VISIBLE_DEVICES, "
                          f"JAX_PLATFORMS and XLA_FLAGS")
    return detail


def check_mlp(args) -> str:
    import jax
    import jax.numpy as jnp

    def loss(params, x, y):
        hidden = jnp.tanh(x @ params["w1"] + params["b1"])
        return jnp.mean((hidden @ params["w2"] - y) ** 2)

    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w1": jax.random.normal(k1, (64, 128)) * 0.1, "b1": jnp.zeros(128),
              "w2": jax.random.normal(k2, (128, 8)) * 0.1}
    x = jax.random.normal(k3, (256, 64))
    value, grads = jax.jit(jax.value_and_grad(loss))(params, x, jnp.ones((256, 8)))
    finite = bool(jnp.isfinite(value)) and all(
        bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))
    if not finite:
        raise CheckFailed("non-finite loss or gradient")
    if not float(jnp.abs(grads["w1"]).sum()) > 0:
        raise CheckFailed("gradient is identically zero")
    return f"loss {float(value):.3f}"


def check_conv(args) -> str:
    import jax
    import jax.numpy as jnp

    def loss(kernel, images):  # NHWC images, HWIO kernel: 6x6 boards, as the grid observation
        out = jax.lax.conv_general_dilated(images, kernel, (1, 1), "SAME",
                                           dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.mean(out ** 2)

    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    kernel = jax.random.normal(k1, (3, 3, 8, 8)) * 0.1
    images = jax.random.normal(k2, (8, 6, 6, 8))
    value, grad = jax.jit(jax.value_and_grad(loss))(kernel, images)
    if not (bool(jnp.isfinite(value)) and bool(jnp.all(jnp.isfinite(grad)))):
        raise CheckFailed("non-finite loss or gradient")
    return f"loss {float(value):.3f}"


def check_all_reduce(args) -> str:
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    devices = jax.devices()  # every process's: the all-reduce crosses hosts
    mesh = Mesh(np.array(devices), ("d",))
    # Device i contributes i + 1; every device must end with the sum 1 + 2 + ... + n.
    values = np.arange(1, len(devices) + 1, dtype=np.float32)
    contributions = jax.make_array_from_callback(values.shape, NamedSharding(mesh, P("d")),
                                                 lambda index: values[index])
    total = jax.jit(jax.shard_map(lambda x: jax.lax.psum(x, "d"), mesh=mesh,
                                  in_specs=P("d"), out_specs=P("d")))(contributions)
    expected = len(devices) * (len(devices) + 1) / 2
    got = np.concatenate([np.asarray(shard.data) for shard in total.addressable_shards])
    if not np.allclose(got, expected):
        raise CheckFailed(f"psum over {len(devices)} devices gave {got.tolist()}, "
                          f"expected {expected} on each")
    return f"psum over {len(devices)} device(s) = {expected:g}"


def check_training_update(args) -> str:
    import jax
    import numpy as np
    from purejaxrl import ppo
    from purejaxrl.config import TrainConfig, auto_scale_config, validate_config

    num_devices = args.num_devices or jax.device_count()
    config = TrainConfig(env=args.env, num_envs=args.num_envs or 2 * num_devices,
                         num_steps=args.num_steps,
                         hidden_width=args.hidden_width, num_devices=num_devices)
    config, _ = auto_scale_config(config)
    config = config.replace(total_timesteps=config.batch_size)
    validate_config(config)
    env, env_params, network, optimizer, reward_components = ppo.build(config)
    mesh = ppo.make_mesh(num_devices)
    runner = ppo.init_runner_state(config, env, env_params, network, optimizer,
                                   len(reward_components), mesh)
    params_before = jax.device_get(runner.params)
    chunk = ppo.UpdateChunk(config, env, env_params, network, optimizer, reward_components,
                            1, mesh)
    compile_seconds = chunk.compile(runner)
    runner, metrics = chunk(runner, 1)
    metrics = jax.device_get(metrics)
    updates = int(jax.device_get(runner.update_step))
    if updates != 1:
        raise CheckFailed(f"update_step is {updates} after one update, expected 1")
    losses = np.array([metrics.total_loss, metrics.policy_loss, metrics.value_loss])
    if not np.all(np.isfinite(losses)):
        raise CheckFailed(f"non-finite losses after update 1: {losses.tolist()}")
    params_after = jax.device_get(runner.params)
    changed = any(not np.array_equal(before, after) for before, after in
                  zip(jax.tree.leaves(params_before), jax.tree.leaves(params_after)))
    if not changed:
        raise CheckFailed("update 1 left every parameter unchanged")
    for name, value in (("invalid_actions", ppo.metric_total(metrics, env, "invalid")),
                        ("masked_actions_sampled", float(np.sum(metrics.masked_actions_sampled)))):
        if value:
            raise CheckFailed(f"{name} = {value} (must be 0)")
    return (f"{config.env}, {config.num_envs} envs x {config.num_steps} steps on "
            f"{num_devices} device(s), compile {compile_seconds:.1f}s, "
            f"loss {float(np.ravel(metrics.total_loss)[0]):.3f}")


def check_compile_cache(args) -> str:
    path = os.path.abspath(os.path.expanduser(args.compile_cache_dir))
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-") as probe:
            probe.write(b"ok")
            probe.flush()
    except OSError as error:
        raise CheckFailed(f"{path} is not writable ({error}); pass --compile-cache-dir or "
                          f"train with --no-compile-cache") from None
    entries = len([name for name in os.listdir(path) if not name.startswith(".")])
    return f"{path} writable, {entries} cached entr{'y' if entries == 1 else 'ies'}"


CHECKS = (("distributed", check_distributed), ("devices", check_devices),
          ("mlp_forward_backward", check_mlp),
          ("conv_forward_backward", check_conv), ("all_reduce", check_all_reduce),
          ("training_update", check_training_update), ("compile_cache", check_compile_cache))


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expect-devices", type=int, default=0,
                        help="fail unless at least this many devices are visible")
    parser.add_argument("--force-host-devices", type=int, default=0,
                        help="CPU only: split the host into N devices (sets XLA_FLAGS)")
    parser.add_argument("--env", choices=("hackmatrix", "toy"), default="hackmatrix")
    parser.add_argument("--num-envs", type=int, default=0,
                        help="training smoke envs (default: 2 per device)")
    parser.add_argument("--num-steps", type=int, default=8)
    parser.add_argument("--num-devices", type=int, default=0,
                        help="training smoke devices (default: all)")
    parser.add_argument("--hidden-width", type=int, default=256)
    parser.add_argument("--compile-cache-dir", default=DEFAULT_COMPILE_CACHE_DIR)
    parser.add_argument("--verbose", action="store_true", help="print tracebacks of failures")
    multi = parser.add_argument_group("multi-process (as scripts/train_purejaxrl.py)")
    multi.add_argument("--distributed", choices=("auto", "on", "off"), default="auto")
    multi.add_argument("--coordinator-address", metavar="HOST:PORT")
    multi.add_argument("--num-processes", type=int)
    multi.add_argument("--process-id", type=int)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.force_host_devices:
        # Must be in place before jax is imported (it is imported only by the checks).
        if "jax" in sys.modules:
            raise SystemExit("--force-host-devices: jax was already imported")
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_"
                                   f"platform_device_count={args.force_host_devices}").strip()
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    choose_platforms()  # before any check imports JAX
    start = time.perf_counter()
    failures = 0
    for name, check in CHECKS:
        check_start = time.perf_counter()
        try:
            detail = check(args)
        except Exception as error:  # a preflight reports every failure, then moves on
            failures += 1
            reason = str(error) if isinstance(error, CheckFailed) else \
                f"{type(error).__name__}: {error}"
            print(f"FAIL {name}: {reason}", flush=True)
            if args.verbose and not isinstance(error, CheckFailed):
                traceback.print_exc()
            continue
        print(f"PASS {name} ({time.perf_counter() - check_start:.1f}s): {detail}", flush=True)
    total = time.perf_counter() - start
    verdict = f"{failures} of {len(CHECKS)} checks FAILED" if failures else \
        f"all {len(CHECKS)} checks passed"
    print(f"{verdict} in {total:.1f}s", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
