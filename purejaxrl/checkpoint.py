"""Checkpoints: ``<checkpoint_dir>/<run-name>/checkpoint_<update>.pkl`` (cloudpickle).

A checkpoint holds the complete runner state as host (numpy) arrays: parameters, optimizer
state (including the schedule's step count), env states, the carried observations, every RNG
key, the episode accumulators and the update counter (global values: in a multi-process run
the env states of all processes, gathered; process 0 alone writes the file); plus the ``TrainConfig``, the env-step
counter, the run name, the wandb run id, the process count and the package versions. Writes are atomic (a temp
file in the same directory, fsynced, then ``os.replace`` and an fsync of the directory), so a
crash or ``kill -9`` mid-write never leaves a truncated checkpoint under the final name; the
next save removes the orphaned temp file.
"""

from __future__ import annotations

import datetime
import io
import os
import pickle
import platform
import re
import tempfile
from importlib import metadata

import cloudpickle
import jax
import numpy as np

CHECKPOINT_FORMAT = "hackmatrix-purejaxrl-checkpoint"
CHECKPOINT_VERSION = 1
_CHECKPOINT_NAME = re.compile(r"^checkpoint_(\d+)\.pkl$")
# Seed s of a multi-seed run (``--num-seeds``) is a single-seed run in <run dir>/seed-<s>.
_SEED_DIRECTORY_PREFIX = "seed-"
_SEED_DIRECTORY = re.compile(rf"^{_SEED_DIRECTORY_PREFIX}(\d+)$")
# A checkpoint is written under a temp name and renamed: only complete files match
# _CHECKPOINT_NAME, so --resume never picks up a write that was cut short.
_TEMP_PREFIX, _TEMP_SUFFIX = ".checkpoint_", ".tmp"


# Modules that held pickled-by-reference classes before envs/hackmatrix was split into
# sub-packages (issue 15): checkpoints written before the move name them.
_MOVED_MODULES = {
    **{f"envs.hackmatrix.{name}": f"envs.hackmatrix.core.{name}"
       for name in ("bitboard", "constants", "enemies", "entities", "game", "generation",
                    "history", "mask", "programs", "rewards", "rng", "sparse", "spawn", "state")},
    **{f"envs.hackmatrix.{name}": f"envs.hackmatrix.swift_io.{name}"
       for name in ("parity_client", "protocol", "raw_observation", "scenario")},
}


class _Unpickler(pickle.Unpickler):
    """Resolves classes pickled under a module path that has since moved."""

    def find_class(self, module, name):
        return super().find_class(_MOVED_MODULES.get(module, module), name)


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable, or not one of ours; the message says which."""


def package_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in ("jax", "jaxlib", "flax", "optax", "numpy", "gymnax", "cloudpickle"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def checkpoint_path(run_dir: str, update: int) -> str:
    return os.path.join(run_dir, f"checkpoint_{update}.pkl")


def list_checkpoints(run_dir: str) -> list[tuple[int, str]]:
    """(update, path) of the checkpoints in ``run_dir``, oldest first."""
    if not os.path.isdir(run_dir):
        return []
    found = []
    for name in os.listdir(run_dir):
        match = _CHECKPOINT_NAME.match(name)
        if match:
            found.append((int(match.group(1)), os.path.join(run_dir, name)))
    return sorted(found)


def _env_version(config: dict):
    """The contract version of the env the run was trained on (None where it declares none)."""
    from envs import registry
    return registry.env_version(config.get("env"))


def save_checkpoint(run_dir: str, *, runner_state, config: dict, update: int, env_steps: int,
                    run_name: str, wandb_run_id: str | None, elapsed_seconds: float,
                    keep: int, num_processes: int = 1) -> str:
    """Write atomically, then delete all but the newest ``keep`` checkpoints of the run (and
    temp files of killed writes). An OSError (disk full, no permission) is a CheckpointError
    naming the file; the previous checkpoints stay as they were.
    ``runner_state`` holds global values (a multi-process run gathers them first:
    ``distributed.runner_to_host``); ``num_processes`` is recorded because a resume needs the
    same process count."""
    os.makedirs(run_dir, exist_ok=True)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "format_version": CHECKPOINT_VERSION,
        "runner_state": jax.device_get(runner_state),
        "config": dict(config),
        "update": int(update),
        "env_steps": int(env_steps),
        "run_name": run_name,
        "wandb_run_id": wandb_run_id,
        "elapsed_seconds": float(elapsed_seconds),
        "num_processes": int(num_processes),
        "versions": package_versions(),
        "env_version": _env_version(config),
        "saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
    }
    path = checkpoint_path(run_dir, update)
    try:
        fd, tmp_path = tempfile.mkstemp(dir=run_dir, prefix=_TEMP_PREFIX, suffix=_TEMP_SUFFIX)
    except OSError as error:
        raise CheckpointError(f"cannot write checkpoint {path}: {error}") from error
    try:
        with os.fdopen(fd, "wb") as handle:
            cloudpickle.dump(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates the file 0600; give it the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        os.replace(tmp_path, path)
    except BaseException as error:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)
        if isinstance(error, OSError):
            raise CheckpointError(f"cannot write checkpoint {path}: {error}") from error
        raise
    _fsync_directory(run_dir)  # so that the rename itself survives a power loss
    for _, old_path in list_checkpoints(run_dir)[:-keep]:
        os.unlink(old_path)
    # Temp files of writes that were killed (kill -9, power loss) mid-way.
    for name in os.listdir(run_dir):
        if name.startswith(_TEMP_PREFIX) and name.endswith(_TEMP_SUFFIX):
            os.unlink(os.path.join(run_dir, name))
    return path


def _fsync_directory(directory: str) -> None:
    """Best effort: some filesystems cannot fsync a directory; the file itself is synced."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def seed_directory_name(seed: int) -> str:
    return f"{_SEED_DIRECTORY_PREFIX}{seed}"


