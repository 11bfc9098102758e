"""A training run a user can rely on (issue 16).

Rules checked:
* Ctrl-C in a real terminal on ``train_purejaxrl.py 2>&1 | tee log`` (tee dies with the same
  Ctrl-C, so the trainer's next write goes to a closed pipe) saves a checkpoint at the end of
  the chunk, answers at once on the terminal, exits 130, and the checkpoint resumes and
  continues bit for bit like an uninterrupted run;
* SIGTERM saves at the end of the chunk and exits 143; a second Ctrl-C stops at once, without
  saving, exit 130; SIGHUP is a stop, unless it was ignored at start (nohup);
* a ``kill -9`` in the middle of a save leaves no checkpoint that ``--resume`` would pick up but
  not load; the next save removes the orphaned temp file;
* ``--save-interval N`` (and ``--eval-interval N``) act at exact multiples of N whatever
  ``--updates-per-chunk`` is;
* live progress: one tick per update from inside the chunk (also over 4 devices), the same
  numbers bit for bit with or without it; plain ``progress:`` lines when stdout is not a
  terminal, a bar kept below the printed lines on a terminal;
* console, metrics-file and wandb failures never raise into the training loop;
* without a TPU, the trainer starts without libtpu's errors and names its backend in one line.

Subprocesses run in their own session (no controlling terminal unless the test gives them a
pty), write to files, have time limits, and are killed with their process group on failure.
"""

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from purejaxrl import backend
from purejaxrl.checkpoint import list_checkpoints, load_checkpoint
from purejaxrl.config import TrainConfig
from purejaxrl.logger import Console, Progress, RunLogger
from purejaxrl.train import StopSignal, next_chunk_size, train
from tests.trainer.toy_run import CONFIG, assert_trees_equal, options

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(REPO_ROOT, "scripts", "train_purejaxrl.py")
TIMEOUT_S = 240

# Toy runs long enough never to finish by themselves (10^7 updates of 32 env steps).
ENDLESS = ["--env", "toy", "--num-envs", "4", "--num-steps", "8", "--hidden-width", "16",
           "--hidden-depth", "1", "--recurrent-core", "none", "--max-episode-steps", "6",
           "--no-wandb",
           "--total-timesteps", str(32 * 10**7), "--run-name", "run"]

def wait_for(condition, what, timeout=TIMEOUT_S, proc=None):
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        return ""


def metrics_lines(run_dir):
    return read(os.path.join(run_dir, "metrics.jsonl")).count("\n")


def kill_group(proc):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def trainer_env(**extra):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    env.pop("XLA_FLAGS", None)
    return env


def start_trainer(args, out_dir, env=None):
    """The script in a new session (no controlling terminal), stdout/stderr to files."""
    stdout = open(out_dir / "stdout.txt", "w")
    stderr = open(out_dir / "stderr.txt", "w")
    proc = subprocess.Popen([sys.executable, TRAIN, *args], stdout=stdout, stderr=stderr,
                            env=env or trainer_env(), cwd=REPO_ROOT, start_new_session=True)
    stdout.close()
    stderr.close()
    return proc


# --------------------------------------------------------------------------- chunk boundaries

def test_chunks_end_on_every_interval_boundary():
    """Rule: a chunk never crosses a multiple of the save or eval interval."""
    assert next_chunk_size(0, 10, (2, None)) == 2
    assert next_chunk_size(3, 10, (2, None)) == 1
    assert next_chunk_size(10, 10, (15, None)) == 5
    assert next_chunk_size(15, 10, (15, 4)) == 1
    assert next_chunk_size(0, 3, (None, None)) == 3
    assert next_chunk_size(7, 10, (100, 50)) == 10


