"""``scripts/trim_checkpoint.py``: bad input is one line and exit 2 before any work, and
nothing is overwritten (the trimming itself: tests/trainer/test_training.py)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "trim_checkpoint.py")


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    for args, message in (([str(tmp_path / "none"), str(tmp_path / "out")], "error:"),
                          ([str(tmp_path), str(taken)], "nothing is overwritten"),
                          ([str(tmp_path), str(tmp_path / "no" / "out")], "does not exist"),
                          ([str(tmp_path), str(tmp_path / "out"), "--envs", "x"],
                           "invalid int value")):
        result = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                                env=env, cwd=ROOT, timeout=120)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert (taken / "keep.txt").read_text() == "mine"
