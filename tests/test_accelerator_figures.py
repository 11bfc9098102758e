"""scripts/accelerator_figures.sh, the runbook of the accelerator figures (issue 26): bad input
is refused before any work and no earlier figures are overwritten; its throughput part runs end
to end at tiny sizes on this CPU (extended suite), each benchmark row in the OUTDIR's ledger;
so does issue 29's search pair (two arms on one wall-clock budget, compared board by board)."""

import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO_ROOT, "scripts", "accelerator_figures.sh")


def run(*args, **env):
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=1800,
                          env=dict(os.environ, JAX_PLATFORMS="cpu", PYTHON=sys.executable,
                                   **env))


def test_unknown_part_is_refused_with_the_usage(tmp_path):
    result = run(str(tmp_path / "out"), "everything")
    assert result.returncode == 2
    assert result.stderr.startswith("error: unknown part 'everything'")
    assert "throughput|variants|learn" in result.stderr
    assert not (tmp_path / "out").exists()


def test_search_pair_without_its_checkpoint_is_refused_before_any_work(tmp_path):
    """The pair's two arms start from one checkpoint: none given, or one that does not exist,
    is one line and exit 2, and no OUTDIR is made."""
    for extra in ([], [str(tmp_path / "missing")]):
        result = run(str(tmp_path / "out"), "search-pair", *extra)
        assert result.returncode == 2
        assert result.stderr.startswith("error: search-pair needs the CHECKPOINT"), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "out").exists()


def test_an_outdir_that_holds_figures_is_never_written_over(tmp_path):
    earlier = tmp_path / "results.jsonl"
    earlier.write_text('{"label": "earlier"}\n')
    result = run(str(tmp_path), "throughput")
    assert result.returncode == 2 and "is not empty" in result.stderr
    assert os.listdir(tmp_path) == ["results.jsonl"]
    assert earlier.read_text() == '{"label": "earlier"}\n'


@pytest.mark.slow
def test_throughput_part_writes_env_and_train_rows_for_every_env_count(tmp_path):
    """check_runtime passes, then one benchmark step per env count: an env row and a train
    row of the default network each, in OUTDIR/results.jsonl, with a log per step."""
    out = tmp_path / "figures"
    result = run(str(out), "throughput", ENV_COUNTS="4 8", REPEATS="1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((row["benchmark"], row["num_envs"]) for row in rows) == [
        ("env", 4), ("env", 8), ("train", 4), ("train", 8)]
    assert all(row["label"] == "accelerator-default" and row["device"] for row in rows)
    assert {"machine.txt", "check_runtime.log", "default-4.log", "default-8.log"} <= set(
        os.listdir(out))


@pytest.mark.slow
def test_session_part_times_every_configuration_and_profiles_the_step(tmp_path):
    """The short-lease part: the default network at each env count (env and train rows), the
    first count also with the main command's configuration (the trainer's defaults), with 8
    minibatches, at the CPU's loop widths (env) and with 4 seeds, then the step's profile;
    every row in OUTDIR/results.jsonl with its label."""
    out = tmp_path / "figures"
    # The session's 120 s a step is a GPU lease's; a 2-core CPU that compiles each step cold
    # beside another test (pytest-xdist) needs more, and the limit is not what this test checks.
    result = run(str(out), "session", ENV_COUNTS="4 8", REPEATS="1", PROFILE_ENVS="4",
                 DEADLINE_S="1500", STEP_LIMIT_S="400")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((row["label"], row["benchmark"], row["num_envs"]) for row in rows) == sorted([
        ("accelerator-width1", "env", 4),
        ("accelerator-default", "env", 4), ("accelerator-default", "env", 8),
        ("accelerator-default", "train", 4), ("accelerator-default", "train", 8),
        ("accelerator-main", "train", 4),
        ("accelerator-mb8", "train", 4), ("accelerator-seeds4", "train", 4)])
    main = next(row for row in rows if row["label"] == "accelerator-main")
    assert main["trainer_defaults"] and main["acquire_macro"]
    assert main["config"]["training_reward"] == "stage-count"
    assert all(row["updates_per_chunk"] == 1 for row in rows if row["benchmark"] == "train")
    assert [row["num_minibatches"] for row in rows if row["label"] == "accelerator-mb8"] == [8]
    assert "env.step" in (out / "profile.log").read_text()


