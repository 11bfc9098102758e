"""Checkpoints: ``<run dir>/checkpoint_<update>.msgpack``, a format that cannot carry code.

One file per save, a msgpack map of plain data:

* ``format``, ``format_version``: what the file is;
* ``metadata``: JSON text: the ``TrainConfig``, the update and env-step counters, the run name,
  the wandb run id, seconds trained, the process count, the package versions, the env version;
* ``arrays``: ``{key path: [dtype name, shape, little-endian bytes]}``, one entry per leaf of the
  runner state (parameters, optimizer state, env states, observations, every RNG key, episode
  accumulators, reward-normaliser statistics, the update counter), keyed by
  ``jax.tree_util.keystr`` of its path.

Loading never creates a Python object the file names: it decodes msgpack (no extension types
accepted), parses the JSON, and fills a template runner state, built by this code from the
recorded config (``jax.eval_shape`` of the initialisation), leaf by leaf, checking every key,
shape and dtype; a dtype outside ``_DTYPES`` (object, void, structured) is refused. Pickle
files (the format before issue 27) are never opened: they are refused with the command that
converts them (``scripts/convert_checkpoint.py``, which unpickles only behind an explicit
flag saying that it runs the file's code).

Values are global (in a multi-process run the env states of all processes, gathered; process 0
alone writes). Writes are atomic (a temp file in the same directory, fsynced, then
``os.replace`` and an fsync of the directory), so a crash or ``kill -9`` mid-write never leaves a
truncated checkpoint under the final name; the next save removes the orphaned temp file.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import functools
import json
import math
import os
import platform
import re
import sys
import tempfile
from importlib import metadata as package_metadata
from typing import Callable

import jax
import ml_dtypes
import msgpack
import numpy as np

from purejaxrl.config import OPTIONAL_INT_FIELDS, ConfigError, TrainConfig, validate_config

CHECKPOINT_FORMAT = "hackmatrix-purejaxrl-checkpoint"
CHECKPOINT_VERSION = 2
CHECKPOINT_SUFFIX = ".msgpack"
_CHECKPOINT_NAME = re.compile(r"^checkpoint_(\d+)\.msgpack$")
# Checkpoints before issue 27: cloudpickle files, which run code when opened.
LEGACY_SUFFIX = ".pkl"
_LEGACY_NAME = re.compile(r"^checkpoint_(\d+)\.pkl$")
TRUST_FLAG = "--i-trust-this-file-and-allow-code-execution"
CONVERTER = "python scripts/convert_checkpoint.py"
# Seed s of a multi-seed run (``--num-seeds``) is a single-seed run in <run dir>/seed-<s>.
_SEED_DIRECTORY_PREFIX = "seed-"
_SEED_DIRECTORY = re.compile(rf"^{_SEED_DIRECTORY_PREFIX}(\d+)$")
# A checkpoint is written under a temp name and renamed: only complete files match
# _CHECKPOINT_NAME, so --resume never picks up a write that was cut short.
_TEMP_PREFIX, _TEMP_SUFFIX = ".checkpoint_", ".tmp"
METRICS_FILE = "metrics.jsonl"  # a run's records, beside its checkpoints (logger.RunLogger)
# The array dtypes a checkpoint may hold: plain numbers only (no object, void or structured
# dtype, whose bytes could stand for Python objects).
_DTYPES = {name: np.dtype(name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64")}
_DTYPES["bfloat16"] = np.dtype(ml_dtypes.bfloat16)
_TOP_LEVEL_KEYS = {"format", "format_version", "metadata", "arrays"}
_METADATA_TYPES = {"config": (dict,), "update": (int,), "env_steps": (int,),
                   "run_name": (str,), "wandb_run_id": (str, type(None)),
                   "elapsed_seconds": (int, float), "num_processes": (int,),
                   "versions": (dict,), "env_version": (str, type(None))}
# Which code trained the run, one entry per sitting: [{"from_update": u, "commit": c}], the
# first update it trained and its commit (``provenance.process_commit``). Checkpoints written
# before it existed have none.
SITTINGS_KEY = "sittings"
# Of a run started from another run's weights (``--weights-only``): {"file", "run_name",
# "update", "sittings"} of the checkpoint it started from.
WEIGHTS_FROM_KEY = "weights_from"


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable, or not one of ours; the message says which."""


