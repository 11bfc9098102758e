"""JAX's persistent compilation cache, set up the same way by every entry point (trainer,
viewers, protocol server, parity scripts): a restart skips the XLA compilation of programs it
has compiled before. Importing this module does not import JAX (scripts read the default
directory while parsing options, before they choose the platform)."""

from __future__ import annotations

import os

DEFAULT_COMPILE_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "hackmatrix-jax")
# The user's own threshold (JAX's variable), which wins over the caller's default.
MIN_COMPILE_TIME_VARIABLE = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"
# Long runs keep what takes a second or more to compile (JAX's default); interactive tools
# (viewers, play, the protocol server) keep every program: they restart often, and their
# single-env programs compile in about a second on a fast machine, far more on a slow one.
TRAINING_MIN_COMPILE_SECS = 1.0
INTERACTIVE_MIN_COMPILE_SECS = 0.0


class CompileCacheError(ValueError):
    """The cache directory cannot be used (a file where it should be, or it cannot be
    created); the command lines print it as one ``error:`` line."""


def compile_cache_problem(cache_dir: str | None) -> str | None:
    """Why ``cache_dir`` cannot be the cache directory, found without creating anything: the
    path, or the nearest of its parents that exists, is not a directory, or that parent is not
    writable where the directory is still to be made. None if it can be (or is None or "")."""
    if not cache_dir:
        return None
    path = os.path.abspath(os.path.expanduser(cache_dir))
    existing = path
    while not os.path.exists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"{existing} is not a directory"
    if existing != path and not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot create it: {existing} is not writable"
    return None


def enable_compile_cache(cache_dir: str | None,
                         min_compile_time_secs: float = TRAINING_MIN_COMPILE_SECS) -> str | None:
    """Turn the cache on in ``cache_dir`` (created if missing); None or "" leaves it off.
    Programs that compile faster than ``min_compile_time_secs`` are not kept, unless
    ``$JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` says otherwise. Returns the directory used.
    A directory that cannot be used raises ``CompileCacheError``."""
    if not cache_dir:
        return None
    problem = compile_cache_problem(cache_dir)
    if problem is not None:
        raise CompileCacheError(f"compile cache directory {cache_dir}: {problem}")
    import jax

    cache_dir = os.path.abspath(os.path.expanduser(cache_dir))
    try:
        os.makedirs(cache_dir, exist_ok=True)
    except OSError as error:
        raise CompileCacheError(f"compile cache directory {cache_dir}: cannot create it "
                                f"({error.strerror or error})") from None
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    min_seconds = float(os.environ.get(MIN_COMPILE_TIME_VARIABLE, min_compile_time_secs))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_seconds)
    if min_seconds <= 0:  # keep every program, whatever its size
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return cache_dir
