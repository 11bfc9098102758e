"""Fixtures of the parity harness: one engine of each backend for the whole session.

The protocol backend is ONE server process for the session (our own server, or the Swift build
when $HACKMATRIX_BINARY names it), reused through setState; the in-process backend jits the
environment once. Both use the session's persistent compilation cache (tests/conftest.py), so the
server reuses what the in-process engine compiled (and later sessions start warm).
"""

import os

import pytest

from envs.hackmatrix.swift_io.engines import InProcessEngine, ProtocolEngine
from envs.hackmatrix.swift_io.protocol import enable_server_compile_cache
from envs.hackmatrix.swift_io.swift_build import BINARY_ENV_VAR

BACKENDS = ("in-process", "protocol")


def pytest_report_header(config):
    """Say which engine the protocol backend is (in the header of `pytest tests/parity`)."""
    binary = os.environ.get(BINARY_ENV_VAR)
    if binary:
        return f"parity protocol backend: the Swift build {binary} ({BINARY_ENV_VAR})"
    return (f"parity protocol backend: this project's server ({BINARY_ENV_VAR} not set: the "
            "Swift-backed tests skip)")


@pytest.fixture(scope="session", autouse=True)
def compilation_cache():
    """The session's test cache (tests/conftest.py names it in $HACKMATRIX_JAX_CACHE)."""
    return enable_server_compile_cache()


@pytest.fixture(scope="session")
def in_process_engine(compilation_cache):
    return InProcessEngine(seed=0)


@pytest.fixture(scope="session")
def protocol_engine(compilation_cache):
    engine = ProtocolEngine(seed=0)
    yield engine
    engine.close()


@pytest.fixture(params=BACKENDS)
def engine(request):
    """Each parity test runs once per backend."""
    return request.getfixturevalue(f"{request.param.replace('-', '_')}_engine")
