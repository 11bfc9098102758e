"""The host loop: runs jitted chunks of PPO updates and, between chunks, logs, evaluates and
checkpoints. All numerics live in ``purejaxrl/ppo.py``; this file only drives them."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import signal
import threading
import time
from typing import Callable, Optional

import jax
import numpy as np

from envs.compile_cache import CompileCacheError, enable_compile_cache
from purejaxrl import distributed, ppo
from purejaxrl.checkpoint import (CheckpointError, RunDirectoryInUse,
                                  intact_checkpoints_after, list_checkpoints,
                                  lock_run_directory, prune_checkpoints, run_contents,
                                  runner_state_template, save_checkpoint, seed_directories,
                                  seed_directory_name, sittings_with, stack_seeds,
                                  weights_from)
from purejaxrl.config import (ConfigError, RunOptions, TrainConfig, config_differences,
                              validate_config, validate_run_options)
from purejaxrl.evaluation import make_training_evaluator, summarize_episodes
from purejaxrl.health import StallingDetector
from purejaxrl.logger import (Console, Progress, RunLogger, SilentLogger, progress_line,
                              summarize_chunk)
from purejaxrl.networks import parameter_count
from purejaxrl.output_paths import prepare_directory
from purejaxrl.provenance import process_commit


@dataclasses.dataclass
class SeedResult:
    """One seed's share of a run: a single-seed run is one; a ``num_seeds`` run has one per
    seed, each with the records and checkpoints a single run of that seed would have."""

    seed: int
    run_dir: str
    runner_state: ppo.RunnerState  # this seed's (no seed axis)
    records: list  # per chunk, the keys of a single-seed run's records
    last_checkpoint: Optional[str]  # written in this session, else the one it resumed from
    # The code that trained it: [{"from_update", "commit"}] per sitting that trained an update
    # (checkpoint.sittings_with).
    sittings: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class TrainResult:
    runner_state: ppo.RunnerState  # with a leading seed axis when num_seeds > 1
    run_name: str
    run_dir: str
    updates_done: int
    env_steps: int  # per seed
    # The newest checkpoint (written in this session, else the one it resumed from); of a
    # multi-seed run, its directory (what --resume takes).
    last_checkpoint: Optional[str]
    records: list  # what was logged per chunk (multi-seed: per-seed keys prefixed seed<s>/)
    interrupted: bool
    stop_signal: Optional[int]  # the signal that stopped the run (interrupted), else None
    chunk: ppo.UpdateChunk
    seeds: list[SeedResult]
    # Why the run stopped early on a non-finite loss, gradient or parameter (and which
    # checkpoint holds the last finite state), else None.
    diverged: Optional[str] = None
    # Whether the session ended early because the next chunk would have ended past its
    # wall-clock budget (``stop_after_seconds``).
    stopped_by_budget: bool = False


def default_run_name(config: TrainConfig) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{config.env}-ppo-s{config.seed}-{stamp}"


class StopSignal:
    """SIGINT, SIGTERM and SIGHUP (the terminal closed) ask the loop to save a checkpoint when
    the current chunk ends and to stop. A second SIGINT (Ctrl-C again) calls ``on_abandon()``
    and ends the process at once without saving, exit status 130; a repeated SIGTERM or SIGHUP
    changes nothing. SIGHUP stays ignored where it was ignored at start (``nohup``).

    The handler only records the signal: ``on_request(signum)`` (the notice of what will happen
    and about when) runs from ``check()``, which the main loop calls at safe points, at least
    every 0.1 s while a chunk runs. A handler runs on the main thread between any two bytecodes,
    also inside a ``with lock:`` or a write to stdout; a notice printed from there could wait
    forever on a lock its own thread holds, or break the stream it interrupted."""

    def __init__(self, on_request: Callable[[int], None] = lambda signum: None,
                 on_abandon: Callable[[], None] = lambda: None):
        self.signum: Optional[int] = None  # the first stop signal received
        self._on_request = on_request
        self._on_abandon = on_abandon
        self._announced = False
        self._previous = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def check(self) -> bool:
        """Whether a stop was requested; announces it (once) on the calling thread."""
        if self.signum is not None and not self._announced:
            self._announced = True
            self._on_request(self.signum)
        return self.requested

    def _handle(self, signum, frame):
        if self.signum is None:
            self.signum = signum
        elif signum == signal.SIGINT:
            try:  # best effort: "stop now" must not wait on the interrupted code's locks
                self._on_abandon()
            finally:
                os._exit(128 + signal.SIGINT)  # no cleanup, no save: what "stop now" means

    def __enter__(self):
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
                    continue
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: signals cannot be caught here
                pass
        return self

    def __exit__(self, *exc):
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def signal_name(signum: int) -> str:
    return "Ctrl-C (SIGINT)" if signum == signal.SIGINT else signal.Signals(signum).name


def next_chunk_size(update: int, limit: int, intervals) -> int:
    """Updates in the next chunk: at most ``limit``, ending on the next multiple of every
    interval in ``intervals`` (None = unused), so that saves and evaluations happen exactly
    every N updates with one compiled chunk (shorter chunks run it with fewer active updates)."""
    ends = [(update // interval + 1) * interval for interval in intervals if interval]
    return min([limit] + [end - update for end in ends])


def chunk_fits_budget(elapsed_s: float, last_seconds: float, last_updates: int,
                      next_updates: int, budget_s: float) -> bool:
    """Whether a chunk of ``next_updates`` updates is expected to end within ``budget_s``
    seconds of the session's start, ``elapsed_s`` seconds in: at the pace of the last chunk
    (``last_updates`` updates in ``last_seconds``, its save and log included). The estimate
    errs by the chunk-to-chunk variation of the pace; a session stopped by it ends before its
    budget, as a run judged "at its last checkpoint within the budget" would."""
    return elapsed_s + last_seconds * next_updates / last_updates <= budget_s


def run_chunk_interruptibly(chunk: ppo.UpdateChunk, runner: ppo.RunnerState, num_active: int,
                            while_waiting: Callable[[], object] = lambda: None):
    """(runner, metrics as host arrays) after ``num_active`` updates, computed on a worker
    thread while the main thread waits in short steps, calling ``while_waiting()`` after each,
    so that a signal handler (a second Ctrl-C) and the stop notice run at once: a chunk with a
    host callback executes inside its call on the CPU, where the handler would otherwise wait
    for the whole chunk."""
    outcome = {}

    def work():
        try:
            new_runner, metrics = chunk(runner, num_active)
            outcome["value"] = new_runner, jax.device_get(metrics)
        except BaseException as error:  # re-raised on the main thread
            outcome["error"] = error

    worker = threading.Thread(target=work, name="update-chunk", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(timeout=0.1)
        while_waiting()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _restore_params(fresh_params, saved_params):
    fresh_struct, saved_struct = jax.tree.structure(fresh_params), jax.tree.structure(saved_params)
    fresh_shapes = [np.shape(x) for x in jax.tree.leaves(fresh_params)]
    saved_shapes = [np.shape(x) for x in jax.tree.leaves(saved_params)]
    if fresh_struct != saved_struct or fresh_shapes != saved_shapes:
        raise CheckpointError("--weights-only: the checkpoint's network does not match the "
                              "network flags of this run (--hidden-width, --hidden-depth, "
                              "--separate-torsos)")
    return saved_params


def check_resume(config: TrainConfig, checkpoint: Optional[dict], resuming: bool,
                  num_processes: int) -> None:
    """A full resume needs the process count and the config of the checkpoint's run (only its
    budget, ``total_timesteps``, may grow: a finished run is extended), and a checkpoint the
    run wrote itself, not a trimmed copy."""
    if resuming and checkpoint.get("trimmed_from"):
        trimmed = checkpoint["trimmed_from"]
        raise ConfigError(
            f"{checkpoint['path']} is a trimmed copy (scripts/trim_checkpoint.py: "
            f"{checkpoint['config']['num_envs']} of {trimmed['num_envs']} envs): its optimiser "
            "counts the full run's minibatches, so its learning-rate schedule would not "
            "continue that run; resume the original, or start a new run from its weights "
            "with --weights-only")
    if resuming and int(checkpoint.get("num_processes", 1)) != num_processes:
        raise ConfigError(
            f"the checkpoint was written by a {checkpoint.get('num_processes', 1)}-process run "
            f"and this run has {num_processes} process(es); resume with the same process "
            "count (or use --weights-only to start a new run from its weights)")
    if resuming:
        saved = TrainConfig.from_dict(checkpoint["config"])
        # The device count may change (another machine): the global batch and every number
        # of the algorithm stay the same; only the per-device minibatch shuffles differ.
        differences = config_differences(
            saved.replace(num_devices=config.num_devices, total_timesteps=config.total_timesteps),
            config)
        if differences:
            raise ConfigError("the checkpoint was trained with a different config (checkpoint != "
                              "this run): " + "; ".join(differences)
                              + ". Pass only run options when resuming, or use --weights-only "
                              "to start a new run from its weights.")
        if saved.num_devices != config.num_devices:
            _check_state_moves(saved, config)


def _check_state_moves(saved: TrainConfig, config: TrainConfig) -> None:
    """A state split over the envs moves to another device count as it is; a per-device part
    whose size does not follow the envs (the curriculum's archive: one per device) does not."""
    def shapes(of):
        leaves = jax.tree_util.tree_flatten_with_path(runner_state_template(of))[0]
        return {jax.tree_util.keystr(path): leaf.shape for path, leaf in leaves}
    before, after = shapes(saved), shapes(config)
    per_device = {key.lstrip(".").split(".")[0] for key in before if before[key] != after[key]}
    # A frozen recurrent teacher's memory holds the first distill_envs / num_devices envs of
    # each device: the same global shape on any device count, other envs on another.
    if before.get(".teacher.hidden") is not None and saved.distill_envs is not None \
            and saved.distill_envs < saved.num_envs:
        per_device.add("teacher")
    per_device = sorted(per_device)
    if per_device:
        raise ConfigError(
            f"the checkpoint's run keeps its {', '.join(per_device)} per device: it resumes "
            f"only on its {saved.num_devices} devices (--num-devices {saved.num_devices}), not "
            f"{config.num_devices}; or use --weights-only to start a new run from its weights")


def _same_directory(a: str, b: str) -> bool:
    return os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b))


