"""GAE (issue P1): terminated stops bootstrapping, truncated bootstraps from the value of
info["final_observation"], and the lambda-trace never crosses an episode boundary. Expected
values are computed by hand below."""

import jax.numpy as jnp
import numpy as np

from purejaxrl.ppo import compute_gae

GAMMA, LAMBDA = 0.9, 0.8


def test_gae_against_hand_computed_trajectory():
    """One env, 5 steps: t=1 terminated, t=2 truncated (V(final obs) = 3.0), last value 2.0.

    t4: delta = -1 + 0.9*2.0 - 0.5 = 0.3                  A4 = 0.3
    t3: delta = 1 + 0.9*0.5 - 1.0 = 0.45                  A3 = 0.45 + 0.72*0.3 = 0.666
    t2: delta = 0 + 0.9*3.0 - 2.0 = 0.7 (bootstrap V_final) A2 = 0.7 (trace cut)
    t1: delta = 2 + 0 - 1.0 = 1.0 (no bootstrap)           A1 = 1.0 (trace cut)
    t0: delta = 1 + 0.9*1.0 - 0.5 = 1.4                    A0 = 1.4 + 0.72*1.0 = 2.12
    """
    rewards = jnp.array([1.0, 2.0, 0.0, 1.0, -1.0])
    values = jnp.array([0.5, 1.0, 2.0, 1.0, 0.5])
    terminated = jnp.array([False, True, False, False, False])
    truncated = jnp.array([False, False, True, False, False])
    bootstrap = jnp.array([0.0, 0.0, 3.0, 0.0, 0.0])
    advantages, targets = compute_gae(rewards, values, terminated, truncated, bootstrap,
                                      jnp.float32(2.0), GAMMA, LAMBDA)
    expected = np.array([2.12, 1.0, 0.7, 0.666, 0.3])
    np.testing.assert_allclose(advantages, expected, rtol=1e-6)
    np.testing.assert_allclose(targets, expected + np.asarray(values), rtol=1e-6)


def test_terminated_wins_over_truncated_and_envs_are_independent():
    """Env 0: a step both terminated and truncated (the time limit hit on a death step) is not
    bootstrapped: A = r - V = 1 - 2 = -1. Env 1 (no ends): plain GAE, two steps, last value 1:
    A1 = 0 + 0.9*1 - 1 = -0.1, A0 = 1 + 0.9*1 - 1 + 0.72*(-0.1) = 0.828."""
    rewards = jnp.array([[0.0, 1.0], [1.0, 0.0]])
    values = jnp.array([[1.0, 1.0], [2.0, 1.0]])
    terminated = jnp.array([[False, False], [True, False]])
    truncated = jnp.array([[False, False], [True, False]])
    bootstrap = jnp.array([[0.0, 0.0], [5.0, 0.0]])
    advantages, _ = compute_gae(rewards, values, terminated, truncated, bootstrap,
                                jnp.array([4.0, 1.0]), GAMMA, LAMBDA)
    # Env 0, t0: delta = 0 + 0.9*2.0 - 1.0 = 0.8, A = 0.8 + 0.72*(-1.0) = 0.08.
    np.testing.assert_allclose(advantages[:, 0], [0.08, -1.0], rtol=1e-5)
    np.testing.assert_allclose(advantages[:, 1], [0.828, -0.1], rtol=1e-5)
