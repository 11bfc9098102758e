"""Reproducible installs (issue 27): every install the README and CI describe resolves to the
exact versions of requirements.lock.

Rules checked: requirements.txt applies the lock as constraints, and the README's two commands
and CI install requirements.txt; the lock holds one plain ``name==version`` per package and
nothing of the machine that wrote it; every package the project requires is pinned; JAX's
pieces (jaxlib, libtpu of ``jax[tpu]``, the CUDA plugin of the README's GPU line) are pinned
at the one JAX version; the GPU line installs against the lock; the refresh script writes
that format."""

import os
import re

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCK = os.path.join(REPO_ROOT, "requirements.lock")


def read(name):
    with open(os.path.join(REPO_ROOT, name), encoding="utf-8") as handle:
        return handle.read()


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins():
    pins = {}
    for line in read("requirements.lock").splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            assert normalize(name) not in pins, f"{name} pinned twice"
            pins[normalize(name)] = version
    return pins


def requirement_name(requirement):
    return normalize(re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1))


def test_requirements_txt_applies_the_lock_and_every_install_command_uses_it():
    lines = [line.strip() for line in read("requirements.txt").splitlines()]
    assert "-c requirements.lock" in lines
    readme = read("README.md")
    assert readme.count("pip install -r requirements.txt") >= 2  # set-up and tests
    assert re.search(r"pip install .*-r requirements\.txt", read(".ci/run"))


def test_the_lock_holds_plain_pins_only():
    """No editable install, path or URL (they would name the machine that wrote the lock)."""
    pin = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!]+$")
    for line in read("requirements.lock").splitlines():
        if line and not line.startswith("#"):
            assert pin.match(line), line
    assert lock_pins()


def test_every_requirement_is_pinned():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads(read("pyproject.toml"))["project"]
    required = list(project["dependencies"])
    required += [r for extra in project["optional-dependencies"].values() for r in extra]
    required += [line for line in read("requirements.txt").splitlines()
                 if line.strip() and not line.startswith(("#", "-"))]
    pins = lock_pins()
    missing = sorted({requirement_name(r) for r in required} - set(pins))
    assert not missing, f"not in requirements.lock: {missing}"


def test_jax_pieces_share_one_version():
    pins = lock_pins()
    assert pins["jaxlib"] == pins["jax"]
    assert "libtpu" in pins  # what jax[tpu] pulls
    assert pins["jax-cuda12-plugin"] == pins["jax-cuda12-pjrt"] == pins["jax"]


def test_readme_gpu_line_installs_against_the_lock():
    readme = read("README.md")
    assert 'pip install -c requirements.lock "jax[cuda12]"' in readme
    assert 'pip install -U "jax[cuda12]"' not in readme


def test_refresh_script_writes_plain_sorted_pins():
    from scripts.refresh_lock import HEADER, lock_text
    report = {"install": [{"metadata": {"name": "nvidia-nccl-cu12", "version": "2.0"}},
                          {"metadata": {"name": "jax", "version": "9.9"}}]}
    text = lock_text(["six==1.17.0", "jax==0.10.2", "# comment", ""], report)
    assert text == HEADER + "jax==0.10.2\nnvidia-nccl-cu12==2.0\nsix==1.17.0\n"
    for line in ("-e /home/someone/hackmatrix-jax", "pkg @ file:///tmp/pkg.whl"):
        with pytest.raises(ValueError, match="not a plain pin"):
            lock_text([line], {})
