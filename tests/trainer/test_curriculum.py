"""Start-state curriculum (purejaxrl/curriculum.py) on stand-in states: a state is one number
per env, so where each env's next episode starts from can be read off directly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purejaxrl import ppo
from purejaxrl.checkpoint import load_checkpoint
from purejaxrl.curriculum import FIRST_ARCHIVED_STAGE, curriculum_step, empty_archive
from purejaxrl.config import ConfigError
from purejaxrl.train import check_resume, train
from tests.trainer.toy_run import CONFIG, assert_trees_equal, options, run_on_four_devices

NUM_STAGES, SLOTS, N = 5, 2, 32  # stages 3..5 are archived


def batch(values):
    values = jnp.asarray(values, jnp.float32)
    return {"cell": values}, {"view": values * 10}


def step(archive, values, stage, complete, done, share, key_tag=0):
    state, obs = batch(values)
    info = {"stage": jnp.asarray(stage, jnp.int32), "stage_complete": jnp.asarray(complete)}
    return jax.jit(curriculum_step, static_argnums=(5, 6, 7))(
        archive, state, obs, info, jnp.asarray(done), NUM_STAGES, SLOTS, share)


def fresh_archive():
    state, obs = batch(np.zeros(N))
    return empty_archive(state, obs, NUM_STAGES, SLOTS, jax.random.PRNGKey(0))


def test_a_stage_start_is_archived_in_its_stage_ring_only_when_the_episode_goes_on():
    """An env that completed a stage and goes on is at the start of info["stage"]: one such
    state per stage and step enters that stage's ring, with its observation; a stage completed
    by the episode's last step (done: the state is already the next game's) is not archived,
    nor is a stage below FIRST_ARCHIVED_STAGE."""
    archive = fresh_archive()
    values = np.arange(N) + 100.0
    stage = np.full(N, 2)
    stage[5], stage[9] = 4, 3
    complete = np.zeros(N, bool)
    complete[[1, 5, 9]] = True
    done = np.zeros(N, bool)
    done[9] = True
    state, obs, archive, _ = step(archive, values, stage, complete, done, share=0.0)
    assert archive.writes.tolist() == [0, 1, 0]  # stage 3: done; stage 4: lane 5
    row = (4 - FIRST_ARCHIVED_STAGE) * SLOTS
    assert float(archive.env_state["cell"][row]) == 105.0
    assert float(archive.obs["view"][row]) == 1050.0
    np.testing.assert_array_equal(state["cell"], values)  # share 0: nothing restarts


def test_ended_episodes_restart_from_archived_states_and_are_marked_until_they_end():
    """With share 1 every ended episode (up to the per-step cap) restarts from an archived
    stage start, with that state's observation, and is marked as started from the archive;
    when that episode ends, the step reports it (so its statistics are left out), and an
    episode that starts fresh is not marked."""
    archive = fresh_archive()
    values = np.arange(N) + 100.0
    complete = np.zeros(N, bool)
    complete[[3, 4]] = True
    stage = np.full(N, 1)
    stage[3], stage[4] = 3, 5
    _, _, archive, _ = step(archive, values, stage, complete, np.zeros(N, bool), share=0.0)
    archived = {103.0, 104.0}

    done = np.zeros(N, bool)
    done[[0, 7]] = True
    state, obs, archive, ended = step(archive, -np.ones(N), np.ones(N), np.zeros(N, bool),
                                      done, share=1.0)
    for lane in (0, 7):
        assert float(state["cell"][lane]) in archived
        assert float(obs["view"][lane]) == 10 * float(state["cell"][lane])
    assert np.flatnonzero(archive.from_archive).tolist() == [0, 7]
    assert not np.any(ended)  # the episodes that just ended had started fresh
    assert np.all(np.asarray(state["cell"])[[i for i in range(N) if i not in (0, 7)]] == -1)

    done = np.zeros(N, bool)
    done[[7, 8]] = True
    _, _, archive, ended = step(archive, -np.ones(N), np.ones(N), np.zeros(N, bool), done,
                                share=0.0)
    assert np.flatnonzero(ended).tolist() == [7]
    assert np.flatnonzero(archive.from_archive).tolist() == [0]


def test_an_empty_archive_starts_every_episode_fresh():
    """Before any stage start is archived, even share 1 leaves the env's own reset."""
    done = np.ones(N, bool)
    state, _, archive, _ = step(fresh_archive(), np.arange(N) + 1.0, np.ones(N),
                                np.zeros(N, bool), done, share=1.0)
    np.testing.assert_array_equal(state["cell"], np.arange(N) + 1.0)
    assert not np.any(archive.from_archive)


