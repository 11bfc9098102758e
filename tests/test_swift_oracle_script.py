"""scripts/swift_oracle.py builds, caches and smoke-checks the Swift oracle, and fails with a clear
message and a non-zero status on bad input (issue 14). A fake ``swift`` driver stands in for the
toolchain, so these run everywhere in well under a second each (CI has no Swift source)."""

import os
import subprocess
import sys
import textwrap

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO_ROOT, "scripts", "swift_oracle.py")

# A fake driver: `--version`, `build ...` (writes a binary that answers getActionSpace, or fails
# when FAKE_SWIFT_FAIL is set) and `build ... --show-bin-path`. Every call is logged.
FAKE_SWIFT = textwrap.dedent("""\
    #!{python}
    import os, sys
    args = sys.argv[1:]
    with open(os.environ["FAKE_SWIFT_LOG"], "a") as log:
        log.write(" ".join(args) + "\\n")
    if args == ["--version"]:
        print("Swift version 0.0-fake")
        sys.exit(0)
    scratch = args[args.index("--scratch-path") + 1]
    bin_dir = os.path.join(scratch, "release")
    if "--show-bin-path" in args:
        print(bin_dir)
        sys.exit(0)
    if os.environ.get("FAKE_SWIFT_FAIL"):
        print("error: cannot find type 'Grid' in scope", file=sys.stderr)
        sys.exit(1)
    os.makedirs(bin_dir, exist_ok=True)
    reply = os.environ.get("FAKE_BINARY_REPLY", '{{"actionSpaceSize":28}}')
    with open(os.path.join(bin_dir, "HackMatrix"), "w") as binary:
        binary.write("#!{python}\\nimport sys\\nsys.stdin.readline()\\nprint(%r)\\n" % reply)
    os.chmod(os.path.join(bin_dir, "HackMatrix"), 0o755)
    """)


@pytest.fixture
def toolchain(tmp_path):
    """(fake swift path, its call log, a minimal HackMatrix source tree, a cache directory)."""
    swift = tmp_path / "swift"
    swift.write_text(FAKE_SWIFT.format(python=sys.executable))
    swift.chmod(0o755)
    source = tmp_path / "hack-matrix"
    (source / "HackMatrix").mkdir(parents=True)
    (source / "Sources" / "SPMMain").mkdir(parents=True)
    (source / "Package.swift").write_text('let package = Package(name: "HackMatrix")\n')
    (source / "HackMatrix" / "HeadlessGameCLI.swift").write_text("// cli\n")
    (source / "Sources" / "SPMMain" / "main.swift").write_text("// main\n")
    return swift, tmp_path / "swift.log", source, tmp_path / "cache"


def run(toolchain, *extra, source=None, **env):
    swift, log, default_source, cache = toolchain
    environment = dict(os.environ, FAKE_SWIFT_LOG=str(log), **env)
    return subprocess.run(
        [sys.executable, SCRIPT, str(source or default_source), "--swift", str(swift),
         "--cache-dir", str(cache), *extra], capture_output=True, text=True, env=environment,
        timeout=60)


def builds(toolchain) -> int:
    log = toolchain[1]
    calls = log.read_text().splitlines() if log.exists() else []
    return sum(1 for call in calls if call.startswith("build") and "--show-bin-path" not in call)


@pytest.mark.slow  # extended suite (pytest -m slow)
def test_builds_once_prints_the_binary_line_and_reuses_the_cache(toolchain):
    """The only stdout line is HACKMATRIX_BINARY=<cached binary>; a second run with unchanged
    sources does not build again; an edited .swift file gives a new cache entry."""
    first = run(toolchain)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("\n") == 1 and first.stdout.startswith("HACKMATRIX_BINARY=")
    binary = first.stdout.strip().split("=", 1)[1]
    assert binary.startswith(str(toolchain[3])) and os.access(binary, os.X_OK)
    assert builds(toolchain) == 1
    again = run(toolchain)
    assert (again.returncode, again.stdout, builds(toolchain)) == (0, first.stdout, 1)
    (toolchain[2] / "HackMatrix" / "HeadlessGameCLI.swift").write_text("// cli, edited\n")
    edited = run(toolchain)
    assert edited.returncode == 0 and edited.stdout != first.stdout and builds(toolchain) == 2
    forced = run(toolchain, "--force")
    assert forced.stdout == edited.stdout and builds(toolchain) == 3


def test_a_command_after_the_separator_runs_with_the_binary_set(toolchain):
    """`swift_oracle.py SRC -- CMD ...` runs CMD with HACKMATRIX_BINARY set once the binary is
    ready, and exits with CMD's status."""
    probe = ("import os, sys; print('seen', os.environ['HACKMATRIX_BINARY']); "
             "sys.exit(7)")
    result = run(toolchain, "--", sys.executable, "-c", probe)
    binary = result.stdout.splitlines()[0].split("=", 1)[1]
    assert result.returncode == 7 and result.stdout.splitlines()[1] == f"seen {binary}"


def test_not_a_hackmatrix_source_tree_is_exit_2(toolchain, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    result = run(toolchain, source=other)
    assert result.returncode == 2 and result.stdout == ""
    assert "not a HackMatrix source tree" in result.stderr and "Package.swift" in result.stderr
    (toolchain[2] / "Package.swift").write_text('let package = Package(name: "Other")\n')
    result = run(toolchain)
    assert result.returncode == 2 and "does not declare the HackMatrix package" in result.stderr


def test_missing_toolchain_is_exit_2(toolchain, tmp_path):
    swift, log, source, cache = toolchain
    result = subprocess.run([sys.executable, SCRIPT, str(source), "--swift",
                             str(tmp_path / "no-such-swift"), "--cache-dir", str(cache)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert "not found: install the Swift toolchain" in result.stderr


def test_build_failure_is_exit_1_with_the_compiler_output(toolchain):
    result = run(toolchain, FAKE_SWIFT_FAIL="1")
    assert result.returncode == 1 and result.stdout == ""
    assert "swift build failed (exit 1)" in result.stderr
    assert "cannot find type 'Grid'" in result.stderr


def test_a_binary_that_does_not_speak_the_protocol_is_exit_1(toolchain):
    result = run(toolchain, FAKE_BINARY_REPLY='{"error":"Invalid command"}')
    assert result.returncode == 1 and result.stdout == ""
    assert "expected {'actionSpaceSize': 28}" in result.stderr


def test_scripts_without_a_usable_binary_exit_2_saying_how_to_build_one(monkeypatch, tmp_path,
                                                                         capsys):
    """The Swift-backed scripts share swift_oracle's --binary option: no binary (no option, no
    $HACKMATRIX_BINARY) or a path that is not an executable file is a usage error (exit 2)."""
    import argparse

    from envs.hackmatrix.swift_io import swift_build as swift_oracle

    monkeypatch.delenv("HACKMATRIX_BINARY", raising=False)
    parser = argparse.ArgumentParser(prog="swift_soak.py")
    swift_oracle.add_binary_option(parser)
    for argv, message in (([], "pass --binary or set HACKMATRIX_BINARY"),
                          (["--binary", str(tmp_path)], "is not an executable file")):
        with pytest.raises(SystemExit) as exit_info:
            swift_oracle.check_binary(parser, parser.parse_args(argv).binary)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    monkeypatch.setenv("HACKMATRIX_BINARY", sys.executable)
    parser = argparse.ArgumentParser()
    swift_oracle.add_binary_option(parser)
    assert parser.parse_args([]).binary == sys.executable
    swift_oracle.check_binary(parser, sys.executable)  # an executable: accepted
