"""The training loop on the toy corridor (issues P3, P5): one compile for all chunks including
a partial one, metrics per chunk, checkpoints (atomic, keep-last-N, SIGINT), and resume that is
bit-for-bit identical to an uninterrupted run."""

import json
import os
import shutil
import signal

import jax
import msgpack
import numpy as np
import pytest

from purejaxrl import checkpoint as checkpoint_module
from purejaxrl import ppo
from purejaxrl.checkpoint import (CHECKPOINT_FORMAT, CHECKPOINT_VERSION, CheckpointError,
                                  list_checkpoints, load_checkpoint)
from purejaxrl.config import ConfigError, TrainConfig
from purejaxrl.evaluation import make_policy_comparison, random_policy, summarize_episodes
from purejaxrl.logger import RunLogger
from purejaxrl import train as train_module
from purejaxrl.train import train
from tests.trainer.toy_run import CONFIG, assert_trees_equal, options


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, compile_cache_dir):
    """5 updates in one go, saving every 2 updates (and at the end), keeping the last 2
    checkpoints."""
    tmp = tmp_path_factory.mktemp("full")
    return train(CONFIG, options(tmp, compile_cache_dir, save_interval=2, keep_checkpoints=2))


def test_chunks_compile_the_update_once_including_partial_chunk(full_run):
    """Chunks of 2, 2 and 1 updates: the update chunk is traced (and compiled) exactly once."""
    assert [r["update"] for r in full_run.records] == [2, 4, 5]
    assert full_run.chunk.trace_count == 1
    assert full_run.updates_done == 5 and full_run.env_steps == 160
    assert int(full_run.runner_state.update_step) == 5


def test_partial_chunk_does_only_its_active_updates(full_run):
    """The optimizer step count after 5 updates is 5 x 2 minibatches x 2 epochs = 20: the
    padding updates of the partial chunk changed nothing."""
    counts = [int(np.asarray(x)) for x in jax.tree.leaves(full_run.runner_state.opt_state)
              if np.ndim(x) == 0]
    assert counts and all(count == 20 for count in counts)


def test_chunk_metrics_cover_the_issue_list(full_run):
    """The trainer's own records, and the toy's: its metrics under their log keys, its reward
    components, its stages; nothing of another env's."""
    record = full_run.records[-1]
    for key in ("env_steps", "sps", "eta_s", "compile_s", "num_devices", "global_batch",
                "num_minibatches", "update_epochs", "minibatch_size", "episode/return_mean",
                "episode/length_mean", "episode/win_rate", "episode/death_rate",
                "episode/truncation_rate", "episode/stage_mean", "reward/victory",
                "reward/step_penalty", "actions/move_fraction", "actions/shot_fraction",
                "actions/siphon_fraction", "actions/wait_fraction", "actions/invalid",
                "actions/masked_sampled", "curriculum/episodes", "ppo/approx_kl",
                "ppo/clip_fraction", "ppo/explained_variance", "ppo/grad_norm", "ppo/entropy",
                "ppo/learning_rate"):
        assert key in record, key
    assert "undo_exploit_completions" not in record and "progress/steps_per_stage" not in record
    fractions = [value for key, value in record.items() if key.endswith("_fraction")]
    assert sum(fractions) == pytest.approx(1.0)  # the toy's action kinds cover every action
    assert all(r["actions/invalid"] == 0 and r["actions/masked_sampled"] == 0
               for r in full_run.records)
    assert record["global_batch"] == 32 and record["num_devices"] == 1
    lines = open(os.path.join(full_run.run_dir, "metrics.jsonl")).read().splitlines()
    assert len(lines) == 3


def test_learning_rate_anneals_linearly(full_run):
    """Anneal: update u (0-based) uses lr * (1 - u / 5); chunk 3 holds only update 4 -> 0.2 lr."""
    assert np.isclose(full_run.records[-1]["ppo/learning_rate"], 1e-2 * (1 - 4 / 5))
    assert np.isclose(full_run.records[0]["ppo/learning_rate"], 1e-2 * (1 - 0.5 / 5))


