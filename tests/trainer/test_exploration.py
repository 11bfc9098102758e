"""Exploration of the env's rare action (``--explore-share``, TrainConfig.explore_share): where
the env's ``exploration_target`` is in reach, the rollout takes its action with the given
probability instead of the policy's sample, stores the policy's own log-probability of it, and
counts it; nowhere else does anything change. On the toy corridor, whose target is the siphon
wherever it is legal (cell 2, once)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import registry
from envs.toy import corridor
from purejaxrl import ppo
from purejaxrl.config import ConfigError, validate_config
from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.logger import summarize_chunk
from purejaxrl.networks import log_prob_of
from tests.trainer.toy_run import CONFIG, rollout_setup

# Enough steps that random play walks onto cell 2 often: 16 envs x 16 steps.
EXPLORING = CONFIG.replace(num_envs=16, num_steps=16, explore_share=1.0)


def rollout(config):
    setup = rollout_setup(config)
    _, transitions, stats, _, _, _ = setup["collect"](setup["runner"])
    return setup["env"], setup["network"], setup["runner"].params, transitions, stats


def test_every_offered_state_takes_the_target_with_the_policys_own_log_probability():
    """Share 1: at every stored state where the siphon is legal the action is the siphon, and
    only there does the rollout count an explored action; the stored log-probability of every
    action, explored or sampled, is the network's at that state, so the update's ratio starts
    at 1 for it; no masked action is taken."""
    env, network, params, transitions, stats = rollout(EXPLORING)
    offered, target = env.exploration_target(transitions.obs)
    offered = np.asarray(offered)
    actions = np.asarray(transitions.action)
    assert offered.sum() >= 4  # the test sees the rule at work
    assert np.all(actions[offered] == corridor.SIPHON)
    assert np.all(np.asarray(target) == corridor.SIPHON)
    explored = np.asarray(stats["explored_actions"])
    np.testing.assert_array_equal(explored, offered.astype(np.float32))
    logits = jax.vmap(lambda obs: ppo.apply_step(network, params, None, obs, None)[1])(
        transitions.obs)
    expected = log_prob_of(logits, transitions.mask, transitions.action)
    np.testing.assert_allclose(np.asarray(transitions.log_prob), np.asarray(expected),
                               rtol=1e-6, atol=1e-6)
    assert float(np.sum(stats["masked_actions_sampled"])) == 0


def test_a_share_explores_about_that_share_of_the_offered_states():
    """Share 0.5: about half the offered states take the siphon for the policy (the untrained
    policy's own siphons come on top of those, never counted as explored)."""
    env, _, _, transitions, stats = rollout(EXPLORING.replace(explore_share=0.5))
    offered = np.asarray(env.exploration_target(transitions.obs)[0])
    explored = np.asarray(stats["explored_actions"]).astype(bool)
    assert not np.any(explored & ~offered)
    assert np.all(np.asarray(transitions.action)[explored] == corridor.SIPHON)
    assert 0.25 < explored.sum() / offered.sum() < 0.75, (explored.sum(), offered.sum())


@pytest.mark.parametrize("share, env, message", [
    (1.5, "toy", "--explore-share must be in [0, 1]"),
    (0.1, "CartPole-v1", "--explore-share needs an env with an exploration_target"),
])
def test_a_share_out_of_range_or_without_a_target_is_refused(share, env, message):
    """A share outside [0, 1], or an env without ``exploration_target``, is a ConfigError
    before any work."""
    config = (CONFIG if env == "toy" else ppo.config_for_env(env)).replace(explore_share=share)
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_config(config)
        ppo.build(config)


def test_an_annealed_share_falls_linearly_to_zero_over_the_run():
    """``--explore-anneal``: the share at update u of U is share * (1 - u / U): every offered
    state explored at the first update, about half at the middle one, none after the last;
    the same compiled rollout serves every update (the share is computed, not baked in)."""
    config = EXPLORING.replace(explore_anneal=True,
                               total_timesteps=8 * EXPLORING.num_envs * EXPLORING.num_steps)
    setup = rollout_setup(config)
    updates = config.num_updates
    assert updates >= 2
    fractions = []
    for update_step in (0, updates // 2, updates):
        runner = setup["runner"].replace(update_step=jnp.int32(update_step))
        _, transitions, stats, _, _, _ = setup["collect"](runner)
        offered = np.asarray(setup["env"].exploration_target(transitions.obs)[0])
        fractions.append(np.asarray(stats["explored_actions"]).sum() / offered.sum())
    assert fractions[0] == 1.0 and fractions[2] == 0.0, fractions
    assert abs(fractions[1] - (1 - (updates // 2) / updates)) < 0.25, fractions
    assert setup["collect"]._cache_size() == 1
    with pytest.raises(ConfigError, match=re.escape("--explore-anneal needs --explore-share")):
        validate_config(CONFIG.replace(explore_anneal=True))


def test_without_exploration_nothing_is_counted():
    """Share 0 (the default): no action is explored."""
    *_, stats = rollout(EXPLORING.replace(explore_share=0.0))
    assert float(jnp.sum(stats["explored_actions"])) == 0


def test_the_record_gives_the_explored_share_of_the_env_steps():
    """``actions/explored_fraction``: explored actions over the chunk's env steps (two active
    updates of 32 steps, 8 and 4 explored: 12 / 64)."""
    toy = TrainerEnv(*registry.make("toy"))
    update = ppo.UpdateMetrics.zeros(toy).replace(active=jnp.float32(1.0))
    chunk = jax.tree.map(lambda x: np.stack([np.asarray(x)] * 3), update)
    chunk = chunk.replace(explored_actions=np.array([8.0, 4.0, 5.0], np.float32),
                          active=np.array([1.0, 1.0, 0.0], np.float32))
    record = summarize_chunk(chunk, toy, batch_size=32)
    assert record["actions/explored_fraction"] == 12 / 64


def test_the_explore_pool_travels_from_the_command_line_to_the_env():
    """``--explore-pool NAMES`` reaches HackMatrix's ``explore_pool``; it needs a share to
    narrow, an env that takes it (the toy has no programs), and program names; a checkpoint
    that predates it reads back with no pool (all programs, as it explored)."""
    from purejaxrl.cli.train import build_parser
    from purejaxrl.config import TrainConfig
    args = build_parser().parse_args(["--explore-share", "0.25", "--explore-pool", "reset"])
    assert args.explore_pool == ("reset",)
    config = TrainConfig(explore_share=0.25, env_options=dict(explore_pool=("reset",)))
    env, _ = ppo.make_env(config)
    assert env.env.explore_pool == ("reset",)
    assert TrainConfig.from_dict(config.to_dict()) == config
    older = config.to_dict()
    del older["env_options"]["explore_pool"]
    assert TrainConfig.from_dict(older).env_option("explore_pool") == ()
    with pytest.raises(ConfigError, match=re.escape("--explore-pool needs --explore-share")):
        validate_config(TrainConfig().with_env_options(explore_pool=("reset",)))
    with pytest.raises(ConfigError, match="--explore-pool needs an env that takes it"):
        ppo.make_env(CONFIG.with_env_options(explore_pool=("reset",)))
    with pytest.raises(ConfigError, match="explore_pool must name distinct programs"):
        ppo.make_env(config.with_env_options(explore_pool=("resett",)))


def test_the_acquire_macro_travels_from_the_command_line_to_the_env_and_stays_for_play():
    """``--acquire-macro`` (and ``--acquire-macro-pool``) reach HackMatrix's options (29 actions
    for the network);
    it is part of the agent, so the config a policy plays with keeps it (unlike the training
    curricula); a checkpoint that predates it reads back without it; an env that does not take
    it (the toy) refuses it."""
    from purejaxrl.cli.train import build_parser
    from purejaxrl.config import TrainConfig
    assert build_parser().parse_args(["--acquire-macro"]).acquire_macro is True
    config = TrainConfig().with_env_options(acquire_macro=True)
    env, _ = ppo.make_env(config)
    assert env.env.acquire_macro and env.num_actions == 29
    assert config.for_play().env_option("acquire_macro")
    older = config.to_dict()
    del older["env_options"]["acquire_macro"]
    assert TrainConfig.from_dict(older).env_option("acquire_macro") is False
    with pytest.raises(ConfigError, match="--acquire-macro needs an env that takes it"):
        ppo.make_env(CONFIG.with_env_options(acquire_macro=True))
    pooled = build_parser().parse_args(["--acquire-macro", "--acquire-macro-pool", "reset"])
    assert pooled.acquire_macro_pool == ("reset",)
    env, _ = ppo.make_env(config.with_env_options(acquire_macro_pool=("reset",)))
    assert env.env.acquire_macro_pool == ("reset",)
    with pytest.raises(ConfigError, match="acquire_macro_pool needs acquire_macro"):
        validate_config(TrainConfig().with_env_options(acquire_macro_pool=("reset",)))
    # --acquire-macro-from-stage K holds the macro back before stage K, in play too.
    late = build_parser().parse_args(["--acquire-macro", "--acquire-macro-from-stage", "3"])
    assert late.acquire_macro_from_stage == 3
    late_config = config.with_env_options(acquire_macro_from_stage=3)
    env, _ = ppo.make_env(late_config)
    assert env.env.acquire_macro_from_stage == 3
    assert late_config.for_play().agent_env_options()["acquire_macro_from_stage"] == 3
    predating = late_config.to_dict()
    del predating["env_options"]["acquire_macro_from_stage"]
    assert TrainConfig.from_dict(predating).env_option("acquire_macro_from_stage") == 1
    with pytest.raises(ConfigError, match="acquire_macro_from_stage needs acquire_macro"):
        validate_config(TrainConfig().with_env_options(acquire_macro_from_stage=3))
    with pytest.raises(ConfigError, match="acquire_macro_from_stage must be a stage, 1..8"):
        validate_config(TrainConfig().with_env_options(acquire_macro=True,
                                                        acquire_macro_from_stage=0))
    with pytest.raises(ConfigError, match="--acquire-macro-from-stage needs an env that takes"):
        ppo.make_env(CONFIG.with_env_options(acquire_macro_from_stage=3))


def test_the_judged_network_keeps_the_agents_own_env_options_and_the_baselines_do_not():
    """The acquire macro is part of the agent (an action its network chooses): the network is
    judged on the parity env with the macro (29 actions), the random and heuristic baselines
    on the game's own 28; training options still stay out."""
    from purejaxrl.config import TrainConfig
    from purejaxrl.learning_benchmark import evaluation_env
    config = TrainConfig(env="hackmatrix", env_options=dict(
        acquire_macro=True, acquire_macro_pool=("reset",), undo_pays_once=True))
    env, _ = evaluation_env(config)
    assert env.num_actions == 29 and env.env.acquire_macro_pool == ("reset",)
    assert not env.env.undo_pays_once
    baselines, _ = evaluation_env(config, agent=False)
    assert baselines.num_actions == 28 and not baselines.env.acquire_macro


def test_evaluate_plays_its_baselines_without_the_checkpoints_macro(monkeypatch, capsys):
    """``scripts/evaluate.py`` on an ``--acquire-macro`` checkpoint, as the learning benchmark
    does: the random and heuristic rows play the game's own 28 actions (a random row with the
    macro would walk to programs no random player could), the network's rows its 29. Stopped
    where the first loop would compile: only which env each row plays in is checked."""
    import types

    import purejaxrl.evaluation
    import purejaxrl.policy
    from purejaxrl.cli.evaluate import baseline_config
    from purejaxrl.cli.evaluate import main as evaluate_main
    from purejaxrl.config import TrainConfig
    macro = TrainConfig(env_options=dict(acquire_macro=True, acquire_macro_pool=("reset",),
                                         acquire_macro_from_stage=3, start_programs=1))
    game = baseline_config(macro)
    assert [game.env_option(name) for name in (
        "acquire_macro", "acquire_macro_pool", "acquire_macro_from_stage")] == [False, (), 1]
    assert game.env_option("start_programs") == 1  # only the agent's own options go
    assert baseline_config(TrainConfig()) == TrainConfig()

    class Stop(Exception):
        pass

    played = []

    def comparison(env, env_params, policies, num_envs, max_steps, record_actions=False):
        played.append((env.num_actions, len(policies)))
        raise Stop

    def loaded(path):
        return types.SimpleNamespace(config=macro, params={}, checkpoint={
            "path": path, "update": 0, "env_steps": 0, "config": macro.to_dict()})
    monkeypatch.setattr(purejaxrl.policy, "load_policy", loaded)
    monkeypatch.setattr(purejaxrl.evaluation, "make_policy_comparison", comparison)
    for policies, envs in (("random,heuristic", [(28, 2)]),
                           ("checkpoint-greedy,random", [(29, 1)])):
        played.clear()
        with pytest.raises(Stop):
            evaluate_main(["--checkpoint", "run", "--policies", policies, "--episodes", "2"])
        assert played == envs

