"""The learning benchmark end to end on a tiny budget: every seed trained and evaluated on the
same held-out boards, the baselines beside them, one ledger row per seed and per baseline, and
a learning-curve PNG. (Learning results themselves live in the ledger and SPEC, not in tests.)"""

import dataclasses
import json
import os

import pytest

from envs.hackmatrix import HackMatrix
from purejaxrl import learning_benchmark
from purejaxrl.config import RunOptions, TrainConfig
from purejaxrl.learning_benchmark import evaluation_env, honest, run
from purejaxrl.train import train
from tests.script_harness import load_script

# Extended suite (`pytest -m slow`): learn_bench trains, evaluates and resumes in
# subprocesses, about 70 s.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory, compile_cache_dir):
    tmp = tmp_path_factory.mktemp("bench")
    ledger = tmp / "ledger.jsonl"
    learn_bench = load_script("learn_bench")
    code = learn_bench.main([
        "--tier", "smoke", "--label", "tiny", "--seeds", "3", "5", "--eval-episodes", "8",
        "--ledger", str(ledger), "--checkpoint-dir", str(tmp / "runs"), "--",
        "--env", "toy", "--num-envs", "4", "--num-steps", "8", "--total-timesteps", "64",
        "--hidden-width", "16", "--compile-cache-dir", compile_cache_dir, "--quiet"])
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    return dict(code=code, rows=rows, tmp=tmp)


@pytest.fixture(scope="module")
def vmapped_bench_run(tmp_path_factory, compile_cache_dir):
    """The same benchmark with seeds 3 and 4 trained together in one program."""
    tmp = tmp_path_factory.mktemp("bench_vmapped")
    ledger = tmp / "ledger.jsonl"
    code = load_script("learn_bench").main([
        "--tier", "smoke", "--label", "tiny", "--seeds", "3", "4", "--vmap-seeds",
        "--eval-episodes", "8", "--ledger", str(ledger), "--checkpoint-dir", str(tmp / "runs"),
        "--", "--env", "toy", "--num-envs", "4", "--num-steps", "8", "--total-timesteps", "64",
        "--hidden-width", "16", "--compile-cache-dir", compile_cache_dir, "--quiet"])
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    return dict(code=code, rows=rows, tmp=tmp)


def test_vmapped_seeds_get_the_rows_of_seeds_trained_one_by_one(vmapped_bench_run, bench_run):
    """--vmap-seeds: one program trains both seeds; each gets its own row, evaluated on the
    same boards, with the single-seed config of that seed and its own checkpoint."""
    assert vmapped_bench_run["code"] == 0
    rows = [r for r in vmapped_bench_run["rows"] if r["kind"] == "seed"]
    assert [r["seed"] for r in rows] == [3, 4]
    sequential = next(r for r in bench_run["rows"] if r.get("seed") == 3)
    assert rows[0]["config"] == sequential["config"]
    for row in rows:
        assert row["seeds_in_program"] == 2 and row["env_steps"] == 64
        assert row["checkpoint"].startswith(os.path.join("tiny", f"seed-{row['seed']}",
                                                         "checkpoint_"))
        assert row["eval"]["greedy"]["episodes"] == 8 and row["curve"]


def test_every_seed_and_both_baselines_get_a_ledger_row(bench_run):
    assert bench_run["code"] == 0
    rows = bench_run["rows"]
    assert [r["seed"] for r in rows if r["kind"] == "seed"] == [3, 5]
    assert sorted(r["policy"] for r in rows if r["kind"] == "baseline") == ["heuristic", "random"]
    for row in rows:
        assert row["label"] == "tiny" and row["eval_episodes"] == 8
        assert "learn_bench.py" in row["command"]


def test_seed_rows_hold_greedy_and_sampled_evaluation_and_the_trained_budget(bench_run):
    for row in (r for r in bench_run["rows"] if r["kind"] == "seed"):
        assert row["config"]["seed"] == row["seed"] and row["env_steps"] == 64
        # named relative to --checkpoint-dir, never by a path of the machine
        assert row["checkpoint"].startswith(f"tiny-s{row['seed']}{os.sep}checkpoint_")
        for mode in ("greedy", "sampled"):
            summary = row["eval"][mode]
            assert summary["episodes"] == 8
            assert summary["masked_actions"] == 0 and summary["invalid_actions"] == 0


