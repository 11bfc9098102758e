"""Shared fixtures of the viewer tests: a tiny HackMatrix checkpoint and one
watch_agent run over it (GIF, HTML and record written), each produced once per session."""

import json

import pytest

from viewer_helpers import WATCH, WATCH_EPISODES, WATCH_MAX_STEPS, run_script


@pytest.fixture(scope="session")
def viewer_cache(session_compile_cache):
    """The session's persistent XLA cache (tests/conftest.py) for the viewer subprocesses."""
    return session_compile_cache


def save_tiny_checkpoint(tmp_path_factory, name, **fields):
    """A width-8 HackMatrix policy at initialisation (``fields`` over the tiny config), saved
    as a checkpoint of update 0 by the trainer's own writer; its run directory. The viewers
    read any checkpoint alike; skipping the PPO update keeps its compile (the largest cost of
    such a fixture) out of the default suite."""
    from purejaxrl.config import TrainConfig
    from tests.initial_checkpoint import save_initial_checkpoint

    config = TrainConfig(**{**dict(env="hackmatrix", num_envs=2, num_steps=8,
                                   total_timesteps=16, num_minibatches=1, update_epochs=1,
                                   hidden_width=8, hidden_depth=1, core_width=8,
                                   max_episode_steps=20, seed=1), **fields})
    return save_initial_checkpoint(config, str(tmp_path_factory.mktemp("ckpt") / name), name)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """The default network (a GRU core, here 8 wide), tiny (``save_tiny_checkpoint``)."""
    return save_tiny_checkpoint(tmp_path_factory, "tiny")


@pytest.fixture(scope="session")
def tiny_feedforward_checkpoint(tmp_path_factory):
    """A network of another architecture than TrainConfig's defaults: no recurrent core and
    a head of its own (what a run trained with --recurrent-core none --head-width 16 saves)."""
    return save_tiny_checkpoint(tmp_path_factory, "tiny-ff", recurrent_core="none",
                                sequence_length=None, head_width=16)


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
