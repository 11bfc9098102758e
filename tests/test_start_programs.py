"""The start-programs curriculum (``HackMatrix(start_programs=K, start_programs_share=P)``, the
trainer's ``--start-programs``): a share P of new games, at reset and at the step's auto-reset,
starts with K distinct programs owned; everything else about the game (board, corner, starting
bonus) is the game without the option, and a policy loaded to play is judged on the game's own
start. Agents trained without it die owning no program (SPEC §4.4)."""

import jax
import numpy as np
import pytest

from envs.hackmatrix.env import HackMatrix
from purejaxrl.config import ConfigError, TrainConfig, validate_config

PLAIN = HackMatrix()
ALWAYS = HackMatrix(start_programs=3, start_programs_share=1.0)
PARAMS = PLAIN.default_params
KEYS = jax.random.split(jax.random.PRNGKey(11), 16)


def _without_programs(state):
    return state.replace(program_rank=0)


def _assert_same_game(a, b):
    same = jax.tree.map(lambda x, y: np.array_equal(np.asarray(x), np.asarray(y)),
                        _without_programs(a), _without_programs(b))
    assert all(jax.tree.leaves(same))


def test_every_new_game_owns_k_distinct_programs_on_the_game_it_would_be():
    """Share 1: each reset owns exactly K programs, ranked 0..K-1 (acquisition order), drawn
    per game (not the same three every time); the rest of the state is the plain reset's."""
    reset = jax.jit(jax.vmap(lambda key: PLAIN.reset(key, PARAMS)[1]))
    granted = jax.jit(jax.vmap(lambda key: ALWAYS.reset(key, PARAMS)[1]))
    plain, states = reset(KEYS), granted(KEYS)
    ranks = np.asarray(states.program_rank)
    assert (np.sort(ranks, axis=1)[:, -3:] == [0, 1, 2]).all()
    assert ((ranks >= 0).sum(axis=1) == 3).all()
    assert len({tuple(np.flatnonzero(row >= 0)) for row in ranks}) > 1
    assert (np.asarray(plain.program_rank) == -1).all()
    _assert_same_game(plain, states)


def test_share_zero_and_count_zero_are_the_plain_game():
    """Share 0 grants nothing; K = 0 (the default) leaves the env's graph as it was."""
    from envs.hackmatrix.training import start_with_programs
    state = PLAIN.reset(KEYS[0], PARAMS)[1]
    np.testing.assert_array_equal(start_with_programs(state, KEYS[0], 3, 0.0).program_rank,
                                  state.program_rank)
    assert HackMatrix(start_programs=0, start_programs_share=1.0)._with_start_programs(
        state, KEYS[0]) is state


def test_the_auto_reset_after_an_ended_game_grants_them_too():
    """Training resets inside ``step``: an invalid action ends the game (decisions R4), and the
    next game is ``reset(key_reset)``'s, programs included (so, by the test above, the plain
    env's next game with K programs owned)."""
    obs, state = PLAIN.reset(KEYS[1], PARAMS)
    invalid = int(np.flatnonzero(~np.asarray(obs.action_mask))[0])
    step_key = jax.random.PRNGKey(5)
    next_obs, next_state, _, terminated, _, _ = jax.jit(ALWAYS.step)(step_key, state, invalid,
                                                                     PARAMS)
    assert bool(terminated)
    assert int((np.asarray(next_state.program_rank) >= 0).sum()) == 3
    assert int(np.asarray(next_obs.programs).sum()) == 3  # the agent sees them
    _, key_reset = jax.random.split(step_key)
    expected = ALWAYS.reset(key_reset, PARAMS)[1]
    same = jax.tree.map(lambda x, y: np.array_equal(np.asarray(x), np.asarray(y)),
                        next_state.replace(time=0), expected.replace(time=0))
    assert all(jax.tree.leaves(same))


def test_a_pool_limits_the_draw_to_its_programs():
    """``start_programs_pool``: the K programs are drawn from the named ones only (RESET alone:
    every granted game owns exactly RESET; a pool of two with K = 2: both, in either order);
    the game is otherwise the plain one, as without a pool."""
    from envs.hackmatrix.core.constants import PROGRAM_NAMES
    reset_only = HackMatrix(start_programs=1, start_programs_share=1.0,
                            start_programs_pool=("reset",))
    pair = HackMatrix(start_programs=2, start_programs_share=1.0,
                      start_programs_pool=("reset", "siph+"))
    plain = jax.jit(jax.vmap(lambda key: PLAIN.reset(key, PARAMS)[1]))(KEYS)
    for env, names in ((reset_only, {"reset"}), (pair, {"reset", "siph+"})):
        states = jax.jit(jax.vmap(lambda key: env.reset(key, PARAMS)[1]))(KEYS)
        ranks = np.asarray(states.program_rank)
        for row in ranks:
            assert {PROGRAM_NAMES[i] for i in np.flatnonzero(row >= 0)} == names
            assert sorted(row[row >= 0]) == list(range(len(names)))
        _assert_same_game(plain, states)
    orders = {tuple(np.argsort(row)[-2:]) for row in np.asarray(
        jax.vmap(lambda key: pair.reset(key, PARAMS)[1])(KEYS).program_rank)}
    assert len(orders) == 2  # acquisition order drawn per game


