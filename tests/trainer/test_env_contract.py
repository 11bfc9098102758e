"""The trainer's environment contract (purejaxrl/env_protocol.py, issue 15), checked the same way
on both environments the trainer runs: HackMatrix and the toy corridor. Episodes are capped at
a few steps so that random legal play ends some of them (truncation) inside the check."""

import pytest

from envs.hackmatrix import HackMatrix
from purejaxrl.env_protocol import check_env_contract
from purejaxrl.toy_env import ToyCorridor

EPISODE_CAP = 5


@pytest.mark.parametrize("environment", [HackMatrix, ToyCorridor], ids=["hackmatrix", "toy"])
def test_environment_meets_the_trainer_contract(environment):
    env = environment()
    params = env.default_params.replace(max_steps_in_episode=EPISODE_CAP)
    check_env_contract(env, params, num_envs=2, num_steps=3 * EPISODE_CAP)


def test_the_contract_check_catches_a_missing_info_key():
    """The check can fail: an env whose step drops "shot" is refused, naming the key."""
    class WithoutShot(ToyCorridor):
        def step(self, key, state, action, params):
            *out, info = super().step(key, state, action, params)
            return (*out, {k: v for k, v in info.items() if k != "shot"})

    env = WithoutShot()
    with pytest.raises(AssertionError, match="shot"):
        check_env_contract(env, env.default_params.replace(max_steps_in_episode=EPISODE_CAP),
                           num_envs=2, num_steps=3 * EPISODE_CAP)
