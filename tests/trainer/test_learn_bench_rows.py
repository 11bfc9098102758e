"""Which seed rows ``learning_benchmark.run`` writes, with a stand-in trainer and judge (no JAX
work): a seed whose training stopped on a non-finite update is short of the budget, so it is
no result of the tier; a vmapped program resumed after some of its seeds' rows were written
appends only the others'."""

import json
import types

import pytest

from envs import registry
from purejaxrl import learning_benchmark
from purejaxrl.config import ConfigError, RunOptions, TrainConfig


class Killed(Exception):
    pass


def summary(stage):
    return {"episodes": 8, "stage_mean": stage, "win_rate": 0.0, "return_mean": 1.0,
            "length_mean": 10.0, "truncation_rate": 0.0, "unfinished": 0,
            "masked_actions": 0, "stages": []}


@pytest.fixture
def bench(monkeypatch, tmp_path):
    """``run`` on HackMatrix's judgements with the judge scoring a network by its stand-in
    parameters (4 + seed), the baselines judged without play, and a ledger in ``tmp_path``."""
    def make_judge(config, episodes):
        def judge(params):
            return {j: {"greedy": summary(float(params)), "sampled": summary(float(params))}
                    for j in learning_benchmark.judgements_for(config)}
        return judge
    monkeypatch.setattr(learning_benchmark, "make_judge", make_judge)
    monkeypatch.setattr(learning_benchmark, "judge_baselines", lambda config, episodes: {
        "random": {j: summary(1.2) for j in learning_benchmark.judgements_for(config)}})
    config = TrainConfig(total_timesteps=10 * 2048 * 128)
    options = RunOptions(checkpoint_dir=str(tmp_path / "runs"), wandb=False)
    ledger = str(tmp_path / "ledger.jsonl")

    def run(seeds, label, trainer, **kwargs):
        return learning_benchmark.run(config, seeds, label, "standard", "cmd", options, 8,
                                      ledger, None, trainer, say=lambda *a: None, **kwargs)

    def seed_rows(label):
        return [row for row in learning_benchmark.read_jsonl(ledger)
                if row["label"] == label and row["kind"] == "seed"]
    def edit_rows(edit):
        """Rewrite the ledger with ``edit(row)`` applied to every row; returns the rows."""
        rows = learning_benchmark.read_jsonl(ledger)
        for row in rows:
            edit(row)
        with open(ledger, "w") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)
        return rows
    return types.SimpleNamespace(run=run, seed_rows=seed_rows, config=config, ledger=ledger,
                                 edit_rows=edit_rows)


def must_not_train(config, options, checkpoint):
    raise AssertionError("trained before refusing")


def stand_in_trainer(updates, diverged=None):
    def train(config, options, checkpoint):
        seeds = [types.SimpleNamespace(seed=s, records=[], last_checkpoint=None,
                                       runner_state=types.SimpleNamespace(params=4.0 + s),
                                       sittings=[{"from_update": 0, "commit": "abc1234"}])
                 for s in config.seeds]
        return types.SimpleNamespace(
            interrupted=False, stop_signal=None, diverged=diverged, seeds=seeds,
            env_steps=updates * config.batch_size, updates_done=updates, last_checkpoint=None,
            chunk=types.SimpleNamespace(compile_seconds=1.0))
    return train


def test_a_seed_whose_training_diverged_is_not_recorded(bench):
    """The trainer stops a run on a non-finite update (undone, checkpoint kept) before the
    budget: its seed is not judged into the ledger, and the outcome carries the message."""
    message = "training diverged: non-finite loss at update 4"
    outcome = bench.run([0], "diverged", stand_in_trainer(3, diverged=message))
    assert bench.seed_rows("diverged") == [] and outcome["diverged"] == message
    outcome = bench.run([0], "finished", stand_in_trainer(10))
    assert [row["seed"] for row in bench.seed_rows("finished")] == [0]
    assert outcome["diverged"] is None


