"""What PPO optimises: the env's reward or one of its training rewards (HackMatrix's "progress":
its components without the timing-only ones; "stages"; "stage-count": a point per stage),
reward normalisation by the running return std (PureJaxRL's NormalizeVecReward idea), and
configs from before these options resuming with them off."""

import jax.numpy as jnp
import numpy as np

from envs import registry
from envs.hackmatrix import REWARD_COMPONENTS, HackMatrix
from purejaxrl.config import TrainConfig
from purejaxrl.env_protocol import TrainerEnv
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


def breakdowns():
    """Reward breakdowns of HackMatrix: all zero; a busy step (it kills, picks up a data siphon,
    gains resources and score, and moves 0.05 of shaping towards the exit); a death on stage 3
    beside a siphon-spawned enemy (programs-rewards-observation §8.11's -12.51)."""
    zero = {name: jnp.float32(0.0) for name in REWARD_COMPONENTS}
    busy = dict(zero, step_penalty=jnp.float32(-0.01), kills=jnp.float32(0.3),
                data_siphon=jnp.float32(1.0), resource_gain=jnp.float32(0.15),
                score_gain=jnp.float32(1.5), distance_shaping=jnp.float32(0.05))
    death = dict(zero, step_penalty=jnp.float32(-0.01), damage_penalty=jnp.float32(-1.0),
                 death_penalty=jnp.float32(-1.5), siphon_death_penalty=jnp.float32(-10.0))
    return zero, busy, death


def test_progress_training_reward_drops_timing_only_components_and_spending_penalty():
    """HackMatrix's hook: a death step on stage 3 next to a siphon-spawned enemy
    (programs-rewards-observation §8.11's -12.51 example) pays only the step penalty under
    "progress"; a step that spends resources is not penalised, one that gains them is paid."""
    def training_reward(config, reward, breakdown):
        return HackMatrix.training_rewards[config.training_reward](reward, breakdown)

    zero, _, death = breakdowns()
    progress = TrainConfig(training_reward="progress")
    np.testing.assert_allclose(training_reward(progress, jnp.float32(-12.51), death), -0.01)
    spend = dict(zero, step_penalty=jnp.float32(-0.01), resource_gain=jnp.float32(-0.2))
    gain = dict(zero, step_penalty=jnp.float32(-0.01), resource_gain=jnp.float32(0.15),
                kills=jnp.float32(0.3))
    np.testing.assert_allclose(training_reward(progress, jnp.float32(-0.21), spend), -0.01)
    np.testing.assert_allclose(training_reward(progress, jnp.float32(0.44), gain), 0.44,
                               rtol=1e-6)


def test_stages_training_reward_pays_only_progress_through_the_game():
    """HackMatrix's "stages": a step that kills, picks up a data siphon, gains resources and
    score, and moves towards the exit pays only its distance shaping; a stage completion pays
    its payout (and the shaping), with the resource holding left out; a death pays nothing."""
    stages = HackMatrix.training_rewards["stages"]
    zero, busy, death = breakdowns()
    np.testing.assert_allclose(stages(jnp.float32(2.99), busy), 0.05, rtol=1e-6)
    clear = dict(zero, step_penalty=jnp.float32(-0.01), stage_completion=jnp.float32(4.0),
                 resource_holding=jnp.float32(0.3), distance_shaping=jnp.float32(-0.2))
    np.testing.assert_allclose(stages(jnp.float32(4.09), clear), 3.8, rtol=1e-6)
    assert float(stages(jnp.float32(-12.51), death)) == 0.0
    # Every component but those named is left out: the list is of components that exist.
    from envs.hackmatrix.training import STAGE_COMPONENTS
    assert set(STAGE_COMPONENTS) <= set(REWARD_COMPONENTS) | {"program_shaping"}


def test_stage_count_training_reward_pays_one_point_per_stage_completed():
    """HackMatrix's "stage-count": a stage completion pays 1 whatever Swift's payout (1 on
    stage 1, 32 on stage 6), the winning step 1 (not 64 + 500 + 100 x score), plus the
    potential-style shaping; kills, pickups, resources, score and a death pay nothing. Over a
    game the points are the stages completed, the benchmark's judge."""
    count = HackMatrix.training_rewards["stage-count"]
    zero, busy, death = breakdowns()
    np.testing.assert_allclose(count(jnp.float32(2.99), busy), 0.05, rtol=1e-6)
    for payout in (1.0, 32.0):
        clear = dict(zero, stage_completion=jnp.float32(payout),
                     distance_shaping=jnp.float32(-0.2), resource_holding=jnp.float32(0.3))
        np.testing.assert_allclose(count(jnp.float32(payout), clear), 0.8, rtol=1e-6)
    win = dict(zero, stage_completion=jnp.float32(64.0), victory=jnp.float32(1700.0))
    assert float(count(jnp.float32(1764.0), win)) == 1.0
    assert float(count(jnp.float32(-12.51), death)) == 0.0
    # A game: stages 1-3 cleared, then death: 3 points, where Swift's payouts give 1 + 2 + 4.
    game = [dict(zero, stage_completion=jnp.float32(p)) for p in (1.0, 2.0, 4.0)] + [death]
    assert sum(float(count(jnp.float32(0.0), step)) for step in game) == 3.0
    from envs.hackmatrix.training import STAGE_COUNT_SHAPING
    assert set(STAGE_COUNT_SHAPING) <= set(REWARD_COMPONENTS) | {"program_shaping"}
    assert {"stage_completion", "victory"} <= set(REWARD_COMPONENTS)


def test_the_trainer_offers_env_and_the_envs_training_rewards_over_any_batch():
    """"env" is the reward as it is; an env's training reward (the toy's "progress": without
    the death penalty) is applied to every env of a batch; an env without training rewards
    offers "env" only."""
    toy = TrainerEnv(*registry.make("toy"))
    assert toy.training_reward_names == ("env", "progress")
    breakdown = {name: jnp.zeros((2, 3)) for name in toy.reward_components}
    breakdown["death"] = jnp.full((2, 3), -1.0)
    breakdown["step_penalty"] = jnp.full((2, 3), -0.01)
    reward = jnp.full((2, 3), -1.01)
    np.testing.assert_array_equal(toy.training_reward("env", reward, breakdown), reward)
    np.testing.assert_allclose(toy.training_reward("progress", reward, breakdown),
                               np.full((2, 3), -0.01))
    cartpole = TrainerEnv(*registry.make("CartPole-v1"))
    assert cartpole.training_reward_names == ("env",) and cartpole.reward_components == ()
