"""Run records: per-chunk metric summaries, a JSONL file in the run directory, console
progress (a live bar on a terminal, plain lines elsewhere), and (optionally) Weights & Biases.

Reporting never costs a checkpoint: the console, the metrics file and wandb each fail alone.
A console whose reader is gone (``| tee`` stopped by the same Ctrl-C, a closed pipe, a hung-up
terminal) falls silent and the run goes on; a metrics file or wandb that fails is warned about
once on stderr and left out for the rest of the session."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import threading
import time

import numpy as np

from purejaxrl.checkpoint import METRICS_FILE
from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.output_paths import write_text
from purejaxrl.ppo import UpdateMetrics

_LOSS_FIELDS = ("total_loss", "policy_loss", "value_loss", "entropy", "normalized_entropy",
                "group_entropy", "approx_kl", "clip_fraction", "grad_norm", "distill_loss",
                "distill_kl", "distill_labelled", "distill_kl_fresh", "distill_value_loss",
                "sil_loss", "sil_positive",
                "explained_variance", "learning_rate")


def _ratio(numerator: float, denominator: float) -> float | None:
    return float(numerator) / float(denominator) if denominator > 0 else None


def summarize_chunk(metrics: UpdateMetrics, env: TrainerEnv, batch_size: int) -> dict:
    """Reduce the stacked per-update metrics of one chunk (host numpy arrays, leading axis K)
    to one flat record. Episode statistics cover only episodes that finished in the chunk;
    rates are per finished episode, fractions per env step (``batch_size`` per update), totals
    as they are (``Metric.log_per``); the env's health signals (``health_metrics``) come from
    the chunk's totals."""
    active = np.asarray(metrics.active) > 0
    steps = float(np.sum(active) * batch_size)
    total = lambda field: np.asarray(getattr(metrics, field))[active].sum(axis=0)  # noqa: E731
    episodes = float(total("episodes"))
    env_totals = dict(zip([m.name for m in env.metrics], total("env_metrics")))
    record = {"episode/count": episodes,
              "episode/return_mean": _ratio(total("return_sum"), episodes),
              "episode/length_mean": _ratio(total("length_sum"), episodes)}
    divisor = {"episode": episodes, "step": steps}
    for metric in env.metrics:
        if metric.log is None:
            continue
        value = env_totals[metric.name]
        record[metric.log] = (float(value) if metric.log_per == "total"
                              else _ratio(value, divisor[metric.log_per]))
    record["episode/truncation_rate"] = _ratio(total("truncations"), episodes)
    stage_hist = total("stage_hist")
    if env.num_stages is not None:
        record["episode/stage_mean"] = _ratio(
            float((stage_hist * np.arange(len(stage_hist))).sum()), episodes)
        for stage in range(len(stage_hist)):
            if stage_hist[stage] > 0:
                record[f"stage_reached/{stage}"] = float(stage_hist[stage]) / episodes
    breakdown = dict(zip(env.reward_components, total("breakdown_sum")))
    for name, value in breakdown.items():
        record[f"reward/{name}"] = _ratio(value, episodes)
    record.update(env.health_metrics({
        "episodes": episodes, "return_sum": float(total("return_sum")),
        "length_sum": float(total("length_sum")), "stage_hist": stage_hist,
        "breakdown": breakdown, **env_totals}))
    record["actions/masked_sampled"] = float(total("masked_actions_sampled"))
    record["curriculum/episodes"] = float(total("curriculum_episodes"))
    record["actions/explored_fraction"] = _ratio(total("explored_actions"), steps)
    for field in _LOSS_FIELDS:
        values = np.asarray(getattr(metrics, field))[active]
        if field.startswith(("distill_", "sil_")) and not values.any():
            continue  # search distillation or self-imitation is off
        record[f"ppo/{field}"] = float(np.nanmean(values)) if np.isfinite(values).any() else None
    return record


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (np.floating, np.integer)):
        return _json_safe(value.item())
    return value


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _position(update: int, env_steps: int, total_env_steps: int, sps: float | None,
              eta_s: float | None) -> str:
    percent = 100.0 * env_steps / max(total_env_steps, 1)
    return (f"update {update} | steps {env_steps:,}/{total_env_steps:,} ({percent:.1f}%) | "
            f"SPS {sps or 0:,.0f} | ETA {format_duration(eta_s)}")