def test_save_and_eval_intervals_are_exact(tmp_path, compile_cache_dir):
    """--save-interval 3 and --eval-interval 4 with chunks of 2 over 5 updates: chunks end at
    2, 3, 4, 5; checkpoints at 3 and at the end (5); evaluations at 4 and at the end."""
    result = train(CONFIG, options(tmp_path, compile_cache_dir, save_interval=3,
                                   eval_interval=4, eval_envs=2,
                                   keep_checkpoints=10))
    assert [r["update"] for r in result.records] == [2, 3, 4, 5]
    assert [u for u, _ in list_checkpoints(result.run_dir)] == [3, 5]
    evaluated = [r["update"] for r in result.records if "eval_greedy/win_rate" in r]
    assert evaluated == [4, 5]
    assert result.chunk.trace_count == 1  # shorter chunks reuse the one executable


# --------------------------------------------------------------------------- in-process signals

@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_save_at_the_chunk_end(signum, tmp_path, compile_cache_dir):
    """Sent while the first chunk is being reported: the run saves at update 2 and stops,
    naming the signal."""
    class SignalAfterFirstChunk(RunLogger):
        def log(self, record):
            super().log(record)
            if record["update"] == 2:
                os.kill(os.getpid(), signum)

    logger = SignalAfterFirstChunk(str(tmp_path / "run"), use_wandb=False, quiet=True)
    previous = signal.signal(signum, signal.SIG_DFL)  # as at the start of a script
    try:
        result = train(CONFIG, options(tmp_path, compile_cache_dir), logger=logger)
    finally:
        signal.signal(signum, previous)
    assert result.interrupted and result.stop_signal == signum and result.updates_done == 2
    assert [u for u, _ in list_checkpoints(result.run_dir)] == [2]


def test_the_signal_handler_defers_the_stop_notice():
    """Rule: the handler only records the signal; the notice runs from ``check()`` on the main
    loop, once. A handler runs between any two bytecodes of the main thread: had it printed the
    notice there, a signal landing while the main thread held the progress lock (which the
    notice reads) would deadlock the run (a CI run hung so after Ctrl-C)."""
    progress_lock = threading.Lock()
    notices = []

    def notice(signum):  # reads the progress under its lock, as the run's notice does
        if not progress_lock.acquire(timeout=1):
            notices.append("deadlock: the lock is held by the code the handler interrupted")
            return
        try:
            notices.append(signum)
        finally:
            progress_lock.release()

    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with StopSignal(notice) as stop:
            with progress_lock:
                os.kill(os.getpid(), signal.SIGTERM)
                wait_for(lambda: stop.requested, "the handler", timeout=10)
                assert notices == []
            assert stop.check() and notices == [signal.SIGTERM]
            assert stop.check() and notices == [signal.SIGTERM]  # announced once
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_sighup_ignored_at_start_stays_ignored(tmp_path, compile_cache_dir):
    """Under nohup (SIGHUP ignored) a hang-up changes nothing: the run completes."""
    class HangUpAfterFirstChunk(RunLogger):
        def log(self, record):
            super().log(record)
            os.kill(os.getpid(), signal.SIGHUP)

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        logger = HangUpAfterFirstChunk(str(tmp_path / "run"), use_wandb=False, quiet=True)
        result = train(CONFIG, options(tmp_path, compile_cache_dir), logger=logger)
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert not result.interrupted and result.updates_done == 5


# --------------------------------------------------------------------------- Ctrl-C behind tee

# Session leader of a pty: makes the pty its controlling terminal, runs `trainer 2>&1 | tee
# log` as the terminal's foreground job (as an interactive shell would), ignores SIGINT itself,
# and records the trainer's exit status.
PIPELINE = textwrap.dedent("""
    import fcntl, signal, subprocess, sys, termios
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    status_file, log_file, *command = sys.argv[1:]
    trainer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    tee = subprocess.Popen(["tee", log_file], stdin=trainer.stdout)
    trainer.stdout.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tee.wait()
    status = trainer.wait()
    with open(status_file, "w") as handle:
        handle.write(str(status))
""")


