"""The distillation teacher's labels kept across updates (``--distill-replay``,
purejaxrl/label_replay.py): a ring whose oldest labels leave first, whose empty slots weigh
nothing in the fit, and whose options are checked before any work."""

import jax.numpy as jnp
import numpy as np
import pytest

from purejaxrl import label_replay
from purejaxrl.config import ConfigError, TrainConfig, config_warnings, validate_config


def labels(first: int, count: int, weight=None, hidden: bool = False) -> dict:
    """``count`` labels numbered from ``first``: the observation and the target carry the
    number, so a slot tells which label it holds."""
    numbers = jnp.arange(first, first + count, dtype=jnp.float32)
    fresh = dict(obs={"board": numbers[:, None] * jnp.ones((1, 3))},
                 target=jnp.stack([numbers, -numbers], axis=-1),
                 mask=jnp.ones((count, 2), bool))
    if weight is not None:
        fresh["weight"] = jnp.asarray(weight, jnp.float32)
    if hidden:
        fresh["hidden"] = numbers[:, None] * jnp.ones((1, 4))
    return fresh


def empty(capacity: int, hidden: bool = False) -> label_replay.LabelReplay:
    example = labels(0, 2, hidden=hidden)
    return label_replay.empty_replay(example["obs"], example["mask"],
                                     example.get("hidden"), capacity)


def held(replay) -> list:
    """The label number in each slot (None where empty)."""
    return [float(number) if filled else None for number, filled in
            zip(np.asarray(replay.labels["obs"]["board"][:, 0]), np.asarray(replay.filled))]


def test_the_ring_keeps_the_newest_labels_and_drops_the_oldest_first():
    """Update u writes its n labels into slots (u * n + i) % K: three updates of 2 labels in
    a ring of 4 keep the last two updates' labels, the first update's overwritten."""
    replay = empty(4)
    replay = label_replay.store(replay, labels(10, 2), 0)
    assert held(replay) == [10.0, 11.0, None, None]
    replay = label_replay.store(replay, labels(20, 2), 1)
    replay = label_replay.store(replay, labels(30, 2), 2)
    assert held(replay) == [30.0, 31.0, 20.0, 21.0]
    # The target and the mask travel with their observation.
    assert np.asarray(replay.labels["target"])[:, 0].tolist() == [30.0, 31.0, 20.0, 21.0]


def test_a_ring_that_is_not_a_multiple_of_the_update_wraps_label_by_label():
    """With K = 5 and 2 labels an update, the third update's labels go to slots 4 and 0."""
    replay = empty(5)
    for update, first in enumerate((10, 20, 30)):
        replay = label_replay.store(replay, labels(first, 2), update)
    assert held(replay) == [31.0, 11.0, 20.0, 21.0, 30.0]


def test_empty_slots_weigh_nothing_and_the_teachers_weights_are_kept():
    """The fit sees every slot: an empty one weighs 0, a filled one its label's weight (1
    when the teacher gives none; ``distill_target`` move gives 0 where it agrees)."""
    replay = label_replay.store(empty(4), labels(10, 2), 0)
    assert np.asarray(label_replay.fitted_labels(replay)["weight"]).tolist() == [1, 1, 0, 0]
    replay = label_replay.store(replay, labels(20, 2, weight=[0.0, 1.0]), 1)
    assert np.asarray(label_replay.fitted_labels(replay)["weight"]).tolist() == [1, 1, 0, 1]


def test_a_recurrent_label_keeps_the_memory_it_was_labelled_with():
    """With a core the label holds the fitted network's memory before its observation."""
    replay = label_replay.store(empty(4, hidden=True), labels(10, 2, hidden=True), 1)
    assert np.asarray(replay.labels["hidden"])[:, 0].tolist() == [0.0, 0.0, 10.0, 11.0]