def run_directory(config: TrainConfig, options: RunOptions, checkpoint: Optional[dict],
                  resuming: bool) -> tuple[str, str]:
    """(run name, run directory) of a session. A resume continues in the checkpoint's
    directory (``--resume PATH`` writes to PATH, wherever it is); ``options.run_name`` may
    only name that same directory. A new run goes to ``<checkpoint_dir>/<run name>``."""
    if resuming:
        run_dir = checkpoint["run_dir"]
        if options.run_name is not None and not _same_directory(
                os.path.join(options.checkpoint_dir, options.run_name), run_dir):
            raise ConfigError(
                f"--resume continues the run in {run_dir}, and --run-name/--checkpoint-dir "
                f"name {os.path.join(options.checkpoint_dir, options.run_name)}: leave them "
                "out (or add --weights-only to start a new run from the checkpoint's weights)")
        return checkpoint["run_name"], run_dir
    name = options.run_name or default_run_name(config)
    return name, os.path.join(options.checkpoint_dir, name)


def claim_run_directory(run_name: str, run_dir: str, *, resuming: bool, name_given: bool,
                        checkpoint: Optional[dict] = None):
    """Make sure the session may write to its run directory, before any work: it is created,
    must take new files, and is locked for the session (``lock_run_directory``); a new run never
    writes into a directory that holds another run or that another live session holds: a given
    ``--run-name`` is refused (naming ``--resume``), a default name gets a free suffix. A resume
    of a single run from ``checkpoint`` is refused where the directory holds later checkpoints
    that load (``intact_checkpoints_after``): the session would prune them, then overwrite
    them. Returns (run name, run directory, a note for the user or None, the open lock file:
    close it when the session ends). Raises ConfigError."""
    if resuming:
        prepare_directory(run_dir, "run directory")
        lock = _lock_or_refuse(run_dir, "resume it once that session has ended")
        if checkpoint is not None and "seed_checkpoints" not in checkpoint:
            later = intact_checkpoints_after(run_dir, checkpoint["update"])
            if later:
                lock.close()
                raise ConfigError(
                    f"{run_dir} holds checkpoints after update {checkpoint['update']} "
                    f"({', '.join(os.path.basename(path) for path in later)}), which a resume "
                    f"from {checkpoint['path']} would delete and overwrite: resume the newest "
                    f"(--resume {run_dir}), move them away first, or start a new run from this "
                    "one's weights (--weights-only)")
        return run_name, run_dir, None, lock
    contents = run_contents(run_dir)
    if contents and name_given:
        resumable = list_checkpoints(run_dir) or seed_directories(run_dir)
        resume = f"continue it with --resume {run_dir}, or " if resumable else ""
        raise ConfigError(f"{run_dir} already holds a run ({', '.join(contents)}): {resume}"
                          "choose another --run-name")
    if name_given:
        prepare_directory(run_dir, "run directory")
        return run_name, run_dir, None, _lock_or_refuse(run_dir, "choose another --run-name")
    base_name, base_dir, suffix = run_name, run_dir, 2
    while True:
        if not run_contents(run_dir):
            prepare_directory(run_dir, "run directory")
            try:
                lock = lock_run_directory(run_dir)
                break
            except RunDirectoryInUse:
                pass  # started in the same second as this one: the next suffix
        run_name, run_dir = f"{base_name}-{suffix}", f"{base_dir}-{suffix}"
        suffix += 1
    note = None if run_dir == base_dir else f"{base_dir} holds another run: this run is {run_name}"
    return run_name, run_dir, note, lock


