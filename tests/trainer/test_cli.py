"""The command-line scripts (issues P5, P6, P7, 27): bad values (non-finite ones too, and an
unknown flag) fail with one clear line before any compile; missing or corrupt checkpoints fail
cleanly (no traceback, non-zero exit); a tiny toy run writes metrics and checkpoints; resume
refuses a different config and names the field, continues in the directory it was given,
extends a finished run given a larger budget and says when a run is complete; a new run never
writes into a directory that holds another; a rounded --total-timesteps and a stop after
--stop-after-updates or --stop-after-minutes are said (the latter before a chunk that would end
past its budget); evaluate.py prints a comparison table of policies on the same
seeds; output paths that cannot be written fail before any work."""

import json
import os
import shutil
import subprocess
import sys

import msgpack
import pytest

from envs.compile_cache import CompileCacheError, enable_compile_cache
from purejaxrl import train as train_module
from purejaxrl.checkpoint import METRICS_FILE, load_checkpoint
from purejaxrl.cli.evaluate import main as evaluate_main
from purejaxrl.cli.evaluate import table_columns
from purejaxrl.cli.train import build_parser, run_options_from_args
from purejaxrl.cli.train import main as train_main
from purejaxrl.config import DEFAULT_COMPILE_CACHE_DIR, ConfigError, TrainConfig, validate_config

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(REPO_ROOT, "scripts", "train_purejaxrl.py")
EVALUATE = os.path.join(REPO_ROOT, "scripts", "evaluate.py")

TINY = ["--env", "toy", "--num-envs", "4", "--num-steps", "8", "--hidden-width", "16",
        "--hidden-depth", "1", "--recurrent-core", "none", "--no-wandb", "--max-episode-steps", "6"]


def run(script, *args, timeout=300, **extra_env):
    env = dict(os.environ, JAX_PLATFORMS="cpu", **extra_env)
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=REPO_ROOT)


