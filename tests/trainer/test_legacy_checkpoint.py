"""Pickle checkpoints (the format before issue 27) are refused unopened, with the converter
named; the converter opens them only behind its explicit flag, and what it writes is a
checkpoint of the current format holding the same state.

Fixtures: tests/fixtures/checkpoint_before_issue15.pkl (written by ``save_checkpoint`` at commit
76e689a, runner state of ``HackMatrix().reset``; its classes are pickled under module paths that
moved in issue 15) and tests/fixtures/checkpoint_v1_toy.pkl (the last pickle format, the dict
that ``save_checkpoint`` wrote at commit 228fd69, holding 2 updates of ``toy_run.CONFIG``, run
``toy-v1``; its runner state was rewritten in issue 28 with the toy env of envs/toy, whose
observation changed)."""

import os
import pickle
import shutil

import jax
import numpy as np
import pytest

from purejaxrl.checkpoint import CONVERTER, TRUST_FLAG, CheckpointError, load_checkpoint
from purejaxrl.config import FIELDS_ADDED_LATER, LEGACY_ENV_OPTION_FIELDS
from purejaxrl.train import train
from scripts import convert_checkpoint
from tests.trainer.toy_run import CONFIG as TOY_CONFIG
from tests.trainer.toy_run import assert_trees_equal, options

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
BEFORE_ISSUE_15 = os.path.join(FIXTURES, "checkpoint_before_issue15.pkl")
V1_TOY = os.path.join(FIXTURES, "checkpoint_v1_toy.pkl")
# The fixture's run: toy_run.CONFIG with the defaults of its time (gamma was 0.99 until stop 34;
# the recurrent core's fields, unused by its feed-forward network, had defaults 256 and None).
CONFIG = TOY_CONFIG.replace(gamma=0.99, core_width=256, sequence_length=None)


@pytest.mark.parametrize("fixture", [BEFORE_ISSUE_15, V1_TOY])
def test_a_pickle_checkpoint_is_refused_with_the_converter_named(fixture, tmp_path,
                                                                 monkeypatch):
    """As a file and as the only checkpoint of a run directory; nothing is unpickled."""
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("pickle.load called"))
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("pickle.loads called"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(fixture, run_dir / "checkpoint_2.pkl")
    for path in (fixture, str(run_dir)):
        with pytest.raises(CheckpointError) as error:
            load_checkpoint(path)
        assert f"{CONVERTER} {TRUST_FLAG} {path}" in str(error.value)
        assert "pickle" in str(error.value)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The v1 toy fixture converted in a run directory of its own."""
    run_dir = tmp_path_factory.mktemp("legacy") / "toy-v1"
    run_dir.mkdir()
    shutil.copy(V1_TOY, run_dir / "checkpoint_2.pkl")
    code = convert_checkpoint.main([TRUST_FLAG, str(run_dir)])
    assert code == 0
    return run_dir


def test_the_converter_writes_the_same_state_in_the_current_format(converted):
    """Every array (parameters, optimizer state, env states, keys, statistics) and every
    counter of the pickle, in a checkpoint_<update>.msgpack beside it; the .pkl stays."""
    assert sorted(os.listdir(converted)) == ["checkpoint_2.msgpack", "checkpoint_2.pkl"]
    with open(V1_TOY, "rb") as handle:  # a fixture of ours: trusted
        legacy = pickle.load(handle)
    checkpoint = load_checkpoint(str(converted))
    assert checkpoint["path"] == str(converted / "checkpoint_2.msgpack")
    # Fields added after the pickle take the values that reproduce its run (FIELDS_ADDED_LATER).
    assert checkpoint["config"] == CONFIG.to_dict()
    later = {k: v for k, v in checkpoint["config"].items()
             if k not in legacy["config"] and k != "env_options"}
    assert later == {k: FIELDS_ADDED_LATER[k] for k in later}
    # The env options it held as fields of their own (reward_shaping, ...) are the env's: the
    # toy corridor takes none, so none is kept; every other field is as the pickle holds it.
    assert checkpoint["config"]["env_options"] == {}
    kept = [k for k in legacy["config"] if k not in LEGACY_ENV_OPTION_FIELDS]
    assert {k: checkpoint["config"][k] for k in kept} == {k: legacy["config"][k] for k in kept}
    assert set(legacy["config"]) - set(kept) <= set(LEGACY_ENV_OPTION_FIELDS)
    for key in ("update", "env_steps", "run_name", "wandb_run_id", "num_processes"):
        assert checkpoint[key] == legacy[key], key
    assert checkpoint["converted_from"]["file"] == "checkpoint_2.pkl"
    assert_trees_equal(checkpoint["runner_state"], legacy["runner_state"])
    dtypes = lambda tree: [np.asarray(x).dtype for x in jax.tree.leaves(tree)]  # noqa: E731
    assert dtypes(checkpoint["runner_state"]) == dtypes(legacy["runner_state"])


def test_a_converted_checkpoint_resumes(converted, compile_cache_dir):
    """The converted run continues where the pickle stopped, in its directory."""
    result = train(CONFIG, options(converted.parent, compile_cache_dir, run_name="toy-v1"),
                   checkpoint=load_checkpoint(str(converted)))
    assert result.updates_done == 5 and result.run_dir == str(converted)
    assert result.last_checkpoint == str(converted / "checkpoint_5.msgpack")


def test_the_converter_never_writes_over_a_checkpoint(converted, capsys):
    assert convert_checkpoint.main([TRUST_FLAG, str(converted / "checkpoint_2.pkl")]) == 1
    err = capsys.readouterr().err
    assert "exists already; not written over" in err


def test_a_pickle_that_is_not_a_checkpoint_is_not_converted(tmp_path, capsys):
    """The pre-issue-15 fixture names modules that no longer exist: a one-line error, nothing
    written (the module-path shim of the old loader is gone)."""
    source = tmp_path / "checkpoint_0.pkl"
    shutil.copy(BEFORE_ISSUE_15, source)
    assert convert_checkpoint.main([TRUST_FLAG, str(source)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot unpickle {source}") and err.count("\n") == 1
    assert os.listdir(tmp_path) == ["checkpoint_0.pkl"]
