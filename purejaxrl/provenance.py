"""Which code produced a figure: the commit that benchmark and ledger rows record."""

from __future__ import annotations

import functools
import os
import subprocess
from typing import Optional

_REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The benchmarks' own records change as they run (rows appended, curves redrawn): not code.
_RECORDS = ":(exclude)benchmarks"


def git_commit() -> Optional[str]:
    """The short commit of this checkout, with ``+dirty`` when a tracked file outside
    ``benchmarks/`` differs from it (a figure of uncommitted code is not that commit's);
    None outside a git checkout."""
    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                              cwd=_REPOSITORY).stdout.strip()
    try:
        commit = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", _RECORDS)
    except (OSError, subprocess.CalledProcessError):
        return None
    return (commit + "+dirty" if changed else commit) or None


@functools.cache
def process_commit() -> Optional[str]:
    """``git_commit()`` when this process first asks: the code it loaded (a commit made while a
    long run trains is not that run's code), for the records of a run that outlives a commit."""
    return git_commit()
