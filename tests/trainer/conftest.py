"""Shared setup of the trainer tests: importable repo root, tiny configs, one compile cache."""

import pytest


@pytest.fixture(scope="session")
def compile_cache_dir(session_compile_cache):
    """The session's persistent XLA cache (tests/conftest.py), shared by in-process and
    subprocess runs, so identical programs compile once."""
    return session_compile_cache