def test_a_resumed_vmapped_program_appends_each_seed_once(bench, monkeypatch):
    """Three vmapped seeds, the sitting killed while the second seed is judged (the first's row
    written): the resumed sitting writes the second and third seeds' rows, not the first's
    again."""
    make_judge = learning_benchmark.make_judge
    judged = []

    def killed_on_the_second(config, episodes):
        judge = make_judge(config, episodes)

        def judge_or_die(params):
            judged.append(params)
            if len(judged) == 2:
                raise Killed
            return judge(params)
        return judge_or_die
    monkeypatch.setattr(learning_benchmark, "make_judge", killed_on_the_second)
    with pytest.raises(Killed):
        bench.run([0, 1, 2], "vmapped", stand_in_trainer(10), vmap_seeds=True)
    assert [row["seed"] for row in bench.seed_rows("vmapped")] == [0]
    monkeypatch.setattr(learning_benchmark, "make_judge", make_judge)
    outcome = bench.run([0, 1, 2], "vmapped", stand_in_trainer(10), vmap_seeds=True,
                        resume=True)
    assert [row["seed"] for row in bench.seed_rows("vmapped")] == [0, 1, 2]
    assert [row["seed"] for row in outcome["seeds"]] == [0, 1, 2]


def test_rows_name_the_env_version_and_the_code_of_every_sitting(bench):
    """Every row records the env's rules version it was played under; a seed's row records the
    commit of each sitting that trained it (the trainer's ``sittings``)."""
    bench.run([0], "provenance", stand_in_trainer(10))
    rows = learning_benchmark.read_jsonl(bench.ledger)
    assert {row["env_version"] for row in rows} == {registry.env_version("hackmatrix")}
    assert registry.env_version("hackmatrix") is not None
    assert bench.seed_rows("provenance")[0]["sittings"] == [{"from_update": 0,
                                                             "commit": "abc1234"}]


def test_a_resume_over_rows_of_other_rules_is_refused(bench):
    """A label whose kept seed (or baseline) was played under another env version than this
    code's would mix two games in one table: ``--resume`` refuses it before any training and
    writes nothing; rows that predate the field are kept."""
    bench.run([0], "old-rules", stand_in_trainer(10))
    rows = bench.edit_rows(lambda row: row.update(env_version="0.0-older")
                           if row["kind"] == "seed" else None)
    with pytest.raises(ConfigError, match=r"seed 0 of old-rules.*env version '0\.0-older'"):
        bench.run([1], "old-rules", must_not_train, resume=True)
    assert learning_benchmark.read_jsonl(bench.ledger) == rows
    bench.edit_rows(lambda row: row.pop("env_version"))
    bench.run([1], "old-rules", stand_in_trainer(10), resume=True)
    assert [row["seed"] for row in bench.seed_rows("old-rules")] == [0, 1]


def test_another_envs_baselines_of_other_rules_do_not_refuse_a_resume(bench):
    """Baselines a first sitting judged on another env (``-- --env CartPole-v1``: no env
    version) are judged anew on a resume (``kept_baselines``), not compared with this env's
    version."""
    bench.run([0], "mixed-env", stand_in_trainer(10))
    bench.edit_rows(lambda row: row.update(env="CartPole-v1", env_version=None)
                    if row["kind"] == "baseline" else None)
    bench.run([1], "mixed-env", stand_in_trainer(10), resume=True)
    assert [row["seed"] for row in bench.seed_rows("mixed-env")] == [0, 1]


def test_a_resume_over_seeds_judged_without_a_judgement_of_this_code_is_refused(bench):
    """A kept seed written before the closed R9 judgement existed (its row has only the parity
    env's ``eval``) would be shown open beside new seeds shown closed: ``--resume`` refuses
    it before any training, naming the judgement."""
    bench.run([0], "open-only", stand_in_trainer(10))
    bench.edit_rows(lambda row: row.pop("eval_closed"))
    with pytest.raises(ConfigError, match=r"seed 0 of open-only.*not judged under eval_closed"):
        bench.run([1], "open-only", must_not_train, resume=True)


def test_a_resume_keeps_only_baselines_judged_on_its_own_env():
    """A label's baseline rows judged on another env (a first sitting with other flags) are
    not this run's boards: ``kept_baselines`` gives them up, so the baselines are judged anew;
    the run's own env's are kept."""
    config = TrainConfig()
    judgements = learning_benchmark.judgements_for(config)
    row = {"kind": "baseline", "policy": "random", **{j: summary(1.2) for j in judgements}}
    assert learning_benchmark.kept_baselines({"baseline:random": {**row, "env": "toy"}},
                                             config) is None
    kept = learning_benchmark.kept_baselines({"baseline:random": {**row, "env": "hackmatrix"}},
                                             config)
    assert set(kept) == {"random"} and set(kept["random"]) == set(judgements)
