"""Seeds vmapped in one compiled program (``--num-seeds``): each seed is the run a single-seed
run of that seed would be, saved as its own single-seed checkpoint, and the multi-seed run
resumes bit for bit from its directory."""

import json
import os
import shutil

import msgpack

import jax
import numpy as np
import pytest

from purejaxrl import ppo
from purejaxrl import train as train_module
from purejaxrl.checkpoint import CheckpointError, list_checkpoints, load_checkpoint
from purejaxrl.config import ConfigError, validate_config
from purejaxrl.train import train
from tests.trainer.toy_run import CONFIG, assert_trees_equal, options

SEEDS = (3, 4)
MULTI = CONFIG.replace(seed=SEEDS[0], num_seeds=len(SEEDS))


@pytest.fixture(scope="module")
def multi_run(tmp_path_factory, compile_cache_dir):
    """Seeds 3 and 4 together: 5 updates in chunks of 2, saving every 2 updates."""
    tmp = tmp_path_factory.mktemp("multi")
    return train(MULTI, options(tmp, compile_cache_dir, save_interval=2))


@pytest.fixture(scope="module")
def single_runs(tmp_path_factory, compile_cache_dir):
    """The same seeds, each alone."""
    tmp = tmp_path_factory.mktemp("single")
    return [train(CONFIG.replace(seed=seed), options(tmp, compile_cache_dir, run_name=f"s{seed}"))
            for seed in SEEDS]


def assert_trees_close(a, b):
    a, b = jax.device_get(a), jax.device_get(b)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)


def test_each_seed_is_the_single_run_of_that_seed(multi_run, single_runs):
    """Vmapping adds a batch axis and nothing else: every seed's final state (parameters,
    optimiser, envs, keys, counters) equals that seed's single-seed run, up to float rounding of
    batched matmuls; integer state (env states, keys, counters) is identical."""
    assert [s.seed for s in multi_run.seeds] == list(SEEDS)
    for seed_result, single in zip(multi_run.seeds, single_runs):
        assert_trees_close(seed_result.runner_state, single.runner_state)
        assert_trees_equal(seed_result.runner_state.env_keys, single.runner_state.env_keys)
        assert_trees_equal(seed_result.runner_state.env_state, single.runner_state.env_state)
        for multi_record, single_record in zip(seed_result.records, single.records):
            assert multi_record["episode/count"] == single_record["episode/count"]
            assert multi_record["episode/return_mean"] == pytest.approx(
                single_record["episode/return_mean"], rel=1e-5)


def test_the_seeds_differ(multi_run):
    """Independent runs: distinct env streams and initial parameters."""
    first, second = (jax.device_get(s.runner_state) for s in multi_run.seeds)
    assert not np.array_equal(first.env_keys, second.env_keys)
    assert not np.array_equal(jax.tree.leaves(first.params)[0], jax.tree.leaves(second.params)[0])


def test_each_seed_is_saved_as_a_single_seed_checkpoint(multi_run):
    """``<run>/seed-<s>/checkpoint_<update>.msgpack``: a checkpoint of seed s alone (config seed s,
    num_seeds 1) holding that seed's state, so evaluate, watch and resume take it as it is."""
    for seed_result in multi_run.seeds:
        assert seed_result.run_dir == os.path.join(multi_run.run_dir, f"seed-{seed_result.seed}")
        assert [u for u, _ in list_checkpoints(seed_result.run_dir)] == [2, 4, 5]
        checkpoint = load_checkpoint(seed_result.last_checkpoint)
        assert checkpoint["config"]["seed"] == seed_result.seed
        assert checkpoint["config"]["num_seeds"] == 1
        assert_trees_equal(checkpoint["runner_state"], seed_result.runner_state)
    assert multi_run.last_checkpoint == multi_run.run_dir


def test_a_save_that_fails_between_seeds_leaves_an_update_every_seed_holds(
        tmp_path, compile_cache_dir, monkeypatch):
    """A save prunes the seeds' old checkpoints only once every seed's file is written: with
    --keep-checkpoints 1, a write that fails for seed 4 at update 4 leaves update 2 to both
    seeds, and the run resumes from it (a prune per seed would leave seed 3 only update 4,
    seed 4 only update 2: no update in common)."""
    write = train_module.save_checkpoint

    def disk_full_for_seed_4_at_update_4(run_dir, **fields):
        if fields["update"] == 4 and run_dir.endswith("seed-4"):
            raise CheckpointError(f"cannot write checkpoint {run_dir}: disk full")
        return write(run_dir, **fields)

    monkeypatch.setattr(train_module, "save_checkpoint", disk_full_for_seed_4_at_update_4)
    with pytest.raises(CheckpointError, match="disk full"):
        train(MULTI, options(tmp_path, compile_cache_dir, save_interval=2, keep_checkpoints=1))
    assert load_checkpoint(str(tmp_path / "run"), multi_seed=True)["update"] == 2