# What the chunk line shows, where the record has it: (key, label, format).
_PROGRESS_FIELDS = (("episode/stage_mean", "stage", ".2f"), ("episode/win_rate", "win", ".3f"),
                    ("actions/invalid", "invalid", ".0f"))


def progress_line(record: dict, total_env_steps: int, alerts: dict | None = None) -> str:
    """The chunk's console line: position, return, and the stage, win rate and invalid
    actions of an env that logs them (else the episode length); then the ``alerts`` (record
    key -> words, ``TrainerEnv.alerts``) whose value is not 0."""
    def number(key, fmt):
        value = record.get(key)
        return format(value, fmt) if value is not None else "-"
    fields = [f"return {number('episode/return_mean', '.3f')}"]
    shown = [(key, label, fmt) for key, label, fmt in _PROGRESS_FIELDS if key in record]
    fields += [f"{label} {number(key, fmt)}" for key, label, fmt in shown] or [
        f"length {number('episode/length_mean', '.1f')}"]
    return (_position(record["update"], record["env_steps"], total_env_steps,
                      record.get("sps"), record.get("eta_s")) + " | " + " | ".join(fields)
            + _alerts(record, alerts or {}))


def _alerts(record: dict, alerts: dict) -> str:
    """Things a researcher must see at once: sampled illegal actions (a masking bug), and the
    env's alerts (HackMatrix: UNDO-exploit stage completions (decisions R9), dropped entity
    appends (env capacity))."""
    shown = []
    if record.get("actions/masked_sampled"):
        shown.append(f"MASKED ACTIONS SAMPLED {int(record['actions/masked_sampled'])}")
    for key, words in alerts.items():
        if record.get(key):
            shown.append(f"{words} {int(record[key])}")
    return "".join(f" | {alert}" for alert in shown)


_CLEAR_LINE = "\r\033[K"
_BAR_WIDTH = 20
_LOCK_WAIT_S = 1.0  # a writer stuck on a full pipe must not hold up a stop notice for long


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def _silence(stream) -> None:
    """Point a dead stream's file descriptor at /dev/null, so that later writes (ours, a
    library's, Python's flush at exit) succeed quietly instead of raising BrokenPipeError."""
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, descriptor)
        os.close(devnull)
    except OSError:
        pass


def write_to_terminal(text: str) -> bool:
    """Write to the controlling terminal when this process is its foreground job (the user who
    pressed Ctrl-C is looking at it). Never blocks; False where there is no such terminal."""
    try:
        descriptor = os.open("/dev/tty", os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if os.tcgetpgrp(descriptor) != os.getpgrp():
            return False  # a background job: writing could stop it (tostop)
        os.write(descriptor, text.encode())
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)


class Console:
    """What the run tells people, on stdout. Never raises: when stdout breaks (EPIPE, EIO, a
    closed file) the console says so once on stderr, points stdout at /dev/null and falls
    silent; the run goes on. On a terminal a status line (the progress bar) stays below the
    printed lines. Thread-safe: progress ticks come from the XLA runtime's thread."""

    def __init__(self, stream=None, enabled: bool = True):
        self._stream = sys.stdout if stream is None else stream
        self.enabled = enabled
        self.is_terminal = _is_terminal(self._stream)
        self.broken = False
        self._status = ""
        self._lock = threading.RLock()  # re-entrant: a signal handler may print mid-line

    def _write(self, text: str) -> None:
        if self.broken or not self.enabled:
            return
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError) as error:
            self.broken = True
            _silence(self._stream)
            warn(f"console output stopped (stdout: {type(error).__name__}: {error}); the run "
                 "goes on, metrics.jsonl and checkpoints are still written")

    def _locked(self, action) -> None:
        acquired = self._lock.acquire(timeout=_LOCK_WAIT_S)
        try:
            action()
        finally:
            if acquired:
                self._lock.release()

    def line(self, text: str) -> None:
        """A permanent line (above the status line on a terminal)."""
        def write():
            if self.is_terminal and self._status:
                self._write(f"{_CLEAR_LINE}{text}\n{self._status}")
            else:
                self._write(text + "\n")
        self._locked(write)

    def status(self, text: str) -> None:
        """Replace the status line (terminal only; "" erases it)."""
        if not self.is_terminal:
            return
        width = shutil.get_terminal_size().columns - 1
        def write():
            self._status = text[:width]
            self._write(_CLEAR_LINE + self._status)
        self._locked(write)

    def notify(self, text: str) -> None:
        """A line the user must see even behind a pipe that died with the same Ctrl-C (``|
        tee``): also written to the controlling terminal when stdout is not that terminal."""
        if not self.enabled:
            return
        self.line(text)
        if not self.is_terminal or self.broken:
            write_to_terminal(text + "\n")


