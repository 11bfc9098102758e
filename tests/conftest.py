import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Subprocesses the tests start (the scripts, ``python -c`` drivers that import ``tests.*`` or
# ``scripts.*``) import this checkout, as pytest.ini's ``pythonpath = .`` does in-process: the
# installed project (requirements.txt's ``-e .``) may be another checkout of it.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [REPO_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


import pytest  # noqa: E402


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