def package_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in ("jax", "jaxlib", "flax", "optax", "numpy", "gymnax", "msgpack"):
        try:
            versions[name] = package_metadata.version(name)
        except package_metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def checkpoint_path(run_dir: str, update: int) -> str:
    return os.path.join(run_dir, f"checkpoint_{update}{CHECKPOINT_SUFFIX}")


def _list_matching(run_dir: str, pattern: re.Pattern) -> list[tuple[int, str]]:
    if not os.path.isdir(run_dir):
        return []
    found = [(int(match.group(1)), os.path.join(run_dir, name))
             for name in os.listdir(run_dir) if (match := pattern.match(name))]
    return sorted(found)


def list_checkpoints(run_dir: str) -> list[tuple[int, str]]:
    """(update, path) of the checkpoints in ``run_dir``, oldest first."""
    return _list_matching(run_dir, _CHECKPOINT_NAME)


def list_legacy_checkpoints(run_dir: str) -> list[tuple[int, str]]:
    """(update, path) of the pickle checkpoints (before issue 27) in ``run_dir``."""
    return _list_matching(run_dir, _LEGACY_NAME)


def legacy_refusal(path: str) -> str:
    """Why a pickle checkpoint (a file, or a directory of them) is not opened, and the command
    that converts it."""
    what = "is a pickle checkpoint" if os.path.isfile(path) else "holds pickle checkpoints"
    return (f"{path} {what} (the format before issue 27): pickle runs code when opened, so it "
            "is never loaded. If you trust where it came from, convert it: "
            f"{CONVERTER} {TRUST_FLAG} {path}")


def _env_version(config: dict):
    """The contract version of the env the run was trained on (None where it declares none)."""
    from envs import registry
    return registry.env_version(config.get("env"))


# ---------------------------------------------------------------------------- encode

def _array_entry(key: str, leaf) -> list:
    array = np.asarray(leaf)
    if array.dtype.name not in _DTYPES or array.dtype != _DTYPES[array.dtype.name]:
        raise CheckpointError(f"cannot save {key}: dtype {array.dtype} is not a plain number "
                              "type")
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return [array.dtype.name, list(array.shape), little.tobytes()]


def encode_checkpoint(runner_state, record: dict) -> bytes:
    """The bytes of a checkpoint: ``record`` (JSON-able metadata) and every leaf of
    ``runner_state`` (host arrays) keyed by its path."""
    arrays = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(jax.device_get(runner_state))[0]:
        key = jax.tree_util.keystr(path)
        arrays[key] = _array_entry(key, leaf)
    return msgpack.packb({"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION,
                          "metadata": json.dumps(record, sort_keys=True), "arrays": arrays},
                         use_bin_type=True)


