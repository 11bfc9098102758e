"""Build the Swift original's headless binary (the parity oracle) from its source tree and cache
it; the ``--binary`` option the Swift-backed scripts share. scripts/swift_oracle.py is the
command line.

The source is a checkout or export of the public ``charleseff/hack-matrix`` repository (SPEC.md
"Verified against the Swift binary" names the commit checked). Nothing of it is copied into this
repository: ``swift build -c release`` runs with its scratch directory inside the cache, so the
source tree is only read. The cache key is a SHA-256 of the Swift toolchain version, Package.swift
and every .swift file the package builds, so an edited source or another toolchain builds anew and
an unchanged one is reused (``force`` rebuilds anyway). The built binary must answer the
protocol's ``getActionSpace`` before its path is returned.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ..core.constants import N_ACTIONS

BINARY_NAME = "HackMatrix"
BINARY_ENV_VAR = "HACKMATRIX_BINARY"  # the Swift binary of every Swift-backed check
DEFAULT_CACHE_DIR = os.path.join("~", ".cache", "hackmatrix-swift")
# What marks a HackMatrix source tree: the package manifest, the headless CLI and the SPM entry
# point that starts it (programs-rewards-observation §10.1).
REQUIRED_FILES = ("Package.swift", os.path.join("HackMatrix", "HeadlessGameCLI.swift"),
                  os.path.join("Sources", "SPMMain", "main.swift"))
PACKAGE_NAME_MARK = 'name: "HackMatrix"'
SOURCE_DIRS = ("HackMatrix", "Sources")
SMOKE_REQUEST = '{"action": "getActionSpace"}\n'
SMOKE_REPLY = {"actionSpaceSize": N_ACTIONS}
# Limits on the two quick subprocesses, `swift --version` and the smoke check (the binary answers
# one request): each takes about a second; a minute still passes on a machine loaded by training
# and fails a toolchain or binary that hangs instead of leaving the script waiting forever.
TOOLCHAIN_TIMEOUT_S = 60
SMOKE_TIMEOUT_S = 60


class OracleError(Exception):
    """A failure with a message for the user and an exit status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def log(message: str) -> None:
    print(f"swift_oracle: {message}", file=sys.stderr, flush=True)


def check_source_tree(source: str) -> None:
    if not os.path.isdir(source):
        raise OracleError(f"{source} is not a directory", 2)
    missing = [name for name in REQUIRED_FILES if not os.path.isfile(os.path.join(source, name))]
    if missing:
        raise OracleError(f"{source} is not a HackMatrix source tree: missing "
                          f"{', '.join(missing)}", 2)
    with open(os.path.join(source, "Package.swift"), encoding="utf-8", errors="replace") as f:
        if PACKAGE_NAME_MARK not in f.read():
            raise OracleError(f"{source}/Package.swift does not declare the HackMatrix package "
                              f"({PACKAGE_NAME_MARK!r} not found)", 2)