class Terminal:
    """A pty whose output is drained continuously (a full pty would block the writers)."""

    def __init__(self):
        self.master, self.slave = os.openpty()
        self.transcript = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self):
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:  # EIO: every slave end closed
                return
            if not data:
                return
            self.transcript.extend(data)

    def text(self) -> str:
        return bytes(self.transcript).decode(errors="replace")

    def close(self):
        os.close(self.master)


@pytest.fixture(scope="module")
def ctrl_c_behind_tee(tmp_path_factory, compile_cache_dir):
    """Ctrl-C typed into the terminal once the run has logged a chunk."""
    root = tmp_path_factory.mktemp("tee")
    run_dir = str(root / "ck" / "run")
    terminal = Terminal()
    command = [sys.executable, TRAIN, *ENDLESS, "--updates-per-chunk", "4",
               "--checkpoint-dir", str(root / "ck"), "--compile-cache-dir", compile_cache_dir]
    leader = subprocess.Popen([sys.executable, "-c", PIPELINE, str(root / "status"),
                               str(root / "tee.log"), *command],
                              stdin=terminal.slave, stdout=terminal.slave,
                              stderr=terminal.slave, env=trainer_env(), cwd=REPO_ROOT,
                              start_new_session=True)
    os.close(terminal.slave)
    try:
        wait_for(lambda: metrics_lines(run_dir) >= 1, "the first chunk", proc=leader)
        os.write(terminal.master, b"\x03")
        leader.wait(timeout=TIMEOUT_S)
        reader_done = time.monotonic() + 5
        while terminal._reader.is_alive() and time.monotonic() < reader_done:
            time.sleep(0.05)
    finally:
        kill_group(leader)
        terminal.close()
    return dict(status=read(root / "status"), transcript=terminal.text(), run_dir=run_dir,
                root=root)


@pytest.mark.slow  # extended suite (pytest -m slow)
def test_ctrl_c_behind_a_dead_tee_saves_and_exits_130(ctrl_c_behind_tee):
    run = ctrl_c_behind_tee
    assert run["status"] == "130", run["transcript"][-3000:]
    saved = list_checkpoints(run["run_dir"])
    assert len(saved) == 1 and saved[0][0] % 4 == 0  # at the end of a chunk of 4
    assert "Traceback" not in run["transcript"]


def test_ctrl_c_is_answered_on_the_terminal(ctrl_c_behind_tee):
    """tee died with the Ctrl-C, so the answer and the final word reach the terminal
    directly."""
    run = ctrl_c_behind_tee
    update = list_checkpoints(run["run_dir"])[0][0]
    text = run["transcript"]
    assert "Ctrl-C (SIGINT) received: saving a checkpoint" in text
    assert "Press Ctrl-C again to stop now without saving." in text
    assert f"stopped by Ctrl-C (SIGINT) at update {update}: saved " in text
    assert f"resume with --resume {run['run_dir']}" in text


def test_checkpoint_after_ctrl_c_resumes_bit_for_bit(ctrl_c_behind_tee, compile_cache_dir):
    """Resume the interrupted run for 3 more updates (as a script, without live progress) ==
    the same number of updates in one uninterrupted run (in-process): every array of the
    runner state is identical. The interrupted run had live progress: the host callback does
    not change the numbers either."""
    run = ctrl_c_behind_tee
    update, path = list_checkpoints(run["run_dir"])[0]
    out_dir = run["root"] / "resumed"
    out_dir.mkdir()
    proc = start_trainer(["--resume", run["run_dir"], "--stop-after-updates", "3",
                          "--no-progress", "--no-wandb", "--updates-per-chunk", "4",
                          "--checkpoint-dir", str(run["root"] / "ck"),
                          "--compile-cache-dir", compile_cache_dir], out_dir)
    try:
        proc.wait(timeout=TIMEOUT_S)
    finally:
        kill_group(proc)
    assert proc.returncode == 0, read(out_dir / "stderr.txt")[-3000:]
    assert f"resuming at update {update}/" in read(out_dir / "stdout.txt")
    resumed = load_checkpoint(run["run_dir"])
    assert resumed["update"] == update + 3
    config = TrainConfig.from_dict(load_checkpoint(path)["config"])
    reference = train(config, options(run["root"] / "reference", compile_cache_dir,
                                      updates_per_chunk=4),
                      stop_after_updates=update + 3)
    assert_trees_equal(resumed["runner_state"], reference.runner_state)


