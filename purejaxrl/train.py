"""The host loop: runs jitted chunks of PPO updates and, between chunks, logs, evaluates and
checkpoints. All numerics live in ``purejaxrl/ppo.py``; this file only drives them."""

from __future__ import annotations

import dataclasses
import datetime
import os
import signal
import threading
import time
from typing import Callable, Optional

import jax
import numpy as np

from envs.compile_cache import enable_compile_cache
from purejaxrl import distributed, ppo
from purejaxrl.checkpoint import CheckpointError, save_checkpoint
from purejaxrl.config import (ConfigError, RunOptions, TrainConfig, config_differences,
                              validate_config, validate_run_options)
from purejaxrl.evaluation import make_training_evaluator, summarize_episodes
from purejaxrl.health import StallingDetector
from purejaxrl.logger import (Console, Progress, RunLogger, SilentLogger, progress_line,
                              summarize_chunk)
from purejaxrl.networks import parameter_count


@dataclasses.dataclass
class TrainResult:
    runner_state: ppo.RunnerState
    run_name: str
    run_dir: str
    updates_done: int
    env_steps: int
    last_checkpoint: Optional[str]
    records: list
    interrupted: bool
    stop_signal: Optional[int]  # the signal that stopped the run (interrupted), else None
    chunk: ppo.UpdateChunk


def default_run_name(config: TrainConfig) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{config.env}-ppo-s{config.seed}-{stamp}"


class StopSignal:
    """SIGINT, SIGTERM and SIGHUP (the terminal closed) ask the loop to save a checkpoint when
    the current chunk ends and to stop; ``on_request(signum)`` answers at once (what will happen
    and about when). A second SIGINT (Ctrl-C again) calls ``on_abandon()`` and ends the process
    at once without saving, exit status 130; a repeated SIGTERM or SIGHUP changes nothing.
    SIGHUP stays ignored where it was ignored at start (``nohup``)."""

    def __init__(self, on_request: Callable[[int], None] = lambda signum: None,
                 on_abandon: Callable[[], None] = lambda: None):
        self.signum: Optional[int] = None  # the first stop signal received
        self._on_request = on_request
        self._on_abandon = on_abandon
        self._previous = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def _handle(self, signum, frame):
        if self.signum is None:
            self.signum = signum
            self._on_request(signum)
        elif signum == signal.SIGINT:
            self._on_abandon()
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


def run_chunk_interruptibly(chunk: ppo.UpdateChunk, runner: ppo.RunnerState, num_active: int):
    """(runner, metrics as host arrays) after ``num_active`` updates, computed on a worker
    thread while the main thread waits in short steps, so that a signal handler (the stop
    notice, a second Ctrl-C) runs at once: a chunk with a host callback executes inside its call
    on the CPU, where the handler would otherwise wait for the whole chunk."""
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