def checkpoint_record(*, config: dict, update: int, env_steps: int, run_name: str,
                      wandb_run_id: str | None, elapsed_seconds: float,
                      num_processes: int = 1, **extra) -> dict:
    return {"config": dict(config), "update": int(update), "env_steps": int(env_steps),
            "run_name": run_name, "wandb_run_id": wandb_run_id,
            "elapsed_seconds": float(elapsed_seconds), "num_processes": int(num_processes),
            "versions": package_versions(), "env_version": _env_version(config),
            "saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(), **extra}


# ---------------------------------------------------------------------------- write

def write_checkpoint_file(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename, fsync of the
    directory). An OSError is a CheckpointError naming the file; nothing is left under the
    final name or the temp name."""
    directory = os.path.dirname(path) or "."
    try:
        fd, tmp_path = tempfile.mkstemp(dir=directory, prefix=_TEMP_PREFIX, suffix=_TEMP_SUFFIX)
    except OSError as error:
        raise CheckpointError(f"cannot write checkpoint {path}: {error}") from error
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
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
    _fsync_directory(directory)  # so that the rename itself survives a power loss


def save_checkpoint(run_dir: str, *, runner_state, config: dict, update: int, env_steps: int,
                    run_name: str, wandb_run_id: str | None, elapsed_seconds: float,
                    keep: int | None, num_processes: int = 1,
                    sittings: list | None = None, weights_origin: dict | None = None) -> str:
    """Write atomically, then ``prune_checkpoints(run_dir, update, keep)`` unless ``keep`` is
    None (a caller writing several files of one save prunes after the last). An OSError (disk
    full, no permission) is a CheckpointError naming the file; the previous checkpoints stay as
    they were. ``runner_state`` holds global values (a multi-process run gathers them first:
    ``distributed.runner_to_host``); ``num_processes`` is recorded because a resume needs the
    same process count; ``sittings`` (``sittings_with``) names the code that trained it and
    ``weights_origin`` (``weights_from``) the run whose weights it started from."""
    try:
        os.makedirs(run_dir, exist_ok=True)
    except OSError as error:
        raise CheckpointError(f"cannot create run directory {run_dir}: {error}") from error
    record = checkpoint_record(config=config, update=update, env_steps=env_steps,
                               run_name=run_name, wandb_run_id=wandb_run_id,
                               elapsed_seconds=elapsed_seconds, num_processes=num_processes,
                               **({SITTINGS_KEY: sittings} if sittings is not None else {}),
                               **({WEIGHTS_FROM_KEY: weights_origin} if weights_origin
                                  else {}))
    path = checkpoint_path(run_dir, update)
    write_checkpoint_file(path, encode_checkpoint(runner_state, record))
    if keep is not None:
        prune_checkpoints(run_dir, update, keep)
    return path


def prune_checkpoints(run_dir: str, update: int, keep: int) -> None:
    """Delete all but the newest ``keep`` checkpoints up to ``update`` (the one just written),
    and temp files of writes that were killed (kill -9, power loss) mid-way. A checkpoint after
    ``update`` is not this session's to delete: an unreadable newest one that the resume
    skipped stays until the run writes that update again."""
    done = [path for number, path in list_checkpoints(run_dir) if number <= update]
    for old_path in done[:-keep]:
        os.unlink(old_path)
    for name in os.listdir(run_dir):
        if name.startswith(_TEMP_PREFIX) and name.endswith(_TEMP_SUFFIX):
            os.unlink(os.path.join(run_dir, name))


def intact_checkpoints_after(run_dir: str, update: int) -> list[str]:
    """The checkpoints of ``run_dir`` after ``update`` that load: what a session resumed from
    ``update`` would prune and then overwrite (an unreadable one is no loss)."""
    intact = []
    for number, path in list_checkpoints(run_dir):
        if number <= update:
            continue
        try:
            read_checkpoint_file(path)
        except CheckpointError:
            continue
        intact.append(path)
    return intact


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


# ---------------------------------------------------------------------------- decode

def _refuse_extension(code, data):
    raise ValueError(f"msgpack extension type {code} (not part of the checkpoint format)")


def _looks_like_pickle(data: bytes) -> bool:
    """Pickle protocols 2 to 5 open with PROTO (0x80) and the protocol number; a checkpoint
    opens with a msgpack map of four entries (0x84)."""
    return len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5


def _decode(data: bytes, file_path: str) -> tuple[dict, dict]:
    """(metadata, arrays) of checkpoint bytes, as plain data. Raises CheckpointError."""
    if file_path.endswith(LEGACY_SUFFIX) or _looks_like_pickle(data):
        raise CheckpointError(legacy_refusal(file_path))
    try:
        top = msgpack.unpackb(data, raw=False, strict_map_key=True, ext_hook=_refuse_extension)
    except Exception as error:  # truncated, corrupt or another format: msgpack says which
        raise CheckpointError(f"cannot read checkpoint {file_path}: not a checkpoint file "
                              f"({type(error).__name__}: {error})") from None
    if not isinstance(top, dict) or top.get("format") != CHECKPOINT_FORMAT \
            or set(top) != _TOP_LEVEL_KEYS:
        raise CheckpointError(f"{file_path} is not a HackMatrix PureJaxRL checkpoint")
    if top["format_version"] != CHECKPOINT_VERSION:
        raise CheckpointError(f"{file_path} has checkpoint format version "
                              f"{top['format_version']!r}, expected {CHECKPOINT_VERSION}")
    try:
        record = json.loads(top["metadata"]) if isinstance(top["metadata"], str) else None
    except ValueError as error:
        raise CheckpointError(f"cannot read checkpoint {file_path}: its metadata is not JSON "
                              f"({error})") from None
    if not isinstance(record, dict):
        raise CheckpointError(f"cannot read checkpoint {file_path}: no metadata")
    for key, types in _METADATA_TYPES.items():
        value = record.get(key)
        if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
            raise CheckpointError(f"cannot read checkpoint {file_path}: metadata {key!r} is "
                                  f"{value!r}")
    for key, valid in ((SITTINGS_KEY, _valid_sittings), (WEIGHTS_FROM_KEY, _valid_weights_from)):
        if key in record and not valid(record[key]):
            raise CheckpointError(f"cannot read checkpoint {file_path}: metadata {key!r} is "
                                  f"{record[key]!r}")
    if not isinstance(top["arrays"], dict):
        raise CheckpointError(f"cannot read checkpoint {file_path}: no arrays")
    return record, top["arrays"]


def _valid_sittings(sittings) -> bool:
    return isinstance(sittings, list) and all(
        isinstance(sitting, dict) and set(sitting) == {"from_update", "commit"}
        and isinstance(sitting["from_update"], int) and not isinstance(sitting["from_update"],
                                                                        bool)
        and isinstance(sitting["commit"], (str, type(None))) for sitting in sittings)


def _valid_weights_from(origin) -> bool:
    return isinstance(origin, dict) and set(origin) == {"file", "run_name", "update",
                                                        "sittings"} \
        and isinstance(origin["file"], str) and isinstance(origin["run_name"], str) \
        and isinstance(origin["update"], int) and _valid_sittings(origin["sittings"])


def sittings_with(earlier: list, from_update: int, commit: str | None) -> list:
    """The sittings of a run whose sitting starting at ``from_update`` runs the code of
    ``commit``, after the sittings ``earlier`` (those of the checkpoint it resumes; none for a
    new run) that began before that update."""
    kept = [sitting for sitting in earlier if sitting["from_update"] < from_update]
    return kept + [{"from_update": int(from_update), "commit": commit}]


def weights_from(checkpoint: dict) -> dict:
    """The ``WEIGHTS_FROM_KEY`` record of a run started from ``checkpoint``'s weights."""
    return {"file": os.path.basename(checkpoint["path"]), "run_name": checkpoint["run_name"],
            "update": int(checkpoint["update"]),
            "sittings": checkpoint.get(SITTINGS_KEY, [])}


def _config_of(values: dict, file_path: str) -> TrainConfig:
    """The recorded config, checked field by field: the types of ``TrainConfig``'s defaults
    and ``validate_config``. A checkpoint file holds one seed."""
    try:
        config = TrainConfig.from_dict(values)
    except (ConfigError, TypeError) as error:
        raise CheckpointError(f"{file_path}: its config is not this code's: {error}") from None
    defaults = TrainConfig()
    for name in config.to_dict():
        value, default = getattr(config, name), getattr(defaults, name)
        expected = (int, type(None)) if name in OPTIONAL_INT_FIELDS else \
            (int, float) if isinstance(default, float) else (type(default),)
        if not isinstance(value, expected) or isinstance(value, bool) != isinstance(default,
                                                                                    bool):
            raise CheckpointError(f"{file_path}: config field {name} is {value!r}")
    try:
        validate_config(config)
    except ConfigError as error:
        raise CheckpointError(f"{file_path}: its config is invalid: {error}") from None
    if config.num_seeds != 1:
        raise CheckpointError(f"{file_path}: a checkpoint file holds one seed, its config says "
                              f"num_seeds {config.num_seeds}")
    return config


@functools.lru_cache(maxsize=8)
def _template(config: TrainConfig):
    """Shapes and dtypes of the global runner state of ``config`` on its devices (traced,
    nothing computed)."""
    from purejaxrl import ppo  # imports the envs: only once the distributed runtime is up
    from purejaxrl.networks import make_network
    # Not ppo.build: its trace of an env step would only name what the env declares.
    env, env_params = ppo.make_env(config)
    network, optimizer = make_network(config, env), ppo.make_optimizer(config)
    return ppo.global_state_shapes(config, env, env_params, network, optimizer,
                                   len(env.reward_components))


def runner_state_template(config: TrainConfig):
    """The runner state's structure for ``config`` with ``jax.ShapeDtypeStruct`` leaves (the
    seed changes no shape: one template serves every seed)."""
    return _template(config.replace(seed=0))


def _array(key: str, entry, expected, file_path: str) -> np.ndarray:
    if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
            and isinstance(entry[1], list) and isinstance(entry[2], bytes)
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                    for n in entry[1])):
        raise CheckpointError(f"cannot read checkpoint {file_path}: array {key} is not "
                              "[dtype, shape, bytes]")
    name, shape, data = entry
    if name not in _DTYPES:
        raise CheckpointError(f"cannot read checkpoint {file_path}: array {key} has dtype "
                              f"{name!r}, not a plain number type")
    dtype = _DTYPES[name]
    if dtype != expected.dtype or tuple(shape) != tuple(expected.shape):
        raise CheckpointError(
            f"{file_path}: array {key} is {name}{list(shape)}, this code's runner state has "
            f"{expected.dtype}{list(expected.shape)} (incompatible: a checkpoint of another code "
            "version)")
    if len(data) != math.prod(shape) * dtype.itemsize:
        raise CheckpointError(f"cannot read checkpoint {file_path}: array {key} holds "
                              f"{len(data)} bytes, its shape needs "
                              f"{math.prod(shape) * dtype.itemsize}")
    return np.frombuffer(data, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)