@pytest.mark.parametrize("args, message", [
    (["--num-envs", "0"], "--num-envs must be a positive integer"),
    (["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "3"],
     "--num-minibatches 3 must divide"),
    (["--gamma", "1.5"], "--gamma must be in [0, 1]"),
    # More devices than the machine has: said as such (not as an uneven split of the envs).
    (["--num-devices", "5"], "--num-devices 5, but this machine has 1 cpu device(s)"),
    (["--save-interval-minutes", "0"], "--save-interval-minutes must be > 0"),
    (["--weights-only"], "--weights-only needs --resume"),
    (["--total-timesteps", "10"], "smaller than one batch"),
    # An explicit multi-process launch needs all three of its flags, consistent.
    (["--num-processes", "2"], "given without --coordinator-address, --process-id"),
    (["--coordinator-address", "127.0.0.1:1", "--num-processes", "2", "--process-id", "2"],
     "--process-id must be in 0..1"),
    (["--coordinator-address", "localhost", "--num-processes", "2", "--process-id", "0"],
     "must be HOST:PORT"),
    (["--distributed", "off", "--process-id", "0"], "given with --distributed off"),
    # What the env cannot train with (issue 28): an unknown id, an encoder, a training reward
    # or a curriculum it does not offer.
    (["--env", "cartpole"], "unknown env 'cartpole': use hackmatrix, toy or a gymnax id"),
    (["--env", "CartPole-v1", "--encoder", "egocentric"], "needs an env with a board view"),
    (["--env", "CartPole-v1", "--encoder", "flat", "--curriculum-share", "0.5"],
     "--curriculum-share needs an env with stages"),
    (["--env", "CartPole-v1", "--encoder", "cnn"], "--encoder cnn needs image observations"),
    (["--training-reward", "returns"], "--training-reward 'returns': toy offers env, progress"),
    (["--program-potential", "1"], "--program-potential needs an env that takes it"),
    # The shaping modes are the env's own (HackMatrix's SHAPING_MODES): the trainer lists none.
    (["--env", "hackmatrix", "--reward-shaping", "distance"],
     "--env hackmatrix: reward_shaping must be one of ('swift', 'potential'), got 'distance'"),
    (["--env", "CartPole-v1", "--encoder", "flat", "--group-entropy-coef", "0.1"],
     "--group-entropy-coef needs an env with action groups"),
    (["--group-entropy-coef", "-0.1"], "--group-entropy-coef must be >= 0"),
    (["--lr-floor", "1.5"], "--lr-floor must be in [0, 1], got 1.5"),
    (["--lr-floor", "0.2", "--no-anneal-lr"], "--lr-floor 0.2 is where the anneal ends"),
    (["--stop-after-minutes", "0"], "--stop-after-minutes must be > 0, got 0.0"),
    (["--stop-after-minutes", "-1"], "--stop-after-minutes must be > 0, got -1.0"),
])
def test_bad_values_exit_before_any_compile(args, message, tmp_path, capsys):
    """In-process ``main`` (the same code path as the script, without a slow subprocess). The
    tests run on a machine with one CPU device."""
    code = train_main([*TINY, "--checkpoint-dir", str(tmp_path), *args])
    captured = capsys.readouterr()
    assert code == 2
    assert message in captured.err and "Traceback" not in captured.err
    assert "compiled" not in captured.out
    assert not os.listdir(tmp_path)  # no run directory was created


@pytest.mark.parametrize("args, message", [
    (["--lr", "inf"], "argument --lr: must be a finite number, got 'inf'"),
    (["--lr", "nan"], "argument --lr: must be a finite number, got 'nan'"),
    (["--max-grad-norm=-inf"], "argument --max-grad-norm: must be a finite number"),
    (["--gamma", "NaN"], "argument --gamma: must be a finite number"),
    (["--save-interval-minutes", "inf"], "must be a finite number"),
    (["--curriculum-share", "nan"], "argument --curriculum-share: must be a finite number"),
    (["--bogus-flag"], "unrecognized arguments: --bogus-flag"),
    (["--num-envs", "many"], "argument --num-envs: invalid int value: 'many'"),
])
def test_bad_flags_are_one_line_at_parse_time(args, message, tmp_path, capsys):
    """Non-finite numbers and unknown flags are refused while the arguments are parsed: one
    line on stderr naming --help (not the 48-line usage), exit 2, nothing created."""
    with pytest.raises(SystemExit) as stop:
        train_main([*TINY, "--checkpoint-dir", str(tmp_path), *args])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
    assert "--help" in err and "usage:" not in err
    assert not os.listdir(tmp_path)


def test_non_finite_hyperparameters_are_refused_by_validation():
    """The same rule for configs built in code (train() validates before any work)."""
    for field in ("lr", "gamma", "gae_lambda", "clip_eps", "ent_coef", "vf_coef",
                  "max_grad_norm"):
        for value in (float("inf"), float("-inf"), float("nan")):
            with pytest.raises(ConfigError, match=f"--{field.replace('_', '-')} must be a "
                               "finite number"):
                validate_config(TrainConfig().replace(**{field: value}))


def test_uneven_split_over_devices_is_refused():
    with pytest.raises(ConfigError, match="cannot be split evenly over 3 devices"):
        validate_config(TrainConfig(num_envs=8, num_devices=3))


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """3 updates (chunks of 2 + 1), evaluation every 2 updates, a fresh compile cache. The
    cache keeps every program here (threshold 0 s): whether a tiny program takes more than the
    default second to compile depends on the machine's load. The chunk itself, with its live
    progress callback, is one JAX never caches persistently."""
    checkpoint_dir = str(tmp_path_factory.mktemp("cli"))
    compile_cache_dir = str(tmp_path_factory.mktemp("cli_cache"))
    result = run(TRAIN, *TINY, "--total-timesteps", "96", "--checkpoint-dir", checkpoint_dir,
                 "--run-name", "cli", "--compile-cache-dir", compile_cache_dir,
                 "--updates-per-chunk", "2", "--eval-interval", "2", "--eval-envs", "4",
                 "--keep-checkpoints", "2", JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    assert result.returncode == 0, result.stderr[-4000:]
    assert os.listdir(compile_cache_dir), "the persistent compilation cache stayed empty"
    return result, os.path.join(checkpoint_dir, "cli"), checkpoint_dir


def test_cli_run_prints_derived_values_progress_and_writes_run_files(cli_run):
    result, run_dir, _ = cli_run
    assert "num_minibatches=4 (auto)" in result.stdout and "update_epochs=4 (auto)" in result.stdout
    assert "SPS" in result.stdout and "ETA" in result.stdout and "return" in result.stdout
    records = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    assert [r["update"] for r in records] == [2, 3]
    assert "eval_greedy/win_rate" in records[0] and "eval_sampled/stage_mean" in records[-1]
    assert records[0]["num_minibatches"] == 4 and records[0]["update_epochs"] == 4
    assert os.path.exists(os.path.join(run_dir, "checkpoint_3.msgpack"))


def test_resume_with_changed_training_flag_names_it(cli_run):
    _, run_dir, checkpoint_dir = cli_run
    result = run(TRAIN, "--resume", run_dir, "--lr", "0.5", "--no-wandb",
                 "--checkpoint-dir", checkpoint_dir)
    assert result.returncode == 2
    assert "lr: 0.0005 != 0.5" in result.stderr and "Traceback" not in result.stderr


def test_resume_of_a_finished_run_says_it_is_complete(cli_run, capsys):
    """Resuming takes --total-timesteps from the checkpoint: the run is already complete, which
    is said (exit 0, nothing compiled or written)."""
    _, run_dir, _ = cli_run
    before = sorted(os.listdir(run_dir))
    assert train_main(["--resume", run_dir, "--no-wandb"]) == 0
    out = capsys.readouterr().out
    assert f"run {run_dir} is complete: update 3 of 3 (96 env steps)" in out
    assert "larger --total-timesteps" in out and "compiled" not in out
    assert sorted(os.listdir(run_dir)) == before


def test_a_larger_budget_extends_a_finished_run_in_its_directory(cli_run, tmp_path, capsys):
    """A copy of the finished run outside ./checkpoints, resumed with --total-timesteps 160:
    it continues from update 3 to 5 in that directory (and nowhere else)."""
    _, run_dir, _ = cli_run
    moved = tmp_path / "elsewhere" / "cli"
    shutil.copytree(run_dir, moved)
    cwd = os.getcwd()
    os.chdir(tmp_path)  # where ./checkpoints would be
    try:
        code = train_main(["--resume", str(moved), "--no-wandb", "--total-timesteps", "160",
                           "--no-progress", "--no-compile-cache"])
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert code == 0
    assert "resuming at update 3/5" in out and "done: 5 updates" in out
    assert os.path.exists(moved / "checkpoint_5.msgpack")
    assert sorted(os.listdir(tmp_path)) == ["elsewhere"]  # no ./checkpoints/cli
    lines = (moved / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["update"] for line in lines] == [2, 3, 5]


def test_resume_refuses_a_run_name_of_another_directory(cli_run, tmp_path, capsys):
    _, run_dir, _ = cli_run
    code = train_main(["--resume", run_dir, "--no-wandb", "--checkpoint-dir", str(tmp_path),
                       "--run-name", "other"])
    err = capsys.readouterr().err
    assert code == 2 and f"--resume continues the run in {run_dir}" in err
    assert not os.listdir(tmp_path)


def test_a_new_run_never_writes_into_another_runs_directory(cli_run, capsys):
    """Reusing --run-name is refused before any work, suggesting --resume or another name;
    the existing run is untouched."""
    _, run_dir, checkpoint_dir = cli_run
    before = {name: os.path.getmtime(os.path.join(run_dir, name)) for name in os.listdir(run_dir)}
    code = train_main([*TINY, "--total-timesteps", "96", "--checkpoint-dir", checkpoint_dir,
                       "--run-name", "cli"])
    captured = capsys.readouterr()
    assert code == 2 and "compiled" not in captured.out
    assert f"{run_dir} already holds a run" in captured.err
    assert f"--resume {run_dir}" in captured.err and "another --run-name" in captured.err
    assert {name: os.path.getmtime(os.path.join(run_dir, name))
            for name in os.listdir(run_dir)} == before


def test_a_default_run_name_that_is_taken_gets_a_fresh_one(tmp_path):
    """Without --run-name a taken name (two runs started in the same second) is not refused:
    the run takes the next free suffix and says so."""
    for name in ("same", "same-2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / METRICS_FILE).write_text("{}\n")
    name, run_dir, note, lock = train_module.claim_run_directory(
        "same", str(tmp_path / "same"), resuming=False, name_given=False)
    lock.close()
    assert (name, run_dir) == ("same-3", str(tmp_path / "same-3"))
    assert note == f"{tmp_path / 'same'} holds another run: this run is same-3"
    assert os.listdir(run_dir) == [".lock"]  # created, empty but for the session's lock


def test_a_run_directory_that_a_live_session_holds_is_not_shared(tmp_path):
    """Two sessions started at once (a sweep's `&`) both find the default directory empty:
    the first holds its lock while it runs, so the second takes the next suffix; a given
    --run-name, or a resume, of the held directory is refused naming the holding process;
    the lock ends with the session."""
    def claim(name_given=False, resuming=False):
        return train_module.claim_run_directory("sweep", str(tmp_path / "sweep"),
                                                resuming=resuming, name_given=name_given)
    _, first_dir, note, first = claim()
    assert first_dir == str(tmp_path / "sweep") and note is None
    name, second_dir, note, second = claim()
    assert (name, second_dir) == ("sweep-2", str(tmp_path / "sweep-2"))
    assert note == f"{tmp_path / 'sweep'} holds another run: this run is sweep-2"
    for name_given, resuming in ((True, False), (False, True)):
        with pytest.raises(ConfigError, match=rf"{first_dir} is in use by another training "
                                              rf"session \(process {os.getpid()}\)"):
            claim(name_given=name_given, resuming=resuming)
    first.close()
    second.close()
    assert claim(name_given=True)[3].close() is None  # free again


@pytest.mark.parametrize("make", ["file", "missing parent"])
def test_a_checkpoint_dir_that_cannot_be_written_is_one_line(make, tmp_path, capsys):
    """Checked before any compile: a --checkpoint-dir under a regular file, or whose run
    directory cannot be created, is one error line, exit 2 (not a traceback, not a failure at
    the first save)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    target = blocker if make == "file" else blocker / "below"
    code = train_main([*TINY, "--total-timesteps", "96", "--checkpoint-dir", str(target),
                       "--run-name", "r"])
    captured = capsys.readouterr()
    assert code == 2 and "compiled" not in captured.out
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("error: run directory ") and "Traceback" not in captured.err


@pytest.mark.parametrize("make", ["file", "under a file"])
def test_a_compile_cache_dir_that_is_a_file_is_one_line_before_the_run_directory(make, tmp_path,
                                                                                 capsys):
    """--compile-cache-dir naming a file (or a path under one) is refused with one line, exit
    2, by the run options' validation: before the run directory is claimed (not a
    FileExistsError traceback that leaves an empty run directory behind)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cache = blocker if make == "file" else blocker / "below"
    runs = tmp_path / "runs"
    code = train_main([*TINY, "--checkpoint-dir", str(runs), "--run-name", "r",
                       "--compile-cache-dir", str(cache)])
    captured = capsys.readouterr()
    assert code == 2 and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"error: --compile-cache-dir {cache}: {blocker} is not a "
                                   "directory")
    assert not runs.exists()


def test_enable_compile_cache_refuses_a_file_with_its_own_error(tmp_path):
    """Every entry point's cache set-up (``enable_compile_cache``) says why a path cannot be the
    cache with ``CompileCacheError``, which the command lines print as one line."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for cache in (blocker, blocker / "below"):
        with pytest.raises(CompileCacheError, match=f"{blocker} is not a directory"):
            enable_compile_cache(str(cache))


def test_rounded_total_timesteps_and_stop_after_updates_are_said(tmp_path, capsys):
    """--total-timesteps 100 with 32 env steps per update: the run does 3 updates (96 steps),
    which is said; --stop-after-updates 1 ends with the command that continues the run."""
    code = train_main([*TINY, "--total-timesteps", "100", "--checkpoint-dir", str(tmp_path),
                       "--run-name", "r", "--stop-after-updates", "1", "--quiet",
                       "--no-compile-cache"])
    out = capsys.readouterr().out
    assert code == 0
    assert ("note: --total-timesteps 100 is not a multiple of the batch (32 env steps per "
            "update): the run does 3 updates = 96 env steps") in out
    assert f"stopped at update 1 of 3: continue with --resume {tmp_path / 'r'}" in out


def test_a_chunk_is_started_only_if_it_fits_the_time_budget():
    """--stop-after-minutes judges the next chunk by the last one's pace: 50 s in, the last
    chunk took 8 s for 2 updates, so another 2 are expected to end at 58 s and 1 at 54 s."""
    assert train_module.chunk_fits_budget(50.0, 8.0, 2, 2, 60.0)
    assert train_module.chunk_fits_budget(50.0, 8.0, 2, 2, 58.0)  # ends exactly at the budget
    assert not train_module.chunk_fits_budget(50.0, 8.0, 2, 2, 57.0)
    assert train_module.chunk_fits_budget(50.0, 8.0, 2, 1, 57.0)


def test_stop_after_minutes_saves_the_last_chunk_within_the_budget(tmp_path, capsys):
    """A budget shorter than one chunk: the first chunk always runs, it is saved, and the run
    stops there with the command that continues it; a budget that holds the whole run changes
    nothing (every update done, no stop said)."""
    common = [*TINY, "--total-timesteps", "128", "--updates-per-chunk", "1", "--quiet",
              "--no-compile-cache", "--checkpoint-dir", str(tmp_path)]
    code = train_main([*common, "--run-name", "short", "--stop-after-minutes", "1e-6"])
    out = capsys.readouterr().out
    assert code == 0
    assert ("stopped at update 1 of 4 (--stop-after-minutes 1e-06): continue with --resume "
            f"{tmp_path / 'short'}") in out
    assert load_checkpoint(str(tmp_path / "short"))["update"] == 1
    code = train_main([*common, "--run-name", "whole", "--stop-after-minutes", "60"])
    out = capsys.readouterr().out
    assert code == 0 and "stopped at update" not in out
    assert load_checkpoint(str(tmp_path / "whole"))["update"] == 4


@pytest.mark.parametrize("kind", ["missing", "corrupt", "empty_dir", "not_ours", "truncated",
                                  "pickle"])
def test_bad_checkpoint_is_a_clean_error(kind, tmp_path, capsys):
    path = tmp_path / "checkpoint_7.msgpack"
    if kind == "corrupt":
        path.write_bytes(b"\xc1 this is not msgpack")
    elif kind == "not_ours":
        path.write_bytes(msgpack.packb({"some": "dict"}))
    elif kind == "truncated":
        path.write_bytes(msgpack.packb({"format": "hackmatrix-purejaxrl-checkpoint",
                                        "arrays": {"x": b"0" * 100}})[:-20])
    elif kind == "pickle":
        path = tmp_path / "checkpoint_7.pkl"
        path.write_bytes(b"\x80\x05 a pickle")
    elif kind == "empty_dir":
        path = tmp_path
    code = train_main(["--resume", str(path), "--no-wandb"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    expected = {"missing": "checkpoint not found", "corrupt": "cannot read checkpoint",
                "empty_dir": "no checkpoint_<update>.msgpack", "not_ours": "is not a",
                "truncated": "cannot read checkpoint",
                "pickle": "convert_checkpoint.py --i-trust-this-file"}[kind]
    assert expected in err


@pytest.mark.slow  # extended suite (pytest -m slow)
def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous(tmp_path, capsys):
    """A run saved at updates 1 and 2 whose checkpoint_2 is cut short: loading its directory
    takes checkpoint_1 with a warning naming the damaged file, and --resume continues from it
    (the run then has update 2 to do again)."""
    common = ["--no-wandb", "--quiet", "--compile-cache-dir", str(tmp_path / "cache")]
    assert train_main([*TINY, *common, "--total-timesteps", "64", "--save-interval", "1",
                       "--checkpoint-dir", str(tmp_path), "--run-name", "r"]) == 0
    run_dir = tmp_path / "r"
    newest = run_dir / "checkpoint_2.msgpack"
    newest.write_bytes(newest.read_bytes()[:1000])
    warnings = []
    assert load_checkpoint(str(run_dir), warn=warnings.append)["update"] == 1
    assert len(warnings) == 1 and "checkpoint_2.msgpack" in warnings[0]
    capsys.readouterr()
    assert train_main(["--resume", str(run_dir), *common]) == 0
    captured = capsys.readouterr()
    assert "warning: cannot read checkpoint" in captured.err and "checkpoint_2" in captured.err
    assert f"loaded {run_dir / 'checkpoint_1.msgpack'} (update 1)" in captured.out
    assert "done: 2 updates" in captured.out
    assert load_checkpoint(str(run_dir), warn=warnings.append)["update"] == 2


def test_missing_checkpoint_exits_non_zero_without_traceback_as_a_script(tmp_path):
    result = run(TRAIN, "--resume", str(tmp_path / "nope.msgpack"), "--no-wandb")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "checkpoint not found" in result.stderr


def test_evaluate_compares_policies_on_same_seeds(cli_run, tmp_path):
    """The heuristic (always right) wins every toy episode in exactly 4 steps; the table has a
    row per policy. With --record-actions every row keeps each game's actions, as many as
    the game's length, and names its loop (the keys a replay needs)."""
    _, run_dir, _ = cli_run
    out = tmp_path / "eval.json"
    result = run(EVALUATE, "--checkpoint", run_dir, "--episodes", "8", "--json", str(out),
                 "--record-actions")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("policy "))
    table = lines[start:start + 5]
    assert "heuristic: per stage" in result.stdout  # the toy has stages: a report each
    # The toy's columns: its metrics' summaries; HackMatrix's R9/ep is not one of them.
    assert {"win_rate", "stage_mean", "return_mean", "length_mean"} <= set(table[0].split())
    assert "R9/ep" not in table[0].split()
    for name, row in zip(("checkpoint-greedy", "checkpoint-sampled", "random", "heuristic"),
                         table[1:]):
        assert row.split()[0] == name and len(row.split()) == len(table[0].split())
    results = json.loads(out.read_text())
    assert results["heuristic"]["win_rate"] == 1.0 and results["heuristic"]["length_mean"] == 4.0
    assert all(r["invalid_actions"] == 0 and r["episodes"] == 8 for r in results.values())
    assert results["heuristic"]["stages"][-1]["cleared"] == 1.0  # the win is on the last stage
    heuristic = results["heuristic"]["games"]["actions"]
    assert len(heuristic) == 8 and all(len(set(game)) == 1 and len(game) == 4
                                       for game in heuristic)
    for row in results.values():
        assert row["loop"] == "episodes"
        assert [len(game) for game in row["games"]["actions"]] == row["games"]["length"]
    # Every row records what made it: its boards (env, seed), the checkpoint and the command.
    record = results["random"]["evaluation"]
    assert (record["env"], record["episodes"]) == ("toy", 8) and record["checkpoint_update"] >= 1
    assert record["seed"] is not None and "--episodes 8" in record["command"]
    assert all(r["evaluation"] == record for r in results.values())


