"""Every entry script starts cleanly on a machine without a TPU (SPEC §3, backend choice):
``--help`` exits 0, and JAX, where the script has imported it by then, starts without libtpu's
initialisation errors, because the script chose the platform (``purejaxrl/backend.py``
choose_platforms, or JAX_PLATFORMS=cpu for the protocol server and the Swift-parity tools)
before anything imported JAX.

``--help`` alone rarely starts a JAX backend, so the driver below starts it the way the script
would next (``jax.devices()``) once ``--help`` has exited, if JAX was imported: JAX reads
JAX_PLATFORMS at import, so a script that imported JAX before choosing prints libtpu's errors
here. The environment is the user's without JAX_PLATFORMS (tests/conftest.py sets it for the
test process). One subprocess per script: each imports JAX, a few seconds apiece.
"""

import glob
import importlib.util
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = sorted(os.path.basename(path)
                 for path in glob.glob(os.path.join(REPO_ROOT, "scripts", "*.py")))

# Runs a script as __main__ with --help, then starts JAX's backend if the script imported JAX.
DRIVER = """
import runpy, sys
script = sys.argv[1]
sys.argv = [script, "--help"]
status = 0
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as exit_:
    status = exit_.code
if "jax" in sys.modules:
    import jax
    jax.devices()
sys.exit(status)
"""


def tpu_lines(stderr: str) -> list:
    return [line for line in stderr.splitlines() if "libtpu" in line or "TPU" in line]


def test_the_driver_sees_libtpu_errors_when_jax_comes_first(tmp_path):
    """The check below can fail: a script that imports JAX before choosing the platform."""
    if glob.glob("/dev/accel[0-9]*") or glob.glob("/dev/vfio/[0-9]*"):
        pytest.skip("a TPU is attached: libtpu starts for real and prints no errors")
    if importlib.util.find_spec("libtpu") is None:
        pytest.skip("libtpu is not installed: nothing can print its errors")
    script = tmp_path / "late_choice.py"
    script.write_text("import argparse, jax\n"
                      "from purejaxrl.backend import choose_platforms\n"
                      "choose_platforms()\n"
                      "argparse.ArgumentParser().parse_args()\n")
    result = run_help(str(script))
    assert result.returncode == 0, result.stderr
    assert tpu_lines(result.stderr)


def run_help(script: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    return subprocess.run([sys.executable, "-c", DRIVER, script], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=300)


# The main command's scripts in the default suite; the others in the extended one
# (`pytest -m slow`): one subprocess each, about 3.5 s apiece.
DEFAULT_SUITE = {"train_purejaxrl.py", "evaluate.py", "watch_agent.py", "convert_checkpoint.py"}


@pytest.mark.parametrize("script", [
    script if script in DEFAULT_SUITE else pytest.param(script, marks=pytest.mark.slow)
    for script in SCRIPTS])
def test_help_exits_zero_without_libtpu_errors(script):
    result = run_help(os.path.join("scripts", script))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout + result.stderr
    assert tpu_lines(result.stderr) == [], "\n".join(tpu_lines(result.stderr))