# --------------------------------------------------------------------------- SIGTERM, 2nd Ctrl-C

@pytest.fixture(scope="module")
def sigterm_run(tmp_path_factory, compile_cache_dir):
    """SIGTERM once the run has logged a chunk; started the way a user starts it, without
    JAX_PLATFORMS, stdout a file."""
    root = tmp_path_factory.mktemp("sigterm")
    env = trainer_env()
    env.pop("JAX_PLATFORMS", None)
    proc = start_trainer([*ENDLESS, "--updates-per-chunk", "4", "--checkpoint-dir",
                          str(root / "ck"), "--compile-cache-dir", compile_cache_dir],
                         root, env=env)
    run_dir = str(root / "ck" / "run")
    try:
        wait_for(lambda: metrics_lines(run_dir) >= 1, "the first chunk", proc=proc)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=TIMEOUT_S)
    finally:
        kill_group(proc)
    return dict(code=proc.returncode, stdout=read(root / "stdout.txt"),
                stderr=read(root / "stderr.txt"), run_dir=run_dir)


def test_sigterm_saves_at_the_chunk_end_and_exits_143(sigterm_run):
    assert sigterm_run["code"] == 128 + signal.SIGTERM, sigterm_run["stderr"][-3000:]
    saved = list_checkpoints(sigterm_run["run_dir"])
    assert len(saved) == 1 and saved[0][0] % 4 == 0
    assert load_checkpoint(sigterm_run["run_dir"])["update"] == saved[0][0]
    out = sigterm_run["stdout"]
    assert "SIGTERM received: saving a checkpoint" in out
    assert f"stopped by SIGTERM at update {saved[0][0]}: saved " in out


def test_plain_progress_lines_when_stdout_is_not_a_terminal(sigterm_run):
    """The first update of the session is reported from inside the first chunk, as a plain
    line (no carriage returns, no escape codes)."""
    out = sigterm_run["stdout"]
    assert "progress: update 1 | steps 32/320,000,000 (0.0%) | SPS " in out
    assert "\r" not in out and "\033" not in out


@pytest.mark.skipif(backend.tpu_attached(), reason="a TPU machine starts the TPU backend")
def test_quiet_start_without_a_tpu(sigterm_run):
    """No libtpu initialisation errors; the first line names the backend and why."""
    assert "TPU" not in sigterm_run["stderr"] and "E0000" not in sigterm_run["stderr"]
    first = sigterm_run["stdout"].splitlines()[0]
    assert first.startswith("backend: cpu, 1 device(s) (no TPU on this machine: JAX_PLATFORMS=")


@pytest.mark.slow  # extended suite (pytest -m slow)
def test_second_ctrl_c_stops_at_once_without_saving(tmp_path, compile_cache_dir):
    """Chunks of 10^5 toy updates (minutes): the first SIGINT is answered at once with the
    plan; the second ends the process within seconds, exit 130, nothing saved."""
    proc = start_trainer([*ENDLESS, "--updates-per-chunk", "100000", "--checkpoint-dir",
                          str(tmp_path / "ck"), "--compile-cache-dir", compile_cache_dir],
                         tmp_path)
    stdout = lambda: read(tmp_path / "stdout.txt")  # noqa: E731
    try:
        wait_for(lambda: "progress: update 1 |" in stdout(), "the first update", proc=proc)
        proc.send_signal(signal.SIGINT)
        wait_for(lambda: "Ctrl-C (SIGINT) received" in stdout(), "the answer", timeout=30,
                 proc=proc)
        assert ("saving a checkpoint when the current chunk ends at update 100000 (in about"
                in stdout())
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        kill_group(proc)
    assert proc.returncode == 130
    assert "Ctrl-C again: stopping now without saving; last checkpoint: none" in stdout()
    assert list_checkpoints(str(tmp_path / "ck" / "run")) == []


