"""The backend choice made before JAX starts (issue 16): libtpu must not start where no TPU is
attached, a user's JAX_PLATFORMS and TPU machines are left alone, and a GPU machine keeps its
CUDA backend. A real start without JAX_PLATFORMS is checked in
``test_robust_run.test_quiet_start_without_a_tpu``."""

import pytest

from purejaxrl import backend


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
