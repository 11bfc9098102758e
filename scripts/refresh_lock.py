#!/usr/bin/env python
"""Rewrite requirements.lock: the exact version of every package that a fresh install of
requirements.txt resolves to today, plus the packages that the GPU line of the README
(``pip install -c requirements.lock "jax[cuda12]"``) adds, resolved against those versions.

    python scripts/refresh_lock.py
    python scripts/refresh_lock.py --extra NAME        # also pin NAME, about to be required

Runs in a new virtual environment in a temporary directory (the current one is not touched),
with network access to the package index; takes a few minutes. ``--extra NAME`` also installs
and pins NAME (a package about to become a requirement). Review the diff, run the tests, commit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from purejaxrl.cli.parsing import ArgumentParser

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCK = "requirements.lock"
GPU_REQUIREMENT = "jax[cuda12]"
HEADER = f"""\
# Exact versions of every package the README's install commands and CI install: requirements.txt
# names the packages and applies this file as constraints (`-c {LOCK}`). The GPU line of the
# README (`pip install -c {LOCK} "{GPU_REQUIREMENT}"`) resolves against it too: its CUDA
# packages are pinned here as well (a CPU or TPU install ignores them).
# Written by `python scripts/refresh_lock.py` (a fresh virtual environment: pip install -r
# requirements.txt without this file, pip freeze); do not edit by hand.
"""
_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[^\s;@]+$")


def lock_text(freeze: list[str], gpu_report: dict) -> str:
    """The lock file from ``pip freeze --exclude-editable`` lines and the ``pip install
    --dry-run --report`` of the GPU line: one ``name==version`` per package, sorted, no
    editable or path entries (nothing of the machine that wrote it)."""
    pins = {}
    for line in freeze:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not _PIN.match(line):  # -e, file:// and name @ url entries name this machine
            raise ValueError(f"not a plain pin: {line!r}")
        name, version = line.split("==")
        pins[name.lower()] = f"{name}=={version}"
    for item in gpu_report.get("install", []):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        pins.setdefault(name.lower(), f"{name}=={version}")
    return HEADER + "".join(pin + "\n" for _, pin in sorted(pins.items()))


def main(argv=None) -> int:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--extra", action="append", default=[], metavar="NAME",
                        help="also install and pin this package")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="refresh-lock-") as work:
        venv = os.path.join(work, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        pip = [os.path.join(venv, "bin", "python"), "-m", "pip"]
        run = lambda *a: subprocess.run([*pip, *a], check=True, cwd=REPO_ROOT,  # noqa: E731
                                        capture_output=True, text=True).stdout
        run("install", "-q", "--upgrade", "pip")
        unpinned = os.path.join(work, "requirements.txt")
        with open(os.path.join(REPO_ROOT, "requirements.txt"), encoding="utf-8") as source:
            lines = [line for line in source if not line.startswith("-c ")]
        with open(unpinned, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
        run("install", "-q", "-r", unpinned, *args.extra)
        freeze = run("freeze", "--exclude-editable").splitlines()
        cpu_lock = os.path.join(work, LOCK)
        with open(cpu_lock, "w", encoding="utf-8") as handle:
            handle.write(lock_text(freeze, {}))
        report = os.path.join(work, "gpu.json")
        # The GPU line against the new pins: fails here if they cannot satisfy it.
        run("install", "-q", "--dry-run", "--ignore-installed", "--only-binary", ":all:",
            "-c", cpu_lock, GPU_REQUIREMENT, "--report", report)
        with open(report, encoding="utf-8") as handle:
            text = lock_text(freeze, json.load(handle))
    with open(os.path.join(REPO_ROOT, LOCK), "w", encoding="utf-8") as handle:
        handle.write(text)
    print(f"wrote {LOCK}: {text.count(chr(10)) - HEADER.count(chr(10))} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
