"""The code passes ruff with pyproject.toml's rules (pycodestyle errors and warnings, pyflakes,
100 columns), so lint is part of the README's test command and of CI (issue 28)."""

import os
import shutil
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ruff_executable() -> str:
    """The ruff installed beside this Python (requirements.txt installs it), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "ruff")
    found = beside if os.path.exists(beside) else shutil.which("ruff")
    assert found, "ruff is not installed: pip install -r requirements.txt"
    return found


def test_ruff_finds_nothing():
    result = subprocess.run([ruff_executable(), "check", "--no-cache", "--output-format",
                             "concise", "."], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
