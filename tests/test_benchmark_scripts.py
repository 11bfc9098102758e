"""scripts/benchmark.py and scripts/check_runtime.py run end to end at tiny sizes (issue 7).
Structure only (JSON keys, exit codes, PASS/FAIL lines), never speed. Every script runs in its
own subprocess, as a user runs it: the --devices path needs XLA_FLAGS before jax is imported."""

import json
import os
import subprocess
import sys

import pytest

# Extended suite (`pytest -m slow`): each benchmark script runs end to end, about 125 s.
pytestmark = pytest.mark.slow

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARK = os.path.join(REPO_ROOT, "scripts", "benchmark.py")
CHECK_RUNTIME = os.path.join(REPO_ROOT, "scripts", "check_runtime.py")
# The toy env and a narrow network keep each training compile to a few seconds.
TINY_TRAIN = ["--env", "toy", "--hidden-width", "16", "--recurrent-core", "none", "--num-steps",
              "4", "--repeats", "1", "--updates-per-chunk", "1"]
# The trainer's default network (the GRU, its 8-step windows a whole rollout here).
TINY_CHECK = ["--env", "toy", "--hidden-width", "16", "--num-steps", "8"]

MEASUREMENT_KEYS = {"benchmark", "num_envs", "num_steps", "repeats", "trace_lower_s", "compile_s",
                    "sps_median", "sps_min", "sps_max", "peak_host_rss_mb",
                    "peak_device_memory_mb", "device",
                    "device_count", "backend", "jax", "commit", "label"}
TRAIN_KEYS = MEASUREMENT_KEYS | {"env", "num_devices", "global_batch", "num_minibatches",
                                 "update_epochs", "updates_per_chunk", "updates_done",
                                 "update_s_median", "update_s_min", "update_s_max", "config",
                                 "xla_memory_mb", "program_sha256"}


def run(script, *args, extra_env=None):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    env.update(extra_env or {})
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=env, timeout=300)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    """Label 'first': env + train rows in this process; label 'second': train rows measured
    through the --devices subprocess path (1 forced device, so the configurations match)."""
    path = str(tmp_path_factory.mktemp("bench") / "results.jsonl")
    first = run(BENCHMARK, "--mode", "both", "--num-envs", "2", *TINY_TRAIN,
                "--label", "first", "--ledger", path)
    assert first.returncode == 0, first.stderr[-3000:]
    second = run(BENCHMARK, "--mode", "train", "--num-envs", "2", *TINY_TRAIN, "--devices", "1",
                 "--label", "second", "--ledger", path)
    assert second.returncode == 0, second.stderr[-3000:]
    with open(path) as f:
        rows = [json.loads(line) for line in f]
    return path, rows, first.stdout + second.stdout


def test_benchmark_records_env_and_train_rows_with_every_field(ledger):
    """--mode both writes one env and one train row; --devices adds a train row measured in a
    subprocess; every row carries the fields the README documents."""
    _, rows, _ = ledger
    assert [(r["benchmark"], r["label"]) for r in rows] == [
        ("env", "first"), ("train", "first"), ("train", "second")]
    for row in rows:
        assert MEASUREMENT_KEYS <= set(row), MEASUREMENT_KEYS - set(row)
        assert row["num_envs"] == 2 and row["num_steps"] == 4 and row["repeats"] == 1
        assert row["device_count"] == 1 and row["backend"] == "cpu"
        assert row["sps_min"] <= row["sps_median"] <= row["sps_max"]
    for row in rows[1:]:
        assert TRAIN_KEYS <= set(row), TRAIN_KEYS - set(row)
        # one warm-up chunk + one timed chunk of one update each: update 2 completed
        assert row["updates_done"] == 2
        assert row["global_batch"] == 8 and row["config"]["env"] == "toy"
        assert row["invalid_actions"] == 0 and row["masked_actions_sampled"] == 0


def test_benchmark_prints_a_table_row_per_configuration(ledger):
    _, _, stdout = ledger
    table_rows = [line.split() for line in stdout.splitlines()
                  if line.split()[:1] in (["env"], ["train"])]
    assert [cells[:4] for cells in table_rows] == [
        ["env", "hackmatrix", "2", "4"], ["train", "toy", "2", "4"], ["train", "toy", "2", "4"]]


def test_train_benchmark_of_vmapped_seeds_counts_every_seed(tmp_path):
    """--num-seeds 2: one program trains both seeds; the row says so, counts the parameters of
    one seed and the env steps of both (steps/s is the program's)."""
    path = str(tmp_path / "results.jsonl")
    single = run(BENCHMARK, "--mode", "train", "--num-envs", "2", *TINY_TRAIN, "--ledger", path)
    seeds = run(BENCHMARK, "--mode", "train", "--num-envs", "2", *TINY_TRAIN, "--num-seeds", "2",
                "--ledger", path)
    assert single.returncode == 0 and seeds.returncode == 0, seeds.stderr[-3000:]
    with open(path) as f:
        one, two = [json.loads(line) for line in f]
    assert (one["num_seeds"], two["num_seeds"]) == (1, 2)
    assert two["updates_done"] == 2 and two["parameters"] == one["parameters"]
    assert two["config"]["num_seeds"] == 2 and "/2seeds" in seeds.stdout