def test_every_policy_is_judged_with_a_stage_report_and_no_r9_judgement_without_the_loop(
        bench_run):
    """Each seed (both modes) and each baseline has the judgement in the env as it is
    (``eval``) with a per-stage report whose stage 1 every game reaches; the toy has no R9
    UNDO loop to close, so no ``eval_closed`` (HackMatrix gets both: ``judgements_for``)."""
    assert set(learning_benchmark.judgements_for(TrainConfig(env="toy"))) == {"eval"}
    assert set(learning_benchmark.judgements_for(TrainConfig())) == {"eval", "eval_closed"}
    for row in bench_run["rows"]:
        assert "eval_closed" not in row
        summaries = ([row["eval"][m] for m in ("greedy", "sampled")]
                     if row["kind"] == "seed" else [row["eval"]])
        for summary in summaries:
            assert summary["episodes"] == 8
            assert summary["stages"][0]["stage"] == 1
            assert summary["stages"][0]["reached"] == 1.0


def test_heuristic_solves_the_toy_corridor_on_the_held_out_boards(bench_run):
    """The toy heuristic always steps right: every episode is a win (a sanity check that the
    baseline rows come from the policies they name)."""
    heuristic = next(r for r in bench_run["rows"] if r.get("policy") == "heuristic")
    assert heuristic["eval"]["win_rate"] == 1.0


def test_learning_curve_png_is_written(bench_run):
    png = bench_run["tmp"] / "tiny.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_interrupted_seed_is_not_recorded_and_resume_finishes_the_benchmark(
        tmp_path, compile_cache_dir, monkeypatch):
    """Rows are appended as they are made (baselines first, then each seed): a stop during the
    second seed keeps the first seed's row and records nothing for the seed cut short. Then
    ``resume``: seed 1 is taken from the ledger (not trained again), seed 2 continues from its
    checkpoint (its curve joins the logged part and the rest), seed 3 trains; the baselines
    are neither judged nor appended again (the ledger's rows serve the table). A later resume
    that adds seed 0 draws the curves of every seed, the kept ones included, from its first
    drawing on; so does a resume that names only one seed (a tier finished one seed per
    sitting): its table and curve keep every seed. Each call reports how many rows it
    appended (none for a call that only redraws)."""
    # Episodes of at most 4 steps: every 8-step update ends some, so each has a curve point.
    config = TrainConfig(env="toy", num_envs=4, num_steps=8, total_timesteps=64,
                         max_episode_steps=4, hidden_width=16, num_minibatches=4,
                         update_epochs=4, recurrent_core="none")
    options = RunOptions(checkpoint_dir=str(tmp_path / "runs"), wandb=False, quiet=True,
                         compile_cache_dir=compile_cache_dir)

    def stop_after_one_update_on_seed_2(seed_config, seed_options, checkpoint):
        assert checkpoint is None
        if seed_config.seed != 2:
            return train(seed_config, seed_options)
        result = train(seed_config, seed_options, stop_after_updates=1)
        return dataclasses.replace(result, interrupted=True, stop_signal=15)

    ledger = tmp_path / "ledger.jsonl"
    outcome = run(config, [1, 2, 3], "cut", "smoke", "cmd", options, 8, str(ledger), None,
                  stop_after_one_update_on_seed_2, say=lambda line: None)
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert outcome["stop_signal"] == 15
    assert outcome["appended"] == 3  # both baselines and seed 1
    assert [r["seed"] for r in rows if r["kind"] == "seed"] == [1]
    assert sorted(r["policy"] for r in rows if r["kind"] == "baseline") == ["heuristic", "random"]

    first_baselines = {r["policy"]: honest(r) for r in rows if r["kind"] == "baseline"}

    def judged_again(*_):
        raise AssertionError("a resumed benchmark judged its baselines again")

    monkeypatch.setattr(learning_benchmark, "judge_baselines", judged_again)
    trained = []

    def train_recording(seed_config, seed_options, checkpoint):
        trained.append((seed_config.seed, checkpoint["update"] if checkpoint else None))
        return train(seed_config, seed_options, checkpoint=checkpoint)

    outcome = run(config, [1, 2, 3], "cut", "smoke", "cmd", options, 8, str(ledger), None,
                  train_recording, say=lambda line: None, resume=True)
    assert trained == [(2, 1), (3, None)]
    assert outcome["appended"] == 2  # seeds 2 and 3; the baselines were kept
    assert outcome["baselines"] == first_baselines  # the ledger's, not judged again
    assert outcome["stop_signal"] is None and [r["seed"] for r in outcome["seeds"]] == [1, 2, 3]
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [r["seed"] for r in rows if r["kind"] == "seed"] == [1, 2, 3]
    assert sorted(r["policy"] for r in rows if r["kind"] == "baseline") == ["heuristic", "random"]
    resumed = next(r for r in rows if r.get("seed") == 2)
    assert resumed["resumed_at_env_steps"] == 32 and resumed["env_steps"] == 64
    assert [steps for steps, _ in resumed["curve"]] == [32, 64]

    drawn = []
    monkeypatch.setattr(learning_benchmark, "plot_learning_curves",
                        lambda path, title, seed_rows, baselines: drawn.append(
                            [r["seed"] for r in seed_rows]))
    outcome = run(config, [0, 1, 2, 3], "cut", "smoke", "cmd", options, 8, str(ledger),
                  str(tmp_path / "cut.png"), train_recording, say=lambda line: None, resume=True)
    assert trained[-1] == (0, None) and len(trained) == 3
    assert outcome["appended"] == 1 and outcome["drawn"]
    assert drawn and all(seeds == [0, 1, 2, 3] for seeds in drawn)
    assert [r["seed"] for r in outcome["seeds"]] == [0, 1, 2, 3]

    drawn.clear()
    outcome = run(config, [3], "cut", "smoke", "cmd", options, 8, str(ledger),
                  str(tmp_path / "cut.png"), train_recording, say=lambda line: None, resume=True)
    assert len(trained) == 3  # nothing trained again
    assert outcome["appended"] == 0 and outcome["drawn"]
    assert drawn and all(seeds == [0, 1, 2, 3] for seeds in drawn)
    assert [r["seed"] for r in outcome["seeds"]] == [0, 1, 2, 3]


