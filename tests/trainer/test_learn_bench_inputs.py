"""learn_bench refuses bad input with one line and exit 2 before any work (before the
baselines are judged or a seed trains), never a traceback after hours of training, and loses
nothing: repeated seeds, a curve path matplotlib cannot save to or that holds a file this
benchmark does not own, a ledger it cannot read or append to, a training seed equal to the
held-out boards' key, a training flag that limits a session (--stop-after-updates or
--stop-after-minutes: a tier's budget is fixed), and a resume that would judge new seeds on
other held-out boards than the label's kept rows."""

import json

import pytest

from purejaxrl.learning_benchmark import EVALUATION_KEY
from tests.script_harness import load_script


@pytest.fixture
def bench(monkeypatch, capsys):
    """``bench(argv) -> (exit code, error lines, the run() calls)``: learn_bench's main with
    ``run`` (all the work) replaced by a recorder, so a check that is missing shows as a call
    instead of a training run."""
    module = load_script("learn_bench")
    calls = []
    outcome = {"table": "", "appended": 0, "drawn": False, "stop_signal": None}

    def recorded(*args, **kwargs):
        calls.append(args)
        return dict(outcome)
    monkeypatch.setattr(module, "run", recorded)

    def call(argv, train_flags=(), **reported):
        outcome.update(reported)
        capsys.readouterr()
        code = module.main([*argv, "--", "--env", "toy", *train_flags])
        captured = capsys.readouterr()
        err = [line for line in captured.err.splitlines() if not line.startswith("backend:")]
        call.out = captured.out
        return code, err, calls
    return call


def refused(result, *words):
    code, err, calls = result
    assert code == 2 and len(err) == 1 and err[0].startswith("error:"), err
    assert all(word in err[0] for word in words), err[0]
    assert not calls  # no work started
    return err[0]


def test_the_last_line_counts_the_rows_this_sitting_appended(bench, tmp_path):
    """An interrupted sitting that appended nothing says so instead of claiming rows; the
    curve is named only when it was drawn."""
    ledger = tmp_path / "ledger.jsonl"
    argv = ["--tier", "smoke", "--label", "fresh", "--ledger", str(ledger),
            "--checkpoint-dir", str(tmp_path / "runs")]
    code, _, _ = bench(argv, appended=0, drawn=False, stop_signal=2)
    assert code == 130
    assert f"no row appended to {ledger}\n" in bench.out and "curve" not in bench.out
    code, _, _ = bench(argv, appended=3, drawn=True, stop_signal=None)
    assert code == 0
    assert f"3 rows appended to {ledger}; curve " in bench.out