def test_compile_only_reports_the_memory_xla_assigns_and_runs_nothing(tmp_path):
    """--compile-only: one row per env count with XLA's memory per device and no timing
    (nothing ran: no steps/s, no update count); the temporaries grow with the batch (the
    rollout is their bulk); self-imitation's replay adds to the arguments. Refused outside
    train mode before any work."""
    path = str(tmp_path / "results.jsonl")
    done = run(BENCHMARK, "--mode", "train", "--num-envs", "256", "4096", *TINY_TRAIN,
               "--compile-only", "--ledger", path)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(path) as f:
        small, large = [json.loads(line) for line in f]
    for row in (small, large):
        assert row["benchmark"] == "train-compile" and row["compile_s"] > 0
        assert "sps_median" not in row and "updates_done" not in row
        assert set(row["xla_memory_mb"]) == {"arguments", "outputs", "aliased", "temporaries"}
    assert large["xla_memory_mb"]["temporaries"] > small["xla_memory_mb"]["temporaries"] > 0
    # Another batch shape is another program.
    assert small["program_sha256"] != large["program_sha256"]
    assert done.stdout.count("compiled only: XLA needs") == 2
    # Self-imitation's replay is part of the runner state: more arguments, recorded weight.
    imitating = run(BENCHMARK, "--mode", "train", "--num-envs", "256", *TINY_TRAIN,
                    "--compile-only", "--sil-coef", "0.02", "--ledger", path)
    assert imitating.returncode == 0, imitating.stderr[-3000:]
    with open(path) as f:
        replayed = [json.loads(line) for line in f][-1]
    assert replayed["sil_coef"] == replayed["config"]["sil_coef"] == 0.02
    assert small["sil_coef"] == 0.0
    assert replayed["xla_memory_mb"]["arguments"] > small["xla_memory_mb"]["arguments"]
    assert replayed["program_sha256"] != small["program_sha256"]
    refused = run(BENCHMARK, "--mode", "env", "--num-envs", "2", "--compile-only",
                  "--ledger", path)
    assert refused.returncode == 2 and "--compile-only needs --mode train" in refused.stderr


def test_compare_prints_ratios_for_shared_configurations(ledger):
    """--compare A B matches rows by label; only the train configuration is on both sides. The
    same configuration lowered in this process and in the --devices subprocess is the same
    program, and --compare says so."""
    path, rows, _ = ledger
    result = run(BENCHMARK, "--ledger", path, "--compare", "first", "second")
    assert result.returncode == 0, result.stderr
    data = [line.split() for line in result.stdout.splitlines() if line.startswith("train")]
    assert len(data) == 1
    sps_ratio, compile_ratio, program = float(data[0][-5]), float(data[0][-2]), data[0][-1]
    first, second = rows[1], rows[2]
    assert sps_ratio == pytest.approx(second["sps_median"] / first["sps_median"], abs=0.01)
    total = lambda r: r["trace_lower_s"] + r["compile_s"]  # noqa: E731
    assert compile_ratio == pytest.approx(total(second) / total(first), abs=0.01)
    assert first["program_sha256"] == second["program_sha256"] and program == "same"
    assert "1 configuration(s) measured on one side only" in result.stdout


def test_compare_selects_by_commit_prefix_and_rejects_unknown_selectors(ledger):
    path, rows, _ = ledger
    commit = rows[0]["commit"]
    same = run(BENCHMARK, "--ledger", path, "--compare", commit[:4], "first")
    assert same.returncode == 0, same.stderr
    missing = run(BENCHMARK, "--ledger", path, "--compare", "first", "no-such-label")
    assert missing.returncode != 0
    assert "no-such-label" in missing.stderr


def check_lines(stdout):
    return [line for line in stdout.splitlines() if line.startswith(("PASS ", "FAIL "))]


def test_check_runtime_passes_every_check_on_this_machine(tmp_path):
    """One line per check, all PASS, update 1 of the real trainer completes, exit 0."""
    result = run(CHECK_RUNTIME, *TINY_CHECK, "--expect-devices", "1",
                 "--compile-cache-dir", str(tmp_path / "cache"))
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    lines = check_lines(result.stdout)
    assert [line.split()[1] for line in lines] == [
        "distributed", "devices", "mlp_forward_backward", "conv_forward_backward", "all_reduce",
        "training_update", "compile_cache"]
    assert all(line.startswith("PASS ") for line in lines)
    assert "all 7 checks passed" in result.stdout


def test_check_runtime_fails_loudly_when_devices_are_missing(tmp_path):
    """--expect-devices 99 fails with the counts in the message and a non-zero exit; the other
    checks still run (here on 2 forced host devices, so the all-reduce crosses devices)."""
    result = run(CHECK_RUNTIME, *TINY_CHECK, "--expect-devices", "99", "--force-host-devices",
                 "2", "--compile-cache-dir", str(tmp_path / "cache"))
    assert result.returncode != 0
    lines = check_lines(result.stdout)
    assert lines[0].startswith("PASS distributed") and "single process" in lines[0]
    assert lines[1].startswith("FAIL devices: expected at least 99 devices but jax sees only 2")
    assert "PASS all_reduce" in result.stdout and "psum over 2 device(s) = 3" in result.stdout
    assert "PASS training_update" in result.stdout and "on 2 device(s)" in result.stdout
    assert "1 of 7 checks FAILED" in result.stdout


def test_a_configuration_that_fails_keeps_the_rows_measured_before_it(tmp_path):
    """Each row reaches the ledger when it is measured: a later configuration that fails (here
    a batch --num-minibatches does not divide; on a GPU, one that runs out of memory or time)
    loses only itself."""
    path = str(tmp_path / "results.jsonl")
    result = run(BENCHMARK, "--mode", "train", "--num-envs", "2", "3", *TINY_TRAIN,
                 "--num-minibatches", "8", "--ledger", path)
    assert result.returncode == 2 and "must divide" in result.stderr
    with open(path) as f:
        rows = [json.loads(line) for line in f]
    assert [(row["benchmark"], row["num_envs"]) for row in rows] == [("train", 2)]
