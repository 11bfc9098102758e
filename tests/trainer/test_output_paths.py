"""Output files: an existing file is never replaced without --overwrite, and a result is
written whole or not at all (purejaxrl/output_paths.py)."""

import argparse
import os

import pytest

from purejaxrl.output_paths import (OutputPathError, add_overwrite_argument, check_output_file,
                                    output_file_error, write_text)


def test_an_existing_file_is_refused_unless_overwrite_is_given(tmp_path):
    existing = tmp_path / "results.json"
    existing.write_text("an hour of search")
    with pytest.raises(OutputPathError, match=r"^--json .*results.json: already exists; pass "
                                              r"--overwrite to replace it"):
        check_output_file(str(existing), "--json")
    check_output_file(str(existing), "--json", overwrite=True)
    check_output_file(str(tmp_path / "new.json"), "--json")
    assert existing.read_text() == "an hour of search"  # checking changes nothing


def test_output_file_error_is_the_message_or_none(tmp_path):
    existing = tmp_path / "r.json"
    existing.write_text("")
    assert output_file_error(None, "--json") is None
    assert output_file_error(str(tmp_path / "new.json"), "--json") is None
    assert output_file_error(str(existing), "--json", overwrite=True) is None
    assert "already exists" in output_file_error(str(existing), "--record")
    assert output_file_error(str(tmp_path / "no" / "r.json"), "--json").endswith("does not exist")


def test_the_overwrite_flag_defaults_to_off():
    parser = argparse.ArgumentParser()
    add_overwrite_argument(parser)
    assert parser.parse_args([]).overwrite is False
    assert parser.parse_args(["--overwrite"]).overwrite is True


def test_write_text_replaces_whole_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "r.json"
    write_text(str(path), "first")
    write_text(str(path), "second")
    assert path.read_text() == "second"
    assert os.listdir(tmp_path) == ["r.json"]


def test_write_text_gives_the_file_the_mode_open_would(tmp_path):
    """Not the temporary file's private 0600: what the umask allows, as with open()."""
    write_text(str(tmp_path / "r.json"), "x")
    with open(tmp_path / "plain.json", "w") as handle:
        handle.write("x")
    mode = lambda name: os.stat(tmp_path / name).st_mode & 0o777  # noqa: E731
    assert mode("r.json") == mode("plain.json")


def test_an_interrupted_write_keeps_the_old_file_and_cleans_up(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text("old")

    def fail(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(KeyboardInterrupt):
        write_text(str(path), "new")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["r.json"]


def test_refuse_output_file_prints_one_error_line(tmp_path, capsys):
    from purejaxrl.output_paths import refuse_output_file
    existing = tmp_path / "r.json"
    existing.write_text("")
    assert refuse_output_file(None, "--json") is False
    assert refuse_output_file(str(tmp_path / "new.json"), "--json") is False
    assert capsys.readouterr().err == ""
    assert refuse_output_file(str(existing), "--json") is True
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: --json {existing}: already exists")
