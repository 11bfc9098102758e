"""Batch auto-scaling (issue P2). Reference: 256 envs x 128 steps = 32768 samples, 4 minibatches
of 8192, 4 epochs; larger batches keep minibatches near 2048 and lower the epochs (floor 2);
smaller batches keep the reference values; the minibatch count always divides the batch; an
explicit value wins for its own dimension only."""

import pytest

from purejaxrl.config import (ConfigError, TrainConfig, auto_scale_for_batch_size,
                              validate_config)


def test_reference_batch_keeps_reference_values():
    scaled = auto_scale_for_batch_size(256, 128)
    assert (scaled.num_minibatches, scaled.update_epochs, scaled.minibatch_size) == (4, 4, 8192)


def test_2048_envs_gives_128_minibatches_and_2_epochs():
    """262144 samples: 262144 / 2048 = 128 minibatches; epochs 4 * 32768 / 262144 = 0.5 -> 2."""
    scaled = auto_scale_for_batch_size(2048, 128)
    assert (scaled.num_minibatches, scaled.update_epochs, scaled.minibatch_size) == (128, 2, 2048)


def test_double_batch_halves_epochs():
    """512 x 128 = 65536: 32 minibatches of 2048, 4 * 1/2 = 2 epochs."""
    scaled = auto_scale_for_batch_size(512, 128)
    assert (scaled.num_minibatches, scaled.update_epochs) == (32, 2)


def test_intermediate_batch_rounds_epochs():
    """384 x 128 = 49152: 24 minibatches of 2048; 4 * 32768 / 49152 = 2.67 -> 3 epochs."""
    scaled = auto_scale_for_batch_size(384, 128)
    assert (scaled.num_minibatches, scaled.update_epochs) == (24, 3)


@pytest.mark.parametrize("num_envs, expected_minibatches", [(1000, 64), (3000, 192)])
def test_awkward_env_counts_get_a_dividing_minibatch_count(num_envs, expected_minibatches):
    """1000 x 128 = 128000: the divisor nearest 2048-sample minibatches is 64 (2000 each);
    3000 x 128 = 384000: 192 (2000 each). Both divide exactly and pass validation."""
    scaled = auto_scale_for_batch_size(num_envs, 128)
    assert scaled.num_minibatches == expected_minibatches
    assert (num_envs * 128) % scaled.num_minibatches == 0
    assert scaled.update_epochs == 2
    validate_config(TrainConfig(num_envs=num_envs, num_steps=128,
                                num_minibatches=scaled.num_minibatches,
                                update_epochs=scaled.update_epochs, recurrent_core="none"))


@pytest.mark.parametrize("num_envs, num_steps", [(8, 16), (3, 5), (7, 13), (100, 128)])
def test_small_batches_keep_reference_values_where_possible(num_envs, num_steps):
    """Smaller than 32768: 4 epochs, and 4 minibatches when 4 divides the batch, else the
    nearest divisor (3 x 5 = 15 -> 5 (ties go up); 7 x 13 = 91 -> 7)."""
    scaled = auto_scale_for_batch_size(num_envs, num_steps)
    assert scaled.update_epochs == 4
    expected = {128: 4, 15: 5, 91: 7, 12800: 4}[num_envs * num_steps]
    assert scaled.num_minibatches == expected
    assert (num_envs * num_steps) % scaled.num_minibatches == 0


def test_explicit_values_win_for_their_own_dimension_only():
    only_minibatches = auto_scale_for_batch_size(2048, 128, num_minibatches=64)
    assert (only_minibatches.num_minibatches, only_minibatches.update_epochs) == (64, 2)
    only_epochs = auto_scale_for_batch_size(2048, 128, update_epochs=5)
    assert (only_epochs.num_minibatches, only_epochs.update_epochs) == (128, 5)
    assert only_epochs.epochs_explicit and not only_epochs.minibatches_explicit
    assert "explicit" in only_epochs.describe() and "auto" in only_epochs.describe()


def test_minibatch_count_divides_per_device_batch():
    """With 4 devices, 1000 envs = 250 per device x 128 = 32000 local samples; the count must
    divide that share (each device splits its own)."""
    scaled = auto_scale_for_batch_size(1000, 128, num_devices=4)
    assert (1000 // 4 * 128) % scaled.num_minibatches == 0


def test_non_dividing_explicit_minibatch_count_is_a_clear_error():
    with pytest.raises(ConfigError, match="num-minibatches 3 must divide"):
        validate_config(TrainConfig(num_envs=8, num_steps=16, num_minibatches=3))


def test_env_count_must_split_evenly_over_devices():
    with pytest.raises(ConfigError, match="cannot be split evenly over 4 devices"):
        validate_config(TrainConfig(num_envs=10, num_steps=16, num_minibatches=1, num_devices=4))