def test_evaluate_records_the_commit_it_launched_from(tmp_path, monkeypatch):
    """A commit made while an evaluation plays is not the code that played it: the JSON's
    ``evaluation.commit`` is the checkout's commit when the process started."""
    from purejaxrl import evaluation, provenance
    head = {"commit": "launch1"}
    summarize = evaluation.summarize_episodes

    def summarize_then_commit(*args, **kwargs):  # a commit lands while the games are summed up
        head["commit"] = "later22"
        return summarize(*args, **kwargs)

    monkeypatch.setattr(evaluation, "summarize_episodes", summarize_then_commit)
    monkeypatch.setattr(provenance, "git_commit", lambda: head["commit"])
    provenance.process_commit.cache_clear()
    out = tmp_path / "eval.json"
    try:
        assert evaluate_main(["--env", "CartPole-v1", "--episodes", "2", "--json",
                              str(out)]) == 0
    finally:
        provenance.process_commit.cache_clear()
    assert head["commit"] == "later22"  # the commit did land before the JSON was written
    assert json.loads(out.read_text())["random"]["evaluation"]["commit"] == "launch1"


def test_the_evaluation_table_shows_the_columns_each_env_asks_for():
    """The trainer's own columns (stage, return, length, truncation, unfinished) around those of
    the env's metrics: HackMatrix's R9/ep is HackMatrix's alone, a gymnax env adds none."""
    from envs import registry
    columns = {env_id: table_columns(registry.make(env_id)[0])
               for env_id in ("hackmatrix", "toy", "CartPole-v1")}
    assert list(columns["CartPole-v1"].values()) == ["stage_mean", "return_mean", "length_mean",
                                                     "truncation_rate", "unfinished"]
    assert columns["hackmatrix"]["undo_exploit_completions_per_episode"] == "R9/ep"
    assert "R9/ep" not in columns["toy"].values()
    for env_columns in columns.values():
        assert list(env_columns)[:4] == ["stage_mean", "return_mean", "length_mean",
                                         "truncation_rate"]
        assert list(env_columns)[-1] == "unfinished"
    assert {"win_rate", "death_rate", "invalid_actions"} <= set(columns["toy"])


