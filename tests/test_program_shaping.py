"""Potential-based shaping on the programs owned (``HackMatrix(program_potential=C)``, the
trainer's ``--program-potential``): the reward gains the component ``program_shaping`` =
``gamma * Phi(s') - Phi(s)``, ``Phi = C * programs owned``, ``Phi = 0`` after a terminal step,
so acquiring a program pays at once while a whole game nets ``-Phi(start)`` (0 from the game's
own start): the term moves credit, it pays for no act (SPEC §1.5). The rest of the reward is
Swift's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix.env import HackMatrix
from purejaxrl.config import ConfigError, TrainConfig, validate_config
from tests.game_harness import ENV, PARAMS, scenario, step

SHAPED = HackMatrix(program_potential=2.0)
GAMMA = float(PARAMS.shaping_gamma)
DOWN, LEFT, RIGHT, SIPHON = 1, 2, 3, 4
WAIT, DEBUG = 5, 6  # program indices (ProgramType.allCases order), not actions


def _acquisition_start(owned=(WAIT,)):
    """The player at (2, 2) owning ``owned``, a DEBUG program block to its right."""
    return scenario(player={"row": 2, "col": 2, "dataSiphons": 1}, ownedPrograms=list(owned),
                    blocks=[{"row": 2, "col": 3, "type": "program", "programType": "debug",
                             "spawnCount": 1}])


def _swift_part(info):
    return {name: float(value) for name, value in info["reward_breakdown"].items()
            if name != "program_shaping"}


def test_acquiring_a_program_pays_the_potential_and_leaves_swifts_reward_as_it_was():
    """One program owned, a siphon acquires a second: gamma * 2C - C; the other components,
    the state and the observation are the plain env's."""
    start = _acquisition_start()
    obs, state, reward, _, info = step(start, SIPHON, env=SHAPED)
    plain_obs, plain_state, plain_reward, _, plain_info = step(start, SIPHON, env=ENV)
    assert bool(state.owned[DEBUG]) and int(np.sum(state.owned)) == 2
    assert int(info["programs_owned"]) == 2  # the training metric episode/programs_owned
    shaping = float(info["reward_breakdown"]["program_shaping"])
    assert shaping == pytest.approx(GAMMA * 2 * 2.0 - 2.0, abs=1e-6)
    assert _swift_part(info) == _swift_part(plain_info)
    assert float(reward) == pytest.approx(float(plain_reward) + shaping, abs=1e-5)
    assert tuple(SHAPED.reward_components) == tuple(ENV.reward_components) + ("program_shaping",)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves((obs, state)),
                                                    jax.tree.leaves((plain_obs, plain_state))))


def test_holding_costs_one_minus_gamma_and_a_terminal_step_takes_the_potential_back():
    """A move with two programs owned: (gamma - 1) * 2C. An invalid action ends the game
    (decisions R4) and its potential is 0: -2C."""
    start = _acquisition_start(owned=(WAIT, DEBUG))
    _, state, _, terminated, info = step(start, LEFT, env=SHAPED)
    assert not bool(terminated)
    assert float(info["reward_breakdown"]["program_shaping"]) == pytest.approx(
        (GAMMA - 1.0) * 2 * 2.0, abs=1e-6)
    corner = state.replace(player=state.player.replace(row=jnp.int32(0), col=jnp.int32(0)))
    _, _, _, terminated, info = step(corner, DOWN, env=SHAPED)  # off the board
    assert bool(terminated) and bool(info["invalid_action"])
    assert float(info["reward_breakdown"]["program_shaping"]) == pytest.approx(-2 * 2.0,
                                                                                abs=1e-6)


def test_a_whole_game_nets_minus_the_starting_potential():
    """The discounted sum over a game telescopes to ``-Phi(start)``, whatever is acquired on
    the way: one program at the start, a second acquired, some moves, then the end."""
    state = _acquisition_start()
    discounted, discount = 0.0, 1.0
    for action in (SIPHON, LEFT, LEFT, RIGHT, DOWN, DOWN, DOWN):
        _, state, _, terminated, info = step(state, action, env=SHAPED)
        discounted += discount * float(info["reward_breakdown"]["program_shaping"])
        discount *= GAMMA
        if bool(terminated):
            break
    assert bool(terminated)
    assert discounted == pytest.approx(-1 * 2.0, abs=1e-5)


def test_a_pool_makes_the_potential_count_only_its_programs():
    """``program_potential_pool=("debug",)``: acquiring DEBUG (owning WAIT already, which the
    pool leaves out) pays gamma * C - 0; with the pool ("reset",) the same acquisition pays
    nothing, and holding WAIT costs nothing either."""
    start = _acquisition_start()
    debug_only = HackMatrix(program_potential=2.0, program_potential_pool=("debug",))
    reset_only = HackMatrix(program_potential=2.0, program_potential_pool=("reset",))
    _, _, _, _, info = step(start, SIPHON, env=debug_only)
    assert float(info["reward_breakdown"]["program_shaping"]) == pytest.approx(GAMMA * 2.0,
                                                                               abs=1e-6)
    _, _, _, _, info = step(start, SIPHON, env=reset_only)
    assert float(info["reward_breakdown"]["program_shaping"]) == 0.0
    with pytest.raises(ValueError, match="program_potential_pool must name distinct programs"):
        HackMatrix(program_potential=1.0, program_potential_pool=("resett",))
    with pytest.raises(ConfigError, match="program_potential_pool needs program_potential"):
        validate_config(TrainConfig(env_options=dict(program_potential_pool=("reset",))))


def test_option_values_are_checked_and_other_envs_refuse_it():
    from purejaxrl import ppo
    with pytest.raises(ValueError, match="program_potential must be >= 0"):
        HackMatrix(program_potential=-1.0)
    with pytest.raises(ConfigError, match="program_potential must be >= 0"):
        validate_config(TrainConfig(env_options=dict(program_potential=-0.5)))
    with pytest.raises(ConfigError, match="--program-potential needs an env that takes it"):
        ppo.make_env(TrainConfig(env="toy", env_options=dict(program_potential=1.0)))
    env, _ = ppo.make_env(TrainConfig(env_options=dict(program_potential=1.0)))
    assert "program_shaping" in env.reward_components
    assert "program_shaping" not in ppo.make_env(TrainConfig())[0].reward_components


def test_a_trained_policy_plays_the_games_own_reward():
    """Evaluation, watching and search play a checkpoint's config ``for_play``: the shaping is
    training only, so a shaped run's returns compare with every other policy's."""
    from purejaxrl import ppo
    played = TrainConfig(env_options=dict(program_potential=1.0,
                                          program_potential_pool=("reset",),
                                          start_programs=2)).for_play()
    assert played.env_option("program_potential") == 0.0
    assert played.env_option("start_programs") == 0
    assert played.env_option("program_potential_pool") == ()
    assert "program_shaping" not in ppo.make_env(played)[0].reward_components

