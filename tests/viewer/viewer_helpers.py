"""Paths and the subprocess runner of the viewer tests (a module with a unique name, so the
tests can import it whichever conftest.py pytest imported first)."""

import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(REPO_ROOT, "scripts")
WATCH = os.path.join(SCRIPTS, "watch_agent.py")
PLAY = os.path.join(SCRIPTS, "play.py")

WATCH_EPISODES = 2
WATCH_MAX_STEPS = 6


def run_script(script, *args, stdin=None, timeout=300):
    env = dict(os.environ, JAX_PLATFORMS="cpu", NO_COLOR="1")
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                          input=stdin, env=env, timeout=timeout, cwd=REPO_ROOT)