def test_the_replay_options_are_checked_before_any_work():
    """--distill-replay needs the tree teacher's labels and a size that splits evenly over the
    devices and minibatches and holds one update's labels; 0 (off) is always valid."""
    base = TrainConfig(env="toy", num_envs=8, num_steps=4, num_minibatches=4,
                       total_timesteps=64, recurrent_core="none", hidden_width=16,
                       hidden_depth=1)
    validate_config(base)
    on = base.replace(distill_coef=1.0, distill_envs=4)
    validate_config(on.replace(distill_replay=16))
    with pytest.raises(ConfigError, match="--distill-replay needs a search teacher"):
        validate_config(base.replace(distill_replay=16))
    with pytest.raises(ConfigError, match="--distill-replay must be an integer >= 0"):
        validate_config(on.replace(distill_replay=-4))
    with pytest.raises(ConfigError, match="must be a multiple of the device count"):
        validate_config(on.replace(distill_replay=18))
    with pytest.raises(ConfigError, match="must hold at least one update's labels"):
        validate_config(base.replace(distill_coef=1.0, distill_replay=4))
    with pytest.raises(ConfigError, match="--distill-replay applies to --distill-teacher tree"):
        validate_config(on.replace(distill_teacher="rollout", distill_replay=16))
    # A moving teacher's kept labels age: the run goes on, warned.
    assert any("without --distill-frozen-teacher" in warning
               for warning in config_warnings(on.replace(distill_replay=16)))
    assert not config_warnings(on.replace(distill_replay=16, distill_frozen_teacher=True))


def test_a_checkpoint_with_kept_labels_and_a_frozen_teacher_can_be_trimmed():
    """``trim_checkpoint`` keeps the ring as it is (its size is no env count) and a frozen
    recurrent teacher's memory of the labelled envs: kept whole where every labelled env is
    kept, cut to the kept envs where fewer are. Both copies load. (Until stop 82 both were
    refused: the copy's config counted every kept env as labelled.)"""
    import jax

    from purejaxrl import checkpoint as checkpoint_module
    config = TrainConfig(num_envs=8, num_steps=4, num_minibatches=2, total_timesteps=64,
                         recurrent_core="gru", sequence_length=4, core_width=8,
                         hidden_width=16, hidden_depth=1, distill_coef=0.5, distill_envs=4,
                         distill_frozen_teacher=True, distill_replay=4)
    template = checkpoint_module.runner_state_template(config)
    runner = jax.tree.map(lambda leaf: np.arange(np.prod(leaf.shape)).reshape(leaf.shape)
                          .astype(leaf.dtype), template).replace(update_step=np.int32(0))
    record = checkpoint_module.checkpoint_record(config=config.to_dict(), update=0,
                                                 env_steps=0, run_name="run",
                                                 wandb_run_id=None, elapsed_seconds=0.0)
    original = checkpoint_module.parse_checkpoint(
        checkpoint_module.encode_checkpoint(runner, record), "run/checkpoint_0.msgpack")
    for keep, teacher_rows in ((6, 4), (2, 2)):
        data, trimmed = checkpoint_module.trim_checkpoint(original, keep)
        small = checkpoint_module.parse_checkpoint(data, "small/checkpoint_0.msgpack")
        assert small["config"]["num_envs"] == keep == trimmed["config"]["num_envs"]
        labels, teacher = small["runner_state"].labels, small["runner_state"].teacher
        np.testing.assert_array_equal(labels.labels["target"], runner.labels.labels["target"])
        np.testing.assert_array_equal(teacher.hidden, runner.teacher.hidden[:teacher_rows])


def test_kept_search_values_travel_with_their_labels_and_empty_slots_weigh_nothing():
    """With ``--distill-value-coef`` the ring also keeps each label's search value and its
    weight in the critic's fit; an empty slot's value weighs 0, as its policy target does."""
    example = labels(0, 2)
    replay = label_replay.empty_replay(example["obs"], example["mask"], None, 4,
                                       with_values=True)
    fresh = dict(labels(10, 2), value=jnp.array([0.5, -1.5]),
                 value_weight=jnp.array([1.0, 0.0]))
    replay = label_replay.store(replay, fresh, 1)
    fitted = label_replay.fitted_labels(replay)
    assert np.asarray(fitted["value"]).tolist() == [0.0, 0.0, 0.5, -1.5]
    assert np.asarray(fitted["value_weight"]).tolist() == [0.0, 0.0, 1.0, 0.0]
    assert "value" not in label_replay.fitted_labels(empty(4))  # off: the ring as before