def test_evaluate_reports_return_and_length_on_a_gymnax_env():
    """CartPole-v1 (no metrics, no stages, no heuristic): random and the return and length
    columns, no per-stage report; a heuristic asked for is refused."""
    result = run(EVALUATE, "--env", "CartPole-v1", "--episodes", "4")
    assert result.returncode == 0, result.stderr[-2000:]
    header, row = result.stdout.splitlines()[-2:]
    assert header.split() == ["policy", "return_mean", "length_mean", "truncation_rate",
                              "unfinished"]
    assert row.split()[0] == "random" and "per stage" not in result.stdout
    refused = run(EVALUATE, "--env", "CartPole-v1", "--policies", "heuristic")
    assert refused.returncode == 2 and "not available for env 'CartPole-v1'" in refused.stderr


def test_defaults_wandb_on_checkpoint_upload_off_and_persistent_compile_cache_on(capsys):
    """Checkpoints go to wandb only with --wandb-checkpoints (which needs wandb)."""
    options = run_options_from_args(build_parser().parse_args([]))
    assert options.wandb and not options.artifact and options.wandb_mode == "online"
    assert options.compile_cache_dir == DEFAULT_COMPILE_CACHE_DIR
    assert DEFAULT_COMPILE_CACHE_DIR.endswith(os.path.join(".cache", "hackmatrix-jax"))
    off = run_options_from_args(build_parser().parse_args(["--no-wandb", "--no-compile-cache"]))
    assert not off.wandb and not off.artifact and off.compile_cache_dir is None
    assert run_options_from_args(build_parser().parse_args(["--wandb-checkpoints"])).artifact
    assert train_main(["--wandb-checkpoints", "--no-wandb"]) == 2
    assert "--wandb-checkpoints uploads to wandb" in capsys.readouterr().err