def test_repeated_seeds_are_refused(bench, tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    for seeds in (["0", "0"], ["1", "0", "1"]):
        refused(bench(["--seeds", *seeds, "--ledger", str(ledger)]), "more than once")
    assert not ledger.exists()


@pytest.mark.parametrize("flag, value", [("--stop-after-updates", "1"),
                                         ("--stop-after-minutes", "5")])
def test_a_session_limit_is_refused_as_a_training_flag(bench, tmp_path, flag, value):
    """A tier is a fixed budget: a session limit among the training flags would end every
    seed early (or, as before it was refused, be dropped without a word)."""
    ledger = tmp_path / "ledger.jsonl"
    refused(bench(["--ledger", str(ledger)], train_flags=(flag, value)), flag,
            "not a benchmark flag")
    assert not ledger.exists()


def test_the_held_out_key_is_refused_as_a_training_seed(bench, tmp_path):
    """A seed equal to the evaluation key would train on the key stream the held-out boards are
    drawn from: refused, alone or inside a --vmap-seeds range."""
    ledger = tmp_path / "ledger.jsonl"
    for seeds in ([str(EVALUATION_KEY)], [str(EVALUATION_KEY - 1), str(EVALUATION_KEY)]):
        refused(bench(["--seeds", *seeds, "--vmap-seeds", "--ledger", str(ledger)]),
                "held-out boards' key")
    assert not ledger.exists()


def test_a_checkpoint_directory_that_takes_no_files_is_refused_before_the_baselines(bench,
                                                                                   tmp_path):
    """The run directories go under --checkpoint-dir: one that cannot be created or written
    is refused before any work (until stop 81, after the baselines' games, with their rows
    already in the ledger); a new directory is not created by the check."""
    ledger = tmp_path / "ledger.jsonl"
    (tmp_path / "a-file").write_text("")
    for where in ("/proc/x", str(tmp_path / "a-file" / "runs")):
        refused(bench(["--checkpoint-dir", where, "--ledger", str(ledger)]),
                "--checkpoint-dir")
    assert not ledger.exists()
    code, _, calls = bench(["--checkpoint-dir", str(tmp_path / "new" / "runs"),
                            "--ledger", str(ledger)])
    assert code == 0 and len(calls) == 1 and not (tmp_path / "new").exists()


def test_a_curve_path_matplotlib_cannot_save_to_is_refused(bench, tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    (tmp_path / "curves").mkdir()
    (tmp_path / "notes.txt").write_text("a file")
    for plot, words in ((tmp_path / "curves", ["is a directory"]),
                        (tmp_path / "curve.xyz", ["not .xyz"]),
                        (tmp_path / "curve", ["format is its extension"]),  # savefig would add .png
                        (tmp_path / "notes.txt" / "c.png", ["is not a directory"])):
        refused(bench(["--plot", str(plot), "--ledger", str(ledger)]), "--plot", *words)
    assert not ledger.exists() and (tmp_path / "notes.txt").read_text() == "a file"


def test_an_existing_curve_is_replaced_only_with_overwrite(bench, tmp_path):
    """An explicit --plot onto a file, and a label's default curve where the ledger holds no
    seed of that label (a new label, or --no-ledger: e.g. --label default --no-ledger would
    replace the committed default.png), are refused unless --overwrite."""
    ledger = tmp_path / "ledger.jsonl"
    curve = tmp_path / "x.png"
    curve.write_bytes(b"the committed curve")
    for argv in (["--plot", str(curve)], ["--label", "x"], ["--label", "x", "--no-ledger"],
                 ["--label", "x", "--resume"]):  # a resume with no seed of x in the ledger
        refused(bench([*argv, "--ledger", str(ledger)]), str(curve), "already exists",
                "--overwrite")
    assert curve.read_bytes() == b"the committed curve" and not ledger.exists()
    code, _, calls = bench(["--label", "x", "--ledger", str(ledger), "--overwrite"])
    assert code == 0 and len(calls) == 1 and calls[0][8] == str(curve)


@pytest.mark.parametrize("kept", [{"kind": "seed", "seed": 0},
                                  {"kind": "baseline", "policy": "random"}])
def test_a_resumed_label_redraws_its_own_curve_and_no_other_file(bench, tmp_path, kept):
    """--resume of a label with rows in the ledger redraws its default curve (as the first
    sitting drew it, now with the new seeds; a first seed interrupted after the baselines
    leaves only baseline rows and its curve so far); another existing file named by --plot is
    not this label's to replace."""
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(json.dumps({"label": "x", "tier": "smoke", **kept}) + "\n")
    (tmp_path / "x.png").write_bytes(b"x's curve")
    (tmp_path / "y.png").write_bytes(b"y's curve")
    refused(bench(["--label", "x", "--resume", "--ledger", str(ledger), "--plot",
                   str(tmp_path / "y.png")]), "already exists")
    code, _, calls = bench(["--label", "x", "--resume", "--ledger", str(ledger)])
    assert code == 0 and len(calls) == 1 and calls[0][8] == str(tmp_path / "x.png")


def test_a_ledger_that_cannot_be_read_or_appended_to_is_refused(bench, tmp_path):
    spec = tmp_path / "SPEC.md"
    spec.write_text("# Not a ledger\n")
    listed = tmp_path / "list.jsonl"
    listed.write_text("[1, 2]\n")
    (tmp_path / "dir.jsonl").mkdir()
    (tmp_path / "notes.txt").write_text("a file")
    for ledger, words in ((spec, ["not a JSONL ledger"]), (listed, ["not a JSONL ledger"]),
                          (tmp_path / "dir.jsonl", ["is a directory"]),
                          (tmp_path / "notes.txt" / "l.jsonl", ["is not a directory"])):
        refused(bench(["--ledger", str(ledger)]), "--ledger", *words)
    assert spec.read_text() == "# Not a ledger\n" and listed.read_text() == "[1, 2]\n"
    code, _, calls = bench(["--ledger", str(tmp_path / "new" / "l.jsonl")])  # made when written
    assert code == 0 and len(calls) == 1


def test_a_resume_on_other_held_out_boards_than_the_kept_rows_is_refused(tmp_path, capsys):
    """The label's kept seeds and baselines were judged on one board set; a sitting that would
    judge its new seeds on another (another --eval-episodes, or boards of another key) is
    refused naming the value to use, with the real run(): the check precedes the baselines."""
    judged = {"greedy": {"return_mean": 1.0}, "sampled": {"return_mean": 1.0}}

    def rows(seed_boards, baseline_boards, key=EVALUATION_KEY):
        common = {"label": "x", "tier": "smoke", "eval_key": key, "env": "toy"}
        return "".join(json.dumps(row) + "\n" for row in (
            {**common, "kind": "seed", "seed": 0, "eval_episodes": seed_boards, "eval": judged,
             "env_steps": 64, "curve": [[64, 1.0]]},
            *({**common, "kind": "baseline", "policy": policy, "eval_episodes": baseline_boards,
               "eval": judged["greedy"]} for policy in ("random", "heuristic"))))

    ledger = tmp_path / "ledger.jsonl"
    for text, words in ((rows(512, 512), ["seed 0 of x", "512 held-out boards",
                                          "--eval-episodes 512"]),
                        (rows(128, 128, key=7), ["seed 0 of x", "key 7"]),
                        (rows(128, 512), ["128 and 512"])):
        ledger.write_text(text)
        capsys.readouterr()
        code = load_script("learn_bench").main([
            "--label", "x", "--resume", "--seeds", "0", "--eval-episodes", "128", "--ledger",
            str(ledger), "--checkpoint-dir", str(tmp_path / "runs"), "--", "--env", "toy"])
        err = [line for line in capsys.readouterr().err.splitlines()
               if not line.startswith("backend:")]
        assert code == 2 and len(err) == 1, err
        assert all(word in err[0] for word in words), err[0]
        assert ledger.read_text() == text
        assert not (tmp_path / "runs").exists() and not (tmp_path / "x.png").exists()