def test_evaluation_env_is_the_parity_env_whatever_the_training_options():
    """Seeds and baselines are judged in the game itself: the env's own defaults (Swift's
    reward and rules, default time limit), not the training run's shaping, UNDO fix or limit."""
    config = TrainConfig(env="hackmatrix", max_episode_steps=300, gamma=0.9,
                         env_options=dict(reward_shaping="potential", close_undo_exploit=True,
                                          undo_pays_once=True))
    env, params = evaluation_env(config)
    parity = HackMatrix()
    judged = (env.env.reward_shaping, env.env.close_undo_exploit, env.env.undo_pays_once)
    assert judged == (parity.reward_shaping, parity.close_undo_exploit, parity.undo_pays_once)
    assert params == parity.default_params


def test_a_compile_cache_dir_that_is_a_file_is_refused_before_the_baselines(tmp_path, capsys):
    """The training flags' run options are validated with the others, before any work: a
    --compile-cache-dir that is a file is one line, exit 2, no ledger row (not a refusal by the
    first seed's training once the baselines were evaluated and recorded)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    ledger = tmp_path / "l.jsonl"
    code = load_script("learn_bench").main(["--ledger", str(ledger), "--checkpoint-dir",
                                            str(tmp_path / "runs"), "--",
                                            "--compile-cache-dir", str(blocker)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: --compile-cache-dir {blocker}: ")
    assert not ledger.exists() and not (tmp_path / "runs").exists()


def test_bad_label_and_resume_are_refused_with_exit_2(tmp_path):
    learn_bench = load_script("learn_bench")
    assert learn_bench.main(["--label", "a/b", "--ledger", str(tmp_path / "l.jsonl")]) == 2
    assert learn_bench.main(["--ledger", str(tmp_path / "l.jsonl"), "--",
                             "--resume", "somewhere"]) == 2
    assert learn_bench.main(["--ledger", str(tmp_path / "l.jsonl"), "--seeds", "0", "2",
                             "--vmap-seeds"]) == 2
    assert learn_bench.main(["--ledger", str(tmp_path / "l.jsonl"), "--",
                             "--num-seeds", "2"]) == 2
    assert not (tmp_path / "l.jsonl").exists()
