"""Shared fixtures of the viewer tests: a tiny trained HackMatrix checkpoint and one
watch_agent run over it (GIF, HTML and record written), each produced once per session."""

import json

import pytest

from viewer_helpers import WATCH, WATCH_EPISODES, WATCH_MAX_STEPS, run_script


@pytest.fixture(scope="session")
def viewer_cache(tmp_path_factory):
    """One persistent XLA cache for the viewer subprocesses (never the user's ~/.cache)."""
    return str(tmp_path_factory.mktemp("viewer_xla_cache"))


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """One PPO update of a width-8 network on HackMatrix, through the trainer API."""
    from purejaxrl.config import RunOptions, TrainConfig
    from purejaxrl.train import train

    config = TrainConfig(env="hackmatrix", num_envs=2, num_steps=4, total_timesteps=8,
                         num_minibatches=1, update_epochs=1, hidden_width=8, hidden_depth=1,
                         max_episode_steps=20, seed=1)
    options = RunOptions(run_name="tiny", checkpoint_dir=str(tmp_path_factory.mktemp("ckpt")),
                         updates_per_chunk=1, wandb=False, artifact=False,
                         compile_cache_dir=None, quiet=True)
    result = train(config, options)
    assert result.last_checkpoint is not None
    return result.run_dir


@pytest.fixture(scope="session")
def watch_run(tiny_checkpoint, viewer_cache, tmp_path_factory):
    """watch_agent on the run directory (latest checkpoint), 2 sampled episodes of at most
    6 steps, writing a GIF, an HTML replay and a record."""
    out = tmp_path_factory.mktemp("watch")
    paths = {kind: str(out / f"run.{ext}") for kind, ext in
             (("gif", "gif"), ("html", "html"), ("record_file", "json"))}
    result = run_script(WATCH, tiny_checkpoint, "--episodes", str(WATCH_EPISODES), "--seed", "5",
                        "--sample", "--max-episode-steps", str(WATCH_MAX_STEPS),
                        "--compile-cache-dir", viewer_cache, "--gif", paths["gif"],
                        "--html", paths["html"], "--record", paths["record_file"])
    assert result.returncode == 0, result.stderr[-4000:]
    with open(paths["record_file"], encoding="utf-8") as handle:
        record = json.load(handle)
    return dict(paths, stdout=result.stdout, record=record)