def _lock_or_refuse(run_dir: str, advice: str):
    try:
        return lock_run_directory(run_dir)
    except RunDirectoryInUse as busy:
        holder = f" (process {busy.holder})" if busy.holder else ""
        raise ConfigError(f"{run_dir} is in use by another training session{holder}: "
                          f"{advice}") from None


def _initial_runner(config: TrainConfig, checkpoint: Optional[dict], resuming: bool,
                    weights_only: bool, built, mesh):
    """Initialise or resume: (runner state on the mesh, seconds trained before, wandb run id)."""
    env, env_params, network, optimizer, reward_components = built
    if resuming:
        runner = ppo.shard_runner_state(checkpoint["runner_state"], mesh, config.num_seeds)
        return (runner, float(checkpoint.get("elapsed_seconds", 0.0)),
                checkpoint.get("wandb_run_id"))
    runner = ppo.init_runner_state(config, env, env_params, network, optimizer,
                                   len(reward_components), mesh)
    if weights_only:
        if int(checkpoint["config"].get("num_seeds", 1)) > 1:
            raise CheckpointError("--weights-only needs one seed's checkpoint: pass "
                                  "--resume <run directory>/seed-<s> of the multi-seed run")
        fresh = runner.params if config.num_seeds == 1 else ppo.seed_slice(runner.params, 0)
        saved = _restore_params(fresh, checkpoint["runner_state"].params)
        if config.num_seeds > 1:  # every seed starts from these weights
            saved = stack_seeds([saved] * config.num_seeds)
        replicated = ppo.place_on_mesh(saved, mesh, jax.sharding.PartitionSpec())
        runner = runner.replace(params=replicated, opt_state=jax.jit(optimizer.init)(replicated))
        if runner.teacher is not None:
            runner = runner.replace(teacher=_frozen_teacher(runner.teacher, saved, checkpoint,
                                                            config.num_seeds, mesh))
    return runner, 0.0, None