def test_help_states_the_defaults_that_train_config_defines():
    """The help text's defaults come from TrainConfig (defined once), so they cannot drift."""
    helps = {a.dest: a.help for a in build_parser()._actions}
    defaults = TrainConfig()
    assert helps["lr"].endswith(f"default {defaults.lr}")
    assert helps["encoder"].endswith(f"default {defaults.encoder}")
    assert helps["normalize_rewards"].endswith("default on" if defaults.normalize_rewards
                                               else "default off")
    assert helps["num_minibatches"] == "default: auto-scaled"


@pytest.mark.slow  # extended suite: three seeds trained, resumed and evaluated, about 30 s
def test_num_seeds_run_resumes_from_its_directory_and_each_seed_evaluates(tmp_path, capsys):
    """--num-seeds 2: stop after 1 of 2 updates, `--resume <run dir>` continues both seeds;
    evaluate.py refuses the run directory (naming the seed directories) and takes a seed's."""
    common = [*TINY, "--total-timesteps", "64", "--checkpoint-dir", str(tmp_path),
              "--no-compile-cache", "--quiet"]
    assert train_main([*common, "--seed", "5", "--num-seeds", "2", "--run-name", "pair",
                       "--stop-after-updates", "1"]) == 0
    run_dir = tmp_path / "pair"
    assert sorted(os.listdir(run_dir)) == [".lock", "metrics.jsonl", "seed-5", "seed-6"]
    capsys.readouterr()
    assert train_main(["--resume", str(run_dir), "--no-wandb", "--checkpoint-dir",
                       str(tmp_path), "--no-compile-cache"]) == 0
    out = capsys.readouterr().out
    assert "resuming at update 1/2" in out and "seeds 5..6 vmapped" in out
    assert "seed 6 | update 2" in out
    assert os.path.exists(run_dir / "seed-6" / "checkpoint_2.msgpack")
    refused = run(EVALUATE, "--checkpoint", str(run_dir), "--episodes", "4")
    assert refused.returncode == 1 and "multi-seed run (seeds 5, 6)" in refused.stderr
    assert "Traceback" not in refused.stderr
    one_seed = run(EVALUATE, "--checkpoint", str(run_dir / "seed-6"), "--episodes", "4")
    assert one_seed.returncode == 0, one_seed.stderr[-2000:]


