"""Shared setup of the trainer tests: importable repo root, tiny configs, one compile cache."""

import pytest


@pytest.fixture(scope="session")
def compile_cache_dir(tmp_path_factory):
    """A persistent XLA cache shared by every test of the session (in-process and subprocess),
    so identical programs compile once; never the user's ~/.cache."""
    return str(tmp_path_factory.mktemp("xla_cache"))
