"""The command-line scripts (issues P5, P6, P7): bad values fail with a clear message before
any compile; missing or corrupt checkpoints fail cleanly (no traceback, non-zero exit); a tiny
toy run writes metrics and checkpoints; resume refuses a different config and names the field;
evaluate.py prints a comparison table of policies on the same seeds."""

import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(REPO_ROOT, "scripts", "train_purejaxrl.py")
EVALUATE = os.path.join(REPO_ROOT, "scripts", "evaluate.py")
from purejaxrl.cli.train import main as train_main  # noqa: E402

TINY = ["--env", "toy", "--num-envs", "4", "--num-steps", "8", "--hidden-width", "16",
        "--hidden-depth", "1", "--no-wandb", "--max-episode-steps", "6"]


def run(script, *args, timeout=300, **extra_env):
    env = dict(os.environ, JAX_PLATFORMS="cpu", **extra_env)
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=REPO_ROOT)


@pytest.mark.parametrize("args, message", [
    (["--num-envs", "0"], "--num-envs must be a positive integer"),
    (["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "3"],
     "--num-minibatches 3 must divide"),
    (["--gamma", "1.5"], "--gamma must be in [0, 1]"),
    (["--num-envs", "8", "--num-devices", "3"], "cannot be split evenly over 3 devices"),
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
])
def test_bad_values_exit_before_any_compile(args, message, tmp_path, capsys):
    """In-process ``main`` (the same code path as the script, without a slow subprocess)."""
    code = train_main([*TINY, "--checkpoint-dir", str(tmp_path), *args])
    captured = capsys.readouterr()
    assert code == 2
    assert message in captured.err and "Traceback" not in captured.err
    assert "compiled" not in captured.out
    assert not os.listdir(tmp_path)  # no run directory was created


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
    assert os.path.exists(os.path.join(run_dir, "checkpoint_3.pkl"))


def test_resume_with_changed_training_flag_names_it(cli_run):
    _, run_dir, checkpoint_dir = cli_run
    result = run(TRAIN, "--resume", run_dir, "--lr", "0.5", "--no-wandb",
                 "--checkpoint-dir", checkpoint_dir)
    assert result.returncode == 2
    assert "lr: 0.0005 != 0.5" in result.stderr and "Traceback" not in result.stderr


def test_resume_of_finished_run_continues_to_original_total(cli_run):
    """Resuming takes --total-timesteps from the checkpoint: the run is already complete."""
    _, run_dir, checkpoint_dir = cli_run
    result = run(TRAIN, "--resume", run_dir, "--no-wandb", "--checkpoint-dir", checkpoint_dir,
                 "--no-compile-cache")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "resuming at update 3/3" in result.stdout and "done: 3 updates" in result.stdout


@pytest.mark.parametrize("kind", ["missing", "corrupt", "empty_dir", "not_ours"])
def test_bad_checkpoint_is_a_clean_error(kind, tmp_path, capsys):
    path = tmp_path / "checkpoint_7.pkl"
    if kind == "corrupt":
        path.write_bytes(b"\x80\x04this is not a pickle")
    elif kind == "not_ours":
        import pickle
        path.write_bytes(pickle.dumps({"some": "dict"}))
    elif kind == "empty_dir":
        path = tmp_path
    code = train_main(["--resume", str(path), "--no-wandb"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("error: ") and "Traceback" not in err
    expected = {"missing": "checkpoint not found", "corrupt": "cannot read checkpoint",
                "empty_dir": "no checkpoint_<update>.pkl", "not_ours": "is not a"}[kind]
    assert expected in err


def test_missing_checkpoint_exits_non_zero_without_traceback_as_a_script(tmp_path):
    result = run(TRAIN, "--resume", str(tmp_path / "nope.pkl"), "--no-wandb")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "checkpoint not found" in result.stderr


def test_evaluate_compares_policies_on_same_seeds(cli_run, tmp_path):
    """The heuristic (always right) wins every toy episode in exactly 4 steps; the table has a
    row per policy."""
    _, run_dir, _ = cli_run
    out = tmp_path / "eval.json"
    result = run(EVALUATE, "--checkpoint", run_dir, "--episodes", "8", "--json", str(out))
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


def test_defaults_wandb_on_and_persistent_compile_cache_on():
    from purejaxrl.config import DEFAULT_COMPILE_CACHE_DIR
    from purejaxrl.cli.train import build_parser, run_options_from_args
    options = run_options_from_args(build_parser().parse_args([]))
    assert options.wandb and options.artifact and options.wandb_mode == "online"
    assert options.compile_cache_dir == DEFAULT_COMPILE_CACHE_DIR
    assert DEFAULT_COMPILE_CACHE_DIR.endswith(os.path.join(".cache", "hackmatrix-jax"))
    off = run_options_from_args(build_parser().parse_args(["--no-wandb", "--no-compile-cache"]))
    assert not off.wandb and not off.artifact and off.compile_cache_dir is None


def test_help_states_the_defaults_that_train_config_defines():
    """The help text's defaults come from TrainConfig (defined once), so they cannot drift."""
    from purejaxrl.config import TrainConfig
    from purejaxrl.cli.train import build_parser
    helps = {a.dest: a.help for a in build_parser()._actions}
    defaults = TrainConfig()
    assert helps["lr"].endswith(f"default {defaults.lr}")
    assert helps["encoder"].endswith(f"default {defaults.encoder}")
    assert helps["normalize_rewards"].endswith("default on" if defaults.normalize_rewards
                                               else "default off")
    assert helps["num_minibatches"] == "default: auto-scaled"


def test_num_seeds_run_resumes_from_its_directory_and_each_seed_evaluates(tmp_path, capsys):
    """--num-seeds 2: stop after 1 of 2 updates, `--resume <run dir>` continues both seeds;
    evaluate.py refuses the run directory (naming the seed directories) and takes a seed's."""
    common = [*TINY, "--total-timesteps", "64", "--checkpoint-dir", str(tmp_path),
              "--no-compile-cache", "--quiet"]
    assert train_main([*common, "--seed", "5", "--num-seeds", "2", "--run-name", "pair",
                       "--stop-after-updates", "1"]) == 0
    run_dir = tmp_path / "pair"
    assert sorted(os.listdir(run_dir)) == ["metrics.jsonl", "seed-5", "seed-6"]
    capsys.readouterr()
    assert train_main(["--resume", str(run_dir), "--no-wandb", "--checkpoint-dir",
                       str(tmp_path), "--no-compile-cache"]) == 0
    out = capsys.readouterr().out
    assert "resuming at update 1/2" in out and "seeds 5..6 vmapped" in out
    assert "seed 6 | update 2" in out
    assert os.path.exists(run_dir / "seed-6" / "checkpoint_2.pkl")
    refused = run(EVALUATE, "--checkpoint", str(run_dir), "--episodes", "4")
    assert refused.returncode == 1 and "multi-seed run (seeds 5, 6)" in refused.stderr
    assert "Traceback" not in refused.stderr
    one_seed = run(EVALUATE, "--checkpoint", str(run_dir / "seed-6"), "--episodes", "4")
    assert one_seed.returncode == 0, one_seed.stderr[-2000:]
