"""learn_bench starts a new label only: without --resume, a label that already has rows in the
ledger, or whose run directory holds a run, is refused with one line and exit 2 before any
work (the baselines' evaluation included), and nothing is written."""

import importlib.util
import json
import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def learn_bench_main(argv):
    spec = importlib.util.spec_from_file_location(
        "learn_bench", os.path.join(REPO_ROOT, "scripts", "learn_bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main(argv)


def refused(tmp_path, capsys, ledger_text=""):
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(ledger_text)
    code = learn_bench_main(["--label", "x", "--ledger", str(ledger), "--checkpoint-dir",
                             str(tmp_path / "runs"), "--", "--env", "toy"])
    err = [line for line in capsys.readouterr().err.splitlines()
           if not line.startswith("backend:")]
    assert ledger.read_text() == ledger_text  # no baseline row appended
    return code, err


def test_a_label_already_in_the_ledger_is_refused_before_any_work(tmp_path, capsys):
    row = json.dumps({"label": "x", "tier": "smoke", "kind": "seed", "seed": 0}) + "\n"
    code, err = refused(tmp_path, capsys, row)
    assert code == 2 and len(err) == 1 and "already has rows" in err[0] and "--resume" in err[0]


def test_a_run_directory_that_holds_a_run_is_refused_before_any_work(tmp_path, capsys):
    run_dir = tmp_path / "runs" / "x-s0"
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text("{}\n")
    code, err = refused(tmp_path, capsys)
    assert code == 2 and len(err) == 1 and "already holds a run" in err[0]
    assert (run_dir / "metrics.jsonl").read_text() == "{}\n"
