"""The benchmark scripts' bad input (scripts/benchmark.py, benchmark_env.py, swift_throughput.py,
swift_soak.py): one line on stderr starting ``error: `` and exit 2, before any work (no
measurement, no compile, no engine started), never a traceback, never an existing result
replaced. Every script runs in-process with its work replaced by a stand-in that fails the test
if reached; nothing here measures, compiles or needs the Swift binary."""

import json
import sys

import pytest

from tests.script_harness import exit_and_stderr, load_script


class Reached(Exception):
    """The script got past its checks to the work (the stand-in was called)."""


def reached(*args, **kwargs):
    raise Reached()


def one_error_line(err: str) -> str:
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


@pytest.fixture
def benchmark(monkeypatch):
    module = load_script("benchmark")
    monkeypatch.setattr(module, "bench_env", reached)
    monkeypatch.setattr(module, "bench_train", reached)
    return module


# --------------------------------------------------------------------------- --compare's ledger

COMPARED_ROW = {"benchmark": "env", "env": "hackmatrix", "num_envs": 2, "num_steps": 4,
                "device_count": 1, "trace_lower_s": 1.0, "compile_s": 1.0, "sps_median": 10.0}


@pytest.mark.parametrize("content", [None, '{not json\n', json.dumps(COMPARED_ROW)[:30] + "\n",
                                     "[1, 2]\n"],
                         ids=["missing", "malformed", "cut-short", "not-an-object"])
def test_compare_refuses_a_ledger_it_cannot_read_in_one_line(benchmark, tmp_path, content,
                                                             capsys):
    """--compare A B --ledger PATH: a missing ledger, or one with a line that is not a JSON
    object (a malformed line, one cut short by an interrupted write), is one ``error:`` line
    naming the ledger, exit 2, no traceback."""
    path = tmp_path / "results.jsonl"
    if content is not None:
        path.write_text(json.dumps({**COMPARED_ROW, "label": "a"}) + "\n" + content)
    code, err = exit_and_stderr(benchmark.main,
                                ["--ledger", str(path), "--compare", "a", "b"], capsys)
    assert code == 2 and f"--ledger {path}" in one_error_line(err)


def test_compare_says_error_for_an_unknown_label_and_no_shared_configuration(benchmark,
                                                                            tmp_path, capsys):
    """A selector no row has, and two selections with no configuration in common, are one
    ``error:`` line each, exit 2."""
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({**COMPARED_ROW, "label": "a"}) + "\n"
                    + json.dumps({**COMPARED_ROW, "num_envs": 4, "label": "b"}) + "\n")
    code, err = exit_and_stderr(benchmark.main, ["--ledger", str(path), "--compare", "a", "x"],
                                capsys)
    assert code == 2 and "'x'" in one_error_line(err)
    code, err = exit_and_stderr(benchmark.main, ["--ledger", str(path), "--compare", "a", "b"],
                                capsys)
    assert code == 2 and "share no configuration" in one_error_line(err)


# --------------------------------------------------------------------------- ledgers written to

def unwritable_ledgers(tmp_path):
    """A directory, and a path under a file (no file can be created there)."""
    (tmp_path / "ledgers").mkdir()
    (tmp_path / "a-file").write_text("")
    return {str(tmp_path / "ledgers"): "is a directory",
            str(tmp_path / "a-file" / "results.jsonl"): "is not a directory"}


def test_benchmark_refuses_a_ledger_it_cannot_append_to_before_measuring(benchmark, tmp_path,
                                                                         capsys):
    """benchmark.py appends each row as it is measured: a ledger that is a directory or lies
    where no file can be made is refused before the first measurement; an existing ledger
    is appended to (the run gets to its work)."""
    for ledger, reason in unwritable_ledgers(tmp_path).items():
        code, err = exit_and_stderr(benchmark.main, ["--mode", "env", "--num-envs", "2",
                                                     "--ledger", ledger], capsys)
        assert code == 2 and f"--ledger {ledger}: " in one_error_line(err) and reason in err
    existing = tmp_path / "results.jsonl"
    existing.write_text(json.dumps(COMPARED_ROW) + "\n")
    with pytest.raises(Reached):
        benchmark.main(["--mode", "env", "--num-envs", "2", "--ledger", str(existing)])


def test_benchmark_env_refuses_a_ledger_it_cannot_append_to_before_measuring(monkeypatch,
                                                                             tmp_path, capsys):
    """benchmark_env.py writes its rows at the end: a ledger it could not write is refused
    before any measurement, so none is lost."""
    module = load_script("benchmark_env")
    monkeypatch.setattr(module, "bench", reached)
    for ledger, reason in unwritable_ledgers(tmp_path).items():
        code, err = exit_and_stderr(module.main, ["--num-envs", "2", "--ledger", ledger], capsys)
        assert code == 2 and f"--ledger {ledger}: " in one_error_line(err) and reason in err
    with pytest.raises(Reached):
        module.main(["--num-envs", "2", "--ledger", str(tmp_path / "new" / "results.jsonl")])


@pytest.fixture
def swift_throughput(monkeypatch):
    module = load_script("swift_throughput")
    for name in ("ProtocolEngine", "InProcessEngine", "enable_server_compile_cache"):
        monkeypatch.setattr(module, name, reached)
    return module


def test_swift_throughput_refuses_a_ledger_it_cannot_append_to_before_the_engines_run(
        swift_throughput, tmp_path, capsys):
    """swift_throughput.py writes its rows after every engine ran: a ledger it could not
    write is refused first."""
    binary = ["--binary", sys.executable]  # an executable file: the binary check passes
    for ledger, reason in unwritable_ledgers(tmp_path).items():
        code, err = exit_and_stderr(swift_throughput.main, binary + ["--ledger", ledger], capsys)
        assert code == 2 and f"--ledger {ledger}: " in one_error_line(err) and reason in err
    with pytest.raises(Reached):
        swift_throughput.main(binary + ["--ledger", str(tmp_path / "results.jsonl")])