def test_learning_rate_floor_is_where_the_anneal_ends():
    """With --lr-floor F, update u of U uses lr * (1 - (1 - F) u / U): the first update the
    full rate, the anneal's line between, and never below F * lr (F = 0: the anneal above)."""
    config = CONFIG.replace(lr_floor=0.25)
    schedule = ppo.learning_rate_schedule(config)
    per_update = config.num_minibatches * config.update_epochs
    rates = [float(schedule(u * per_update)) for u in range(config.num_updates + 1)]
    expected = [1e-2 * (1 - 0.75 * u / config.num_updates)
                for u in range(config.num_updates + 1)]
    assert np.allclose(rates, expected)
    assert np.isclose(rates[-1], 0.25e-2) and min(rates) >= 0.25e-2 * (1 - 1e-6)
    assert np.isclose(float(ppo.learning_rate_schedule(CONFIG)(config.num_updates * per_update)),
                      0.0)


def test_keep_last_n_checkpoints_with_complete_contents(full_run):
    """save_interval=2 saves at updates 2 and 4, and at the end (5); keep_checkpoints=2 keeps 4
    and 5. The newest holds the runner state, config, counters, versions; no temp files are
    left."""
    assert [update for update, _ in list_checkpoints(full_run.run_dir)] == [4, 5]
    assert not [n for n in os.listdir(full_run.run_dir) if n.endswith(".tmp")]
    payload = load_checkpoint(full_run.run_dir)  # a directory resolves to the newest
    assert payload["update"] == 5 and payload["env_steps"] == 160
    assert payload["config"] == CONFIG.to_dict()
    assert payload["versions"]["jax"] == jax.__version__
    assert "wandb_run_id" in payload
    assert_trees_equal(payload["runner_state"], full_run.runner_state)


def test_resume_is_bit_for_bit(full_run, tmp_path, compile_cache_dir, monkeypatch):
    """3 updates, save, resume from the run directory, 2 more == 5 updates in one run: every
    array of the runner state (params, optimizer, env states, observations, keys, episode
    accumulators, counters) is identical. The metrics file is the uninterrupted run's too:
    what a session logged after its last checkpoint before it died (here update 4, and a
    last line cut short) is trained again, so it is dropped, not kept twice. The checkpoint
    names the code of each sitting: the commit of the first from update 0, the second's from
    update 3."""
    monkeypatch.setattr(train_module, "process_commit", lambda: "first0")
    first = train(CONFIG, options(tmp_path, compile_cache_dir), stop_after_updates=3)
    assert first.updates_done == 3 and first.last_checkpoint.endswith("checkpoint_3.msgpack")
    metrics = os.path.join(first.run_dir, "metrics.jsonl")
    with open(metrics, "a") as handle:
        handle.write(json.dumps({"update": 4, "env_steps": 128}) + '\n{"update": 5, "env_st')
    monkeypatch.setattr(train_module, "process_commit", lambda: "second")
    second = train(CONFIG, options(tmp_path, compile_cache_dir),
                   checkpoint=load_checkpoint(first.run_dir))
    assert second.updates_done == 5
    assert_trees_equal(second.runner_state, full_run.runner_state)
    sittings = [{"from_update": 0, "commit": "first0"}, {"from_update": 3, "commit": "second"}]
    assert load_checkpoint(second.run_dir)["sittings"] == second.seeds[0].sittings == sittings
    # Resumed at its end, a sitting trains nothing and names no code.
    third = train(CONFIG, options(tmp_path, compile_cache_dir),
                  checkpoint=load_checkpoint(second.run_dir))
    assert third.updates_done == 5 and third.seeds[0].sittings == sittings
    # The resumed run appends to the same metrics file.
    updates = [json.loads(line)["update"] for line in open(metrics).read().splitlines()]
    assert updates == [2, 3, 5]


def test_resume_with_different_config_names_the_fields(full_run, compile_cache_dir, tmp_path):
    checkpoint = load_checkpoint(full_run.last_checkpoint)
    changed = CONFIG.replace(lr=5e-3, ent_coef=0.0)
    with pytest.raises(ConfigError, match=r"lr: 0\.01 != 0\.005.*ent_coef") as error:
        train(changed, options(tmp_path, compile_cache_dir), checkpoint=checkpoint)
    assert "--weights-only" in str(error.value)