def _frozen_teacher(teacher: ppo.FrozenTeacher, saved_params, checkpoint: dict, num_seeds: int,
                    mesh) -> ppo.FrozenTeacher:
    """``--distill-frozen-teacher``: the starting checkpoint's network and the return
    statistics its critic was trained in, as their own arrays (the runner state is donated,
    so they must not alias the fitted parameters)."""
    stats = checkpoint["runner_state"].return_stats
    if num_seeds > 1:
        stats = stack_seeds([stats] * num_seeds)
    same = jax.sharding.PartitionSpec()
    return teacher.replace(params=ppo.place_on_mesh(saved_params, mesh, same),
                           return_stats=ppo.place_on_mesh(stats, mesh, same))


@dataclasses.dataclass
class _SeedTrack:
    """What the loop keeps per seed: its records, checkpoints and stalling detector."""

    seed: int
    run_name: str
    run_dir: str
    records: list = dataclasses.field(default_factory=list)
    last_checkpoint: Optional[str] = None
    stalling: StallingDetector = dataclasses.field(default_factory=StallingDetector)
    sittings: list = dataclasses.field(default_factory=list)  # checkpoint.sittings_with


class _Run:
    """One training session between ``train``'s start and its end: the runner state, the
    update counter, the logger and what has been saved. Its methods are the named steps of the
    loop: ``run_chunks`` (run, then save, log and evaluate each chunk), ``save``,
    ``chunk_record`` (log), ``evaluate``, and the answers to stop signals.

    A multi-seed run (``num_seeds > 1``) is one runner state with a leading seed axis and one
    ``_SeedTrack`` per seed: every seed is saved as its own single-seed checkpoint under
    ``<run_dir>/seed-<s>`` and logged under ``seed<s>/`` keys of the run's one record."""

    def __init__(self, config: TrainConfig, options: RunOptions, *, checkpoint, resuming,
                 weights_only, stop_after_updates, logger, primary, num_processes, run_name,
                 run_dir, note=None, stop_after_seconds=None, session_start=None):
        self.config, self.options = config, options
        self.checkpoint, self.resuming = checkpoint, resuming
        self.primary, self.num_processes = primary, num_processes
        self.run_name, self.run_dir = run_name, run_dir
        built = ppo.build(config)
        self.env, self.env_params, self.network, optimizer, self.reward_components = built
        mesh = ppo.make_mesh(config.num_devices)
        self.runner, self.elapsed_before, wandb_run_id = _initial_runner(
            config, checkpoint, resuming, weights_only, built, mesh)
        # Every seed is at the same update.
        self.update = int(np.ravel(jax.device_get(self.runner.update_step))[0])
        self.own_logger = logger is None
        self.logger = self._open_logger(wandb_run_id) if self.own_logger else logger
        self.wandb_run_id = self.logger.wandb_run_id or wandb_run_id
        if note:
            self.logger.print(note)
        self.derived = {"num_devices": config.num_devices, "num_processes": num_processes,
                        "global_batch": config.batch_size,
                        "num_minibatches": config.num_minibatches,
                        "minibatch_size": config.minibatch_size,
                        "update_epochs": config.update_epochs,
                        "num_updates": config.num_updates}
        self._announce_start()
        self.console = self.logger.console if hasattr(self.logger, "console") \
            else Console(enabled=False)
        self.progress = Progress(self.console, config.num_updates, config.batch_size,
                                 options.progress_interval_s)
        # Same decision on every process (options are shared), so all compile the same program.
        self.live_progress = options.progress and not options.quiet
        self.chunk = ppo.UpdateChunk(config, self.env, self.env_params, self.network, optimizer,
                                     self.reward_components, options.updates_per_chunk, mesh,
                                     on_update=self.progress.tick if self.live_progress
                                     else None)
        self.session_end = config.num_updates if stop_after_updates is None else min(
            config.num_updates, self.update + stop_after_updates)
        # --stop-after-minutes: the session's wall-clock budget, counted from session_start
        # (train's call: the env's build and the compilation are inside it).
        self.stop_after_seconds = stop_after_seconds
        self.session_start = time.perf_counter() if session_start is None else session_start
        self.stopped_by_budget = False
        self._last_chunk_end = None
        self.evaluator = None
        if options.eval_interval:
            played = config.for_play()
            eval_env, eval_params = (ppo.make_env(played) if played != config
                                     else (self.env, self.env_params))
            self.evaluator = make_training_evaluator(eval_env, eval_params, self.network,
                                                     options.eval_envs,
                                                     int(eval_params.max_steps_in_episode))
        self.records, self.last_checkpoint = [], None  # last_checkpoint: of this session
        # Seed s of a multi-seed run is a single-seed run named <run name>/seed-<s>: its
        # checkpoints can be evaluated, watched or continued alone like any run's.
        multi = config.num_seeds > 1
        self.tracks = [_SeedTrack(
            seed=seed,
            run_name=f"{self.run_name}/{seed_directory_name(seed)}" if multi else self.run_name,
            run_dir=os.path.join(self.run_dir, seed_directory_name(seed)) if multi
            else self.run_dir) for seed in config.seeds]
        earlier = [[]] * config.num_seeds
        if resuming:
            earlier = checkpoint.get("seed_sittings") or [checkpoint.get("sittings", [])]
        for track, sittings in zip(self.tracks, earlier):
            track.sittings = sittings_with(sittings, self.update, process_commit())
        self.weights_origin = checkpoint.get("weights_from") if resuming else \
            weights_from(checkpoint) if weights_only else None
        self.train_seconds = 0.0
        self.compile_seconds = None
        self.diverged = None  # the message, once an update came out non-finite
        self.update_of_last_save = None

    def _open_logger(self, wandb_run_id):
        if not self.primary:
            return SilentLogger()
        options = self.options
        return RunLogger(self.run_dir, use_wandb=options.wandb, quiet=options.quiet,
                         wandb_project=options.wandb_project, wandb_entity=options.wandb_entity,
                         wandb_mode=options.wandb_mode, wandb_run_id=wandb_run_id,
                         run_name=self.run_name, config=self.config.to_dict(),
                         resumed_at_update=self.update if self.resuming else None)

    def _announce_start(self) -> None:
        config = self.config
        self.logger.print(f"run {self.run_name} -> {self.run_dir}")
        self.logger.print(
            f"{'resuming at' if self.resuming else 'starting at'} update {self.update}/"
            f"{config.num_updates}; global batch {config.batch_size} = {config.num_envs} "
            f"envs x {config.num_steps} steps over {config.num_devices} device(s) "
            f"({jax.default_backend()}"
            + (f", {self.num_processes} processes" if self.num_processes > 1 else "")
            + f"); {config.num_minibatches} minibatches of "
            f"{config.minibatch_size}; {config.update_epochs} epochs; "
            f"{parameter_count(self.runner.params) // config.num_seeds:,} parameters"
            + (f"; seeds {config.seeds[0]}..{config.seeds[-1]} vmapped in one program"
               if config.num_seeds > 1 else ""))

    # ------------------------------------------------------------------------ save
    def save(self) -> Optional[list[str]]:
        """Write a checkpoint of the current state, one per seed (every process takes part;
        process 0 writes). Returns the paths written (None on other processes); reports
        nothing: the caller reports after the write."""
        host_runner = distributed.runner_to_host(self.runner)
        # Every process knows what is saved: a later decision to save (stop_diverged) must be
        # the same on all of them, since the gather above waits for all.
        self.update_of_last_save = self.update
        if not self.primary:
            return None
        paths = []
        for index, track in enumerate(self.tracks):
            paths.append(save_checkpoint(
                track.run_dir, runner_state=self.of_seed(host_runner, index),
                config=self.config.replace(seed=track.seed, num_seeds=1).to_dict(),
                update=self.update, env_steps=self.update * self.config.batch_size,
                run_name=track.run_name, wandb_run_id=self.wandb_run_id,
                elapsed_seconds=self.elapsed_before + self.train_seconds,
                keep=None, num_processes=self.num_processes, sittings=track.sittings,
                weights_origin=self.weights_origin))
            track.last_checkpoint = paths[-1]
        # Pruned only once every seed holds this update: a write that fails (or a kill) between
        # two seeds leaves an update that all seeds still have, which a resume needs.
        for track in self.tracks:
            prune_checkpoints(track.run_dir, self.update, self.options.keep_checkpoints)
        self.last_checkpoint = paths[0] if len(paths) == 1 else self.run_dir
        return paths

    def report_saved(self, paths: Optional[list[str]]) -> None:
        if not paths:
            return
        for track, path in zip(self.tracks, paths):
            if self.options.artifact:
                self.logger.log_checkpoint_artifact(path, track.run_name.replace("/", "-"),
                                                    self.update)
            self.logger.print(f"saved {path}")

    # ------------------------------------------------------------------------ signals
    def announce_stop(self, signum: int) -> None:
        chunk_end = self.progress.chunk_end()
        if self.compile_seconds is None and self.update < self.session_end:
            plan = "stopping once compilation ends (no update done yet, nothing new to save)"
        elif chunk_end is None and not self.records:
            plan = "stopping before the first update (nothing new to save)"
        elif chunk_end is None:
            plan = f"saving a checkpoint at update {self.update} and stopping"
        else:
            left = self.progress.seconds_left_in_chunk()
            when = f"in about {left:.0f} s" if left is not None else \
                "time unknown until the first update ends"
            plan = (f"saving a checkpoint when the current chunk ends at update {chunk_end} "
                    f"({when}) and stopping")
        self.console.notify(f"{signal_name(signum)} received: {plan}. Press Ctrl-C again to "
                            "stop now without saving.")

    def announce_abandon(self) -> None:
        self.console.notify("Ctrl-C again: stopping now without saving; last checkpoint: "
                            f"{self.last_checkpoint or 'none written in this session'}")

    # ------------------------------------------------------------------------ log, evaluate
    def chunk_record(self, num_active: int, seconds: float) -> dict:
        """What a chunk reports for the run as a whole (speed, position, batch layout)."""
        config = self.config
        # env_steps and sps are per seed (a seed's position, as in the live progress line);
        # with several seeds the program's throughput is sps_all_seeds.
        sps = num_active * config.batch_size / seconds
        record = {"update": self.update, "env_steps": self.update * config.batch_size,
                  "sps": sps, "chunk_seconds": seconds,
                  "eta_s": (config.num_updates - self.update) * config.batch_size / sps,
                  "elapsed_s": self.elapsed_before + self.train_seconds,
                  "compile_s": self.compile_seconds, **self.derived}
        if config.num_seeds > 1:
            record["sps_all_seeds"] = sps * config.num_seeds
        return record

    def seed_records(self, record: dict, metrics) -> list[dict]:
        """Per seed: the run's record with that seed's metrics, evaluation and health, the
        record a single-seed run would log."""
        multi = self.config.num_seeds > 1
        # Each process evaluates alone (no cross-process program) on its own copy.
        params = distributed.local_copy(self.runner.params) if self.evaluation_due() else None
        records = []
        for index, track in enumerate(self.tracks):
            seed_metrics = jax.tree.map(lambda x: x[:, index], metrics) if multi else metrics
            seed_record = {**record, **summarize_chunk(seed_metrics, self.env,
                                                       self.config.batch_size)}
            if params is not None:
                seed_record.update(self.evaluate(track.seed, self.of_seed(params, index)))
            warning = track.stalling.update(seed_record)
            seed_record["health/stalling"] = warning is not None
            seed_record["health/stalling_warning"] = warning
            records.append(seed_record)
            track.records.append(seed_record)
        return records

    def of_seed(self, tree, index: int):
        """Seed ``index``'s part of a runner-state value (the value itself for one seed)."""
        return ppo.seed_slice(tree, index) if self.config.num_seeds > 1 else tree

    def evaluation_due(self) -> bool:
        return self.evaluator is not None and (
            self.update % self.options.eval_interval == 0
            or self.update == self.config.num_updates)

    def evaluate(self, seed: int, params) -> dict:
        """Evaluation results of ``params`` (one seed's). Every process gets the same numbers;
        process 0 logs them."""
        key = jax.random.fold_in(jax.random.PRNGKey(seed + 1), self.update)
        results = self.evaluator(params, key)
        return {f"eval_{mode}/{name}": value for mode, per_env in results.items()
                for name, value in summarize_episodes(per_env, self.env).items()}

    def log(self, record: dict, seed_records: list[dict]) -> None:
        """One record per chunk: a single seed's as it is; several seeds' under ``seed<s>/``
        prefixes beside the run's common keys. The console gets one line per seed."""
        total = self.config.num_updates * self.config.batch_size
        if len(seed_records) == 1:
            (logged,) = seed_records
            logged = {k: v for k, v in logged.items() if k != "health/stalling_warning"}
        else:
            logged = dict(record)
            for track, seed_record in zip(self.tracks, seed_records):
                logged.update({f"seed{track.seed}/{key}": value
                               for key, value in seed_record.items()
                               if key not in record and key != "health/stalling_warning"})
        self.records.append(logged)
        self.logger.log(logged)
        for track, seed_record in zip(self.tracks, seed_records):
            prefix = f"seed {track.seed} | " if len(seed_records) > 1 else ""
            self.logger.print(prefix + progress_line(seed_record, total, self.env.alerts))
            if seed_record["health/stalling_warning"]:
                self.logger.print(prefix + seed_record["health/stalling_warning"])

    # ------------------------------------------------------------------------ run chunks
    def compile(self, stop) -> bool:
        """Compile the update chunk (if an update is left to do). Returns whether a stop
        signal came meanwhile (then no update is done: nothing new to save)."""
        if self.update < self.session_end:
            self.compile_seconds = self.chunk.compile(self.runner)
            self.logger.print(f"compiled {self.options.updates_per_chunk} updates per chunk in "
                              f"{self.compile_seconds:.1f}s"
                              + (" (live progress: not kept in the compile cache)"
                                 if self.live_progress else ""))
        return self.update < self.session_end and distributed.agree_any([stop.check()])[0]

    def run_chunks(self, stop, stopping: bool) -> bool:
        """Run chunks until the session's last update or a stop; after each: save (first, so
        that no failure of the console, the metrics file or wandb can cost a checkpoint), then
        log and evaluate. Returns whether a stop signal ended the loop."""
        options = self.options
        last_save = time.monotonic()
        while self.update < self.session_end and not stopping:
            num_active = self.next_chunk_size()
            self.progress.chunk_started(self.update, self.update + num_active)
            start = time.perf_counter()
            self.runner, metrics = run_chunk_interruptibly(self.chunk, self.runner, num_active,
                                                            while_waiting=stop.check)
            seconds = time.perf_counter() - start
            self.train_seconds += seconds
            done, failed = self.chunk_outcome(metrics, num_active)
            self.update += done
            self.progress.chunk_finished(self.update)
            if failed:
                self.stop_diverged(failed, metrics, done, seconds)
                return False
            self.end_session_if_out_of_time(start, num_active)

            due_by_updates = options.save_interval and self.update % options.save_interval == 0
            due_by_time = time.monotonic() - last_save >= options.save_interval_minutes * 60
            # Clocks and signals are per process: agree, so all processes save together.
            stopping, due_by_time = distributed.agree_any([stop.check(), due_by_time])
            saved = None  # the paths written now (process 0)
            saving = due_by_updates or due_by_time or stopping or self.update == self.session_end
            with self.failing_together():
                if saving:
                    saved = self.save()
                    last_save = time.monotonic()
                record = self.chunk_record(num_active, seconds)
                self.log(record, self.seed_records(record, metrics))
                self.report_saved(saved)
            # A signal that came while this chunk was being reported stops here, not a chunk
            # later.
            if not stopping and self.update < self.session_end \
                    and distributed.agree_any([stop.check()])[0]:
                stopping = True
                if not saving:
                    with self.failing_together():
                        self.report_saved(self.save())
        return stopping

    def next_chunk_size(self) -> int:
        return next_chunk_size(
            self.update, min(self.options.updates_per_chunk, self.session_end - self.update),
            (self.options.save_interval, self.options.eval_interval))

    def end_session_if_out_of_time(self, chunk_start: float, chunk_updates: int) -> None:
        """--stop-after-minutes: end the session here (this chunk is saved) when the next
        chunk would end past the budget, at the pace of the one that started at
        ``chunk_start``."""
        if self.stop_after_seconds is None or self.update >= self.session_end:
            return
        now = time.perf_counter()
        # The chunk's own time plus the save and log that came between it and the previous one.
        between = 0.0 if self._last_chunk_end is None else chunk_start - self._last_chunk_end
        self._last_chunk_end = now
        last_seconds = now - chunk_start + between
        fits = chunk_fits_budget(now - self.session_start, last_seconds, chunk_updates,
                                 self.next_chunk_size(), self.stop_after_seconds)
        # Clocks are per process: agree, so that every process stops at the same update.
        if distributed.agree_any([not fits])[0]:
            self.session_end, self.stopped_by_budget = self.update, True
            self.logger.print(f"time budget: {self.stop_after_seconds / 60:g} minutes; the next "
                              f"chunk would end past it: saving at update {self.update} and "
                              "stopping")

    @contextlib.contextmanager
    def failing_together(self):
        """Saving and logging: a failure of its body is raised here, and stops every other
        process with it. Process 0 alone writes (checkpoints, the metrics file, wandb), so it
        can fail where the others cannot; a process that went on would wait in the next
        collective for one that is gone, until the distributed runtime's heartbeat gives up.
        One small collective each time; with one process, the failure is raised as it is."""
        failure = None
        try:
            yield
        except Exception as error:  # agreed below, then raised as it was
            failure = error
        if not distributed.agree_any([failure is not None])[0]:
            return
        if failure is not None:
            raise failure
        raise distributed.DistributedError(
            f"process {jax.process_index()} stops at update {self.update}: another process "
            "failed while saving or logging (process 0's output says why)")

    def chunk_outcome(self, metrics, num_active: int) -> tuple[int, Optional[str]]:
        """(updates the chunk did, what came out non-finite or None). An update with a
        non-finite loss, gradient or parameter was undone on the device, with the rest of
        its chunk."""
        flags = np.asarray(metrics.nonfinite).reshape(len(metrics.nonfinite), -1)
        bad_rows = np.flatnonzero(flags.any(axis=1))
        if not len(bad_rows):
            return num_active, None
        row = bad_rows[0]
        bits = int(np.bitwise_or.reduce(flags[row].astype(np.int64)))
        what = " and ".join(name for bit, name in ppo.NONFINITE_NAMES.items() if bits & bit)
        seeds = [track.seed for track, bad in zip(self.tracks, flags[row]) if bad]
        which = f" (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})" \
            if self.config.num_seeds > 1 else ""
        return int(row), f"non-finite {what} at update {self.update + int(row) + 1}{which}"

    def stop_diverged(self, failed: str, metrics, done: int, seconds: float) -> None:
        """Save the last finite state (unless it is already saved), log what was done, and
        record why the run stops."""
        newest_saved = self.update_of_last_save if self.update_of_last_save is not None else \
            int(self.checkpoint["update"]) if self.resuming else 0
        with self.failing_together():
            paths = self.save() if self.update > newest_saved else None
            if done:
                record = self.chunk_record(done, seconds)
                self.log(record, self.seed_records(record, metrics))
            self.report_saved(paths)
        kept = self.last_checkpoint or (self.checkpoint["path"] if self.resuming else None)
        self.diverged = (f"training diverged: {failed}; that update was undone and the run "
                         "stopped. " + (f"The last finite state (update {self.update}) is "
                                        f"{kept}" if kept else
                                        "Nothing was saved (no update before it)")
                         + "; a lower --lr may help")

    def announce_end(self, stop) -> None:
        """What a stop signal left behind, and how to go on."""
        if self.last_checkpoint:
            outcome = f"saved {self.last_checkpoint}; resume with --resume {self.run_dir}"
        elif self.resuming:
            outcome = ("nothing new to save; resume with --resume "
                       f"{self.checkpoint.get('path', self.run_dir)}")
        else:
            outcome = "no update done, nothing to save"
        cause = signal_name(stop.signum) if stop.requested else \
            "a stop signal to another process"
        self.console.notify(f"stopped by {cause} at update {self.update}: {outcome}")

    def close(self) -> None:
        self.progress.close()
        if self.own_logger:
            self.logger.close()