def _restore(config: TrainConfig, arrays: dict, file_path: str, env_version):
    """The runner state: this code's template for ``config``, filled from ``arrays``."""
    try:
        template = runner_state_template(config)
    except ConfigError as error:  # its env is not one this install can build
        raise CheckpointError(f"{file_path}: this code cannot build its run: {error}") from None
    leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
    expected = {jax.tree_util.keystr(path): leaf for path, leaf in leaves}
    missing, unexpected = sorted(set(expected) - set(arrays)), sorted(set(arrays) - set(expected))
    if missing or unexpected:
        current = _env_version(config.to_dict())
        versions = f" (its env version {env_version!r}, this code's {current!r})" \
            if env_version != current else ""
        raise CheckpointError(
            f"{file_path}: its arrays do not match this code's runner state{versions} "
            "(incompatible: a checkpoint of another code version): "
            + "; ".join(f"{what} {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"
                        for what, keys in (("missing", missing), ("unexpected", unexpected))
                        if keys))
    return treedef.unflatten([_array(key, arrays[key], leaf, file_path)
                              for key, leaf in expected.items()])


def parse_checkpoint(data: bytes, file_path: str) -> dict:
    """Decode and check checkpoint bytes: the metadata's fields, ``config`` (a dict, every
    field), ``runner_state`` (this code's structure), ``path`` and ``run_dir`` (the file's
    directory). Raises CheckpointError."""
    record, arrays = _decode(data, file_path)
    config = _config_of(record["config"], file_path)
    runner_state = _restore(config, arrays, file_path, record["env_version"])
    if int(runner_state.update_step) != record["update"]:
        raise CheckpointError(f"cannot read checkpoint {file_path}: its metadata says update "
                              f"{record['update']}, its state {int(runner_state.update_step)}")
    return {**record, "config": config.to_dict(), "runner_state": runner_state,
            "path": file_path, "run_dir": os.path.dirname(file_path) or "."}


