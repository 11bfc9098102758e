"""Data parallelism over all local devices (issue P4), on 4 virtual CPU devices in a subprocess
(XLA_FLAGS must be set before jax is imported): training runs, parameters are identical on every
device, env steps are counted once, and one update equals the single-device update of the same
global batch (gradients and advantage statistics are averaged over devices)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

# Extended suite (`pytest -m slow`): a 4-device run in a subprocess, about 60 s
# (test_robust_run keeps a 4-device run in the default suite).
pytestmark = pytest.mark.slow

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax, numpy as np
    from purejaxrl.config import RunOptions, TrainConfig
    from purejaxrl.train import train

    cache, out_dir = sys.argv[2], sys.argv[3]
    def run(config, name, **kwargs):
        options = RunOptions(run_name=name, checkpoint_dir=out_dir, updates_per_chunk=1,
                             wandb=False, artifact=False, compile_cache_dir=cache, quiet=True)
        return train(config, options, **kwargs)

    def in_sync(params):
        for leaf in jax.tree.leaves(params):
            shards = [np.asarray(s.data) for s in leaf.addressable_shards]
            if len(shards) != 4 or any(not np.array_equal(shards[0], s) for s in shards):
                return False
        return True

    def max_diff(a, b):
        return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
                   for x, y in zip(jax.tree.leaves(jax.device_get(a)),
                                   jax.tree.leaves(jax.device_get(b))))

    # Full-batch updates (1 minibatch, 2 epochs) of 8 envs x 8 steps, on 4 devices and on 1.
    base = TrainConfig(env="toy", num_envs=8, num_steps=8, num_minibatches=1, update_epochs=2,
                       total_timesteps=3 * 64, max_episode_steps=5, hidden_width=16,
                       hidden_depth=1, recurrent_core="none", lr=1e-2)
    four = run(base.replace(num_devices=4), "four", stop_after_updates=1)
    one = run(base.replace(num_devices=1), "one", stop_after_updates=1)
    from purejaxrl import ppo
    env, env_params, network, optimizer, components = ppo.build(base)
    initial = ppo.init_runner_state(base, env, env_params, network, optimizer, len(components))
    from purejaxrl.checkpoint import load_checkpoint
    import shutil
    # A copy of the 4-device run at update 1, as on another machine (a resume continues in
    # the directory it loads from).
    shutil.copytree(four.run_dir, os.path.join(out_dir, "four_on_one"))
    longer = run(base.replace(num_devices=4), "four", checkpoint=load_checkpoint(four.run_dir))
    # The 4-device checkpoint continues on 1 device: same global batch.
    moved_host = run(base.replace(num_devices=1), "four_on_one",
                     checkpoint=load_checkpoint(os.path.join(out_dir, "four_on_one")))
    # Two seeds vmapped, their envs split over the 4 devices: the same update as on 1 device.
    seeds_four = run(base.replace(num_devices=4, num_seeds=2), "seeds_four", stop_after_updates=1)
    seeds_one = run(base.replace(num_devices=1, num_seeds=2), "seeds_one", stop_after_updates=1)
    diffs, moved = [max_diff(four.runner_state.params, one.runner_state.params)], [
        max_diff(four.runner_state.params, initial.params)]
    print(json.dumps({
        "devices": jax.local_device_count(),
        "max_param_diff": max(diffs), "max_param_move": max(moved),
        "in_sync_one_update": in_sync(four.runner_state.params),
        "in_sync_three_updates": in_sync(longer.runner_state.params),
        "env_shards": len(four.runner_state.env_keys.addressable_shards),
        "seeds_max_param_diff": max_diff(seeds_four.runner_state.params,
                                         seeds_one.runner_state.params),
        "seeds_in_sync": in_sync(seeds_four.runner_state.params),
        "seeds_env_shard_shape": list(
            seeds_four.runner_state.env_keys.addressable_shards[0].data.shape),
        "resumed_on_one_device_updates": moved_host.updates_done,
        "resumed_from": moved_host.records[0]["update"] - 1,  # chunks of 1 update
        "records": [{k: r[k] for k in ("update", "env_steps", "global_batch", "num_devices",
                                       "actions/invalid")} for r in four.records + longer.records],
    }))
""")