def train(config: TrainConfig, options: RunOptions, checkpoint: Optional[dict] = None,
          weights_only: bool = False, stop_after_updates: Optional[int] = None,
          logger: Optional[RunLogger] = None,
          stop_after_seconds: Optional[float] = None) -> TrainResult:
    """Train to ``config.total_timesteps`` (or until ``stop_after_updates`` updates are done, or
    until the next chunk would end past ``stop_after_seconds`` of wall-clock from this call, or
    a stop signal), starting fresh, from ``checkpoint`` (full resume: same config required), or
    from its parameters only (``weights_only``: a new run). The first chunk always runs.

    In a multi-process run every process calls this with the same arguments; they run the same
    sequence of collectives, and only process 0 writes (logs, wandb, checkpoints)."""
    session_start = time.perf_counter()
    validate_config(config)
    validate_run_options(options)
    if stop_after_seconds is not None and not stop_after_seconds > 0:
        raise ConfigError(f"stop_after_seconds must be > 0, got {stop_after_seconds}")
    resuming = checkpoint is not None and not weights_only
    num_processes = jax.process_count()
    check_resume(config, checkpoint, resuming, num_processes)
    if config.distill_frozen_teacher and checkpoint is None:
        raise ConfigError("--distill-frozen-teacher needs --resume CHECKPOINT --weights-only: "
                          "the teacher is the network the run starts from")
    run_name, run_dir = run_directory(config, options, checkpoint, resuming)
    # Process 0 alone writes, so it alone checks; every process stops if it fails.
    failure, note, lock = None, None, None
    if distributed.is_primary():
        try:
            run_name, run_dir, note, lock = claim_run_directory(
                run_name, run_dir, resuming=resuming, name_given=options.run_name is not None,
                checkpoint=checkpoint)
        except ConfigError as error:
            failure = error
    try:
        if distributed.agree_any([failure is not None])[0]:
            raise failure or ConfigError("process 0 cannot write its run directory")
        try:
            enable_compile_cache(options.compile_cache_dir)
        except CompileCacheError as error:  # checked by validate_run_options; changed since
            raise ConfigError(str(error)) from None
        run = _Run(config, options, checkpoint=checkpoint, resuming=resuming,
                   weights_only=weights_only, stop_after_updates=stop_after_updates,
                   logger=logger, primary=distributed.is_primary(),
                   num_processes=num_processes, run_name=run_name, run_dir=run_dir, note=note,
                   stop_after_seconds=stop_after_seconds, session_start=session_start)
        try:
            with StopSignal(run.announce_stop, run.announce_abandon) as stop:
                interrupted = run.run_chunks(stop, stopping=run.compile(stop))
                stop.check()  # a signal during the last save: the run ended anyway, say so
                if interrupted:
                    run.announce_end(stop)
                stop_signal = stop.signum if interrupted else None
        finally:
            run.close()
    finally:
        if lock is not None:
            lock.close()
    resumed = {}  # what a session that saved nothing leaves as the newest checkpoints
    if resuming:
        resumed = dict(zip(config.seeds, checkpoint.get("seed_checkpoints",
                                                        [checkpoint["path"]])))
    seeds = [SeedResult(seed=track.seed, run_dir=track.run_dir,
                        runner_state=run.of_seed(run.runner, index),
                        records=track.records,
                        last_checkpoint=track.last_checkpoint or resumed.get(track.seed),
                        # a sitting that trained no update (resumed at its budget) is no one's
                        sittings=track.sittings if run.update > track.sittings[-1]["from_update"]
                        else track.sittings[:-1])
             for index, track in enumerate(run.tracks)]
    return TrainResult(runner_state=run.runner, run_name=run.run_name, run_dir=run.run_dir,
                       updates_done=run.update, env_steps=run.update * config.batch_size,
                       last_checkpoint=run.last_checkpoint or (checkpoint["path"] if resuming
                                                               else None),
                       records=run.records, interrupted=interrupted, stop_signal=stop_signal,
                       chunk=run.chunk, seeds=seeds, diverged=run.diverged,
                       stopped_by_budget=run.stopped_by_budget)
