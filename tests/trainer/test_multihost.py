"""Multi-process training (issue 8) on this machine: two local processes with two forced CPU
devices each, joined by ``jax.distributed`` over loopback (CPU collectives: gloo), stand in for
two hosts of a TPU slice.

Rules checked: a few updates complete; parameters are identical on all 4 devices of both
processes; live progress hears of each update once, on process 0; the run equals a single
process with 4 devices on the same global batch (same env keys exactly, parameters within float
tolerance); only process 0 writes files (process 1 runs in an empty working directory that must
stay empty); env steps are counted once; a checkpoint of the 2-process run resumes in a
2-process run (process 1 cannot read the file: process 0 broadcasts it) and continues like the
single-process run; resuming it with another process count fails with a message naming the
counts. Every launch has a time limit and kills its processes on failure.

Each process reports through its own file (``process<rank>.json`` in a report directory outside
the working directories): its exit status and what Python printed, captured apart from what the
C++ runtime writes to the same stdout (gloo's "connected to N peer ranks" lines, which arrive in
pieces anywhere in the stream). No assertion parses the processes' raw stdout.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import pytest

# Extended suite (`pytest -m slow`): two processes compile and train on one global mesh,
# about 95 s.
pytestmark = pytest.mark.slow

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN_SCRIPT = os.path.join(REPO_ROOT, "scripts", "train_purejaxrl.py")
LAUNCH_TIMEOUT_S = 300

# 8 envs x 8 steps over 4 devices: 2 envs per device, 2 minibatches, 2 epochs.
CONFIG_FLAGS = ["--env", "toy", "--num-envs", "8", "--num-steps", "8", "--num-minibatches", "2",
                "--update-epochs", "2", "--total-timesteps", "640", "--max-episode-steps", "5",
                "--hidden-width", "16", "--hidden-depth", "1", "--recurrent-core", "none",
                "--lr", "0.01"]

# Phase A drives train() directly so each process can report its own parameter shards.
# argv: the report directory, then the trainer's arguments.
DRIVER = textwrap.dedent("""
    import dataclasses, hashlib, json, os, sys
    report_dir = sys.argv[1]
    sys.argv = [sys.argv[0]] + sys.argv[2:]
    import jax, numpy as np
    from purejaxrl import distributed
    from purejaxrl.cli.train import build_parser, config_from_args, run_options_from_args

    args = build_parser().parse_args(sys.argv[1:])
    distributed.initialize(args.distributed, args.coordinator_address, args.num_processes,
                           args.process_id)
    from purejaxrl.train import train
    from purejaxrl.logger import Progress
    ticks, tick = [], Progress.tick  # live progress: which process hears of which update
    Progress.tick = lambda self, update, loss=None: (ticks.append(int(update)),
                                                     tick(self, update, loss))
    config = config_from_args(args, None, jax.device_count(), say=lambda *a, **k: None)
    options = dataclasses.replace(run_options_from_args(args), quiet=False)  # progress on
    result = train(config, options, stop_after_updates=args.stop_after_updates)
    # sha256 of every local copy of every parameter leaf: equal digests = bit-identical.
    local_shards = [[hashlib.sha256(np.asarray(s.data).tobytes()).hexdigest()
                     for s in leaf.addressable_shards]
                    for leaf in jax.tree.leaves(result.runner_state.params)]
    report = os.path.join(report_dir, f"process{jax.process_index()}.json")
    with open(report, "w") as handle:
        json.dump({
            "process": jax.process_index(), "processes": jax.process_count(),
            "devices": jax.device_count(), "local_devices": jax.local_device_count(),
            "updates_done": result.updates_done, "env_steps": result.env_steps, "ticks": ticks,
            "local_shards": local_shards,
            "env_rows_here": sum(s.data.shape[0] for s in
                                 result.runner_state.env_keys.addressable_shards),
        }, handle)
""")

# Runs a script (argv: the report directory, the script, its arguments) as ``python script``
# would, and writes {"code", "stdout"} to <report dir>/process<--process-id>.json: the stdout
# is what Python printed (sys.stdout), captured apart from the C++ runtime's writes to fd 1.
CAPTURED = textwrap.dedent("""
    import contextlib, io, json, os, runpy, sys
    report_dir, script = sys.argv[1], sys.argv[2]
    sys.argv = sys.argv[2:]
    rank = sys.argv[sys.argv.index("--process-id") + 1] if "--process-id" in sys.argv else "0"
    printed = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(printed):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (stop.code is not None)
    with open(os.path.join(report_dir, f"process{rank}.json"), "w") as handle:
        json.dump({"code": int(code), "stdout": printed.getvalue()}, handle)
    sys.exit(code)