@pytest.mark.parametrize("make", ["missing directory", "directory", "under a file",
                                  "existing file"])
def test_evaluate_json_path_that_cannot_be_written_fails_before_any_work(make, tmp_path,
                                                                         capsys):
    """A --json path that cannot be written, or a file already there (an earlier result:
    replaced only with --overwrite), is refused in one line before anything is played."""
    blocker = tmp_path / "a-file"
    blocker.write_text("earlier results")
    path = {"missing directory": tmp_path / "nope" / "r.json", "directory": tmp_path,
            "under a file": blocker / "r.json", "existing file": blocker}[make]
    code = evaluate_main(["--policies", "random", "--episodes", "1", "--json", str(path)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith(f"error: --json {path}: ")
    assert blocker.read_text() == "earlier results"
    if make == "existing file":
        assert "already exists; pass --overwrite" in captured.err


@pytest.mark.parametrize("flags, message", [
    (["--episodes", "0"], "error: --episodes must be >= 1, got 0"),
    (["--max-episode-steps", "0"], "error: --max-episode-steps must be >= 1, got 0"),
    (["--max-steps", "5"], "unrecognized arguments: --max-steps 5"),
    (["--start-programs", "-1"], "start_programs must be in 0..23, got -1"),
    (["--start-programs-pool", "reset"], "start_programs_pool needs start_programs > 0"),
    (["--acquire-macro"], "unrecognized arguments: --acquire-macro"),
    (["--record-actions"], "error: --record-actions keeps the games' actions in the --json "
                           "output: it needs --json"),
])
def test_evaluate_refuses_bad_counts_before_any_work(flags, message, capsys):
    """One line, exit 2, nothing on stdout. --max-episode-steps is the env's time limit and
    bounds every evaluation loop, so the old separate cap --max-steps is gone."""
    try:
        code = evaluate_main(["--policies", "random", *flags])
    except SystemExit as exit_:  # argparse
        code = exit_.code
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and message in captured.err
