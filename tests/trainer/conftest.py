"""Shared setup of the trainer tests: importable repo root, tiny configs, one compile cache."""

import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)


@pytest.fixture(scope="session")
def compile_cache_dir(tmp_path_factory):
    """A persistent XLA cache shared by every test of the session (in-process and subprocess),
    so identical programs compile once; never the user's ~/.cache."""
    return str(tmp_path_factory.mktemp("xla_cache"))