# --------------------------------------------------------------------------- kill -9 mid-save

# Trains the shared toy run, saving every 2 updates; the second save writes half a checkpoint,
# says so in a file and waits to be killed.
KILLED_MID_SAVE = textwrap.dedent("""
    import os, sys, tempfile, time
    from purejaxrl import checkpoint
    from purejaxrl.train import train
    from tests.trainer.toy_run import CONFIG, options

    checkpoint_dir, cache, marker = sys.argv[2:5]
    real_write, saves = checkpoint.write_checkpoint_file, []

    def write_then_hang(path, data):
        # As write_checkpoint_file starts a write: its temp file, here only 1000 bytes.
        saves.append(path)
        if len(saves) < 2:
            return real_write(path, data)
        fd, _ = tempfile.mkstemp(dir=os.path.dirname(path), prefix=checkpoint._TEMP_PREFIX,
                                 suffix=checkpoint._TEMP_SUFFIX)
        os.write(fd, data[:1000])
        open(marker, "w").close()
        time.sleep(600)

    checkpoint.write_checkpoint_file = write_then_hang
    train(CONFIG, options(checkpoint_dir, cache, save_interval=2))
""")


@pytest.mark.slow  # extended suite (pytest -m slow)
def test_kill_9_during_a_save_leaves_a_resumable_run(tmp_path, compile_cache_dir):
    marker = tmp_path / "writing"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_MID_SAVE, REPO_ROOT,
                             str(tmp_path / "ck"), compile_cache_dir, str(marker)],
                            env=trainer_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(marker.exists, "the second save", proc=proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        kill_group(proc)
    run_dir = str(tmp_path / "ck" / "run")
    orphans = [name for name in os.listdir(run_dir) if name.endswith(".tmp")]
    assert len(orphans) == 1  # the cut-short write, under its temp name only
    assert [u for u, _ in list_checkpoints(run_dir)] == [2]
    checkpoint = load_checkpoint(run_dir)  # what --resume picks: the complete one
    assert checkpoint["update"] == 2
    result = train(CONFIG, options(tmp_path / "ck", compile_cache_dir), checkpoint=checkpoint)
    assert result.updates_done == 5
    assert not [name for name in os.listdir(run_dir) if name.endswith(".tmp")]


# --------------------------------------------------------------------------- live progress

FOUR_DEVICE_TICKS = textwrap.dedent("""
    import json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    from purejaxrl import ppo
    from purejaxrl.config import TrainConfig

    config = TrainConfig(env="toy", num_envs=8, num_steps=8, num_minibatches=2,
                         update_epochs=2, total_timesteps=100 * 64, max_episode_steps=5,
                         hidden_width=16, hidden_depth=1, recurrent_core="none", lr=1e-2,
                         num_devices=4)
    env, env_params, network, optimizer, components = ppo.build(config)
    mesh = ppo.make_mesh(4)
    ticks = []
    chunk = ppo.UpdateChunk(config, env, env_params, network, optimizer, components, 3, mesh,
                            on_update=lambda count, loss: ticks.append(int(count)))
    runner = ppo.init_runner_state(config, env, env_params, network, optimizer,
                                   len(components), mesh)
    runner, _ = chunk(runner, 3)
    runner, _ = chunk(runner, 2)  # a partial chunk: no tick for the skipped update
    jax.block_until_ready(runner)  # the calls return before the chunks run
    print(json.dumps({"ticks": ticks}))
""")


@pytest.mark.slow  # extended suite (pytest -m slow): a 4-device subprocess
def test_one_tick_per_update_over_four_devices():
    """4 devices, a chunk of 3 then a partial chunk of 2: ticks 1..5, each once (one device
    reports, not four)."""
    result = subprocess.run([sys.executable, "-c", FOUR_DEVICE_TICKS, REPO_ROOT],
                            capture_output=True, text=True, timeout=TIMEOUT_S,
                            env=trainer_env(), start_new_session=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"ticks": [1, 2, 3, 4, 5]}


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_lines_when_not_a_terminal():
    """The first tick always prints; later ones at most every line_interval_s."""
    stream = io.StringIO()
    progress = Progress(Console(stream), total_updates=100, batch_size=32, line_interval_s=3600)
    progress.chunk_started(0, 10)
    for update in (1, 2, 3):
        progress.tick(update)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("progress: update 1 | steps 32/3,200 (1.0%)")
    every = io.StringIO()
    progress = Progress(Console(every), total_updates=100, batch_size=32, line_interval_s=0)
    progress.chunk_started(0, 10)
    for update in (1, 2, 3):
        progress.tick(update)
    assert [line.split(" |")[0] for line in every.getvalue().splitlines()] == [
        "progress: update 1", "progress: update 2", "progress: update 3"]


def test_progress_bar_on_a_terminal_stays_below_printed_lines(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    stream = FakeTerminal()
    console = Console(stream)
    progress = Progress(console, total_updates=10, batch_size=32, line_interval_s=0)
    progress.chunk_started(0, 10)
    progress.tick(5)
    assert stream.getvalue().startswith(
        "\r\033[K[##########----------] update 5 | steps 160/320 (50.0%) | SPS ")
    assert "\n" not in stream.getvalue()
    console.line("update 5 | chunk summary")
    # The line replaces the bar, which is drawn again below it.
    after = stream.getvalue().split("update 5 | chunk summary\n")[1]
    assert after.startswith("[##########----------] update 5 |") and "\n" not in after
    progress.close()
    assert stream.getvalue().endswith("\r\033[K")


def test_stop_estimate_counts_down_to_the_chunk_end():
    progress = Progress(Console(io.StringIO(), enabled=False), total_updates=100,
                        batch_size=32, line_interval_s=10)
    progress.chunk_started(0, 10)
    assert progress.chunk_end() == 10 and progress.seconds_left_in_chunk() is None
    time.sleep(0.05)
    progress.tick(1)
    left = progress.seconds_left_in_chunk()
    assert left is not None and 9 * 0.05 * 0.5 < left < 9 * 0.05 * 20
    progress.chunk_finished(10)
    assert progress.chunk_end() is None


# --------------------------------------------------------------------------- failing outputs

class BrokenPipeStream(io.StringIO):
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


def test_a_broken_console_falls_silent_and_warns_once(capsys):
    console = Console(BrokenPipeStream())
    console.line("update 10 | ...")
    console.notify("stopping")
    console.line("update 20 | ...")
    assert console.broken
    assert capsys.readouterr().err.count("console output stopped") == 1


def test_a_closed_pipe_is_pointed_at_dev_null():
    """After EPIPE the descriptor is /dev/null: Python's own flush at exit cannot fail."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    stream = os.fdopen(write_end, "w")
    console = Console(stream)
    console.line("lost")
    assert console.broken
    stream.write("later writes succeed\n")
    stream.flush()
    assert os.path.samestat(os.fstat(write_end), os.stat(os.devnull))
    stream.close()


def test_metrics_file_and_wandb_failures_do_not_raise(tmp_path, capsys):
    class FailingRun:
        id = "abc"

        def log(self, *args, **kwargs):
            raise ConnectionError("wandb service died")

        def finish(self, *args, **kwargs):
            pass

    logger = RunLogger(str(tmp_path), use_wandb=False, quiet=True)
    logger.wandb_run = FailingRun()
    logger._file.close()  # writes now fail (ValueError: closed file)
    logger.log({"update": 1, "env_steps": 32})
    logger.log({"update": 2, "env_steps": 64})
    logger.log_checkpoint_artifact(str(tmp_path / "none.msgpack"), "run", 2)
    logger.close()
    err = capsys.readouterr().err
    assert err.count("cannot write") == 1 and err.count("wandb failed") == 1
