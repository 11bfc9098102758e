"""learn_bench starts a new label only: without --resume, a label that already has rows in the
ledger, or whose run directory holds a run, is refused with one line and exit 2 before any
work (the baselines' evaluation included), and nothing is written."""

import json

import pytest

from tests.script_harness import load_script


def learn_bench_main(argv):
    return load_script("learn_bench").main(argv)


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


def test_the_overview_prints_the_ledger_and_refuses_training_flags(tmp_path, capsys):
    """--overview trains nothing: it prints the ledger's table; given training flags, or a
    ledger that does not exist, it says so in one line and exits 2, as --by-stage does
    without --overview."""
    ledger = tmp_path / "ledger.jsonl"
    judged = {"greedy": {"stage_mean": 4.5}, "sampled": {"stage_mean": 4.4}}
    ledger.write_text(json.dumps({"label": "x", "tier": "smoke", "kind": "seed", "seed": 0,
                                  "eval": judged, "eval_closed": judged}) + "\n")
    assert learn_bench_main(["--overview", "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "smoke tier" in out and "4.50" in out
    for argv in (["--overview", "--ledger", str(ledger), "--", "--gamma", "0.9"],
                 ["--overview", "--ledger", str(tmp_path / "missing.jsonl")]):
        assert learn_bench_main(argv) == 2
        err = [line for line in capsys.readouterr().err.splitlines()
               if not line.startswith("backend:")]
        assert len(err) == 1 and err[0].startswith("error:")
    assert learn_bench_main(["--by-stage", "--ledger", str(ledger)]) == 2  # not a training flag
    assert "--by-stage is a form of --overview" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() and ledger.read_text().count("\n") == 1


def test_a_resume_whose_kept_seed_ran_another_configuration_is_refused(tmp_path, capsys):
    """--resume keeps the label's seeds from the ledger; one trained with other flags (or
    under defaults that changed since) would put two configurations in one table: refused in
    one line naming the difference, exit 2, before any work. Seeds that differ only in seed
    and placement are kept."""
    from purejaxrl.config import TrainConfig
    ledger = tmp_path / "ledger.jsonl"
    flags = ["--env", "toy", "--num-envs", "4", "--num-steps", "8", "--total-timesteps", "64"]
    same = TrainConfig(env="toy", num_envs=4, num_steps=8, total_timesteps=64,
                       num_minibatches=4, update_epochs=4, seed=7, num_devices=2)
    for config, refused_ in ((same.replace(gamma=0.9), True), (same, False)):
        row = {"label": "x", "tier": "smoke", "kind": "seed", "seed": 0,
               "config": config.to_dict()}
        ledger.write_text(json.dumps(row) + "\n")
        if refused_:
            code = learn_bench_main(["--label", "x", "--resume", "--seeds", "0", "--ledger",
                                     str(ledger), "--checkpoint-dir", str(tmp_path / "runs"),
                                     "--", *flags])
            err = [line for line in capsys.readouterr().err.splitlines()
                   if not line.startswith("backend:")]
            assert code == 2 and len(err) == 1
            assert "seed 0 of x" in err[0]
            assert "another configuration (gamma: 0.9 != 0.995)" in err[0]  # nothing else
        else:
            from purejaxrl.learning_benchmark import check_kept_seeds, finished_rows
            from purejaxrl import ppo
            built = ppo.config_for_env("toy", num_envs=4, num_steps=8, total_timesteps=64,
                                       num_minibatches=4, update_epochs=4)
            check_kept_seeds(finished_rows(str(ledger), "x", "smoke"), built, "x")
        assert ledger.read_text().count("\n") == 1 and not (tmp_path / "runs").exists()


def test_a_run_directory_holding_nothing_of_a_run_is_not_refused(tmp_path):
    """What counts as a run is what the trainer counts (``run_contents``): a directory that a
    session locked and left before its first metrics record or checkpoint (it failed to start)
    does not block the label; one with a checkpoint does."""
    from purejaxrl.config import ConfigError
    from purejaxrl.learning_benchmark import check_new_label
    run_dir = tmp_path / "x-s0"
    run_dir.mkdir()
    (run_dir / ".lock").write_text("123\n")
    check_new_label(None, "x", "smoke", [str(run_dir)])
    (run_dir / "checkpoint_1.msgpack").write_bytes(b"")
    with pytest.raises(ConfigError, match="already holds a run"):
        check_new_label(None, "x", "smoke", [str(run_dir)])
