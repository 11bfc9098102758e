"""The group-entropy bonus (``--group-entropy-coef``): an entropy bonus on the policy's marginal
over the env's kinds of action (the ``action_groups`` hook), so a rare kind (HackMatrix's siphon
and programs) keeps probability where it is legal. The marginal's entropy is checked by hand,
the bonus on one update of the toy corridor (whose groups are move / siphon / other), the hook
and the refusals without it."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.contract import check_action_groups
from envs.hackmatrix.core.constants import ACTION_SIPHON, N_ACTIONS, PROGRAM_ACTION_OFFSET
from envs.hackmatrix.env import HackMatrix
from purejaxrl import ppo
from purejaxrl.config import ConfigError, TrainConfig, validate_config
from purejaxrl.networks import masked_group_entropy
from tests.trainer.toy_run import rollout_setup

# Zero advantages and value targets below: without the bonus (and with ent_coef 0) nothing
# pulls the policy's shares of the groups anywhere.
CONFIG = TrainConfig(env="toy", num_envs=8, num_steps=4, max_episode_steps=6, hidden_width=16,
                     hidden_depth=1, num_minibatches=4, update_epochs=2, total_timesteps=64,
                     recurrent_core="none", lr=1e-2, ent_coef=0.0)


def test_group_entropy_is_the_entropy_of_the_group_marginal():
    """Groups {0, 1}, {2}, {3}; action 1 illegal: the marginal is (p0, p2, p3) of the policy
    restricted to the legal actions. A group whose actions are all illegal has probability 0,
    adds nothing, and leaves the gradient finite."""
    groups = jnp.asarray([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], jnp.float32)
    logits = jnp.asarray([1.0, 5.0, 0.0, -1.0])
    mask = jnp.asarray([True, False, True, True])
    e = [math.exp(1.0), 1.0, math.exp(-1.0)]
    shares = [x / sum(e) for x in e]
    expected = -sum(p * math.log(p) for p in shares)
    assert float(masked_group_entropy(logits, mask, groups)) == pytest.approx(expected, rel=1e-5)

    no_siphon = jnp.asarray([True, True, False, True])  # group {2} has no legal action
    e = [math.exp(1.0) + math.exp(5.0), math.exp(-1.0)]
    shares = [x / sum(e) for x in e]
    expected = -sum(p * math.log(p) for p in shares)
    assert float(masked_group_entropy(logits, no_siphon, groups)) == pytest.approx(expected,
                                                                                   rel=1e-5)
    grad = jax.grad(lambda x: masked_group_entropy(x, no_siphon, groups))(logits)
    assert np.all(np.isfinite(np.asarray(grad)))
    assert float(grad[2]) == 0.0  # an illegal action's logit plays no part


@pytest.fixture(scope="module")
def one_update():
    """One update's epochs from the same rollout with the bonus off and on (coefficient 1),
    with zero advantages and value targets, and the toy's group matrix."""
    setup = rollout_setup(CONFIG)
    env, network, runner = setup["env"], setup["network"], setup["runner"]
    _, transitions, _, _, _, _ = setup["collect"](runner)
    groups = env.action_group_matrix()
    zeros = jnp.zeros((CONFIG.num_steps, CONFIG.num_envs))
    optimizer = ppo.make_optimizer(CONFIG)

    def run(config):
        return ppo.update_epochs(runner.params, optimizer.init(runner.params), transitions,
                                 zeros, zeros, jax.random.PRNGKey(1), config, network,
                                 optimizer, None, None, None, groups)

    def group_entropy(params):
        logits, _ = network.apply(params, transitions.obs)
        return float(jnp.mean(masked_group_entropy(logits, transitions.mask, groups)))

    off = jax.jit(lambda: run(CONFIG))()
    on = jax.jit(lambda: run(CONFIG.replace(group_entropy_coef=1.0)))()
    return dict(off=off, on=on, before=group_entropy(runner.params),
                off_after=group_entropy(off[0]), on_after=group_entropy(on[0]))


def test_the_bonus_spreads_the_policy_over_the_groups(one_update):
    """With the bonus on, the entropy of the policy's group marginal on the rollout's states
    rises, by far more than without it; the logged group entropy is that of the minibatches
    (positive both ways: it is logged whether or not it is rewarded)."""
    u = one_update
    assert u["on_after"] - u["before"] > 0.002  # Adam, 8 steps of lr 1e-2: about 0.005
    assert u["on_after"] - u["before"] > 20 * abs(u["off_after"] - u["before"])
    for losses in (u["off"][2], u["on"][2]):
        assert 0.0 < float(losses["group_entropy"]) <= math.log(3) + 1e-6


def test_the_bonus_enters_the_total_loss_with_its_coefficient():
    """total = PPO's loss - coef x group entropy: with zero advantages and targets, the two
    runs' first-minibatch totals differ by the group entropy (same parameters there)."""
    setup = rollout_setup(CONFIG)
    env, network, runner = setup["env"], setup["network"], setup["runner"]
    _, transitions, _, _, _, _ = setup["collect"](runner)
    groups = env.action_group_matrix()
    zeros = jnp.zeros((CONFIG.num_steps, CONFIG.num_envs))
    off, aux_off = ppo.ppo_loss(runner.params, network, transitions, zeros, zeros, CONFIG,
                                None, groups)
    on, aux_on = ppo.ppo_loss(runner.params, network, transitions, zeros, zeros,
                              CONFIG.replace(group_entropy_coef=0.5), None, groups)
    assert float(aux_on["group_entropy"]) == pytest.approx(float(aux_off["group_entropy"]))
    assert float(off - on) == pytest.approx(0.5 * float(aux_on["group_entropy"]), rel=1e-5)


def test_hackmatrix_groups_are_directions_siphon_and_programs():
    """The four directions, the siphon, the 23 programs: a partition of the 28 actions."""
    groups = dict(HackMatrix.action_groups)
    assert groups == {"direction": (0, 1, 2, 3), "siphon": (ACTION_SIPHON,),
                      "program": tuple(range(PROGRAM_ACTION_OFFSET, N_ACTIONS))}
    check_action_groups(HackMatrix.action_groups, N_ACTIONS)


@pytest.mark.parametrize("groups, message", [
    ((("a", (0, 1)), ("b", (2,))), "every action 0..3 exactly once"),  # 3 missing
    ((("a", (0, 1)), ("b", (1, 2, 3))), "every action 0..3 exactly once"),  # 1 twice
    ((("a", (0, 1, 2, 3)), ("b", ())), "empty"),
    ((("a", (0, 1)), ("a", (2, 3))), "names repeat"),
])
def test_groups_that_are_not_a_partition_fail_the_contract(groups, message):
    with pytest.raises(AssertionError, match=message):
        check_action_groups(groups, 4)


def test_refusals_before_any_work():
    """A negative coefficient, or an env without action groups."""
    with pytest.raises(ConfigError, match="--group-entropy-coef must be >= 0"):
        validate_config(TrainConfig(group_entropy_coef=-0.1))
    with pytest.raises(ConfigError, match="--group-entropy-coef needs an env with action groups"):
        ppo.make_env(ppo.config_for_env("CartPole-v1", group_entropy_coef=0.1))
