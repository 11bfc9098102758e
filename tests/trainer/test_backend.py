"""The backend choice made before JAX starts (issue 16): libtpu must not start where no TPU is
attached, a user's JAX_PLATFORMS and TPU machines are left alone, and a GPU machine keeps its
CUDA backend. A real start without JAX_PLATFORMS is checked in
``test_robust_run.test_quiet_start_without_a_tpu``."""

import os
import subprocess
import sys

import pytest

from purejaxrl import backend

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("plugins, expected", [
    (set(), "cpu"), ({"xla_cuda12"}, "cuda,cpu"), ({"xla_cuda13", "xla_cuda12"}, "cuda,cpu"),
    ({"xla_rocm7"}, None), ({"xla_cuda12", "metal_plugin"}, None)])
def test_platforms_without_tpu(plugins, expected):
    """cpu, plus cuda where a CUDA plugin is installed (JAX skips it without a GPU); any other
    plugin: JAX's own choice."""
    assert backend.platforms_without_tpu(plugins) == expected


def test_choose_platforms_respects_the_user_and_tpu_machines(monkeypatch):
    monkeypatch.setitem(backend._choice, "reason", None)
    monkeypatch.setattr(backend, "installed_jax_plugins", lambda: set())
    environ = {"JAX_PLATFORMS": ""}  # set, even empty: the user's choice
    backend.choose_platforms(environ)
    assert environ == {"JAX_PLATFORMS": ""}
    monkeypatch.setattr(backend, "tpu_attached", lambda: True)
    environ = {}
    backend.choose_platforms(environ)
    assert environ == {}
    monkeypatch.setattr(backend, "tpu_attached", lambda: False)
    backend.choose_platforms(environ)
    assert environ == {"JAX_PLATFORMS": "cpu"}
    assert "no TPU on this machine" in backend.platform_choice()


def test_the_trainer_imports_without_starting_the_xla_backend():
    """A multi-host run calls jax.distributed.initialize after the trainer's modules are
    imported and its flags parsed, and JAX refuses it once the backend has started. Importing
    the command line and the distributed module (and parsing flags) must not start it: a
    module-level array anywhere on the import chain does (gymnax's modules make some, so
    whatever imports gymnax, the networks included, is imported later, inside functions).
    Checked in a fresh interpreter; the two-process runs themselves are the slow suite's
    (test_multihost.py)."""
    code = ("from jax._src import xla_bridge\n"
            "import purejaxrl.distributed\n"
            "from purejaxrl.cli.train import build_parser, run_options_from_args\n"
            "run_options_from_args(build_parser().parse_args(['--num-envs', '8']))\n"
            "print(xla_bridge.backends_are_initialized())\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO_ROOT, env={**os.environ, "JAX_PLATFORMS": "cpu"},
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False", result.stdout
