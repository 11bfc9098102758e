import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Subprocesses the tests start (the scripts, ``python -c`` drivers that import ``tests.*`` or
# ``scripts.*``) import this checkout, as pytest.ini's ``pythonpath = .`` does in-process: the
# installed project (requirements.txt's ``-e .``) may be another checkout of it.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [REPO_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
