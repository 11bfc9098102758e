"""The package layout is the architecture (issues 15, 28; SPEC §1.1), so its import direction is
checked: the rules in ``envs/hackmatrix/core`` import nothing outside ``core``; the env contract
(the modules directly in ``envs/hackmatrix``) builds on ``core`` only; the viewers (``viz``)
never reach into the Swift I/O (``swift_io``); nothing under ``envs`` imports the trainer or the
scripts. The trainer (``purejaxrl``) imports no env: it meets them in ``envs/registry.py`` and
reads them by ``envs/contract.py`` and their options by ``envs/options.py``, the only
``envs`` modules it may import besides the JAX-free ``envs/compile_cache.py``; an env
package imports no other env package. No file adds to ``sys.path``: the scripts import the
installed project (requirements.txt installs it with ``-e .``), the tests get the root from
pytest.ini."""

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
# The envs modules the trainer may import: the meeting point, the contract, the compile cache.
TRAINER_MAY_IMPORT = ("envs", "envs.registry", "envs.contract", "envs.options",
                      "envs.compile_cache", "envs.command_line")
ENV_PACKAGES = ("hackmatrix", "toy")


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


def _modules_under(folder: pathlib.Path):
    return sorted(path for path in folder.rglob("*.py"))


def test_the_trainer_imports_no_env_but_the_registry_and_the_contract():
    wrong = []
    for path in _modules_under(REPO_ROOT / "purejaxrl"):
        for line, module in _imports(path):
            if module.split(".")[0] == "envs" and module not in TRAINER_MAY_IMPORT:
                wrong.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_envs_import_neither_the_trainer_nor_each_other():
    """Every module under envs/ (the registry and the contract included) stays out of the
    trainer, scripts and tests; an env package imports no other env package (the toy corridor
    is not HackMatrix); the contract imports no env."""
    wrong = []
    for path in _modules_under(REPO_ROOT / "envs"):
        parts = path.relative_to(REPO_ROOT).parts
        own = parts[1] if len(parts) > 2 else None
        for line, module in _imports(path):
            names = module.split(".")
            if names[0] in FOREIGN:
                wrong.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {module}")
            if (names[0] == "envs" and len(names) > 1 and names[1] in ENV_PACKAGES
                    and names[1] != own):
                wrong.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_the_trainer_check_would_catch_an_env_import():
    """The checker itself: HackMatrix's hooks module, were it a trainer module, would be
    refused for its (relative) imports of the game, not for the contract's."""
    refused = {module for _, module in _imports(PACKAGE / "training.py")
               if module.split(".")[0] == "envs" and module not in TRAINER_MAY_IMPORT}
    assert "envs.hackmatrix.core.constants" in refused and "envs.contract" not in refused


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