def find_toolchain(swift: str | None) -> tuple[str, str]:
    """(path of the swift driver, its version line)."""
    path = shutil.which(swift or "swift")
    if path is None:
        raise OracleError(f"{swift or 'swift'} not found: install the Swift toolchain "
                          "(https://www.swift.org/install) or pass --swift PATH", 2)
    try:
        result = subprocess.run([path, "--version"], capture_output=True, text=True,
                                timeout=TOOLCHAIN_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OracleError(f"{path} --version failed: {exc}", 2) from exc
    output = (result.stdout + result.stderr).strip()
    if result.returncode != 0 or not output:
        raise OracleError(f"{path} --version failed (exit {result.returncode}): {output}", 2)
    return path, output.splitlines()[0]


def package_files(source: str) -> list:
    """Relative paths of the files the build reads: the manifest and every .swift source."""
    files = ["Package.swift"]
    if os.path.isfile(os.path.join(source, "Package.resolved")):
        files.append("Package.resolved")
    for top in SOURCE_DIRS:
        for root, dirs, names in os.walk(os.path.join(source, top)):
            dirs.sort()
            files += [os.path.relpath(os.path.join(root, name), source)
                      for name in sorted(names) if name.endswith(".swift")]
    return sorted(files)


def source_hash(source: str, toolchain_version: str) -> str:
    digest = hashlib.sha256(toolchain_version.encode() + b"\0")
    for relative in package_files(source):
        digest.update(relative.replace(os.sep, "/").encode() + b"\0")
        with open(os.path.join(source, relative), "rb") as f:
            digest.update(f.read() + b"\0")
    return digest.hexdigest()


def smoke_check(binary: str) -> None:
    """The binary answers getActionSpace over the headless protocol (--headless-cli)."""
    try:
        result = subprocess.run([binary, "--headless-cli"], input=SMOKE_REQUEST,
                                capture_output=True, text=True, timeout=SMOKE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OracleError(f"{binary} did not answer the protocol: {exc}", 1) from exc
    lines = result.stdout.splitlines()
    try:
        reply = json.loads(lines[0]) if lines else None
    except ValueError:
        reply = None
    if reply != SMOKE_REPLY:
        raise OracleError(f"{binary} --headless-cli answered {result.stdout[:200]!r} to "
                          f"getActionSpace (exit {result.returncode}), expected {SMOKE_REPLY}", 1)


def build(source: str, swift: str, entry: str) -> str:
    """swift build -c release with its scratch directory under ``entry``; returns the binary."""
    scratch = os.path.join(entry, "build")
    command = [swift, "build", "-c", "release", "--package-path", source,
               "--scratch-path", scratch, "--product", BINARY_NAME]
    log(f"building: {' '.join(command)}")
    started = time.time()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-30:])
        raise OracleError(f"swift build failed (exit {result.returncode}):\n{tail}", 1)
    log(f"built in {time.time() - started:.1f} s")
    bin_dir = subprocess.run(command + ["--show-bin-path"], capture_output=True, text=True)
    built = os.path.join(bin_dir.stdout.strip(), BINARY_NAME)
    if bin_dir.returncode != 0 or not os.path.isfile(built):
        shown = bin_dir.stdout.strip() or bin_dir.stderr.strip()
        raise OracleError(f"swift build succeeded but {BINARY_NAME} was not found "
                          f"(--show-bin-path: {shown})", 1)
    return built


def install(built: str, binary: str) -> None:
    """Copy the built binary into place atomically (a concurrent reader never sees half)."""
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(binary), prefix=".HackMatrix.")
    os.close(fd)
    shutil.copy2(built, temporary)
    os.chmod(temporary, 0o755)
    os.replace(temporary, binary)


def oracle(source: str, *, cache_dir: str, swift: str | None = None, force: bool = False) -> str:
    """Build (or reuse) the binary for ``source``; returns its path."""
    source = os.path.abspath(os.path.expanduser(source))
    check_source_tree(source)
    swift_path, version = find_toolchain(swift)
    key = source_hash(source, version)
    entry = os.path.join(os.path.abspath(os.path.expanduser(cache_dir)), key[:16])
    binary = os.path.join(entry, BINARY_NAME)
    if os.path.isfile(binary) and not force:
        log(f"cached build for {version}: {binary}")
    else:
        os.makedirs(entry, exist_ok=True)
        install(build(source, swift_path, entry), binary)
        with open(os.path.join(entry, "build.json"), "w") as f:
            json.dump({"source": source, "toolchain": version, "sha256": key,
                       "built": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, f, indent=1)
    smoke_check(binary)
    return binary


def add_binary_option(parser, *, from_environment: bool = True) -> None:
    """``--binary``: the Swift HackMatrix binary, by default ``$HACKMATRIX_BINARY``."""
    default = os.environ.get(BINARY_ENV_VAR) if from_environment else None
    where = f" (default ${BINARY_ENV_VAR})" if from_environment else ""
    parser.add_argument("--binary", default=default,
                        help=f"the Swift HackMatrix binary{where}; build it with "
                             "scripts/swift_oracle.py SWIFT_SOURCE_DIR")


def binary_label(binary: str) -> str:
    """How reports name a binary without a path of this machine: "<cache key>/HackMatrix" for a
    build of this script (the key is the hash of toolchain and sources), else the file name."""
    build = os.path.join(os.path.dirname(os.path.abspath(binary)), "build.json")
    if os.path.isfile(build):
        with open(build) as f:
            meta = json.load(f)
        return f"{meta['sha256'][:16]}/{os.path.basename(binary)} ({meta['toolchain']})"
    return os.path.basename(binary)


def check_binary(parser, binary, *, required: bool = True) -> None:
    """Exit through ``parser.error`` (status 2, a clear message) unless ``binary`` is an
    executable file (or absent and not ``required``)."""
    if not binary:
        if required:
            parser.error(f"no Swift binary: pass --binary or set {BINARY_ENV_VAR} "
                         "(python scripts/swift_oracle.py SWIFT_SOURCE_DIR prints the line)")
        return
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        parser.error(f"--binary {binary} is not an executable file")
