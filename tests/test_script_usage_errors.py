"""Every script's command line answers an unknown flag or a bad value with one line on stderr
starting ``error: `` (naming ``--help``), exit 2, before any work: never argparse's whole usage
block (``purejaxrl/cli/parsing.py`` ArgumentParser). In-process (``tests/script_harness.py``):
each script's ``main`` is called with a flag no script has, which fails while the arguments are
parsed, so nothing runs."""

import glob
import os

import pytest

from script_harness import REPO_ROOT, exit_and_stderr, load_script

# headless_cli is the protocol server's drop-in for the Swift binary: it ignores flags it does
# not know (Swift's); a bad value of its own flags is one line (below).
NOT_HERE = {"headless_cli.py"}
SCRIPTS = sorted(os.path.basename(path)
                 for path in glob.glob(os.path.join(REPO_ROOT, "scripts", "*.py"))
                 if os.path.basename(path) not in NOT_HERE)


@pytest.mark.parametrize("script", SCRIPTS)
def test_an_unknown_flag_is_one_error_line(script, capsys):
    """One line ``error: ... (see PROG --help)``, exit 2, no usage block."""
    module = load_script(script[:-len(".py")])
    code, err = exit_and_stderr(module.main, ["--no-such-flag-anywhere"], capsys)
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "--help" in err and "usage:" not in err


@pytest.mark.parametrize("script, flag", [("watch_agent", "--fps"), ("probe_encoders", "--lr")])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_non_finite_number_is_refused_while_parsing(script, flag, value, capsys):
    """NaN and infinity are no speed or learning rate (NaN even passes ``x <= 0``): refused
    while the arguments are parsed (``finite_float``), one ``error:`` line, exit 2."""
    parser = load_script(script).build_parser()
    code, err = exit_and_stderr(parser.parse_args, [flag, value], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: argument {flag}: must be a finite number"), err


def test_the_protocol_servers_bad_value_is_one_error_line(capsys):
    """The protocol server ignores flags it does not know (Swift's), but a bad value of one of
    its own is one ``error:`` line, exit 2, no usage block (its parser, envs.command_line's,
    is the trainer's)."""
    from envs.hackmatrix.swift_io.protocol import build_parser
    code, err = exit_and_stderr(build_parser().parse_known_args, ["--seed", "x"], capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert "usage:" not in err