def test_option_values_are_checked():
    with pytest.raises(ValueError, match="start_programs must be in 0..23"):
        HackMatrix(start_programs=24)
    with pytest.raises(ConfigError, match="start_programs_share must be in"):
        validate_config(TrainConfig(env_options=dict(start_programs=2, start_programs_share=1.5)))
    with pytest.raises(ConfigError, match=r"start_programs must be in 0..23, got -1"):
        validate_config(TrainConfig(env_options=dict(start_programs=-1)))
    with pytest.raises(ConfigError, match="--start-programs must be an integer"):
        validate_config(TrainConfig(env_options=dict(start_programs=1.5)))
    with pytest.raises(ValueError, match="start_programs_pool must name distinct programs"):
        HackMatrix(start_programs=1, start_programs_pool=("reset", "bogus"))
    with pytest.raises(ValueError, match="start_programs_pool must name distinct programs"):
        HackMatrix(start_programs=1, start_programs_pool=("reset", "reset"))
    with pytest.raises(ValueError, match=r"start_programs \(2\) is more than the 1 programs"):
        HackMatrix(start_programs=2, start_programs_pool=("reset",))
    with pytest.raises(ConfigError, match="start_programs_pool needs start_programs > 0"):
        validate_config(TrainConfig(env_options=dict(start_programs_pool=("reset",))))


def test_the_pool_travels_through_the_command_line_and_a_checkpoints_config():
    """``--start-programs-pool reset,siph+`` is the config's tuple; a checkpoint's JSON config
    (a list) reads back as that tuple, and a config from before the field has no pool."""
    from purejaxrl.cli.train import build_parser
    args = build_parser().parse_args(["--start-programs", "1",
                                      "--start-programs-pool", "reset,siph+"])
    assert args.start_programs_pool == ("reset", "siph+")
    config = TrainConfig(env_options=dict(start_programs=1, start_programs_pool=("reset", "siph+")))
    values = config.to_dict()
    assert values["env_options"]["start_programs_pool"] == ["reset", "siph+"]
    assert TrainConfig.from_dict(values) == config
    del values["env_options"]["start_programs_pool"]
    assert TrainConfig.from_dict(values).env_option("start_programs_pool") == ()
    played = config.for_play()
    assert played.env_option("start_programs_pool") == ()
    assert played.env_option("start_programs") == 0


def test_toy_does_not_take_it():
    from purejaxrl import ppo
    with pytest.raises(ConfigError, match="--start-programs needs an env that takes it"):
        ppo.make_env(TrainConfig(env="toy", env_options=dict(start_programs=2)))
    with pytest.raises(ConfigError, match="start_programs must be in 0..23"):
        ppo.make_env(TrainConfig(env_options=dict(start_programs=30)))


def test_a_policy_trained_with_it_plays_the_games_own_start(tmp_path):
    """``load_policy`` (evaluate, watch) builds the env without the curriculum, whatever the
    checkpoint's config says; the learning benchmark's judge is the env's own defaults."""
    from purejaxrl import ppo
    from purejaxrl.checkpoint import save_checkpoint
    from purejaxrl.policy import load_policy

    config = TrainConfig(num_envs=2, num_steps=8, total_timesteps=16, num_minibatches=1,
                         update_epochs=1, hidden_width=8, hidden_depth=1, recurrent_core="none",
                         env_options=dict(start_programs=2, start_programs_share=1.0))
    env, env_params, network, optimizer, components = ppo.build(config)
    assert env.env.start_programs == 2
    runner = ppo.init_runner_state(config, env, env_params, network, optimizer, len(components))
    run_dir = str(tmp_path / "run")
    save_checkpoint(run_dir, runner_state=runner, config=config.to_dict(), update=0,
                    env_steps=0, run_name="run", wandb_run_id=None, elapsed_seconds=0.0, keep=1)
    policy = load_policy(run_dir)
    assert policy.checkpoint["config"]["env_options"]["start_programs"] == 2
    assert policy.config.env_option("start_programs") == 0
    assert policy.env.env.start_programs == 0


def test_evaluate_can_start_every_game_owning_named_programs(tmp_path, capsys):
    """``evaluate.py --start-programs 1 --start-programs-pool reset --start-programs-share 1``
    (the training options of the env, set for every game): a diagnostic of what
    owning a program is worth to a policy. Every game starts owning RESET (the stage report's
    programs owned where games end: at least 1 on every stage a game ended on: a game
    never loses a program and may acquire others), and the output says that this
    is not the game's own start."""
    import json
    from purejaxrl.cli.evaluate import main as evaluate_main
    out = tmp_path / "eval.json"
    code = evaluate_main(["--policies", "random", "--episodes", "4", "--seed", "3",
                          "--start-programs", "1", "--start-programs-pool", "reset",
                          "--start-programs-share", "1", "--json", str(out)])
    assert code == 0
    said = capsys.readouterr().out
    assert "a diagnostic, not the game's own games: the training options start_programs=1, " \
        "start_programs_share=1.0, start_programs_pool=reset," in said
    result = json.loads(out.read_text())["random"]
    assert result["training_options"]["start_programs"] == 1
    assert result["training_options"]["start_programs_pool"] == ["reset"]
    owned = [row["end_programs_owned"] for row in result["stages"]
             if row["end_programs_owned"] is not None]
    assert owned and all(value >= 1 for value in owned)