def test_stages_are_drawn_uniformly_among_the_archived_ones():
    """The rare late stages get as many starts as the common ones: with one state archived for
    stage 3 and one for stage 5, restarts split about evenly between them."""
    archive = fresh_archive()
    complete = np.zeros(N, bool)
    complete[[0, 1]] = True
    stage = np.ones(N)
    stage[0], stage[1] = 3, 5
    _, _, archive, _ = step(archive, np.arange(N) * 1.0, stage, complete, np.zeros(N, bool),
                            share=0.0)
    counts = {0.0: 0, 1.0: 0}
    for _ in range(20):
        state, _, archive, _ = step(archive, -np.ones(N), np.ones(N), np.zeros(N, bool),
                                    np.ones(N, bool), share=1.0)
        for value in np.asarray(state["cell"]):
            if value >= 0:
                counts[float(value)] += 1
    total = counts[0.0] + counts[1.0]
    assert total == 20 * max(1, N // 16)
    assert 0.25 < counts[0.0] / total < 0.75


def test_rollout_leaves_episodes_started_from_the_archive_out_of_the_episode_statistics():
    """In the trainer's rollout (toy corridor): the first episode of every env is marked as
    started from the archive; the rollout counts exactly those ends as curriculum episodes and
    every other end as an episode (a share this small restarts nothing from the archive)."""
    config = CONFIG.replace(curriculum_share=1e-9)
    env, env_params, network, optimizer, components = ppo.build(config)
    runner = ppo.init_runner_state(config, env, env_params, network, optimizer, len(components))
    runner = runner.replace(curriculum=runner.curriculum.replace(
        from_archive=jnp.ones(config.num_envs, bool)))
    _, transitions, stats, _, _, _ = jax.jit(lambda r: ppo.collect_rollout(
        r, config, env, env_params, network, components))(runner)
    done = np.asarray(transitions.terminated | transitions.truncated)
    envs_with_an_end = int(np.sum(done.any(axis=0)))
    assert envs_with_an_end > 0
    assert float(np.sum(stats["curriculum_episodes"])) == envs_with_an_end
    assert float(np.sum(stats["episodes"])) == done.sum() - envs_with_an_end


@pytest.mark.slow  # extended suite (pytest -m slow)
def test_a_curriculum_run_resumes_bit_for_bit_with_its_archive(tmp_path, compile_cache_dir):
    """Toy corridor, every episode restarted from the archive where it can be: 3 updates,
    save, resume, 2 more == 5 in one run, archive included; part-games were counted apart."""
    config = CONFIG.replace(curriculum_share=1.0, curriculum_slots=2)
    whole = train(config, options(tmp_path / "whole", compile_cache_dir))
    assert sum(r["curriculum/episodes"] for r in whole.records) > 0
    assert int(np.sum(whole.runner_state.curriculum.writes)) > 0
    first = train(config, options(tmp_path / "parts", compile_cache_dir), stop_after_updates=3)
    second = train(config, options(tmp_path / "parts", compile_cache_dir),
                   checkpoint=load_checkpoint(first.run_dir))
    assert_trees_equal(second.runner_state, whole.runner_state)


def test_a_curriculum_checkpoint_is_refused_on_another_device_count_before_any_work():
    """Each device keeps its own archive, so a 4-device curriculum state has no 1- or 2-device
    form: the resume is refused with a one-line reason (not a shape error from inside the
    update), while a run without the archive moves to any device count (its state follows the
    envs)."""
    saved = CONFIG.replace(curriculum_share=1.0, curriculum_slots=2, num_devices=4)
    checkpoint = {"config": saved.to_dict(), "num_processes": 1}
    check_resume(saved, checkpoint, True, 1)
    for devices in (1, 2):
        with pytest.raises(ConfigError, match="keeps its curriculum per device: it resumes only "
                                              "on its 4 devices"):
            check_resume(saved.replace(num_devices=devices), checkpoint, True, 1)
    plain = CONFIG.replace(num_devices=4)
    check_resume(plain.replace(num_devices=1), {"config": plain.to_dict(), "num_processes": 1},
                 True, 1)


@pytest.mark.slow  # extended suite: a 4-device run in a subprocess
def test_a_curriculum_run_on_four_devices_resumes_with_every_devices_archive(tmp_path):
    """Every device keeps its own archive, so the global state holds 4 of them; the checkpoint
    of such a run holds all 4 and resumes on the same 4 devices (the checkpoint's template is
    the global state's shape for the run's device count, not one device's)."""
    report = run_on_four_devices("""
        from purejaxrl import ppo
        from purejaxrl.checkpoint import load_checkpoint
        from purejaxrl.curriculum import archived_stages
        from purejaxrl.train import train
        from tests.trainer.toy_run import CONFIG, options
        config = CONFIG.replace(curriculum_share=1.0, curriculum_slots=2, num_devices=4)
        first = train(config, options(out, None), stop_after_updates=3)
        second = train(config, options(out, None), checkpoint=load_checkpoint(first.run_dir))
        print(json.dumps({"writes": list(first.runner_state.curriculum.writes.shape),
                          "stages": archived_stages(ppo.make_env(config)[0].num_stages),
                          "updates_done": second.updates_done}))
    """, tmp_path)
    assert report["writes"] == [4 * report["stages"]]
    assert report["updates_done"] == CONFIG.num_updates