def read_checkpoint_file(file_path: str) -> tuple[bytes, dict]:
    """(bytes, parsed checkpoint) of one checkpoint file."""
    try:
        with open(file_path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise CheckpointError(f"cannot read checkpoint {file_path}: {error}") from None
    return data, parse_checkpoint(data, file_path)


# ---------------------------------------------------------------------------- load

def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def read_newest_intact(path: str, warn: Callable[[str], None] = _warn) -> tuple[bytes, dict]:
    """(bytes, parsed checkpoint) of a checkpoint file as given, or of a run directory's newest
    checkpoint that loads: an unreadable newest one (a damaged disk, a partial copy) is
    reported through ``warn`` and the previous one is taken."""
    if not os.path.isdir(path):
        if not os.path.exists(path):
            raise CheckpointError(f"checkpoint not found: {path}")
        return read_checkpoint_file(path)
    checkpoints = list_checkpoints(path)
    if not checkpoints:
        if list_legacy_checkpoints(path):
            raise CheckpointError(legacy_refusal(path))
        raise CheckpointError(f"no checkpoint_<update>{CHECKPOINT_SUFFIX} files in directory "
                              f"{path}")
    failures = []
    for _, file_path in reversed(checkpoints):
        try:
            loaded = read_checkpoint_file(file_path)
        except CheckpointError as error:
            failures.append(str(error))
            continue
        for failure in failures:
            warn(f"{failure}; skipped, using the previous checkpoint")
        return loaded
    raise CheckpointError(failures[0] + (f" (and the {len(failures) - 1} older checkpoint(s) "
                                         "do not load either)" if len(failures) > 1 else ""))


def read_metadata(path: str) -> dict:
    """The metadata of a checkpoint file, or of a run directory's newest checkpoint, with its
    ``path``: read and checked as every load checks it (a pickle is refused unopened), the
    arrays left unbuilt, so a checkpoint of another code version is read too. A multi-seed
    run's directory is refused naming its seeds' directories. Raises CheckpointError."""
    if os.path.isdir(path):
        checkpoints = list_checkpoints(path)
        seeds = seed_directories(path) if not checkpoints else []
        if seeds:
            raise CheckpointError(f"{path} is a multi-seed run (seeds "
                                  f"{', '.join(str(seed) for seed, _ in seeds)}): name one "
                                  f"seed's directory, e.g. {seeds[0][1]}")
        if not checkpoints:
            if list_legacy_checkpoints(path):
                raise CheckpointError(legacy_refusal(path))
            raise CheckpointError(f"no checkpoint_<update>{CHECKPOINT_SUFFIX} files in "
                                  f"directory {path}")
        path = checkpoints[-1][1]
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise CheckpointError(f"cannot read checkpoint {path}: {error}") from None
    record, _ = _decode(data, path)
    return {**record, "path": path}


def run_contents(run_dir: str) -> list[str]:
    """What in ``run_dir`` belongs to a run: checkpoints (either format), seed directories of
    a multi-seed run, a metrics file with records. [] for a missing or empty directory."""
    contents = []
    for what, found in (("checkpoint", list_checkpoints(run_dir)),
                        ("pickle checkpoint", list_legacy_checkpoints(run_dir)),
                        ("seed director", seed_directories(run_dir))):
        if found:
            plural = ("ies" if what.endswith("director") else "s") if len(found) > 1 else \
                ("y" if what.endswith("director") else "")
            contents.append(f"{len(found)} {what}{plural}")
    metrics = os.path.join(run_dir, METRICS_FILE)
    if os.path.isfile(metrics) and os.path.getsize(metrics) > 0:
        contents.append(METRICS_FILE)
    return contents


RUN_LOCK_FILE = ".lock"


class RunDirectoryInUse(Exception):
    """Another live process holds the run directory's lock; ``holder`` is its process id as
    that process wrote it ("" if unknown)."""

    def __init__(self, run_dir: str, holder: str):
        super().__init__(run_dir)
        self.run_dir, self.holder = run_dir, holder


def lock_run_directory(run_dir: str):
    """The open lock file of an existing ``run_dir``, locked exclusively for as long as it
    stays open (``fcntl.flock``: closing it, or the process's end, releases it, so a killed run
    leaves no stale lock), holding this process's id. Two sessions started at once (a sweep's
    ``&``, two resumes of one run) would otherwise write the same metrics and checkpoints: the
    second gets RunDirectoryInUse. A filesystem without flock leaves the directory unlocked."""
    path = os.path.join(run_dir, RUN_LOCK_FILE)
    handle = open(path, "a+", encoding="ascii")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return handle  # no flock here (ENOLCK, EINVAL): unlocked, as before locks
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        raise RunDirectoryInUse(run_dir, holder) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def seed_directory_name(seed: int) -> str:
    return f"{_SEED_DIRECTORY_PREFIX}{seed}"


def seed_directories(run_dir: str) -> list[tuple[int, str]]:
    """(seed, directory) of the seeds of a multi-seed run directory, by seed; [] for any other
    path."""
    return _list_matching(run_dir, _SEED_DIRECTORY)


def stack_seeds(trees: list):
    """One value with a leading seed axis from per-seed values of the same structure."""
    return jax.tree.map(lambda *leaves: np.stack([np.asarray(leaf) for leaf in leaves]), *trees)


def load_multi_seed_checkpoint(run_dir: str, warn: Callable[[str], None] = _warn) -> dict:
    """A multi-seed run directory as one checkpoint to resume: every seed's checkpoint at the
    newest update that all of them have and that loads for all of them (a stop between two
    seeds' writes leaves some a save ahead; an unreadable one is skipped with a warning),
    runner states stacked on a leading seed axis, config ``num_seeds`` = their count.
    Raises CheckpointError when the seeds do not form one run."""
    seeds = seed_directories(run_dir)
    seed_numbers = [seed for seed, _ in seeds]
    if seed_numbers != list(range(seed_numbers[0], seed_numbers[0] + len(seeds))):
        raise CheckpointError(f"{run_dir}: seeds {seed_numbers} are not consecutive; resume "
                              "each seed alone with --resume <run directory>/seed-<s>")
    common = set.intersection(*[{update for update, _ in list_checkpoints(directory)}
                                for _, directory in seeds])
    if not common:
        if any(list_legacy_checkpoints(directory) for _, directory in seeds):
            raise CheckpointError(legacy_refusal(run_dir))
        raise CheckpointError(f"the seeds of {run_dir} have no checkpoint at a common update")
    failure = None
    for update in sorted(common, reverse=True):
        try:
            loaded = [read_checkpoint_file(checkpoint_path(directory, update))[1]
                      for _, directory in seeds]
        except CheckpointError as error:
            failure = failure or error
            warn(f"{error}; skipped, using the previous update of every seed")
            continue
        break
    else:
        raise failure
    first = loaded[0]
    for (seed, _), checkpoint in zip(seeds, loaded):
        config = dict(checkpoint["config"], seed=first["config"]["seed"])
        if checkpoint["config"].get("seed") != seed or \
                config != first["config"] or checkpoint["num_processes"] != first["num_processes"]:
            raise CheckpointError(f"{checkpoint['path']} is not seed {seed} of the run of "
                                  f"{first['path']}")
    return {**first, "path": run_dir, "run_dir": run_dir,
            "config": dict(first["config"], num_seeds=len(seeds)),
            "runner_state": stack_seeds([checkpoint["runner_state"] for checkpoint in loaded]),
            "run_name": os.path.dirname(first["run_name"]) or os.path.basename(run_dir),
            "seed_checkpoints": [checkpoint["path"] for checkpoint in loaded],
            # per seed: a seed may have been resumed alone, by other code, in between
            "seed_sittings": [checkpoint.get(SITTINGS_KEY, []) for checkpoint in loaded]}


def load_checkpoint(path: str, multi_seed: bool = False,
                    warn: Callable[[str], None] = _warn) -> dict:
    """Load and check a checkpoint: a file, or a run directory (its newest checkpoint that
    loads). The directory of a multi-seed run is loaded (its seeds stacked, to resume it) only
    with ``multi_seed``; else the message names its seed directories, since a policy is one
    seed's. Raises CheckpointError."""
    seeds = seed_directories(path) if not list_checkpoints(path) else []
    if seeds and multi_seed:
        return load_multi_seed_checkpoint(path, warn)
    if seeds:
        raise CheckpointError(f"{path} is a multi-seed run (seeds "
                              f"{', '.join(str(seed) for seed, _ in seeds)}): name one seed's "
                              f"directory, e.g. {seeds[0][1]}")
    return read_newest_intact(path, warn)[1]


# ---------------------------------------------------------------------------- trim

def trim_checkpoint(checkpoint: dict, num_envs: int) -> tuple[bytes, dict]:
    """A smaller copy of a loaded checkpoint (``load_checkpoint``'s dict) that keeps the first
    ``num_envs`` envs' rollout state and everything else as it is: the network, the optimiser,
    the return statistics, the counters. Its config says ``num_envs`` envs and one minibatch
    (so that it validates at any count); it serves evaluation, watching, search and
    ``--resume --weights-only`` (whose run takes its batch from its own flags); a full resume
    is refused (``train.check_resume``: the optimiser's step count, hence the learning-rate
    schedule, is the full batch's). A checkpoint of 16384 envs is hundreds of MB, mostly
    the envs' states. Returns (the bytes, the record). Raises CheckpointError."""
    config = TrainConfig.from_dict(checkpoint["config"])
    where = checkpoint["path"]
    if not (isinstance(num_envs, int) and 1 <= num_envs <= config.num_envs
            and num_envs % config.num_devices == 0):
        raise CheckpointError(f"{where}: the envs to keep must be in [1, {config.num_envs}] and "
                              f"a multiple of its device count ({config.num_devices}), got "
                              f"{num_envs}")
    # The distillation teacher's labelled envs stay where they fit (a frozen recurrent
    # teacher's memory keeps its rows); kept labels keep their ring, whose size is no env
    # count.
    labelled = (config.distill_envs if config.distill_envs is not None
                and config.distill_envs <= num_envs else None)
    small = config.replace(num_envs=num_envs, num_minibatches=1, distill_envs=labelled)
    try:
        validate_config(small)
    except ConfigError as error:
        raise CheckpointError(f"{where}: cannot keep {num_envs} envs: {error}") from None
    full_shapes = jax.tree.leaves(runner_state_template(config))
    small_template = runner_state_template(small)
    leaves = jax.tree.leaves(checkpoint["runner_state"])
    kept = []
    for leaf, full, want in zip(leaves, full_shapes, jax.tree.leaves(small_template)):
        array = np.asarray(leaf)
        differ = [axis for axis, (a, b) in enumerate(zip(full.shape, want.shape)) if a != b]
        if not differ:
            kept.append(array)
            continue
        axis = differ[0]
        # Per env, or per labelled env (a frozen recurrent teacher's memory of more envs than
        # are kept: the copy never resumes, so its first rows serve as well as any).
        if len(differ) > 1 or full.shape[axis] not in (config.num_envs, config.distill_envs) \
                or want.shape[axis] != num_envs:
            raise CheckpointError(f"{where}: a runner-state field of shape {full.shape} does not "
                                  f"shrink with the envs alone ({want.shape})")
        kept.append(np.take(array, np.arange(num_envs), axis=axis))
    runner = jax.tree.unflatten(jax.tree.structure(small_template), kept)
    record = {key: value for key, value in checkpoint.items()
              if key not in ("runner_state", "path", "run_dir", "config")}
    record.update(config=small.to_dict(),
                  trimmed_from={"num_envs": config.num_envs, "num_minibatches":
                                config.num_minibatches, "file": os.path.basename(where)})
    data = encode_checkpoint(runner, record)
    parse_checkpoint(data, where)  # what is written must load: this code's own check
    return data, record