""")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(devices: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=REPO_ROOT,
               XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    return env


def _launch(commands, cwds, devices):
    """Start the processes together, wait for all (bounded), kill all if any hangs. Output goes
    to temporary files, not pipes: a process blocked on a full pipe would stall the others in
    their collectives."""
    logs = [(tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")) for _ in commands]
    procs = [subprocess.Popen(cmd, cwd=cwd, env=_env(devices), stdout=out, stderr=err,
                              text=True)
             for cmd, cwd, (out, err) in zip(commands, cwds, logs)]
    deadline = time.monotonic() + LAUNCH_TIMEOUT_S
    try:
        for proc in procs:
            proc.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    results = []
    for proc, (out, err) in zip(procs, logs):
        out.seek(0)
        err.seek(0)
        results.append((proc.returncode, out.read(), err.read()))
        out.close()
        err.close()
    return results


def _two_processes(argv_prefix, extra, cwds):
    return _two_process_launch(argv_prefix + CONFIG_FLAGS + extra, cwds)


def _two_process_launch(argv, cwds):
    port = _free_port()
    commands = [argv + [
        "--coordinator-address", f"127.0.0.1:{port}", "--num-processes", "2",
        "--process-id", str(rank)] for rank in range(2)]
    return _launch(commands, cwds, devices=2)


def _report_dir(root, name):
    directory = root / name
    directory.mkdir()
    return directory


def _read_reports(directory, processes=2):
    """The per-process report files, process 0 first."""
    reports = []
    for rank in range(processes):
        path = directory / f"process{rank}.json"
        assert path.is_file(), f"process {rank} wrote no report ({path.name})"
        with open(path) as handle:
            reports.append(json.load(handle))
    return reports


def _load(path):
    from purejaxrl.checkpoint import load_checkpoint
    return load_checkpoint(str(path))


def _leaves(tree):
    import jax
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _files_under(directory):
    return sorted(os.path.relpath(os.path.join(root, name), directory)
                  for root, _, names in os.walk(directory) for name in names)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, compile_cache_dir):
    root = tmp_path_factory.mktemp("multihost")
    host0, host1, single = (root / "host0", root / "host1", root / "single")
    for directory in (host0, host1, single):
        directory.mkdir()
    common = ["--run-name", "mh", "--checkpoint-dir", "ckpt", "--save-interval", "1",
              "--keep-checkpoints", "5", "--updates-per-chunk", "1", "--no-wandb", "--quiet",
              "--compile-cache-dir", compile_cache_dir]

    two_reports, resumed_reports = _report_dir(root, "two"), _report_dir(root, "resumed")
    two = _two_processes([sys.executable, "-c", DRIVER, str(two_reports)],
                         common + ["--stop-after-updates", "2"], [host0, host1])
    host1_files_after_training = _files_under(host1)
    one = _launch([[sys.executable, TRAIN_SCRIPT] + CONFIG_FLAGS + common
                   + ["--stop-after-updates", "3"]], [single], devices=4)[0]
    resumed = _two_processes([sys.executable, "-c", CAPTURED, str(resumed_reports), TRAIN_SCRIPT],
                             common + ["--resume", "ckpt/mh", "--stop-after-updates", "1"],
                             [host0, host1])
    wrong_count = _launch([[sys.executable, TRAIN_SCRIPT, "--resume",
                            str(host0 / "ckpt" / "mh"), "--no-wandb", "--no-compile-cache"]],
                          [single], devices=4)[0]
    return dict(two=two, one=one, resumed=resumed, wrong_count=wrong_count,
                two_reports=two_reports, resumed_reports=resumed_reports,
                host0=host0, host1=host1, single=single,
                host1_files_after_training=host1_files_after_training)


def _reports(runs, name="two"):
    for code, out, err in runs[name]:
        assert code == 0, err[-4000:]
    return _read_reports(runs[f"{name}_reports"])


def test_two_processes_train_on_the_global_mesh(runs):
    reports = _reports(runs)
    assert [r["process"] for r in reports] == [0, 1]
    for report in reports:
        assert (report["processes"], report["devices"], report["local_devices"]) == (2, 4, 2)
        assert report["updates_done"] == 2
        # env steps are global: 2 updates x 8 envs x 8 steps, counted once.
        assert report["env_steps"] == 2 * 64
        # Each process steps only its own half of the envs.
        assert report["env_rows_here"] == 4


def test_live_progress_ticks_once_per_update_on_process_zero(runs):
    """One host callback per update for the whole run, from a device of process 0."""
    reports = _reports(runs)
    assert reports[0]["ticks"] == [1, 2] and reports[1]["ticks"] == []


def test_parameters_identical_on_all_devices_of_both_processes(runs):
    reports = _reports(runs)
    leaves = len(reports[0]["local_shards"])
    assert leaves > 0
    for leaf in range(leaves):
        digests = [d for report in reports for d in report["local_shards"][leaf]]
        assert len(digests) == 4 and len(set(digests)) == 1, f"leaf {leaf} differs: {digests}"


def test_only_process_zero_writes_files(runs):
    _reports(runs)
    assert runs["host1_files_after_training"] == []
    assert _files_under(runs["host1"]) == []  # also after the resumed run
    written = _files_under(runs["host0"])
    assert {"ckpt/mh/checkpoint_1.msgpack", "ckpt/mh/checkpoint_2.msgpack",
            "ckpt/mh/checkpoint_3.msgpack",
            "ckpt/mh/metrics.jsonl"} <= set(written)


def test_metrics_are_global_and_logged_once(runs):
    with open(runs["host0"] / "ckpt" / "mh" / "metrics.jsonl") as handle:
        records = [json.loads(line) for line in handle]
    assert [r["update"] for r in records] == [1, 2, 3]
    assert [r["env_steps"] for r in records] == [64, 128, 192]
    assert all(r["num_processes"] == 2 and r["num_devices"] == 4 for r in records)
    assert all(r["actions/invalid"] == 0 and r["actions/masked_sampled"] == 0 for r in records)


def test_checkpoint_holds_every_process_envs_and_matches_one_process(runs):
    code, _, err = runs["one"]
    assert code == 0, err[-4000:]
    two = _load(runs["host0"] / "ckpt" / "mh" / "checkpoint_2.msgpack")
    one = _load(runs["single"] / "ckpt" / "mh" / "checkpoint_2.msgpack")
    assert two["num_processes"] == 2 and one["num_processes"] == 1
    keys = np.asarray(two["runner_state"].env_keys)
    assert keys.shape[0] == 8 and len({row.tobytes() for row in keys}) == 8  # no duplicates
    np.testing.assert_array_equal(keys, np.asarray(one["runner_state"].env_keys))
    for a, b in zip(_leaves(two["runner_state"].params), _leaves(one["runner_state"].params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_two_process_checkpoint_resumes_in_two_processes(runs):
    first, second = _reports(runs, "resumed")
    assert first["code"] == second["code"] == 0
    assert any(line.startswith("done: 3 updates") for line in first["stdout"].splitlines())
    assert second["stdout"] == ""  # process 1 prints nothing
    resumed = _load(runs["host0"] / "ckpt" / "mh" / "checkpoint_3.msgpack")
    one = _load(runs["single"] / "ckpt" / "mh" / "checkpoint_3.msgpack")
    assert resumed["update"] == 3 and resumed["env_steps"] == 192
    np.testing.assert_array_equal(np.asarray(resumed["runner_state"].env_keys),
                                  np.asarray(one["runner_state"].env_keys))
    for a, b in zip(_leaves(resumed["runner_state"].params), _leaves(one["runner_state"].params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_resume_with_another_process_count_fails_clearly(runs):
    code, _, err = runs["wrong_count"]
    assert code == 2
    assert "2-process run" in err and "1 process" in err
    assert "Traceback" not in err


def test_preflight_runs_across_two_processes(tmp_path):
    """check_runtime.py on both processes at once: the all-reduce and the training update
    cross processes, and --expect-devices counts the devices of both."""
    script = os.path.join(REPO_ROOT, "scripts", "check_runtime.py")
    reports = _report_dir(tmp_path, "reports")
    results = _two_process_launch(
        [sys.executable, "-c", CAPTURED, str(reports), script, "--env", "toy",
         "--expect-devices", "4", "--compile-cache-dir", str(tmp_path / "cache")],
        [tmp_path, tmp_path])
    for rank, ((code, out, err), report) in enumerate(zip(results, _read_reports(reports))):
        assert code == report["code"] == 0, out[-3000:] + err[-3000:]
        printed = report["stdout"]
        assert "PASS distributed" in printed and f"process {rank} of 2" in printed
        assert "PASS all_reduce" in printed and "psum over 4 device(s) = 10" in printed
        assert "all 7 checks passed" in printed


def test_a_write_only_process_zero_fails_stops_both_processes(runs, tmp_path, compile_cache_dir):
    """Process 0 alone writes, so it alone can fail a checkpoint write mid-run (here a
    directory stands where update 4's checkpoint goes). Both processes exit with a one-line
    error, process 1 naming process 0, instead of process 1 waiting in the next collective
    for a process that is gone."""
    _reports(runs, "resumed")  # the run resumed to update 3 that this test copies
    import shutil
    host0, host1 = tmp_path / "host0", tmp_path / "host1"
    host1.mkdir()
    shutil.copytree(runs["host0"] / "ckpt" / "mh", host0 / "ckpt" / "blocked")
    (host0 / "ckpt" / "blocked" / "checkpoint_4.msgpack").mkdir()
    reports = _report_dir(tmp_path, "reports")
    started = time.monotonic()
    results = _two_process_launch(
        [sys.executable, "-c", CAPTURED, str(reports), TRAIN_SCRIPT] + CONFIG_FLAGS
        + ["--resume", "ckpt/blocked", "--checkpoint-dir", "ckpt", "--save-interval", "1",
           "--updates-per-chunk", "1", "--stop-after-updates", "2", "--no-wandb", "--quiet",
           "--compile-cache-dir", compile_cache_dir],
        [host0, host1])
    assert time.monotonic() - started < LAUNCH_TIMEOUT_S - 30  # nobody waited to be killed
    (code0, _, err0), (code1, _, err1) = results
    assert code0 == 1 and "cannot write checkpoint" in err0 and "checkpoint_4" in err0, err0[-3000:]
    assert code1 == 1, err1[-3000:]
    assert "process 1 stops at update 4: another process failed" in err1
    assert "Traceback" not in err0 + err1
    assert _files_under(host1) == []
