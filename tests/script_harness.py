"""Scripts of ``scripts/`` run in-process: their ``main(argv)`` called in the test's own
interpreter, which has imported JAX already, instead of a subprocess that imports it again
(seconds apiece). That each script starts as a script is checked once per script by
tests/test_script_help.py."""

from __future__ import annotations

import importlib.util
import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_script(name: str):
    """The module of ``scripts/<name>.py``, loaded under ``name`` (not run as __main__)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO_ROOT, "scripts",
                                                                     f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exit_and_stderr(main, args, capsys) -> tuple[int, str]:
    """``main(args)``'s exit status, whether returned or raised (argparse's SystemExit), and
    what it wrote to stderr."""
    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err