def test_weights_only_starts_a_new_run_from_the_parameters(full_run, tmp_path,
                                                           compile_cache_dir):
    """--weights-only: a different config (here another seed, which a full resume refuses) is
    accepted; the run starts at update 0 with the checkpoint's parameters, not the new seed's
    initialisation, and a fresh optimizer; its checkpoints name the run it started from."""
    checkpoint = load_checkpoint(full_run.last_checkpoint)
    reseeded = CONFIG.replace(seed=7)
    seen = {}

    class Recorder(RunLogger):
        def log(self, record):
            seen.setdefault("first", record)
            super().log(record)

    logger = Recorder(str(tmp_path / "w"), use_wandb=False, quiet=True)
    result = train(reseeded, options(tmp_path, compile_cache_dir, run_name="w"),
                   checkpoint=checkpoint, weights_only=True, stop_after_updates=1,
                   logger=logger)
    assert result.updates_done == 1 and seen["first"]["update"] == 1
    # The new run names the weights it started from; its own sittings start at 0.
    saved_record = load_checkpoint(result.last_checkpoint)
    assert saved_record["weights_from"] == {
        "file": os.path.basename(full_run.last_checkpoint), "run_name": checkpoint["run_name"],
        "update": 5, "sittings": checkpoint["sittings"]}
    assert [sitting["from_update"] for sitting in saved_record["sittings"]] == [0]
    # Params moved by one update from the checkpoint's, not from a fresh init: close to them.
    saved = jax.tree.leaves(checkpoint["runner_state"].params)
    now = jax.tree.leaves(jax.device_get(result.runner_state.params))
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(saved, now)) < 0.1


def test_weights_only_rejects_a_different_network(full_run, tmp_path, compile_cache_dir):
    checkpoint = load_checkpoint(full_run.last_checkpoint)
    with pytest.raises(CheckpointError, match="network does not match"):
        train(CONFIG.replace(hidden_width=8), options(tmp_path, compile_cache_dir),
              checkpoint=checkpoint, weights_only=True)


def test_a_trimmed_checkpoint_keeps_the_network_and_the_first_envs(full_run, tmp_path,
                                                                   compile_cache_dir):
    """``trim_checkpoint`` (scripts/trim_checkpoint.py): the copy of a 4-env run keeping 2 envs
    loads as a checkpoint whose config says 2 envs; its parameters, optimiser state, return
    statistics and counters are the original's, its envs' observations and game states the
    first two of the original's; and a new run starts from it with --weights-only. Counts
    outside [1, num_envs] are refused."""
    original = load_checkpoint(full_run.last_checkpoint)
    data, record = checkpoint_module.trim_checkpoint(original, 2)
    path = os.path.join(tmp_path, "checkpoint_5.msgpack")
    checkpoint_module.write_checkpoint_file(path, data)
    trimmed = load_checkpoint(path)
    assert trimmed["config"]["num_envs"] == 2 and trimmed["update"] == original["update"]
    assert record["trimmed_from"]["num_envs"] == CONFIG.num_envs
    before, after = original["runner_state"], trimmed["runner_state"]
    for field in ("params", "opt_state", "return_stats", "update_step"):
        assert_trees_equal(getattr(before, field), getattr(after, field))
    first_two = jax.tree.map(lambda x: np.asarray(x)[:2], (before.obs, before.env_state))
    assert_trees_equal(first_two, (after.obs, after.env_state))
    result = train(CONFIG, options(tmp_path, compile_cache_dir, run_name="from-trimmed"),
                   checkpoint=trimmed, weights_only=True, stop_after_updates=1)
    assert result.updates_done == 1
    # Its optimiser counted 2 minibatches an update, its config says 1: a full resume would
    # run the learning-rate schedule at twice the pace, so only --weights-only takes it.
    with pytest.raises(ConfigError, match="is a trimmed copy .*2 of 4 envs.*--weights-only"):
        train(TrainConfig.from_dict(trimmed["config"]),
              options(tmp_path, compile_cache_dir, run_name=None), checkpoint=trimmed)
    for envs in (0, CONFIG.num_envs + 1):
        with pytest.raises(CheckpointError, match="the envs to keep must be in"):
            checkpoint_module.trim_checkpoint(original, envs)