def seed_directories(run_dir: str) -> list[tuple[int, str]]:
    """(seed, directory) of the seeds of a multi-seed run directory, by seed; [] for any other
    path."""
    if not os.path.isdir(run_dir):
        return []
    found = [(int(match.group(1)), os.path.join(run_dir, name))
             for name in os.listdir(run_dir) if (match := _SEED_DIRECTORY.match(name))]
    return sorted(found)


def stack_seeds(trees: list):
    """One value with a leading seed axis from per-seed values of the same structure."""
    return jax.tree.map(lambda *leaves: np.stack([np.asarray(leaf) for leaf in leaves]), *trees)


def load_multi_seed_checkpoint(run_dir: str) -> dict:
    """A multi-seed run directory as one checkpoint to resume: every seed's checkpoint at the
    newest update that all of them have (a stop between two seeds' writes leaves some a save
    ahead), runner states stacked on a leading seed axis, config ``num_seeds`` = their count.
    Raises CheckpointError when the seeds do not form one run."""
    seeds = seed_directories(run_dir)
    common = set.intersection(*[{update for update, _ in list_checkpoints(directory)}
                                for _, directory in seeds])
    if not common:
        raise CheckpointError(f"the seeds of {run_dir} have no checkpoint at a common update")
    update = max(common)
    loaded = [load_checkpoint(checkpoint_path(directory, update)) for _, directory in seeds]
    first = loaded[0]
    seed_numbers = [seed for seed, _ in seeds]
    if seed_numbers != list(range(seed_numbers[0], seed_numbers[0] + len(seeds))):
        raise CheckpointError(f"{run_dir}: seeds {seed_numbers} are not consecutive; resume "
                              "each seed alone with --resume <run directory>/seed-<s>")
    for (seed, _), checkpoint in zip(seeds, loaded):
        config = dict(checkpoint["config"], seed=first["config"]["seed"])
        if checkpoint["config"].get("seed") != seed or \
                config != first["config"] or checkpoint["num_processes"] != first["num_processes"]:
            raise CheckpointError(f"{checkpoint['path']} is not seed {seed} of the run of "
                                  f"{first['path']}")
    return {**first, "path": run_dir,
            "config": dict(first["config"], num_seeds=len(seeds)),
            "runner_state": stack_seeds([checkpoint["runner_state"] for checkpoint in loaded]),
            "run_name": os.path.dirname(first["run_name"]) or os.path.basename(run_dir),
            "seed_checkpoints": [checkpoint["path"] for checkpoint in loaded]}


def resolve_checkpoint(path: str) -> str:
    """A checkpoint file as given, or the newest checkpoint of a run directory."""
    if os.path.isdir(path):
        checkpoints = list_checkpoints(path)
        if not checkpoints:
            raise CheckpointError(f"no checkpoint_<update>.pkl files in directory {path}")
        return checkpoints[-1][1]
    if not os.path.exists(path):
        raise CheckpointError(f"checkpoint not found: {path}")
    return path


def read_checkpoint_bytes(path: str) -> tuple[str, bytes]:
    """(file path, raw bytes) of a checkpoint file or of a run directory's newest."""
    file_path = resolve_checkpoint(path)
    try:
        with open(file_path, "rb") as handle:
            return file_path, handle.read()
    except OSError as error:
        raise CheckpointError(f"cannot read checkpoint {file_path}: {error}") from None


def parse_checkpoint(data: bytes, file_path: str) -> dict:
    """Unpickle and sanity-check checkpoint bytes. Raises CheckpointError."""
    try:
        payload = _Unpickler(io.BytesIO(data)).load()
    except Exception as error:  # truncated, corrupt, or unpicklable content
        raise CheckpointError(
            f"cannot read checkpoint {file_path}: {type(error).__name__}: {error}") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{file_path} is not a HackMatrix PureJaxRL checkpoint")
    if payload.get("format_version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"{file_path} has checkpoint format version "
                              f"{payload.get('format_version')}, expected {CHECKPOINT_VERSION}")
    missing = [key for key in ("runner_state", "config", "update", "env_steps")
               if key not in payload]
    if missing:
        raise CheckpointError(f"{file_path} lacks {', '.join(missing)}")
    payload.setdefault("num_processes", 1)
    payload["path"] = file_path
    return payload


def load_checkpoint(path: str, multi_seed: bool = False) -> dict:
    """Load and sanity-check a checkpoint (file or run directory). The directory of a
    multi-seed run is loaded (its seeds stacked, to resume it) only with ``multi_seed``; else
    the message names its seed directories, since a policy is one seed's. Raises
    CheckpointError."""
    seeds = seed_directories(path) if not list_checkpoints(path) else []
    if seeds and multi_seed:
        return load_multi_seed_checkpoint(path)
    if seeds:
        raise CheckpointError(f"{path} is a multi-seed run (seeds "
                              f"{', '.join(str(seed) for seed, _ in seeds)}): name one seed's "
                              f"directory, e.g. {seeds[0][1]}")
    return parse_checkpoint(*reversed(read_checkpoint_bytes(path)))