def warn(message: str) -> None:
    """A warning on stderr that never raises (stderr may be the same dead pipe as stdout)."""
    try:
        print(f"warning: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        _silence(sys.stderr)


class Progress:
    """Live progress inside a chunk: ``tick(update)`` comes from the chunk's host callback at
    the end of every update (``UpdateChunk(on_update=...)``); the host loop marks chunk starts
    and ends. On a terminal it redraws a bar; elsewhere it prints a plain ``progress:`` line
    for the first update of the session and then at most every ``line_interval_s``. Rates
    count from the session's first chunk (host time between chunks included), so the ETA is
    wall-clock. ``seconds_left_in_chunk`` feeds the stop notice."""

    def __init__(self, console: Console, total_updates: int, batch_size: int,
                 line_interval_s: float):
        self.console = console
        self.total_updates = total_updates
        self.batch_size = batch_size
        self.line_interval_s = line_interval_s
        self._lock = threading.Lock()
        self._first = None  # (time, update) at the first chunk start of the session
        self._latest = None  # (time, update) of the newest tick or chunk end
        self._chunk_end = None  # the update the chunk in flight ends at
        self._last_line = None  # time of the last plain line

    def chunk_started(self, update: int, chunk_end: int) -> None:
        with self._lock:
            now = time.monotonic()
            if self._first is None:
                self._first = self._latest = (now, update)
            self._chunk_end = chunk_end

    def chunk_finished(self, update: int) -> None:
        with self._lock:
            self._latest = (time.monotonic(), update)
            self._chunk_end = None

    def _seconds_per_update(self) -> float | None:
        if self._first is None or self._latest[1] <= self._first[1]:
            return None
        return (self._latest[0] - self._first[0]) / (self._latest[1] - self._first[1])

    def chunk_end(self) -> int | None:
        """The update the chunk in flight ends at (None between chunks)."""
        with self._lock:
            return self._chunk_end

    def seconds_left_in_chunk(self) -> float | None:
        with self._lock:
            per_update = self._seconds_per_update()
            if self._chunk_end is None or per_update is None:
                return None
            elapsed = time.monotonic() - self._latest[0]
            return max(0.0, (self._chunk_end - self._latest[1]) * per_update - elapsed)

    def tick(self, update, total_loss=None) -> None:
        """``UpdateChunk``'s ``on_update``: the count of updates done (the loss, which times the
        call, is not shown). Called by JAX on its runtime thread: must never raise (an exception
        would fail the chunk)."""
        try:
            with self._lock:
                update = int(update)
                now = time.monotonic()
                self._latest = (now, update)
                per_update = self._seconds_per_update()
                first = self._last_line is None
                due = first or now - self._last_line >= self.line_interval_s
                if due and not self.console.is_terminal:
                    self._last_line = now
            sps = self.batch_size / per_update if per_update else None
            eta = (self.total_updates - update) * per_update if per_update else None
            position = _position(update, update * self.batch_size,
                                 self.total_updates * self.batch_size, sps, eta)
            if self.console.is_terminal:
                done = int(_BAR_WIDTH * update / max(self.total_updates, 1))
                self.console.status(f"[{'#' * done}{'-' * (_BAR_WIDTH - done)}] {position}")
            elif due:
                self.console.line(f"progress: {position}")
        except Exception as error:  # noqa: BLE001 - progress must never fail the run
            warn(f"progress display failed ({type(error).__name__}: {error})")

    def close(self) -> None:
        self.console.status("")


def _drop_records_after(path: str, update: int) -> None:
    """Rewrite the metrics file ``path`` (atomically) without its records of updates after
    ``update``; a line that does not parse (a write cut short by a kill) goes too."""
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    kept = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("update", 0) <= update:
            kept.append(line)
    if len(kept) != len(lines):
        write_text(path, "".join(line + "\n" for line in kept))


class RunLogger:
    """Writes every record to ``<run_dir>/metrics.jsonl`` (appending on resume), prints
    progress, and mirrors records to wandb when enabled. ``log``, ``print`` and
    ``log_checkpoint_artifact`` never raise (see the module docstring).

    ``resumed_at_update``: the update a resume starts from. Records of later updates (logged
    after that checkpoint by a session that then died without saving) are dropped first: the
    resumed session trains those updates again, and the file keeps one record per chunk in
    order, as an uninterrupted run's would."""

    def __init__(self, run_dir: str, *, use_wandb: bool, quiet: bool = False,
                 wandb_project: str | None = None, wandb_entity: str | None = None,
                 wandb_mode: str = "online", wandb_run_id: str | None = None,
                 run_name: str | None = None, config: dict | None = None,
                 resumed_at_update: int | None = None):
        os.makedirs(run_dir, exist_ok=True)
        self.run_dir = run_dir
        self.quiet = quiet
        self.console = Console(enabled=not quiet)
        self.metrics_path = os.path.join(run_dir, METRICS_FILE)
        if resumed_at_update is not None:
            _drop_records_after(self.metrics_path, resumed_at_update)
        self._file = open(self.metrics_path, "a", encoding="utf-8")
        self.wandb_run = None
        if use_wandb and wandb_mode != "disabled":
            import wandb

            def init(mode):
                return wandb.init(
                    project=wandb_project, entity=wandb_entity, name=run_name, id=wandb_run_id,
                    resume="allow" if wandb_run_id else None, mode=mode, config=config,
                    dir=run_dir)
            try:
                self.wandb_run = init(wandb_mode)
            except Exception as error:  # not logged in, no network: keep training, log locally
                if wandb_mode != "online":
                    raise
                warn(f"wandb online init failed ({type(error).__name__}: {error}); logging "
                     f"offline to {run_dir}/wandb (upload later with `wandb sync`)")
                self.wandb_run = init("offline")
        self.wandb_run_id = self.wandb_run.id if self.wandb_run is not None else None

    def print(self, message: str) -> None:
        self.console.line(message)

    def _drop_wandb(self, error: Exception) -> None:
        warn(f"wandb failed ({type(error).__name__}: {error}); the rest of this session logs "
             f"to {self.metrics_path} only")
        run, self.wandb_run = self.wandb_run, None
        try:
            run.finish(exit_code=1)
        except Exception:  # noqa: BLE001 - it already failed once
            pass

    def log(self, record: dict) -> None:
        clean = {key: _json_safe(value) for key, value in record.items()}
        if self._file is not None:
            try:
                self._file.write(json.dumps(clean) + "\n")
                self._file.flush()
            except (OSError, ValueError) as error:
                warn(f"cannot write {self.metrics_path} ({type(error).__name__}: {error}); "
                     "the rest of this session is not recorded there (checkpoints are)")
                self._close_file()
        if self.wandb_run is not None:
            try:
                self.wandb_run.log({k: v for k, v in clean.items() if v is not None},
                                   step=int(record["env_steps"]))
            except Exception as error:  # noqa: BLE001 - any wandb failure
                self._drop_wandb(error)

    def log_checkpoint_artifact(self, path: str, run_name: str, update: int) -> None:
        """Upload a checkpoint as a new version of the run's single checkpoint artifact."""
        if self.wandb_run is None:
            return
        try:
            import wandb
            artifact = wandb.Artifact(f"{run_name}-checkpoint", type="model",
                                      metadata={"update": update})
            artifact.add_file(path)
            self.wandb_run.log_artifact(artifact, aliases=["latest", f"update-{update}"])
        except Exception as error:  # noqa: BLE001 - any wandb failure
            self._drop_wandb(error)

    def _close_file(self) -> None:
        file, self._file = self._file, None
        try:
            file.close()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        if self._file is not None:
            self._close_file()
        if self.wandb_run is not None:
            try:
                self.wandb_run.finish()
            except Exception as error:  # noqa: BLE001 - the checkpoints are already written
                warn(f"wandb finish failed ({type(error).__name__}: {error})")
            self.wandb_run = None


class SilentLogger:
    """The logger of processes other than 0 in a multi-process run: they write no files and
    print nothing (process 0 reports for the whole run)."""

    wandb_run_id = None

    def __init__(self):
        self.console = Console(enabled=False)

    def print(self, message: str) -> None:
        pass

    def log(self, record: dict) -> None:
        pass

    def log_checkpoint_artifact(self, path: str, run_name: str, update: int) -> None:
        pass

    def close(self) -> None:
        pass