@pytest.mark.parametrize("flag", ["--steps", "--repeats"])
@pytest.mark.parametrize("value", ["0", "-1"])
def test_swift_throughput_refuses_non_positive_counts(swift_throughput, flag, value, capsys):
    """--steps and --repeats of 0 (no timed step: a median of nothing, a division by zero after
    the engines ran) are a usage error, one line, exit 2, checked before the binary."""
    code, err = exit_and_stderr(swift_throughput.main,
                                ["--binary", "/nonexistent", flag, value], capsys)
    assert code == 2 and "--steps and --repeats must be positive" in one_error_line(err)


# --------------------------------------------------------------------------- train options

@pytest.mark.parametrize("bad", [["--hidden-width", "0"], ["--cell-features", "0"],
                                 ["--group-entropy-coef", "nan"], ["--sil-coef", "inf"]])
def test_a_train_option_bad_for_every_configuration_is_refused_before_the_env_row(
        benchmark, bad, tmp_path, capsys):
    """--mode both measures the env row of the first --num-envs before its train row: a
    train option that no configuration can take is refused before that, one line, exit 2,
    and the ledger is not touched."""
    ledger = tmp_path / "results.jsonl"
    code, err = exit_and_stderr(benchmark.main,
                                ["--num-envs", "2", "4", "--num-steps", "8",
                                 "--ledger", str(ledger), *bad], capsys)
    assert code == 2 and bad[0] in one_error_line(err)
    assert not ledger.exists()


def test_a_train_option_that_fails_a_later_configuration_only_lets_the_earlier_ones_run(
        benchmark, tmp_path, capsys):
    """A failure that depends on the configuration (--num-minibatches 8 divides 2 envs x 4
    steps, not 3 x 4) still lets the configurations before it be measured (each row reaches
    the ledger as it is made); where the first configuration fails, nothing would be, and the
    run is refused before any work."""
    argv = ["--mode", "both", "--env", "toy", "--recurrent-core", "none", "--num-steps", "4",
            "--num-minibatches", "8", "--ledger", str(tmp_path / "results.jsonl"), "--num-envs"]
    with pytest.raises(Reached):
        benchmark.main(argv + ["2", "3"])
    code, err = exit_and_stderr(benchmark.main, argv + ["3", "2"], capsys)
    assert code == 2 and "--num-minibatches 8 must divide" in one_error_line(err)


# --------------------------------------------------------------------------- swift_soak dumps

@pytest.fixture
def swift_soak(monkeypatch):
    module = load_script("swift_soak")
    for name in ("ProtocolEngine", "enable_server_compile_cache", "soak"):
        monkeypatch.setattr(module, name, reached)
    return module


def test_swift_soak_refuses_a_dump_directory_that_holds_files(swift_soak, tmp_path, capsys):
    """--dump-dir: a second run into the directory would replace the divergence-*.pkl that the
    first run's report names; a directory that holds files is refused (one line, exit 2,
    the files untouched) unless --overwrite, which removes the first run's dumps. A new or
    empty directory is used; one that is a file is refused."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    (dumps / "divergence-0.pkl").write_bytes(b"first run")
    binary = ["--binary", sys.executable]
    code, err = exit_and_stderr(swift_soak.main, binary + ["--dump-dir", str(dumps)], capsys)
    assert code == 2 and "--overwrite" in one_error_line(err)
    assert (dumps / "divergence-0.pkl").read_bytes() == b"first run"
    (dumps / "divergence-7.pkl").write_bytes(b"first run")
    (dumps / "notes.txt").write_text("the user's")
    with pytest.raises(Reached):
        swift_soak.main(binary + ["--dump-dir", str(dumps), "--overwrite"])
    # --overwrite: none of the first run's dumps outlives it beside the new run's (fewer, maybe);
    # a file the soak did not write stays.
    assert sorted(path.name for path in dumps.iterdir()) == ["notes.txt"]
    with pytest.raises(Reached):
        swift_soak.main(binary + ["--dump-dir", str(tmp_path / "new")])
    code, err = exit_and_stderr(swift_soak.main,
                                binary + ["--dump-dir", str(dumps / "notes.txt")], capsys)
    assert code == 2 and "is not a directory" in one_error_line(err)


@pytest.mark.parametrize("flag", ["--steps", "--max-episode-steps", "--max-divergences"])
def test_swift_soak_refuses_non_positive_counts(swift_soak, flag, capsys):
    """--max-episode-steps 0 would start trajectories of no step forever (--steps is never
    reached); it, --steps 0 and --max-divergences 0 are a usage error, one line, exit 2,
    checked before the binary."""
    code, err = exit_and_stderr(swift_soak.main, ["--binary", "/nonexistent", flag, "0"], capsys)
    assert code == 2 and f"{flag}" in one_error_line(err) and "must be positive" in err


# --------------------------------------------------------------------------- usage errors

@pytest.mark.parametrize("name, argv", [
    ("benchmark", ["--num-envs", "many"]), ("benchmark_env", ["--repeats", "x"]),
    ("swift_throughput", ["--no-such-flag"]), ("swift_soak", ["--steps", "x"])])
def test_usage_errors_are_one_line(name, argv, capsys):
    """A bad flag or value is one ``error:`` line pointing at --help (the shared parser,
    ``purejaxrl.cli.parsing.ArgumentParser``), not the whole usage, exit 2."""
    code, err = exit_and_stderr(load_script(name).main, argv, capsys)
    assert code == 2 and "--help" in one_error_line(err)
