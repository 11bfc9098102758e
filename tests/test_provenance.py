"""A benchmark or ledger row names the commit whose code produced it: a checkout whose tracked
code differs from its commit says ``+dirty``; the benchmarks' own records (rows appended by
the run itself) do not count as code."""

import subprocess

import pytest

from purejaxrl import provenance


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    git(tmp_path, "init", "-q")
    (tmp_path / "benchmarks").mkdir()
    for name in ("code.py", "benchmarks/results.jsonl"):
        (tmp_path / name).write_text("0\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    monkeypatch.setattr(provenance, "_REPOSITORY", str(tmp_path))
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    return tmp_path, head


def test_a_clean_checkout_and_its_own_records_give_the_commit(checkout):
    repo, head = checkout
    assert provenance.git_commit() == head
    (repo / "benchmarks" / "results.jsonl").write_text("0\n1\n")
    (repo / "untracked_notes.txt").write_text("x")
    assert provenance.git_commit() == head


def test_changed_code_is_marked_dirty(checkout):
    repo, head = checkout
    (repo / "code.py").write_text("1\n")
    assert provenance.git_commit() == head + "+dirty"


def test_outside_a_checkout_there_is_no_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "_REPOSITORY", str(tmp_path))
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert provenance.git_commit() is None
