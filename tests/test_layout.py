"""The package layout is the architecture (issue 15; SPEC §1.1), so its import direction is
checked: the rules in ``envs/hackmatrix/core`` import nothing outside ``core``; the env contract
(the modules directly in ``envs/hackmatrix``) builds on ``core`` only; the viewers (``viz``)
never reach into the Swift I/O (``swift_io``); nothing under ``envs`` imports the trainer or the
scripts. No file adds to ``sys.path``: the scripts import the installed project
(requirements.txt installs it with ``-e .``), the tests get the root from pytest.ini."""

import ast
import os
import pathlib
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = REPO_ROOT / "envs" / "hackmatrix"
# Layer of each part of envs/hackmatrix, and the layers it may import from.
ALLOWED = {
    "core": {"core"},
    "": {"", "core"},  # env, observation, baselines, soak and the package's public API
    "viz": {"viz", "", "core"},
    "swift_io": {"swift_io", "viz", "", "core"},  # parity reports show boards (viz)
}
# The package's __init__ is its public API (HackMatrix, set_state, ...): it re-exports any layer.
FACADE = PACKAGE / "__init__.py"
FOREIGN = ("purejaxrl", "scripts", "tests")


def _layer(module: str) -> str:
    """The layer of a dotted module path under envs.hackmatrix (None outside it)."""
    parts = module.split(".")
    if parts[:2] != ["envs", "hackmatrix"]:
        return None
    return parts[2] if len(parts) > 3 and parts[2] in ALLOWED else ""


def _imports(path: pathlib.Path):
    """(line, absolute dotted module) of every import in ``path``, relative ones resolved."""
    package = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            if node.module is None:  # from . import a, b: each name is a module
                for alias in node.names:
                    yield node.lineno, f"{module}.{alias.name}"
            else:
                yield node.lineno, module


def _package_modules():
    return sorted(path for path in PACKAGE.rglob("*.py"))


def test_every_layer_imports_only_the_layers_below_it():
    wrong = []
    for path in _package_modules():
        layer = _layer(".".join(path.relative_to(REPO_ROOT).with_suffix("").parts))
        for line, module in _imports(path):
            target = _layer(module)
            if target is not None and target not in ALLOWED[layer] and path != FACADE:
                wrong.append(f"{path.relative_to(REPO_ROOT)}:{line} ({layer or 'env'}) "
                             f"imports {module} ({target or 'env'})")
            if module.split(".")[0] in FOREIGN:
                wrong.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_the_layer_rules_see_every_import():
    """The checker itself: relative imports resolve to the module they name."""
    imports = {module for _, module in _imports(PACKAGE / "swift_io" / "scenario.py")}
    assert "envs.hackmatrix.core.entities" in imports
    assert "envs.hackmatrix.swift_io.raw_observation" in imports
    assert _layer("envs.hackmatrix.core.state") == "core"
    assert _layer("envs.hackmatrix.env") == ""
    assert _layer("envs.hackmatrix") == ""


def test_no_file_changes_sys_path():
    offenders = []
    for path in REPO_ROOT.rglob("*.py"):
        if {".venv", ".git"} & set(path.relative_to(REPO_ROOT).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr == "path"
                    and isinstance(node.value, ast.Name) and node.value.id == "sys"):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert not offenders, "sys.path used at " + ", ".join(offenders)


@pytest.mark.parametrize("script", ["train_purejaxrl.py", "evaluate.py", "watch_agent.py"])
def test_scripts_run_as_the_readme_says_without_the_root_on_the_path(script, tmp_path):
    """``python scripts/<name>.py`` from any directory, with no PYTHONPATH: the project is
    installed (requirements.txt's ``-e .``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / script), "--help"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, (
        f"{script} --help failed; is the project installed (pip install -r requirements.txt "
        f"installs it with -e .)?\n{result.stderr[-2000:]}")
    assert "usage:" in result.stdout
