"""Masked categorical (issue P1): masked actions are never sampled, and entropy, KL and
log-probabilities are taken over the legal actions only."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import registry
from envs.hackmatrix.observation import Observation
from purejaxrl.config import TrainConfig
from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.networks import (MASKED_LOGIT, greedy_masked, log_prob_of, make_network,
                                masked_entropy, masked_kl, sample_masked)

NUM_ACTIONS = 28


@pytest.fixture(scope="module")
def hackmatrix():
    return TrainerEnv(*registry.make("hackmatrix"))


@pytest.fixture(scope="module")
def logits_and_mask():
    key_logits, key_mask = jax.random.split(jax.random.PRNGKey(1))
    logits = 3.0 * jax.random.normal(key_logits, (16, NUM_ACTIONS))
    mask = jax.random.bernoulli(key_mask, 0.3, (16, NUM_ACTIONS)).at[:, 7].set(True)
    # Make the masked actions the most attractive ones, so a leak would show at once.
    logits = jnp.where(mask, logits, 50.0)
    return logits, mask


def test_masked_actions_never_sampled_over_many_draws(logits_and_mask):
    """20,000 draws per row, masked logits set far above the legal ones: none is masked."""
    logits, mask = logits_and_mask
    draws = jax.jit(jax.vmap(lambda k: jax.vmap(sample_masked)(
        jax.random.split(k, logits.shape[0]), logits, mask)))(
        jax.random.split(jax.random.PRNGKey(2), 20_000))
    chosen_legal = np.take_along_axis(np.asarray(mask)[None], np.asarray(draws)[..., None],
                                      axis=-1)
    assert chosen_legal.all()


def test_sampling_frequencies_follow_softmax_over_legal_actions():
    """Two legal actions with logits 0 and log 3 are drawn 1:3; the rest never."""
    logits = jnp.zeros(NUM_ACTIONS).at[4].set(jnp.log(3.0)).at[9].set(100.0)
    mask = jnp.zeros(NUM_ACTIONS, bool).at[2].set(True).at[4].set(True)
    draws = np.asarray(jax.vmap(lambda k: sample_masked(k, logits, mask))(
        jax.random.split(jax.random.PRNGKey(3), 40_000)))
    assert set(np.unique(draws)) <= {2, 4}
    assert abs(np.mean(draws == 4) - 0.75) < 0.01


def test_greedy_picks_best_legal_action():
    logits = jnp.arange(NUM_ACTIONS, dtype=jnp.float32)
    mask = jnp.zeros(NUM_ACTIONS, bool).at[3].set(True).at[5].set(True)
    assert int(greedy_masked(logits, mask)) == 5


def test_log_prob_normalised_over_legal_actions():
    """Uniform logits with k legal actions: each legal action has log-prob -log k."""
    mask = jnp.zeros(NUM_ACTIONS, bool).at[jnp.array([0, 4, 6, 20])].set(True)
    logits = jnp.zeros(NUM_ACTIONS).at[1].set(30.0)  # a masked action with a huge logit
    assert np.isclose(float(log_prob_of(logits, mask, jnp.int32(6))), -np.log(4.0), atol=1e-6)


def test_entropy_counts_legal_actions_only():
    """Uniform over k legal actions has entropy log k whatever the masked logits are; one
    legal action has entropy exactly 0; the result is finite (no 0 * -inf)."""
    mask = jnp.zeros(NUM_ACTIONS, bool).at[jnp.array([1, 2, 3])].set(True)
    logits = jnp.zeros(NUM_ACTIONS).at[10].set(25.0).at[11].set(-25.0)
    assert np.isclose(float(masked_entropy(logits, mask)), np.log(3.0), atol=1e-6)
    single = jnp.zeros(NUM_ACTIONS, bool).at[5].set(True)
    assert float(masked_entropy(logits, single)) == 0.0


def test_kl_over_legal_actions_only():
    """KL between two distributions that differ only on masked logits is 0; on legal actions it
    is the two-point KL computed by hand: p = (1/2, 1/2), q = (1/4, 3/4)."""
    mask = jnp.zeros(NUM_ACTIONS, bool).at[0].set(True).at[1].set(True)
    p = jnp.zeros(NUM_ACTIONS)
    assert float(masked_kl(p, p.at[5].set(40.0), mask)) == 0.0
    q = jnp.zeros(NUM_ACTIONS).at[1].set(jnp.log(3.0))
    expected = 0.5 * np.log(0.5 / 0.25) + 0.5 * np.log(0.5 / 0.75)
    assert np.isclose(float(masked_kl(p, q, mask)), expected, atol=1e-6)


def test_masked_logit_is_large_finite_negative():
    assert np.isfinite(MASKED_LOGIT) and MASKED_LOGIT <= -1e8


def _observation(batch, channels):
    return Observation(player=jnp.ones((batch, 10)), programs=jnp.ones((batch, 23), jnp.int32),
                       grid=jnp.ones((batch, 6, 6, channels)),
                       action_mask=jnp.ones((batch, NUM_ACTIONS), bool))


@pytest.mark.parametrize("encoder", ["flat", "egocentric"])
@pytest.mark.parametrize("separate", [True, False])
def test_network_shapes_torsos_and_float32_outputs(separate, encoder, hackmatrix):
    """Any grid channel count; separate torsos double the hidden layers (the egocentric
    encoder's one shared cell embedding comes on top); bfloat16 compute keeps float32
    parameters and float32 logits/values."""
    config = TrainConfig(hidden_width=8, hidden_depth=2, separate_torsos=separate,
                         compute_dtype="bfloat16", encoder=encoder, recurrent_core="none")
    network = make_network(config, hackmatrix)
    obs = _observation(3, 5)
    params = network.init(jax.random.PRNGKey(0), obs)
    logits, value = network.apply(params, obs)
    assert logits.shape == (3, NUM_ACTIONS) and value.shape == (3,)
    assert logits.dtype == jnp.float32 and value.dtype == jnp.float32
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params))
    kernels = [x for path, x in jax.tree_util.tree_leaves_with_path(params)
               if "kernel" in jax.tree_util.keystr(path)]
    embedding = 1 if encoder == "egocentric" else 0
    assert len(kernels) == (2 * 2 + 2 if separate else 2 + 2) + embedding


def test_orthogonal_init_scales(hackmatrix):
    """Orthogonal hidden weights (W^T W = 2 I for gain sqrt 2), policy head gain 0.01, zero
    biases: initial logits are near zero (near-uniform initial policy)."""
    config = TrainConfig(hidden_width=16, hidden_depth=1, separate_torsos=False,
                         recurrent_core="none")
    network = make_network(config, hackmatrix)
    params = network.init(jax.random.PRNGKey(0), _observation(1, 2))["params"]
    hidden = params["MLPTorso_0"]["Dense_0"]
    kernel = np.asarray(hidden["kernel"])
    assert np.allclose(kernel.T @ kernel, 2.0 * np.eye(16), atol=1e-4)
    assert not np.asarray(hidden["bias"]).any()
    head = np.asarray(params["Dense_0"]["kernel"])
    # 16 inputs < 28 outputs: the rows are orthogonal, with norm 0.01.
    assert np.allclose(head @ head.T, 1e-4 * np.eye(16), atol=1e-7)