def train(config: TrainConfig, options: RunOptions, checkpoint: Optional[dict] = None,
          weights_only: bool = False, stop_after_updates: Optional[int] = None,
          logger: Optional[RunLogger] = None) -> TrainResult:
    """Train to ``config.total_timesteps`` (or until ``stop_after_updates`` updates are done, or
    a stop signal), starting fresh, from ``checkpoint`` (full resume: same config required), or
    from its parameters only (``weights_only``: a new run).

    In a multi-process run every process calls this with the same arguments; they run the same
    sequence of collectives, and only process 0 writes (logs, wandb, checkpoints)."""
    validate_config(config)
    validate_run_options(options)
    resuming = checkpoint is not None and not weights_only
    primary = distributed.is_primary()
    num_processes = jax.process_count()
    if resuming and int(checkpoint.get("num_processes", 1)) != num_processes:
        raise ConfigError(
            f"the checkpoint was written by a {checkpoint.get('num_processes', 1)}-process run "
            f"and this run has {num_processes} process(es); resume with the same process "
            "count (or use --weights-only to start a new run from its weights)")
    if resuming:
        saved = TrainConfig.from_dict(checkpoint["config"])
        # The device count may change (another machine): the global batch and every number
        # of the algorithm stay the same; only the per-device minibatch shuffles differ.
        differences = config_differences(saved.replace(num_devices=config.num_devices), config)
        if differences:
            raise ConfigError("the checkpoint was trained with a different config (checkpoint != "
                              "this run): " + "; ".join(differences)
                              + ". Pass only run options when resuming, or use --weights-only "
                              "to start a new run from its weights.")
    enable_compile_cache(options.compile_cache_dir)

    run_name = options.run_name or (checkpoint["run_name"] if resuming else None) \
        or default_run_name(config)
    run_dir = os.path.join(options.checkpoint_dir, run_name)
    env, env_params, network, optimizer, reward_components = ppo.build(config)
    mesh = ppo.make_mesh(config.num_devices)

    if resuming:
        runner = ppo.shard_runner_state(checkpoint["runner_state"], mesh)
        elapsed_before = float(checkpoint.get("elapsed_seconds", 0.0))
        wandb_run_id = checkpoint.get("wandb_run_id")
    else:
        runner = ppo.init_runner_state(config, env, env_params, network, optimizer,
                                       len(reward_components), mesh)
        if weights_only:
            saved = _restore_params(runner.params, checkpoint["runner_state"].params)
            replicated = ppo.place_on_mesh(saved, mesh, jax.sharding.PartitionSpec())
            runner = runner.replace(params=replicated,
                                    opt_state=jax.jit(optimizer.init)(replicated))
        elapsed_before = 0.0
        wandb_run_id = None
    update = int(jax.device_get(runner.update_step))

    own_logger = logger is None
    if own_logger and not primary:
        logger = SilentLogger()
    elif own_logger:
        logger = RunLogger(run_dir, use_wandb=options.wandb, quiet=options.quiet,
                           wandb_project=options.wandb_project, wandb_entity=options.wandb_entity,
                           wandb_mode=options.wandb_mode, wandb_run_id=wandb_run_id,
                           run_name=run_name, config=config.to_dict())
    wandb_run_id = logger.wandb_run_id or wandb_run_id

    derived = {"num_devices": config.num_devices, "num_processes": num_processes,
               "global_batch": config.batch_size,
               "num_minibatches": config.num_minibatches,
               "minibatch_size": config.minibatch_size, "update_epochs": config.update_epochs,
               "num_updates": config.num_updates}
    logger.print(f"run {run_name} -> {run_dir}")
    logger.print(f"{'resuming at' if resuming else 'starting at'} update {update}/"
                 f"{config.num_updates}; global batch {config.batch_size} = {config.num_envs} "
                 f"envs x {config.num_steps} steps over {config.num_devices} device(s) "
                 f"({jax.default_backend()}"
                 + (f", {num_processes} processes" if num_processes > 1 else "")
                 + f"); {config.num_minibatches} minibatches of "
                 f"{config.minibatch_size}; {config.update_epochs} epochs; "
                 f"{parameter_count(runner.params):,} parameters")

    console = logger.console if hasattr(logger, "console") else Console(enabled=False)
    progress = Progress(console, config.num_updates, config.batch_size,
                        options.progress_interval_s)
    # Same decision on every process (options are shared), so all compile the same program.
    live_progress = options.progress and not options.quiet
    chunk = ppo.UpdateChunk(config, env, env_params, network, optimizer, reward_components,
                            options.updates_per_chunk, mesh,
                            on_update=progress.tick if live_progress else None)
    session_end = config.num_updates if stop_after_updates is None else min(
        config.num_updates, update + stop_after_updates)
    evaluator = None
    if options.eval_interval:
        evaluator = make_training_evaluator(env, env_params, network, options.eval_envs,
                                            options.eval_max_steps)
    records, last_checkpoint = [], None
    stalling = StallingDetector()
    train_seconds = 0.0
    compile_seconds = None

    def save() -> Optional[str]:
        """Write a checkpoint of the current state (every process takes part; process 0
        writes). Reports nothing: the caller reports after the write."""
        host_runner = distributed.runner_to_host(runner)
        if not primary:
            return None
        return save_checkpoint(
            run_dir, runner_state=host_runner, config=config.to_dict(), update=update,
            env_steps=update * config.batch_size, run_name=run_name,
            wandb_run_id=wandb_run_id, elapsed_seconds=elapsed_before + train_seconds,
            keep=options.keep_checkpoints, num_processes=num_processes)

    def report_saved(path: Optional[str]) -> None:
        if path is None:
            return
        if options.artifact:
            logger.log_checkpoint_artifact(path, run_name, update)
        logger.print(f"saved {path}")

    def announce_stop(signum: int) -> None:
        chunk_end = progress.chunk_end()
        if compile_seconds is None and update < session_end:
            plan = "stopping once compilation ends (no update done yet, nothing new to save)"
        elif chunk_end is None and not records:
            plan = "stopping before the first update (nothing new to save)"
        elif chunk_end is None:
            plan = f"saving a checkpoint at update {update} and stopping"
        else:
            left = progress.seconds_left_in_chunk()
            when = f"in about {left:.0f} s" if left is not None else \
                "time unknown until the first update ends"
            plan = (f"saving a checkpoint when the current chunk ends at update {chunk_end} "
                    f"({when}) and stopping")
        console.notify(f"{signal_name(signum)} received: {plan}. Press Ctrl-C again to stop "
                       "now without saving.")

    def announce_abandon() -> None:
        console.notify("Ctrl-C again: stopping now without saving; last checkpoint: "
                       f"{last_checkpoint or 'none written in this session'}")

    try:
        with StopSignal(announce_stop, announce_abandon) as stop:
            if update < session_end:
                compile_seconds = chunk.compile(runner)
                logger.print(f"compiled {options.updates_per_chunk} updates per chunk in "
                             f"{compile_seconds:.1f}s"
                             + (" (live progress: not kept in the compile cache)"
                                if live_progress else ""))
            # A stop during compilation: no update done, nothing new to save.
            stopping = update < session_end and distributed.agree_any([stop.requested])[0]
            last_save = time.monotonic()
            while update < session_end and not stopping:
                num_active = next_chunk_size(
                    update, min(options.updates_per_chunk, session_end - update),
                    (options.save_interval, options.eval_interval))
                progress.chunk_started(update, update + num_active)
                start = time.perf_counter()
                runner, metrics = run_chunk_interruptibly(chunk, runner, num_active)
                seconds = time.perf_counter() - start
                train_seconds += seconds
                update += num_active
                progress.chunk_finished(update)

                # Save first, then report: no failure of the console, the metrics file or
                # wandb can cost a checkpoint.
                due_by_updates = options.save_interval and update % options.save_interval == 0
                due_by_time = time.monotonic() - last_save >= options.save_interval_minutes * 60
                # Clocks and signals are per process: agree, so all processes save together.
                stopping, due_by_time = distributed.agree_any([stop.requested, due_by_time])
                saved = None  # the path written now (process 0)
                saving = due_by_updates or due_by_time or stopping or update == session_end
                if saving:
                    saved = save()
                    last_checkpoint = saved or last_checkpoint
                    last_save = time.monotonic()

                sps = num_active * config.batch_size / seconds
                record = {"update": update, "env_steps": update * config.batch_size,
                          "sps": sps, "chunk_seconds": seconds,
                          "eta_s": (config.num_updates - update) * config.batch_size / sps,
                          "elapsed_s": elapsed_before + train_seconds,
                          "compile_s": compile_seconds, **derived,
                          **summarize_chunk(metrics, reward_components)}
                if evaluator is not None and (update % options.eval_interval == 0
                                              or update == config.num_updates):
                    key = jax.random.fold_in(jax.random.PRNGKey(config.seed + 1), update)
                    # Each process evaluates alone (no cross-process program); all get the
                    # same numbers, process 0 logs them.
                    results = evaluator(distributed.local_copy(runner.params), key)
                    for mode, per_env in results.items():
                        for name, value in summarize_episodes(per_env).items():
                            record[f"eval_{mode}/{name}"] = value
                stalling_warning = stalling.update(record)
                record["health/stalling"] = stalling_warning is not None
                records.append(record)
                logger.log(record)
                logger.print(progress_line(record, config.num_updates * config.batch_size))
                if stalling_warning:
                    logger.print(stalling_warning)
                report_saved(saved)
                # A signal that came while this chunk was being reported stops here, not a
                # chunk later.
                if not stopping and update < session_end \
                        and distributed.agree_any([stop.requested])[0]:
                    stopping = True
                    if not saving:
                        saved = save()
                        last_checkpoint = saved or last_checkpoint
                        report_saved(saved)
            interrupted = stopping
            if interrupted:
                if last_checkpoint:
                    outcome = f"saved {last_checkpoint}; resume with --resume {run_dir}"
                elif resuming:
                    outcome = ("nothing new to save; resume with --resume "
                               f"{checkpoint.get('path', run_dir)}")
                else:
                    outcome = "no update done, nothing to save"
                cause = signal_name(stop.signum) if stop.requested else \
                    "a stop signal to another process"
                console.notify(f"stopped by {cause} at update {update}: {outcome}")
            stop_signal = stop.signum if interrupted else None
    finally:
        progress.close()
        if own_logger:
            logger.close()
    return TrainResult(runner_state=runner, run_name=run_name, run_dir=run_dir,
                       updates_done=update, env_steps=update * config.batch_size,
                       last_checkpoint=last_checkpoint, records=records,
                       interrupted=interrupted, stop_signal=stop_signal, chunk=chunk)
