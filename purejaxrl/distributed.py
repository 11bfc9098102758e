"""Multi-process (multi-host) runs on JAX's own multi-controller runtime.

Every host of a TPU pod slice runs the same ``scripts/train_purejaxrl.py`` command. After
``jax.distributed.initialize`` each process sees the global device list; the trainer builds one
mesh over all of them (``ppo.make_mesh``), so ``shard_map`` places each process's share of the
envs on its own devices and ``pmean`` averages gradients over every device of every host.

This module holds the process-level plumbing around that:

* ``initialize``: when and how to call ``jax.distributed.initialize`` (explicit coordinator
  flags, JAX's cluster auto-detection, or a single process);
* ``is_primary``: process 0 is the only one that reads or writes files (logs, wandb,
  checkpoints);
* ``runner_to_host``: a global pytree as host numpy arrays on every process (a collective: the
  env state of every process is gathered, so process 0 can write one complete checkpoint);
* ``agree_any``: one answer on every process to "did any process see this flag" (stop signals,
  time-based saves), so all processes enter the same collectives;
* ``load_checkpoint_everywhere``: process 0 reads the checkpoint and broadcasts its path and
  bytes, so the other hosts need no shared filesystem.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

import jax
import numpy as np

from purejaxrl.backend import tpu_attached
from purejaxrl.checkpoint import CheckpointError, list_checkpoints, load_checkpoint, \
    parse_checkpoint, read_newest_intact, seed_directories
from purejaxrl.config import ConfigError

DISTRIBUTED_MODES = ("auto", "on", "off")


class DistributedError(RuntimeError):
    """The distributed runtime could not start (coordinator unreachable, a process missing)."""


def _start(**kwargs) -> None:
    try:
        jax.distributed.initialize(**kwargs)
    except Exception as error:  # XLA runtime errors carry no stable type
        where = kwargs.get("coordinator_address") or "auto-detected coordinator"
        raise DistributedError(f"jax.distributed.initialize failed ({where}): "
                               f"{type(error).__name__}: {error}") from None


def initialize(mode: str = "auto", coordinator_address: Optional[str] = None,
               num_processes: Optional[int] = None, process_id: Optional[int] = None) -> bool:
    """Start JAX's distributed runtime if this is a multi-process launch; returns whether it
    was started. Must run before anything touches a JAX device, including importing gymnax
    (hence ``envs`` and ``purejaxrl.train``), whose modules create arrays at import.

    * explicit: ``coordinator_address``, ``num_processes`` and ``process_id`` all given (any
      cluster, or several processes on one machine);
    * ``mode="on"``: ``jax.distributed.initialize()`` with JAX's cluster auto-detection (Cloud
      TPU VMs, SLURM, Open MPI, Kubernetes) and its ``JAX_COORDINATOR_ADDRESS`` etc. variables;
    * ``mode="auto"`` (default): as ``on`` when this machine has TPU chips (on a single-host
      slice this yields one process) or ``JAX_COORDINATOR_ADDRESS`` is set, else one process;
    * ``mode="off"``: one process.
    """
    if mode not in DISTRIBUTED_MODES:
        raise ConfigError(f"--distributed must be one of {', '.join(DISTRIBUTED_MODES)}, "
                          f"got {mode!r}")
    explicit = {"--coordinator-address": coordinator_address, "--num-processes": num_processes,
                "--process-id": process_id}
    given = [name for name, value in explicit.items() if value is not None]
    if given and mode == "off":
        raise ConfigError(f"{', '.join(given)} given with --distributed off")
    if given:
        missing = [name for name, value in explicit.items() if value is None]
        if missing:
            raise ConfigError(f"{', '.join(given)} given without {', '.join(missing)}: an "
                              "explicit multi-process launch needs all three")
        if num_processes < 1:
            raise ConfigError(f"--num-processes must be >= 1, got {num_processes}")
        if not 0 <= process_id < num_processes:
            raise ConfigError(f"--process-id must be in 0..{num_processes - 1}, got {process_id}")
        if ":" not in coordinator_address:
            raise ConfigError(f"--coordinator-address must be HOST:PORT, got "
                              f"{coordinator_address!r}")
        _start(coordinator_address=coordinator_address, num_processes=num_processes,
               process_id=process_id)
        return True
    if mode == "on" or (mode == "auto" and (tpu_attached()
                                            or os.environ.get("JAX_COORDINATOR_ADDRESS"))):
        _start()
        return True
    return False


def is_primary() -> bool:
    return jax.process_index() == 0


def _leaf_to_host(leaf):
    if not isinstance(leaf, jax.Array):
        return np.asarray(leaf)
    if leaf.is_fully_addressable:
        return np.asarray(leaf)
    if leaf.is_fully_replicated:
        return np.asarray(leaf.addressable_data(0))
    from jax.experimental import multihost_utils
    return np.asarray(multihost_utils.process_allgather(leaf, tiled=True))


def runner_to_host(tree):
    """Every leaf as a host numpy array holding the *global* value. With several processes this
    is a collective (all processes must call it): leaves split over processes are gathered."""
    return jax.tree.map(_leaf_to_host, tree)


def local_copy(tree):
    """Replicated global arrays as arrays on this process's first device: for work one process
    does alone (evaluation) without a cross-process program."""
    return jax.tree.map(lambda x: x.addressable_data(0) if isinstance(x, jax.Array) else x,
                        tree)


def agree_any(flags: Sequence[bool]) -> list[bool]:
    """Flag i is True on every process if it was True on any. A collective with several
    processes; the identity with one."""
    local = np.asarray(flags, dtype=np.bool_)
    if jax.process_count() == 1:
        return [bool(flag) for flag in local]
    from jax.experimental import multihost_utils
    gathered = np.asarray(multihost_utils.process_allgather(local))
    return [bool(flag) for flag in gathered.reshape(-1, local.size).any(axis=0)]


def _broadcast_from_primary(data: Optional[bytes], failed: bool) -> tuple[bytes, bool]:
    from jax.experimental import multihost_utils
    header = np.array([len(data or b""), int(failed)], np.int64)
    length, failed = (int(v) for v in multihost_utils.broadcast_one_to_all(header))
    buffer = np.frombuffer(data, np.uint8) if is_primary() else np.zeros(length, np.uint8)
    received = multihost_utils.broadcast_one_to_all(buffer) if length else buffer
    return np.asarray(received, np.uint8).tobytes(), bool(failed)


def load_checkpoint_everywhere(path: str) -> dict:
    """``checkpoint.load_checkpoint`` on every process, reading the file on process 0 only: the
    path of the file it chose and its bytes are broadcast, so the checkpoint directory need
    exist only on process 0's host. A failure on process 0 raises the same
    ``CheckpointError`` on every process."""
    if jax.process_count() == 1:
        return load_checkpoint(path, multi_seed=True)
    message, failed, checkpoint = None, False, None
    if is_primary():
        # Every check of the path is process 0's, inside this try: the others cannot see it,
        # and a failure they are not told of would leave them waiting in the broadcast.
        try:
            if seed_directories(path) and not list_checkpoints(path):
                raise CheckpointError(f"{path} is a multi-seed run: a multi-process run resumes "
                                      "one seed at a time (--resume <run directory>/seed-<s>)")
            data, checkpoint = read_newest_intact(path)
            # A path holds no NUL byte: it separates the file's path from its bytes.
            message = checkpoint["path"].encode() + b"\0" + data
        except (CheckpointError, ConfigError, OSError) as error:
            message, failed = str(error).encode(), True
    message, failed = _broadcast_from_primary(message, failed)
    if failed:
        raise CheckpointError(message.decode() if is_primary()
                              else f"process 0 could not load the checkpoint: {message.decode()}")
    if checkpoint is not None:
        return checkpoint
    file_path, data = message.split(b"\0", 1)
    return parse_checkpoint(data, file_path.decode())