@pytest.fixture(scope="module")
def report(tmp_path_factory, compile_cache_dir):
    out_dir = tmp_path_factory.mktemp("multidevice")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    completed = subprocess.run(
        [sys.executable, "-c", SCRIPT, REPO_ROOT, compile_cache_dir, str(out_dir)],
        capture_output=True, text=True, env=env, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_runs_on_four_devices_with_envs_split(report):
    assert report["devices"] == 4 and report["env_shards"] == 4


def test_parameters_identical_on_every_device(report):
    assert report["in_sync_one_update"] and report["in_sync_three_updates"]


def test_one_update_matches_single_device_for_same_global_batch(report):
    """Same seed, same 8 envs (per-env RNG keys), 4 devices x 2 envs vs 1 device x 8 envs: the
    parameters after one update agree to float tolerance, while the update itself moved them
    far more than that (so the check is not vacuous)."""
    assert report["max_param_diff"] < 1e-5
    assert report["max_param_move"] > 1e-3


def test_env_steps_counted_once_across_devices(report):
    """Each record counts update x global batch (8 envs x 8 steps), not x devices."""
    assert [r["env_steps"] for r in report["records"]] == [64, 128, 192]
    assert all(r["global_batch"] == 64 and r["num_devices"] == 4 for r in report["records"])
    assert all(r["actions/invalid"] == 0 for r in report["records"])


def test_checkpoint_from_four_devices_resumes_on_one(report):
    """Update 1 of the 4-device run, continued to update 3 on one device."""
    assert report["resumed_on_one_device_updates"] == 3 and report["resumed_from"] == 1


def test_vmapped_seeds_split_their_envs_over_devices(report):
    """--num-seeds with 4 devices: each device holds its quarter of every seed's envs (shard
    [2 seeds, 2 envs]), parameters stay in sync, and the update equals the 1-device one."""
    assert report["seeds_env_shard_shape"][:2] == [2, 2]
    assert report["seeds_in_sync"]
    assert report["seeds_max_param_diff"] < 1e-5


DISTILL_SCRIPT = textwrap.dedent("""
    import json, os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import PartitionSpec as P
    from purejaxrl import ppo
    from purejaxrl.config import TrainConfig

    # Only the distillation terms move the weights (zero advantages, no value or entropy
    # term); 8 labelled states weighing [1, 0, 0, 0 | 1, 1, 1, 1] in the policy's fit (device
    # 0 holds one, device 1 four) and [1, 1, 1, 0 | 1, 0, 0, 0] in the critic's fit to the
    # search's values (device 0 three, device 1 one).
    base = TrainConfig(env="toy", num_envs=8, num_steps=4, max_episode_steps=5, hidden_width=16,
                       hidden_depth=1, recurrent_core="none", num_minibatches=1,
                       update_epochs=1, total_timesteps=64, lr=1e-2, ent_coef=0.0, vf_coef=0.0)
    env, env_params, network, optimizer, components = ppo.build(base)
    runner = ppo.init_runner_state(base, env, env_params, network, optimizer, len(components))
    _, rollout, _, _, _, _ = jax.jit(lambda r: ppo.collect_rollout(
        r, config=base, env=env, env_params=env_params, network=network,
        reward_components=components))(runner)
    zeros, targets = jnp.zeros((4, 8)), rollout.value
    mask = env.action_mask(runner.obs)
    noise = 3.0 * jax.random.normal(jax.random.PRNGKey(5), mask.shape)
    distill = dict(obs=runner.obs, mask=mask, weight=jnp.array([1., 0, 0, 0, 1, 1, 1, 1]),
                   target=jax.nn.softmax(jnp.where(mask, noise, -1e9), -1),
                   value=noise[:, 0], value_weight=jnp.array([1., 1, 1, 0, 1, 0, 0, 0]))

    def update(config, axis, rollout, advantages, targets, distill):
        params, _, aux = ppo.update_epochs(runner.params, runner.opt_state, rollout, advantages,
                                           targets, jax.random.PRNGKey(0), config, network,
                                           optimizer, axis, distill=distill)
        return params, aux

    one = base.replace(distill_coef=1.0, distill_value_coef=1.0, num_devices=1)
    two = base.replace(distill_coef=1.0, distill_value_coef=1.0, num_devices=2)
    params_one, aux_one = jax.jit(lambda *a: update(one, None, *a))(rollout, zeros, targets,
                                                                   distill)
    split = P(None, "devices")
    params_two, aux_two = jax.jit(jax.shard_map(
        lambda *a: update(two, "devices", *a), mesh=ppo.make_mesh(2),
        in_specs=(split, split, split, P("devices")), out_specs=(P(), P()),
        check_vma=False))(rollout, zeros, targets, distill)
    print(json.dumps({
        "devices": jax.local_device_count(),
        "max_param_diff": max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                              for a, b in zip(jax.tree.leaves(params_one),
                                              jax.tree.leaves(params_two))),
        "max_param_move": max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                              for a, b in zip(jax.tree.leaves(params_one),
                                              jax.tree.leaves(runner.params))),
        "loss": [float(aux_one["distill_loss"]), float(aux_two["distill_loss"])],
        "value_loss": [float(aux_one["distill_value_loss"]),
                       float(aux_two["distill_value_loss"])],
        "grad_norm": [float(aux_one["grad_norm"]), float(aux_two["grad_norm"])]}))
""")


def test_uneven_distillation_weights_give_the_single_device_update(compile_cache_dir):
    """Search distillation with uneven weights (--distill-where acquire, the move target, the
    rollout teacher; the search's values, --distill-value-coef) fits the weighted mean over the
    whole minibatch, whatever the device count: split over 2 devices, one holding 1 labelled
    state and the other 4 (the values: 3 and 1), the gradient, the update and the logged
    losses are the single device's (a device's own weighted mean would
    count its one state as much as the other's four; Adam's first step hides the gradient's
    size in the weights, so the gradient's norm is compared too)."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    completed = subprocess.run([sys.executable, "-c", DISTILL_SCRIPT], capture_output=True,
                               text=True, env=env, timeout=600, cwd=REPO_ROOT)
    assert completed.returncode == 0, completed.stderr[-4000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["devices"] == 2 and report["max_param_move"] > 1e-4
    assert report["max_param_diff"] < 1e-6
    assert report["loss"][0] == pytest.approx(report["loss"][1], rel=1e-5)
    assert report["value_loss"][0] > 0
    assert report["value_loss"][0] == pytest.approx(report["value_loss"][1], rel=1e-5)
    assert report["grad_norm"][0] == pytest.approx(report["grad_norm"][1], rel=1e-5)