def test_a_session_step_past_the_deadline_is_skipped_not_started(tmp_path):
    """DEADLINE_S bounds the whole session part: with no time left every step is skipped
    (named in the output) and the exit status says the figures are incomplete."""
    out = tmp_path / "figures"
    result = run(str(out), "session", ENV_COUNTS="4", DEADLINE_S="0")
    assert result.returncode == 1
    assert "== default-4: skipped" in result.stdout and "== profile: skipped" in result.stdout
    assert not (out / "results.jsonl").exists()


@pytest.mark.slow
def test_learn_part_trains_one_seed_at_learn_envs_with_learn_flags(tmp_path):
    """The learning part: learn_bench at LEARN_ENVS envs with LEARN_FLAGS passed to training,
    its seed's ledger row (labelled by tier and env count), curve and trimmed checkpoint in
    OUTDIR."""
    out = tmp_path / "figures"
    result = run(str(out), "learn", "smoke", LEARN_ENVS="64", STEP_LIMIT_S="900",
                 LEARN_FLAGS="--total-timesteps 16384")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    seeds = [row for row in rows if row["kind"] == "seed"]
    assert [(row["label"], row["seed"], row["env_steps"]) for row in seeds] == [
        ("accelerator-smoke-64", 0, 16384)]
    assert (out / "accelerator-smoke-64.png").exists()
    # The network comes back trimmed to the envs the run has, at most 128 (here its 64).
    trimmed = out / "accelerator-smoke-64-accelerator-smoke-64-s0"
    assert [path.name for path in trimmed.glob("checkpoint_*.msgpack")] == ["checkpoint_2.msgpack"]


@pytest.mark.slow
def test_search_pair_trains_both_arms_for_the_budget_and_compares_them(tmp_path):
    """Issue 29's equal-wall-clock test end to end at toy sizes: from one HackMatrix
    checkpoint, PPO alone and PPO with the search teacher each stop on the same
    --stop-after-minutes budget, both are evaluated on the same boards, come back trimmed, and
    are compared board by board."""
    source = tmp_path / "source"
    made = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "scripts", "train_purejaxrl.py"),
         "--num-envs", "8", "--num-steps", "8", "--total-timesteps", "64", "--no-wandb",
         "--quiet", "--checkpoint-dir", str(tmp_path), "--run-name", "source"],
        capture_output=True, text=True, timeout=1200, cwd=REPO_ROOT,
        env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert made.returncode == 0, made.stderr[-3000:]
    out = tmp_path / "figures"
    result = run(str(out), "search-pair", str(source), PAIR_ENVS="8", PAIR_MINUTES="0.05",
                 PAIR_FLAGS="--num-steps 8", EVAL_EPISODES="4", STEP_LIMIT_S="900",
                 EVAL_LIMIT_S="900", TEACHER_FLAGS="--distill-coef 1 --distill-simulations 2 "
                 "--distill-worlds 1 --distill-leaf value --distill-raw-values")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for arm in ("ppo", "taught"):
        log = (out / f"train-{arm}.log").read_text()
        assert "(--stop-after-minutes 0.05)" in log, log[-2000:]
        evaluation = json.loads((out / f"pair-{arm}.json").read_text())
        assert evaluation["checkpoint-greedy"]["episodes"] == 4
        assert list((out / f"pair-{arm}-trimmed").glob("checkpoint_*.msgpack"))
    # The taught arm fitted the teacher's labels, the other none.
    for arm, taught in (("ppo", False), ("taught", True)):
        records = [json.loads(line) for line in
                   (out / "runs" / f"pair-{arm}" / "metrics.jsonl").read_text().splitlines()]
        assert records and all((record.get("ppo/distill_labelled", 0) > 0) == taught
                               for record in records)
    [greedy, sampled] = json.loads((out / "pair-compared.json").read_text())
    assert greedy["boards"] == 4 and greedy["a"] == "pair-ppo.json:checkpoint-greedy"
