import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Subprocesses the tests start (the scripts, ``python -c`` drivers that import ``tests.*`` or
# ``scripts.*``) import this checkout, as pytest.ini's ``pythonpath = .`` does in-process: the
# installed project (requirements.txt's ``-e .``) may be another checkout of it.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [REPO_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


import pytest  # noqa: E402

# One persistent XLA cache for the whole test session and the ones after it: in-process
# programs, the scripts the tests start (the viewers, the trainer, the protocol server) and the
# parity engines all read and write it, so a program compiles once per code version, not once
# per process and per run (the pytest-xdist workers share it too): on this project's 2-core CI
# machine the suite takes about 7 minutes warm, much longer cold (SPEC §1.1). The default is the
# scripts' own default directory
# (``envs.compile_cache.DEFAULT_COMPILE_CACHE_DIR``); $HACKMATRIX_TEST_COMPILE_CACHE names
# another, and set empty, a fresh directory of this session (a cold run, as on a new machine).
TEST_COMPILE_CACHE_VARIABLE = "HACKMATRIX_TEST_COMPILE_CACHE"


def pytest_configure(config):
    from envs.compile_cache import (DEFAULT_COMPILE_CACHE_DIR, INTERACTIVE_MIN_COMPILE_SECS,
                                    enable_compile_cache)
    from envs.hackmatrix.swift_io.protocol import CACHE_ENV_VAR
    cache_dir = os.environ.get(TEST_COMPILE_CACHE_VARIABLE, DEFAULT_COMPILE_CACHE_DIR)
    if not cache_dir:
        import tempfile
        cache_dir = tempfile.mkdtemp(prefix="hackmatrix-test-xla-cache-")
        # pytest-xdist's workers start after this and inherit it: one fresh cache for them all.
        os.environ[TEST_COMPILE_CACHE_VARIABLE] = cache_dir
    config.test_compile_cache_dir = enable_compile_cache(cache_dir, INTERACTIVE_MIN_COMPILE_SECS)
    os.environ[CACHE_ENV_VAR] = config.test_compile_cache_dir  # the protocol server's


@pytest.fixture(scope="session")
def session_compile_cache(pytestconfig):
    """The session's persistent XLA cache directory (see TEST_COMPILE_CACHE_VARIABLE): pass it
    to the scripts a test starts (``--compile-cache-dir``)."""
    return pytestconfig.test_compile_cache_dir


@pytest.fixture(scope="session")
def recorded_random_games():
    """Random play on 4 HackMatrix boards through ``search.play_boards`` (the search rows'
    player: 2 lanes, so lanes take over boards) with ``record_actions``, as ``evaluate.py
    --record-actions`` keeps it: compiled once for the tests that re-simulate recorded games."""
    import jax
    from purejaxrl import ppo, search
    from purejaxrl.config import TrainConfig
    from purejaxrl.evaluation import game_outcomes, random_policy
    config = TrainConfig(max_episode_steps=60)
    env, env_params = ppo.make_env(config)
    seed, boards = 11, 4
    played = jax.device_get(jax.jit(lambda k: search.play_boards(
        env, env_params, random_policy(env), k, boards, 60, 2, record_actions=True))(
        jax.random.PRNGKey(seed)))
    return dict(config=config, env=env, env_params=env_params, seed=seed, boards=boards,
                loop="boards", played=played, games=game_outcomes(played))


@pytest.fixture(scope="session")
def recorded_random_episodes():
    """Random play on 4 HackMatrix boards through ``evaluation.play_episodes`` (every
    non-search row's loop) with ``record_actions``: the same fields as
    ``recorded_random_games``."""
    import jax
    from purejaxrl import ppo
    from purejaxrl.config import TrainConfig
    from purejaxrl.evaluation import game_outcomes, play_episodes, random_policy
    config = TrainConfig(max_episode_steps=60)
    env, env_params = ppo.make_env(config)
    seed, boards = 12, 4
    played = jax.device_get(jax.jit(lambda k: play_episodes(
        env, env_params, random_policy(env), k, boards, 60, record_actions=True))(
        jax.random.PRNGKey(seed)))
    return dict(config=config, env=env, env_params=env_params, seed=seed, boards=boards,
                loop="episodes", played=played, games=game_outcomes(played))