def test_one_record_per_chunk_with_every_seed_under_its_prefix(multi_run):
    assert [r["update"] for r in multi_run.records] == [2, 4, 5]
    for record in multi_run.records:
        for seed in SEEDS:
            assert f"seed{seed}/episode/return_mean" in record
            assert f"seed{seed}/health/stalling" in record
        assert "episode/return_mean" not in record
        assert record["sps_all_seeds"] == pytest.approx(2 * record["sps"])
    lines = open(os.path.join(multi_run.run_dir, "metrics.jsonl")).read().splitlines()
    assert len(lines) == 3


@pytest.mark.slow  # extended suite (pytest -m slow)
def test_resume_of_the_run_directory_is_bit_for_bit(multi_run, tmp_path, compile_cache_dir,
                                                    monkeypatch):
    """3 updates, stop, ``--resume <run dir>`` (every seed stacked), 2 more == 5 in one go.
    Each seed keeps its own sittings (one may have been continued alone, by other code)."""
    monkeypatch.setattr(train_module, "process_commit", lambda: "first0")
    first = train(MULTI, options(tmp_path, compile_cache_dir, save_interval=2),
                  stop_after_updates=3)
    alone = os.path.join(first.run_dir, f"seed-{SEEDS[1]}", "checkpoint_3.msgpack")
    with open(alone, "rb") as handle:
        top = msgpack.unpackb(handle.read(), raw=False)
    metadata = dict(json.loads(top["metadata"]), sittings=[{"from_update": 0, "commit": "alone"}])
    with open(alone, "wb") as handle:
        handle.write(msgpack.packb({**top, "metadata": json.dumps(metadata)}, use_bin_type=True))
    checkpoint = load_checkpoint(first.run_dir, multi_seed=True)
    assert checkpoint["update"] == 3 and checkpoint["config"]["num_seeds"] == 2
    monkeypatch.setattr(train_module, "process_commit", lambda: "second")
    second = train(MULTI, options(tmp_path, compile_cache_dir, save_interval=2),
                   checkpoint=checkpoint)
    assert second.updates_done == 5
    assert_trees_equal(second.runner_state, multi_run.runner_state)
    resumed = {"from_update": 3, "commit": "second"}
    for seed, first_commit in zip(SEEDS, ("first0", "alone")):
        saved = load_checkpoint(os.path.join(second.run_dir, f"seed-{seed}"))
        assert saved["sittings"] == [{"from_update": 0, "commit": first_commit}, resumed]


def test_resume_takes_the_newest_update_every_seed_has(multi_run, tmp_path):
    """A stop between two seeds' writes leaves one seed a save ahead: resume goes back to the
    last update both have."""
    run_dir = tmp_path / "run"
    shutil.copytree(multi_run.run_dir, run_dir)
    os.remove(run_dir / f"seed-{SEEDS[1]}" / "checkpoint_5.msgpack")
    assert load_checkpoint(str(run_dir), multi_seed=True)["update"] == 4


def test_seed_directories_of_other_runs_are_refused(multi_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(multi_run.run_dir, run_dir)
    os.rename(run_dir / f"seed-{SEEDS[1]}", run_dir / "seed-9")
    with pytest.raises(CheckpointError, match="not consecutive"):
        load_checkpoint(str(run_dir), multi_seed=True)


def test_weights_only_from_a_multi_seed_directory_names_a_seed(multi_run, tmp_path,
                                                               compile_cache_dir):
    with pytest.raises(CheckpointError, match="seed-<s>"):
        checkpoint = load_checkpoint(multi_run.run_dir, multi_seed=True)
        train(CONFIG, options(tmp_path, compile_cache_dir), checkpoint=checkpoint,
              weights_only=True)


def test_a_policy_is_loaded_from_one_seed(multi_run):
    """Evaluate and watch load one policy: the run directory is refused with the seed
    directories named, and a seed directory loads as a single-seed checkpoint."""
    with pytest.raises(CheckpointError, match=r"multi-seed run \(seeds 3, 4\).*seed-3"):
        load_checkpoint(multi_run.run_dir)
    assert load_checkpoint(multi_run.seeds[1].run_dir)["config"]["seed"] == 4


def test_num_seeds_must_be_positive():
    with pytest.raises(ConfigError, match="--num-seeds"):
        validate_config(CONFIG.replace(num_seeds=0))


def test_init_of_a_seed_equals_its_single_init():
    """The multi-seed initial state is the stack of the single-seed ones (same key streams)."""
    env, env_params, network, optimizer, components = ppo.build(MULTI)
    stacked = ppo.init_runner_state(MULTI, env, env_params, network, optimizer, len(components))
    for index, seed in enumerate(SEEDS):
        single_config = CONFIG.replace(seed=seed)
        single = ppo.init_runner_state(single_config, env, env_params, network, optimizer,
                                       len(components))
        assert_trees_equal(ppo.seed_slice(stacked, index), single)
