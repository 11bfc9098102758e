"""A checkpoint written before envs/hackmatrix was split into sub-packages (issue 15) still
loads: cloudpickle pickled its classes by reference, under module paths that have since moved
(``envs.hackmatrix.state.EnvState`` is now ``envs.hackmatrix.core.state.EnvState``).

tests/fixtures/checkpoint_before_issue15.pkl was written by ``checkpoint.save_checkpoint`` at
commit 76e689a (before the move) with ``runner_state = {"env_state", "obs", "env_params"}`` of
``HackMatrix().reset(PRNGKey(15))`` and the default ``TrainConfig``."""

import os

import jax
import numpy as np

from envs.hackmatrix import HackMatrix
from envs.hackmatrix.core.state import EnvState
from purejaxrl.checkpoint import load_checkpoint

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures",
                       "checkpoint_before_issue15.pkl")


def test_checkpoint_pickled_under_the_old_module_paths_loads_as_the_same_state():
    with open(FIXTURE, "rb") as handle:
        assert b"envs.hackmatrix.state" in handle.read()  # the fixture names the old path
    payload = load_checkpoint(FIXTURE)
    saved = payload["runner_state"]
    assert type(saved["env_state"]) is EnvState
    env = HackMatrix()
    obs, state = env.reset(jax.random.PRNGKey(15), env.default_params)
    for want, got in ((state, saved["env_state"]), (obs, saved["obs"])):
        assert jax.tree.structure(want) == jax.tree.structure(got)
        jax.tree.map(np.testing.assert_array_equal, want, got)