def test_sigint_saves_at_the_next_chunk_boundary(tmp_path, compile_cache_dir):
    """A SIGINT during the first chunk: the loop finishes that chunk, saves checkpoint_2 and
    stops, reporting the interruption."""
    class InterruptAfterFirstChunk(RunLogger):
        def log(self, record):
            super().log(record)
            os.kill(os.getpid(), signal.SIGINT)

    logger = InterruptAfterFirstChunk(str(tmp_path / "run"), use_wandb=False, quiet=True)
    result = train(CONFIG, options(tmp_path, compile_cache_dir), logger=logger)
    assert result.interrupted and result.updates_done == 2
    assert [u for u, _ in list_checkpoints(result.run_dir)] == [2]


def test_wandb_offline_run_id_is_kept_across_resume(tmp_path, compile_cache_dir, monkeypatch):
    """wandb in offline mode (no network): the checkpoint stores the run id, and the resumed
    session logs to the same wandb run; checkpoints go up as artifact versions."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_API_KEY", "")
    run_options = options(tmp_path, compile_cache_dir, wandb=True, wandb_mode="offline",
                          artifact=True)
    first = train(CONFIG, run_options, stop_after_updates=2)
    run_id = load_checkpoint(first.last_checkpoint)["wandb_run_id"]
    assert run_id
    resumed_ids = {}

    class Capture(RunLogger):
        def close(self):
            resumed_ids["id"] = self.wandb_run_id
            super().close()

    monkeypatch.setattr(train_module, "RunLogger", Capture)
    second = train(CONFIG, run_options, checkpoint=load_checkpoint(first.run_dir))
    assert second.updates_done == 5 and resumed_ids["id"] == run_id
    assert load_checkpoint(second.last_checkpoint)["wandb_run_id"] == run_id


def test_runner_state_is_donated_to_the_chunk(full_run):
    """The chunk consumes its input buffers (donate_argnums): the old runner state is deleted,
    so device memory holds one runner state, not two."""
    env, env_params, network, optimizer, components = ppo.build(CONFIG)
    runner = ppo.init_runner_state(CONFIG, env, env_params, network, optimizer, len(components),
                                   full_run.chunk.mesh)
    new_runner, _ = full_run.chunk(runner, 1)
    assert all(leaf.is_deleted() for leaf in jax.tree.leaves(runner))
    assert int(new_runner.update_step) == 1


def test_checkpoint_write_is_atomic(full_run, tmp_path, monkeypatch):
    """A write that fails midway (here: the data is written, its fsync fails) leaves neither a
    checkpoint under the final name nor a temp file; the previous checkpoint stays loadable;
    the error names the file."""
    state = jax.device_get(full_run.runner_state)
    fields = dict(config=CONFIG.to_dict(), env_steps=160, run_name="r", wandb_run_id=None,
                  elapsed_seconds=0.0, keep=5, runner_state=state)
    checkpoint_module.save_checkpoint(str(tmp_path), update=5, **fields)

    def broken_fsync(descriptor):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint_module.os, "fsync", broken_fsync)
    with pytest.raises(CheckpointError,
                       match=r"cannot write checkpoint .*checkpoint_6\.msgpack: disk full"):
        checkpoint_module.save_checkpoint(str(tmp_path), update=6, **fields)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["checkpoint_5.msgpack"]
    assert load_checkpoint(str(tmp_path))["update"] == 5


def test_a_save_prunes_only_the_checkpoints_up_to_its_own_update(full_run, tmp_path):
    """Keep-last-N counts the checkpoints up to the update just written: a later one (an
    unreadable newest that the resume skipped) is not the session's to delete. Saving update
    3 with keep 1 beside updates 1, 2, 4 and 5 removes 1 and 2 and leaves 3, 4 and 5."""
    fields = dict(config=CONFIG.to_dict(), env_steps=160, run_name="r", wandb_run_id=None,
                  elapsed_seconds=0.0, runner_state=jax.device_get(full_run.runner_state))
    for update in (1, 2, 4, 5):
        checkpoint_module.save_checkpoint(str(tmp_path), update=update, keep=None, **fields)
    checkpoint_module.save_checkpoint(str(tmp_path), update=3, keep=1, **fields)
    assert [update for update, _ in list_checkpoints(str(tmp_path))] == [3, 4, 5]


def test_resuming_an_older_checkpoint_of_a_run_with_later_ones_is_refused(full_run, tmp_path,
                                                                          compile_cache_dir):
    """A resume continues in its checkpoint's directory: from checkpoint_4 of a run that also
    holds a checkpoint_5 that loads, the session would delete 5 (keep-last-N) and then write
    over it, and a later --resume of the directory would take the abandoned 5. Refused before
    any work, naming the later file; the directory is left as it was."""
    run_dir = tmp_path / "copy"
    shutil.copytree(full_run.run_dir, run_dir)
    before = sorted(os.listdir(run_dir))
    older = load_checkpoint(str(run_dir / "checkpoint_4.msgpack"))
    with pytest.raises(ConfigError, match=r"after update 4 \(checkpoint_5\.msgpack\).*"
                                          r"delete and overwrite.*--weights-only"):
        train(CONFIG, options(tmp_path, compile_cache_dir, run_name=None), checkpoint=older)
    assert sorted(os.listdir(run_dir)) == before


def test_checkpoint_holds_plain_data_and_json_metadata(full_run):
    """The file is a msgpack map of four entries: format, version, JSON metadata (config,
    counters, run name, versions) and one [dtype, shape, bytes] entry per runner-state leaf,
    keyed by its pytree path; every dtype is a plain number type."""
    with open(full_run.last_checkpoint, "rb") as handle:
        top = msgpack.unpackb(handle.read(), raw=False)
    assert (top["format"], top["format_version"]) == (CHECKPOINT_FORMAT, CHECKPOINT_VERSION)
    metadata = json.loads(top["metadata"])
    assert metadata["config"] == CONFIG.to_dict() and metadata["update"] == 5
    leaves = jax.tree_util.tree_flatten_with_path(jax.device_get(full_run.runner_state))[0]
    assert set(top["arrays"]) == {jax.tree_util.keystr(path) for path, _ in leaves}
    assert ".params['params']" in "".join(top["arrays"])  # keys are readable paths
    assert {entry[0] for entry in top["arrays"].values()} <= {"float32", "int32", "uint32",
                                                              "bool"}


def test_sittings_keep_those_that_began_before_the_resumed_update():
    """A resume at update 3 keeps the sittings that began before it and adds its own (one that
    began at 3 or later trained updates the resume trains again); a new run has one sitting."""
    earlier = [{"from_update": 0, "commit": "a"}, {"from_update": 3, "commit": "b"}]
    assert checkpoint_module.sittings_with(earlier, 3, "c") == [
        {"from_update": 0, "commit": "a"}, {"from_update": 3, "commit": "c"}]
    assert checkpoint_module.sittings_with([], 0, None) == [{"from_update": 0, "commit": None}]


def test_checkpoint_info_describes_a_run_from_its_metadata(full_run, tmp_path, capsys):
    """scripts/checkpoint_info.py on a run directory: its newest checkpoint's update against the
    run's budget, env steps, the code of each sitting and the config's differences from the
    main command's; ``--json F`` writes the metadata as saved (an existing F only with
    ``--overwrite``); a directory without checkpoints is one error line, exit 2."""
    from scripts import checkpoint_info
    assert checkpoint_info.main([full_run.run_dir]) == 0
    text = capsys.readouterr().out
    assert "update        5 of 5 (160 env steps)" in text
    commit = load_checkpoint(full_run.run_dir)["sittings"][0]["commit"]
    assert f"code          updates 1-5: {commit or 'outside a git checkout'}" in text
    assert "env           toy" in text and "num_envs: " in text
    report = tmp_path / "info.json"
    assert checkpoint_info.main([full_run.last_checkpoint, "--json", str(report)]) == 0
    shown = json.loads(report.read_text())
    assert checkpoint_info.main([full_run.last_checkpoint, "--json", str(report)]) == 2
    capsys.readouterr()
    loaded = load_checkpoint(full_run.last_checkpoint)
    assert shown["update"] == 5 and shown["sittings"] == loaded["sittings"]
    assert shown["config"] == loaded["config"]
    assert checkpoint_info.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: no checkpoint_")


def test_a_checkpoint_with_malformed_sittings_is_refused(full_run, tmp_path):
    """The sittings are a list of {from_update: int, commit: str or null}, the weights' origin
    {file, run_name, update: int, sittings}; anything else is one error naming the field (a
    file without sittings, written before they existed, loads)."""
    with open(full_run.last_checkpoint, "rb") as handle:
        top = msgpack.unpackb(handle.read(), raw=False)
    metadata = json.loads(top["metadata"])
    path = tmp_path / "checkpoint_5.msgpack"
    origin = {"file": "checkpoint_5.msgpack", "run_name": "r", "update": 5, "sittings": []}
    for key, value in (("sittings", [{"from_update": "0", "commit": "a"}]),
                       ("sittings", {"0": "a"}), ("sittings", [{"from_update": 0}]),
                       ("weights_from", {**origin, "update": "5"}),
                       ("weights_from", {**origin, "sittings": None}), ("sittings", None)):
        edited = {name: field for name, field in metadata.items() if name != key}
        if value is not None:
            edited[key] = value
        path.write_bytes(msgpack.packb({**top, "metadata": json.dumps(edited)},
                                       use_bin_type=True))
        if value is None:
            assert "sittings" not in load_checkpoint(str(path))
            continue
        with pytest.raises(CheckpointError, match=f"metadata '{key}'"):
            load_checkpoint(str(path))


def test_a_checkpoint_of_another_code_version_is_refused_by_name(full_run, tmp_path):
    """Loading fills this code's runner state: a leaf missing from the file, or one whose
    shape differs, is an error naming the leaf, never a silently wrong state."""
    with open(full_run.last_checkpoint, "rb") as handle:
        top = msgpack.unpackb(handle.read(), raw=False)
    key = next(k for k in top["arrays"] if k.endswith("['kernel']"))
    for edit, message in ((lambda arrays: arrays.pop(key), "missing"),
                          (lambda arrays: arrays[key].__setitem__(1, [1, 1]), "this code's")):
        edited = msgpack.unpackb(msgpack.packb(top, use_bin_type=True), raw=False)
        edit(edited["arrays"])
        path = tmp_path / "checkpoint_5.msgpack"
        path.write_bytes(msgpack.packb(edited, use_bin_type=True))
        with pytest.raises(CheckpointError, match=message) as error:
            load_checkpoint(str(path))
        assert key in str(error.value)


def test_ppo_learns_the_toy_corridor(tmp_path, compile_cache_dir):
    """End-to-end sanity of the loss signs: 40 updates of PPO on the toy corridor earn clearly
    more per episode than the uniformly random legal policy on the same env (shooting at cell 3
    pays 0.15 - 0.01 per step, so a 16-step episode can earn about 1.5 more than walking)."""
    config = TrainConfig(env="toy", num_envs=8, num_steps=16, num_minibatches=4,
                         update_epochs=4, total_timesteps=40 * 128, hidden_width=32,
                         hidden_depth=1, recurrent_core="none", lr=3e-3)
    env, env_params = ppo.make_env(config)
    play = make_policy_comparison(env, env_params, [random_policy(env)], 256, 100)
    random_return = summarize_episodes(play(0, jax.random.PRNGKey(0)), env)["return_mean"]
    result = train(config, options(tmp_path, compile_cache_dir, updates_per_chunk=10))
    final_return = result.records[-1]["episode/return_mean"]
    assert final_return > random_return + 1.0, (random_return, final_return)
