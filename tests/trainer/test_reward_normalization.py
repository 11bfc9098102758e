"""Reward normalisation (PureJaxRL's NormalizeVecReward idea): the running moments of the
discounted return equal the moments of everything merged so far, the scale is 1/std, and a
config written before the option existed resumes with it off."""

import jax.numpy as jnp
import numpy as np

from purejaxrl.config import TrainConfig
from purejaxrl.ppo import ReturnStatistics, reward_scale, update_return_statistics


def test_running_moments_equal_moments_of_all_batches_merged():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(8, 4)), rng.normal(-1.0, 0.5, size=(16, 4)),
               rng.normal(10.0, 4.0, size=(4, 4))]
    stats = ReturnStatistics.initial()
    for batch in batches:
        stats = update_return_statistics(stats, jnp.asarray(batch, jnp.float32), None)
    everything = np.concatenate([b.ravel() for b in batches])
    # The prior count (1e-4) moves the moments by about 1e-4 / 224.
    np.testing.assert_allclose(float(stats.mean), everything.mean(), rtol=1e-4)
    np.testing.assert_allclose(float(stats.var), everything.var(), rtol=1e-4)
    np.testing.assert_allclose(float(stats.count), everything.size, rtol=1e-5)
    np.testing.assert_allclose(float(reward_scale(stats)), 1.0 / everything.std(), rtol=1e-4)


def test_config_from_before_the_option_resumes_with_the_behaviour_of_its_time():
    old = TrainConfig().to_dict()
    for name in ("normalize_rewards", "encoder", "cell_features"):
        old.pop(name)
    config = TrainConfig.from_dict(old)
    assert config.normalize_rewards is False and config.encoder == "flat"
