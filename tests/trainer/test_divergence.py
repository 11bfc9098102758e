"""Divergence stops loudly (issue 27).

Rules checked: an update that makes the loss, the gradient or the parameters non-finite is
undone on the device (the rest of its chunk is skipped) and the run stops, saying at which
update and what diverged; the last finite state is saved, unless it already is, and named; no
checkpoint ever holds a non-finite parameter; the command line exits 1 with one error line.
The non-finite values are injected by an optimizer that turns its updates into NaN from a
given step on, so the update that diverges is known exactly (update 3 of the toy run)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from envs import registry
from purejaxrl import checkpoint as checkpoint_module
from purejaxrl import ppo
from purejaxrl.checkpoint import list_checkpoints, load_checkpoint
from purejaxrl.cli.train import main as train_main
from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.train import train
from tests.trainer.toy_run import CONFIG, options

# CONFIG: 2 minibatches x 2 epochs = 4 optimizer steps per update; step 8 is in update 3.
POISON_AT_STEP = 8
DIVERGING_UPDATE = 3
REAL_OPTIMIZER = ppo.make_optimizer


def poisoned_optimizer(config):
    inner = REAL_OPTIMIZER(config)

    def init(params):
        return inner.init(params), jnp.int32(0)

    def update(grads, state, params=None):
        inner_state, step = state
        updates, inner_state = inner.update(grads, inner_state, params)
        updates = jax.tree.map(lambda u: jnp.where(step >= POISON_AT_STEP, jnp.nan, u), updates)
        return updates, (inner_state, step + 1)
    return optax.GradientTransformation(init, update)


def diverging_run(run_options):
    """Train CONFIG with the poisoned optimizer; (result, its checkpoints loaded)."""
    patch = pytest.MonkeyPatch()
    patch.setattr(ppo, "make_optimizer", poisoned_optimizer)
    checkpoint_module._template.cache_clear()  # templates follow the optimizer's state
    try:
        result = train(CONFIG, run_options)
        loaded = [load_checkpoint(path) for _, path in list_checkpoints(result.run_dir)]
    finally:
        patch.undo()
        checkpoint_module._template.cache_clear()
    return result, loaded


@pytest.fixture(scope="module")
def unsaved(tmp_path_factory, compile_cache_dir):
    """No save before the divergence (saves only by time, an hour apart)."""
    return diverging_run(options(tmp_path_factory.mktemp("unsaved"), compile_cache_dir))


@pytest.fixture(scope="module")
def saved_every_update(tmp_path_factory, compile_cache_dir):
    return diverging_run(options(tmp_path_factory.mktemp("saved"), compile_cache_dir,
                                 save_interval=1, keep_checkpoints=10))


def all_finite(tree) -> bool:
    return all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(tree)
               if np.issubdtype(np.asarray(x).dtype, np.floating))


def test_the_diverging_update_is_undone_and_the_run_stops(unsaved):
    result, _ = unsaved
    assert result.updates_done == DIVERGING_UPDATE - 1 and not result.interrupted
    assert int(result.runner_state.update_step) == DIVERGING_UPDATE - 1
    assert all_finite(result.runner_state)
    assert [r["update"] for r in result.records] == [2]  # the diverged chunk did nothing
    assert result.chunk.trace_count == 1
    assert "non-finite " in result.diverged and f"at update {DIVERGING_UPDATE}" in \
        result.diverged and "parameters" in result.diverged


def test_the_last_finite_state_is_saved_and_named(unsaved):
    result, loaded = unsaved
    assert [c["update"] for c in loaded] == [DIVERGING_UPDATE - 1]
    assert all_finite(loaded[0]["runner_state"])
    assert f"The last finite state (update {DIVERGING_UPDATE - 1}) is " \
        f"{loaded[0]['path']}" in result.diverged
    assert result.last_checkpoint == loaded[0]["path"]


def test_a_saved_finite_state_is_named_not_written_again(saved_every_update):
    result, loaded = saved_every_update
    assert [c["update"] for c in loaded] == list(range(1, DIVERGING_UPDATE))
    assert all(all_finite(c["runner_state"]) for c in loaded)
    assert loaded[-1]["path"] in result.diverged


def test_nonfinite_bits_name_what_diverged_per_seed():
    toy = TrainerEnv(*registry.make("toy"))
    metrics = ppo.UpdateMetrics.zeros(toy).replace(total_loss=jnp.float32(jnp.nan))
    params = {"w": jnp.ones(3)}
    bits = ppo.nonfinite_bits(metrics, params, 1)
    assert int(bits) == ppo.NONFINITE_LOSS
    seeds = jax.tree.map(lambda x: jnp.stack([x, x]), metrics.replace(total_loss=jnp.float32(0)))
    seeds = seeds.replace(grad_norm=jnp.array([0.0, jnp.inf]))
    two = {"w": jnp.array([[1.0, 1.0], [jnp.nan, 1.0]])}
    assert ppo.nonfinite_bits(seeds, two, 2).tolist() == [
        0, ppo.NONFINITE_GRADIENT + ppo.NONFINITE_PARAMETERS]


@pytest.mark.slow  # extended suite (pytest -m slow)
def test_the_command_line_exits_1_with_one_error_line(tmp_path, capsys):
    """--lr 1e38 (finite, so accepted, with a warning) overflows the parameters in the first
    update: nothing finite to save beyond the initial state, so nothing is saved, and that is
    said."""
    code = train_main(["--env", "toy", "--num-envs", "4", "--num-steps", "8", "--hidden-width",
                       "16", "--hidden-depth", "1", "--recurrent-core", "none", "--no-wandb",
                       "--max-episode-steps", "6",
                       "--total-timesteps", "96", "--lr", "1e38", "--checkpoint-dir",
                       str(tmp_path), "--run-name", "r", "--quiet", "--no-compile-cache"])
    captured = capsys.readouterr()
    err = captured.err
    assert "warning: --lr 1e+38 is far above the learning rates PPO trains with" in captured.out
    assert code == 1 and "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith("error: training diverged: non-finite ") and "at update 1" in line
    assert "Nothing was saved" in line
    assert list_checkpoints(str(tmp_path / "r")) == []
