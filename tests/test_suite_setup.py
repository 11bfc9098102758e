"""How the test suite itself runs (pytest.ini, tests/conftest.py): the rules that keep it fast
and honest when it is split over pytest-xdist workers."""

import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REPORTING_TESTS = '''
import os, pathlib, pytest

@pytest.mark.parametrize("i", range(8))
def test_report(session_compile_cache, i):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    pathlib.Path(os.environ["REPORT_DIR"], f"{worker}-{i}").write_text(session_compile_cache)
'''


def test_an_empty_cache_variable_gives_every_worker_one_fresh_cache(tmp_path):
    """HACKMATRIX_TEST_COMPILE_CACHE set empty means a cold run: one fresh directory for the
    session, which the xdist workers share (so a program compiles once, not once a worker)."""
    (tmp_path / "test_report.py").write_text(REPORTING_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    reports = tmp_path / "reports"
    reports.mkdir()
    env = {**os.environ, "HACKMATRIX_TEST_COMPILE_CACHE": "", "REPORT_DIR": str(reports),
           "JAX_PLATFORMS": "cpu"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-n", "2",
         "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    written = {path.name: path.read_text() for path in reports.iterdir()}
    assert len(written) == 8
    assert {name.split("-")[0] for name in written} == {"gw0", "gw1"}  # both workers ran
    (cache,) = set(written.values())
    assert os.path.isdir(cache) and cache != os.path.expanduser("~/.cache/hackmatrix-jax")
