"""Checks of output paths before any work: a file the command will write at its end (--json,
--gif, --html, --mp4, --record), a ledger it appends rows to (--ledger) and the run directory
a training run writes to. A path that
cannot be written is an ``OutputPathError`` (a ``ConfigError``: exit 2) naming the flag, at
once, not a traceback after the work is done. An existing file is refused unless the command
was given ``--overwrite``: a repeated command must not replace results that took an hour to
make. No JAX import here: the checks run first."""

from __future__ import annotations

import os
import sys
import tempfile

from purejaxrl.config import ConfigError


class OutputPathError(ConfigError):
    """An output path that cannot be written; the message names the flag and the reason."""


def _probe(directory: str, what: str) -> None:
    """Create and delete a file in ``directory`` (permission bits alone do not tell: a
    read-only filesystem, or root)."""
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".write-test-"):
            pass
    except OSError as error:
        raise OutputPathError(f"{what}: cannot write in {directory} "
                              f"({error.strerror or error})") from None


OVERWRITE_FLAG = "--overwrite"


def add_overwrite_argument(parser) -> None:
    """The one flag that lets a command replace its output files (refused otherwise)."""
    parser.add_argument(OVERWRITE_FLAG, action="store_true",
                        help="replace output files that already exist (without it an existing "
                             "file is refused before any work, so no result is lost)")


def check_output_file(path: str, flag: str, overwrite: bool = False) -> None:
    """Raise ``OutputPathError`` unless ``path`` can be written: its directory exists and
    takes new files, and ``path`` does not exist, or (``overwrite``) is a file that opens for
    writing. Creates and changes nothing."""
    what = f"{flag} {path}"
    if os.path.isdir(path):
        raise OutputPathError(f"{what}: is a directory")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise OutputPathError(f"{what}: directory {os.path.dirname(path) or '.'} does not "
                              "exist")
    if os.path.exists(path):
        if not overwrite:
            raise OutputPathError(f"{what}: already exists; pass {OVERWRITE_FLAG} to replace "
                                  "it, or choose a new path")
        try:
            with open(path, "ab"):  # appends nothing: the file stays as it is
                pass
        except OSError as error:
            raise OutputPathError(f"{what}: cannot write ({error.strerror or error})") from None
    else:
        _probe(directory, what)


def check_writable_file(path: str, what: str) -> None:
    """Raise ``OutputPathError`` (``what`` names the flag) unless ``path`` can be appended to
    or created: an existing file that opens for appending, or a place whose nearest existing
    directory takes new files (the directories between are made when the file is written).
    Creates and changes nothing. For a ledger, which a command appends to."""
    if os.path.isdir(path):
        raise OutputPathError(f"{what}: is a directory")
    if os.path.exists(path):
        try:
            with open(path, "ab"):  # appends nothing
                pass
        except OSError as error:
            raise OutputPathError(f"{what}: cannot write ({error.strerror or error})") from None
        return
    directory = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(directory):
        directory = os.path.dirname(directory)
    if not os.path.isdir(directory):
        raise OutputPathError(f"{what}: {directory} is not a directory")
    _probe(directory, what)


def refuse_ledger_file(path, flag: str = "--ledger") -> bool:
    """For a script's ``main``: where ``path`` (a ledger the command appends rows to; None or
    empty: none) cannot be appended to or created (``check_writable_file``), print the one
    ``error:`` line and return True (the caller exits 2)."""
    if not path:
        return False
    try:
        check_writable_file(path, f"{flag} {path}")
    except OutputPathError as error:
        print(f"error: {error}", file=sys.stderr)
        return True
    return False


def prepare_directory(path: str, flag: str) -> None:
    """Create ``path`` (and its parents) if needed and check that it takes new files; raise
    ``OutputPathError`` naming ``flag`` otherwise."""
    what = f"{flag} {path}"
    if os.path.exists(path) and not os.path.isdir(path):
        raise OutputPathError(f"{what}: exists and is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise OutputPathError(f"{what}: cannot create it ({error.strerror or error})") from None
    _probe(path, what)


def check_directory_creatable(path: str, flag: str) -> None:
    """Raise ``OutputPathError`` naming ``flag`` unless ``path`` is a directory that takes new
    files, or does not exist and the nearest directory above it that does takes them (the
    check of a run's output directory before hours of work; nothing is created)."""
    what = f"{flag} {path}"
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise OutputPathError(f"{what}: {existing} is not a directory")
    _probe(existing, what)


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: into a temporary file beside it, then
    renamed over it, so an interrupted write never leaves a truncated result."""
    directory = os.path.dirname(os.path.abspath(path))
    handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=directory, delete=False,
                                         prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with handle:
            handle.write(text)
        # A temporary file is private (0600); the result gets the mode open() would give it.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(handle.name, 0o666 & ~umask)
        os.replace(handle.name, path)
    except BaseException:
        if os.path.exists(handle.name):
            os.unlink(handle.name)
        raise


def check_distinct_files(named: list) -> None:
    """Raise ``OutputPathError`` where two of the (flag, path) pairs (None paths left out)
    name one file: two outputs of one command, or an output and an input, would overwrite
    each other (``--overwrite`` allows replacing an earlier result, never this)."""
    seen = {}
    for flag, path in named:
        if path is None:
            continue
        real = os.path.realpath(path)
        if real in seen:
            raise OutputPathError(f"{flag} {path} is also {seen[real]}: one file cannot be "
                                  "both")
        seen[real] = f"{flag} {path}" if flag else path


def refuse_output_file(path, flag: str, overwrite: bool = False, inputs=()) -> bool:
    """For a script's ``main``: print ``output_file_error``'s message as the one ``error:``
    line and return True where ``path`` cannot be written, or is one of the (name, path)
    ``inputs`` (``check_distinct_files``) (the caller exits 2)."""
    try:
        check_distinct_files([*inputs, (flag, path)])
        message = None
    except OutputPathError as error:
        message = str(error)
    message = message or output_file_error(path, flag, overwrite)
    if message:
        print(f"error: {message}", file=sys.stderr)
    return message is not None


def output_file_error(path, flag: str, overwrite: bool = False):
    """``check_output_file``'s message for ``path`` (None: writable, or no path given), for a
    script that prints it as its one-line error."""
    if path is None:
        return None
    try:
        check_output_file(path, flag, overwrite)
    except OutputPathError as error:
        return str(error)
    return None
