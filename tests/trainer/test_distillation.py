"""Search distillation inside PPO's update (``--distill-coef``): every minibatch fits an equal
share of the envs' search targets with the PPO loss, weighted by the coefficient; off (0) the
update is PPO's alone; a relative target (``--distill-target shift``) pulls by the search's
shift alone. On the toy corridor with hand-made targets (the toy has no search: the
targets' origin, the search teacher, is tested in test_search.py); the extended suite runs the
real teacher on HackMatrix."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purejaxrl import ppo
from purejaxrl.config import ConfigError, TrainConfig, validate_config
from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.expert_iteration import policy_loss
from purejaxrl.networks import log_prob_of
from tests.trainer.fork_env import Fork, ForkSearchHooks, TableCritic
from tests.trainer.toy_run import jitted_collect, rollout_setup

CONFIG = TrainConfig(env="toy", num_envs=8, num_steps=4, max_episode_steps=6, hidden_width=16,
                     hidden_depth=1, num_minibatches=4, update_epochs=2, total_timesteps=64,
                     recurrent_core="none", lr=1e-2)


def distilled_update(config: TrainConfig) -> dict:
    """One update's epochs from the same rollout with distillation off and on (coefficient 5),
    for either network (a recurrent one fits each target from the memory held before its
    observation): advantages and value targets are zero and the same for both, so the
    difference is the distillation term alone. Each env's target puts all its weight on its
    first legal action that the initial policy likes least."""
    setup = rollout_setup(config)
    env, network, runner = setup["env"], setup["network"], setup["runner"]
    after, transitions, _, _, window_hidden, _ = setup["collect"](runner)
    mask = env.action_mask(after.obs)
    starts = jnp.zeros(config.num_envs, bool)

    def logits_of(params):
        return ppo.apply_step(network, params, after.hidden, after.obs, starts)[1]

    least_liked = jnp.argmin(jnp.where(mask, logits_of(runner.params), jnp.inf), axis=-1)
    distill = dict(obs=after.obs, mask=mask,
                   target=jax.nn.one_hot(least_liked, mask.shape[-1], dtype=jnp.float32))
    if after.hidden is not None:
        distill["hidden"] = after.hidden
    off = zero_advantage_epochs(setup, transitions, window_hidden, config, None)
    on = zero_advantage_epochs(setup, transitions, window_hidden,
                               config.replace(distill_coef=5.0), distill)

    def target_log_prob(params):
        return np.asarray(log_prob_of(logits_of(params), mask, least_liked))
    return dict(off=off, on=on, before=target_log_prob(runner.params),
                off_after=target_log_prob(off[0]), on_after=target_log_prob(on[0]))


def zero_advantage_epochs(setup: dict, transitions, window_hidden, config: TrainConfig,
                          distill):
    """``update_epochs`` from the setup's runner over one rollout with advantages and value
    targets zero, so that what moves the network beyond PPO's own terms is ``distill``."""
    runner, network = setup["runner"], setup["network"]
    zeros = jnp.zeros((config.num_steps, config.num_envs))
    optimizer = ppo.make_optimizer(config)
    return jax.jit(lambda: ppo.update_epochs(
        runner.params, optimizer.init(runner.params), transitions, zeros, zeros,
        jax.random.PRNGKey(1), config, network, optimizer, None, window_hidden, distill))()


@pytest.fixture(scope="module")
def one_update():
    return distilled_update(CONFIG)


def test_distillation_moves_the_policy_onto_the_targets(one_update):
    """With the term on, every env's target action gains probability, far more than the PPO
    loss alone moves it; the reported cross-entropy and KL are positive, every state weighs
    (labelled share 1: no weights), and the total loss includes the weighted term."""
    gain_on = one_update["on_after"] - one_update["before"]
    gain_off = one_update["off_after"] - one_update["before"]
    assert (gain_on > 0).all()
    assert gain_on.mean() > 5 * abs(gain_off).mean()
    losses = one_update["on"][2]
    assert losses["distill_loss"] > 0 and losses["distill_kl"] > 0
    assert float(losses["distill_labelled"]) == 1.0
    assert losses["total_loss"] > losses["policy_loss"] + 0.5 * losses["value_loss"]


def test_distillation_off_reports_zero_and_leaves_ppo_alone(one_update):
    """Off, the distillation metrics are 0 (the logger then leaves them out)."""
    losses = one_update["off"][2]
    assert float(losses["distill_loss"]) == 0.0 and float(losses["distill_kl"]) == 0.0
    assert float(losses["distill_labelled"]) == 0.0


def test_distillation_config_is_checked_before_any_work():
    """A negative coefficient, a minibatch count that does not divide the envs, a
    non-positive budget, raw Q-values without the tree teacher, and an env without search
    hooks are refused with a message naming the option; a recurrent network is accepted (its
    teacher carries the hidden state)."""
    on = CONFIG.replace(distill_coef=1.0)
    validate_config(on)
    validate_config(on.replace(recurrent_core="gru", sequence_length=None, num_minibatches=2))
    with pytest.raises(ConfigError, match="--distill-coef must be >= 0"):
        validate_config(CONFIG.replace(distill_coef=-1.0))
    with pytest.raises(ConfigError, match="must divide the envs per device"):
        validate_config(on.replace(num_minibatches=16))
    with pytest.raises(ConfigError, match="--distill-simulations"):
        validate_config(on.replace(distill_simulations=0))
    with pytest.raises(ConfigError, match="--distill-leaf must be one of"):
        validate_config(on.replace(distill_leaf="exit"))
    with pytest.raises(ConfigError, match="--distill-where must be one of"):
        validate_config(on.replace(distill_where="sometimes"))
    with pytest.raises(ConfigError, match=r"--distill-prior-mix must be in \[0, 1\]"):
        validate_config(on.replace(distill_prior_mix=1.5))
    with pytest.raises(ConfigError, match="--distill-raw-values needs a search teacher"):
        validate_config(CONFIG.replace(distill_raw_values=True))
    with pytest.raises(ConfigError, match="--distill-raw-values needs a search teacher"):
        validate_config(on.replace(distill_raw_values=True, distill_teacher="rollout"))
    with pytest.raises(ConfigError, match="search hooks"):
        ppo.make_env(on)
    # A kept label's shift would be added to a later policy: shift fits fresh labels only.
    with pytest.raises(ConfigError, match="--distill-target shift fits each update's fresh"):
        validate_config(on.replace(distill_target="shift", distill_replay=8))


def test_value_leaf_teaches_the_networks_return_and_game_leaf_the_games():
    """``distill_leaf``: "game" searches the env's objective (the fork's gain: action 0 pays
    1, its leaves 0), so the target prefers action 0; "value" searches the network's return:
    the training reward times the run's reward scale (return variance 4: scale 0.5, action 0
    is worth 0.5) and the critic at the leaves (position 2: 0.8, discounted by the run's
    gamma), so the target prefers action 1."""
    fork = Fork()
    env, critic = TrainerEnv(fork, None), TableCritic([0.0, 0.0, 0.8])
    obs, state = fork.reset(None, None)
    runner = SimpleNamespace(
        obs=jax.tree.map(lambda x: x[None], obs), env_state=state[None], params=None,
        hidden=None, teacher=None, return_stats=ppo.ReturnStatistics(
            count=jnp.float32(1.0), mean=jnp.float32(0.0), var=jnp.float32(4.0)))
    config = TrainConfig(env="toy", num_envs=1, num_minibatches=1, training_reward="gain",
                         distill_coef=1.0, distill_simulations=8, recurrent_core="none")
    preferred = {}
    for leaf in ("game", "value"):
        targets = jax.jit(lambda leaf=leaf: ppo.search_distillation_targets(
            runner, config.replace(distill_leaf=leaf), env, critic, jax.random.PRNGKey(0)))()
        preferred[leaf] = int(np.argmax(np.asarray(targets["target"][0])))
    assert preferred == {"game": 0, "value": 1}


def test_weighted_distillation_fits_only_the_labelled_states():
    """``policy_loss`` with weights: the loss is the weighted mean of the cross-entropies, so a
    state of weight 0 gets no gradient, and a batch that weighs nothing gives 0."""
    from purejaxrl.expert_iteration import policy_loss

    class Table:
        def apply(self, params, obs):
            return params[obs], jnp.zeros(obs.shape)

    params = jnp.zeros((2, 3))
    obs, mask = jnp.array([0, 1]), jnp.ones((2, 3), bool)
    target = jnp.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    loss, _ = policy_loss(Table(), params, obs, target, mask, weight=jnp.array([1.0, 0.0]))
    assert float(loss) == pytest.approx(np.log(3.0))
    grads = jax.grad(lambda p: policy_loss(Table(), p, obs, target, mask,
                                           weight=jnp.array([1.0, 0.0]))[0])(params)
    assert np.abs(np.asarray(grads[0])).sum() > 0 and not np.asarray(grads[1]).any()
    nothing, _ = policy_loss(Table(), params, obs, target, mask, weight=jnp.zeros(2))
    assert float(nothing) == 0.0


def test_the_logged_kl_is_over_the_labels_that_weigh_not_over_the_minibatches():
    """``ppo/distill_kl`` is the weighted mean of the KL over the labels that weigh, whichever
    minibatches they fall in: with one label of eight weighing, three of the four minibatches
    weigh nothing, and counting their 0 would log a quarter of it. With a learning rate of 0
    the policy never moves, so the logged KL equals the KL of that one label."""
    from purejaxrl.expert_iteration import policy_loss
    config = CONFIG.replace(lr=0.0)
    setup = rollout_setup(config)
    env, network, runner = setup["env"], setup["network"], setup["runner"]
    after, transitions, _, _, window_hidden, _ = setup["collect"](runner)
    mask = env.action_mask(after.obs)
    least_liked = jnp.argmin(jnp.where(mask, network.apply(runner.params, after.obs)[0],
                                       jnp.inf), axis=-1)
    weight = jnp.zeros(config.num_envs).at[3].set(1.0)
    distill = dict(obs=after.obs, mask=mask, weight=weight,
                   target=jax.nn.one_hot(least_liked, mask.shape[-1], dtype=jnp.float32))
    zeros = jnp.zeros((config.num_steps, config.num_envs))
    optimizer = ppo.make_optimizer(config)
    _, _, losses = jax.jit(lambda: ppo.update_epochs(
        runner.params, optimizer.init(runner.params), transitions, zeros, zeros,
        jax.random.PRNGKey(1), config.replace(distill_coef=1.0), network, optimizer, None,
        window_hidden, distill))()
    _, fit = policy_loss(network, runner.params, after.obs, distill["target"], mask,
                         weight=weight)
    assert float(fit["kl"]) > 0.1
    assert float(losses["distill_kl"]) == pytest.approx(float(fit["kl"]), rel=1e-5)
    assert float(losses["distill_labelled"]) == pytest.approx(1 / 8)


class VetoCritic(TableCritic):
    """A critic whose policy all but never plays action 1 (logits 0 and -12)."""

    def apply(self, params, obs):
        return jnp.array([0.0, -12.0]), self.values[obs.position]


class ReachHooks(ForkSearchHooks):
    """The fork's hooks, with the start a state where the teacher labels (``reach``)."""

    reach = True

    @classmethod
    def acquisition_in_reach(cls, obs):
        return jnp.bool_(cls.reach) & (obs.position == 0)


def test_distill_where_acquire_labels_and_mixes_only_where_the_hooks_say():
    """``--distill-where acquire --distill-prior-mix 0.5``: at a state the hooks label, the
    teacher's prior gets half uniform, so its value-leaf search (position 2 worth 0.8 against
    action 0's gain of 0.5) can prefer the action the network vetoes by 12 logits, and the
    state weighs 1; at a state they do not label, the prior is the network's (action 0 stays
    preferred) and the state weighs 0."""
    fork = Fork()
    fork.search_hooks = ReachHooks
    env = TrainerEnv(fork, None)
    obs, state = fork.reset(None, None)
    runner = SimpleNamespace(
        obs=jax.tree.map(lambda x: x[None], obs), env_state=state[None], params=None,
        hidden=None, teacher=None, return_stats=ppo.ReturnStatistics(
            count=jnp.float32(1.0), mean=jnp.float32(0.0), var=jnp.float32(4.0)))
    config = TrainConfig(env="toy", num_envs=1, num_minibatches=1, training_reward="gain",
                         distill_coef=1.0, distill_simulations=8, distill_leaf="value",
                         distill_where="acquire", distill_prior_mix=0.5,
                         recurrent_core="none")
    found = {}
    for reach in (True, False):
        ReachHooks.reach = reach
        targets = jax.jit(lambda: ppo.search_distillation_targets(
            runner, config, env, VetoCritic([0.0, 0.0, 0.8]), jax.random.PRNGKey(0)))()
        found[reach] = (int(np.argmax(np.asarray(targets["target"][0]))),
                        float(targets["weight"][0]))
    assert found == {True: (1, 1.0), False: (0, 0.0)}


class CountingCore:
    """A recurrent actor-critic stand-in: its hidden state counts the observations seen since
    the episode's start (zeroed where one starts), its logits are uniform, and position 2 is
    worth 0.8 from the seventh observation on."""

    core_width = 1

    def initial_hidden(self, num_envs):
        return jnp.zeros((num_envs, 1), jnp.float32)

    def apply(self, params, hidden, sequence, episode_start):
        hidden = jnp.where(episode_start[0][:, None], 0.0, hidden) + 1.0
        position = sequence.position[0]
        value = jnp.where((position == 2) & (hidden[:, 0] >= 7), 0.8, 0.0)
        return hidden, jnp.zeros((1,) + position.shape + (2,)), value[None]


def test_a_recurrent_teacher_searches_from_the_players_memory():
    """With a recurrent network the teacher's root starts from the hidden state the env's
    player holds (here 5 observations: the root is the 6th, its children the 7th, where
    position 2 is worth 0.8 against action 0's gain of 0.5), and from zeros where the next
    step starts an episode (position 2 then never pays, so the gain wins). The targets carry
    that memory for the update."""
    fork = Fork()
    env = TrainerEnv(fork, None)
    obs, state = fork.reset(None, None)
    config = TrainConfig(env="toy", num_envs=1, num_minibatches=1, training_reward="gain",
                         distill_coef=1.0, distill_simulations=8, distill_leaf="value",
                         recurrent_core="gru", sequence_length=None)
    stats = ppo.ReturnStatistics(count=jnp.float32(1.0), mean=jnp.float32(0.0),
                                 var=jnp.float32(4.0))
    preferred, memories = {}, {}
    for length in (3, 0):
        runner = SimpleNamespace(
            obs=jax.tree.map(lambda x: x[None], obs), env_state=state[None], params=None,
            hidden=jnp.full((1, 1), 5.0), episode=SimpleNamespace(lengths=jnp.array([length])),
            return_stats=stats, teacher=None)
        targets = jax.jit(lambda runner=runner: ppo.search_distillation_targets(
            runner, config, env, CountingCore(), jax.random.PRNGKey(0)))()
        preferred[length] = int(np.argmax(np.asarray(targets["target"][0])))
        memories[length] = float(targets["hidden"][0, 0])
    assert preferred == {3: 1, 0: 0}
    assert memories == {3: 5.0, 0: 0.0}


def test_a_recurrent_update_fits_the_targets_from_the_stored_memory():
    """Distillation with a GRU: each target is fitted by one step of the core from the memory
    the teacher searched from, so the target action gains probability at that memory, more
    than the PPO loss alone moves it."""
    update = distilled_update(CONFIG.replace(recurrent_core="gru", sequence_length=None,
                                             num_minibatches=2, core_width=8))
    gain_on = update["on_after"] - update["before"]
    gain_off = update["off_after"] - update["before"]
    assert (gain_on > 0).all()
    assert gain_on.mean() > 5 * abs(gain_off).mean()
    assert update["on"][2]["distill_loss"] > 0


def fork_runner(count: int, hidden=None, lengths=None):
    """A runner of ``count`` fork envs at the start, with the episode counters ``ppo``
    reads (``lengths``: the next step starts an episode where 0)."""
    obs, state = Fork().reset(None, None)
    stack = lambda x: jnp.stack([x] * count)  # noqa: E731
    lengths = jnp.full(count, 3) if lengths is None else jnp.asarray(lengths)
    zeros = jnp.zeros(count)
    return ppo.RunnerState(
        params=None, opt_state=None, env_state=stack(state), obs=jax.tree.map(stack, obs),
        env_keys=None, update_key=None,
        episode=ppo.EpisodeAccumulators(returns=zeros, lengths=lengths,
                                        breakdown=jnp.zeros((count, 1)),
                                        discounted_returns=zeros),
        return_stats=ppo.ReturnStatistics(count=jnp.float32(1.0), mean=jnp.float32(0.0),
                                          var=jnp.float32(4.0)),
        update_step=jnp.int32(0), hidden=hidden)


ROLLOUT_TEACHER = TrainConfig(env="toy", num_envs=1, num_minibatches=1,
                              training_reward="gain", distill_coef=1.0,
                              distill_teacher="rollout", distill_rollouts=2,
                              recurrent_core="none")


def test_the_rollout_teacher_labels_only_where_it_overrules_the_network():
    """``--distill-teacher rollout``: the target is the rollout search's move, and a state
    weighs 1 only where that move is not the network's greedy one. The network all but never
    plays action 1 (``VetoCritic``). With the value leaf the search finds action 1 better
    (position 2's 0.8, discounted, against action 0's gain of 0.5 in the critic's units):
    target 1, weight 1. With the game leaf action 0's gain wins, as the network already
    plays: target 0, weight 0 (nothing to teach)."""
    env = TrainerEnv(Fork(), None)
    found = {}
    for leaf in ("value", "game"):
        targets = jax.jit(lambda leaf=leaf: ppo.search_distillation_targets(
            fork_runner(1), ROLLOUT_TEACHER.replace(distill_leaf=leaf), env,
            VetoCritic([0.0, 0.0, 0.8]), jax.random.PRNGKey(0)))()
        target = np.asarray(targets["target"][0])
        assert sorted(target.tolist()) == [0.0, 1.0]  # one-hot
        found[leaf] = (int(np.argmax(target)), float(targets["weight"][0]))
    assert found == {"value": (1, 1.0), "game": (0, 0.0)}


def test_the_rollout_teacher_keeps_the_greedy_move_below_its_minimum_gain():
    """``--distill-min-gain G``: the fork's value-leaf overrule (above) gains about 0.3 in the
    critic's units on draws that never differ, so the paired guard alone passes it. Reported
    as ``gain``; a minimum of 0.01 keeps the overrule, one of 10 keeps the network's greedy
    move (target 0, weight 0, gain 0)."""
    env = TrainerEnv(Fork(), None)
    found = {}
    for min_gain in (0.01, 10.0):
        config = ROLLOUT_TEACHER.replace(distill_leaf="value", distill_min_gain=min_gain)
        targets = jax.jit(lambda config=config: ppo.search_distillation_targets(
            fork_runner(1), config, env, VetoCritic([0.0, 0.0, 0.8]),
            jax.random.PRNGKey(0)))()
        found[min_gain] = (int(np.argmax(np.asarray(targets["target"][0]))),
                           float(targets["weight"][0]), float(targets["gain"][0]))
    assert found[0.01][:2] == (1, 1.0) and 0.1 < found[0.01][2] < 10.0
    assert found[10.0] == (0, 0.0, 0.0)


def test_the_rollout_teacher_labels_the_first_distill_envs_and_carries_the_memory():
    """``--distill-envs 2`` of 3 envs: the targets cover the first two envs only. With a
    recurrent network the teacher searches from the memory the env's player holds (zeros
    where the next step starts an episode), and the targets carry it for the update; its
    uniform logits make action 0 the greedy move, which the value leaf's search overrules."""
    env = TrainerEnv(Fork(), None)
    config = ROLLOUT_TEACHER.replace(num_envs=3, distill_envs=2, distill_leaf="value",
                                     recurrent_core="gru", sequence_length=None)
    runner = fork_runner(3, hidden=jnp.array([[5.0], [5.0], [5.0]]), lengths=[3, 0, 3])
    targets = jax.jit(lambda: ppo.search_distillation_targets(
        runner, config, env, CountingCore(), jax.random.PRNGKey(0)))()
    assert targets["target"].shape == (2, 2) and targets["obs"].position.shape == (2,)
    assert np.asarray(targets["hidden"][:, 0]).tolist() == [5.0, 0.0]
    assert np.asarray(targets["target"]).argmax(axis=-1).tolist() == [1, 1]
    assert np.asarray(targets["weight"]).tolist() == [1.0, 1.0]


def test_rollout_teacher_options_are_checked_before_any_work():
    """An unknown teacher, fewer than 2 rollouts (the guard needs a standard error), a
    --distill-envs outside [1, num_envs] or not a multiple of the minibatch count, and a
    negative minimum gain or one given to the tree teacher are refused with a message naming
    the option."""
    on = CONFIG.replace(distill_coef=1.0, distill_teacher="rollout")
    validate_config(on)
    validate_config(on.replace(distill_envs=4))
    with pytest.raises(ConfigError, match="--distill-teacher must be one of"):
        validate_config(on.replace(distill_teacher="oracle"))
    with pytest.raises(ConfigError, match="--distill-rollouts must be an integer >= 2"):
        validate_config(on.replace(distill_rollouts=1))
    for envs in (0, 9):
        with pytest.raises(ConfigError, match=r"--distill-envs must be in \[1, --num-envs 8\]"):
            validate_config(on.replace(distill_envs=envs))
    with pytest.raises(ConfigError, match="must divide the envs per device the teacher labels"):
        validate_config(on.replace(distill_envs=2))
    validate_config(on.replace(distill_min_gain=0.1))
    with pytest.raises(ConfigError, match="--distill-min-gain must be a finite number >= 0"):
        validate_config(on.replace(distill_min_gain=-0.1))
    with pytest.raises(ConfigError, match="--distill-min-gain applies to --distill-teacher "
                                          "rollout only"):
        validate_config(on.replace(distill_teacher="tree", distill_min_gain=0.1))


class ParamCritic:
    """An actor-critic stand-in whose parameters are its table: uniform logits, value
    ``params[position]``."""

    def apply(self, params, obs):
        return jnp.zeros(obs.action_mask.shape), params[obs.position]


def test_search_values_are_the_improved_policys_value_in_the_critics_units():
    """``--distill-value-coef``: each label carries the search's value of its state, the
    improved policy's mean of the completed root Q-values. On the fork with a critic that
    values nothing, Q(action 0) is its gain in the critic's units (return variance 4: 0.5;
    variance 0.01: 10) and Q(action 1) is 0, so the value is that gain times the target's
    weight on action 0, which the search prefers: above half the gain, at most the gain. It
    weighs at every labelled state; with the coefficient 0 the labels carry no value."""
    env = TrainerEnv(Fork(), None)
    config = TrainConfig(env="toy", num_envs=1, num_minibatches=1, training_reward="gain",
                         distill_value_coef=1.0, distill_simulations=8, distill_leaf="value",
                         recurrent_core="none")

    def labels(var, config=config):
        runner = fork_runner(1).replace(params=jnp.zeros(3), return_stats=ppo.ReturnStatistics(
            count=jnp.float32(1.0), mean=jnp.float32(0.0), var=jnp.float32(var)))
        return jax.jit(lambda: ppo.search_distillation_targets(
            runner, config, env, ParamCritic(), jax.random.PRNGKey(0)))()

    for var, gain in ((4.0, 0.5), (0.01, 10.0)):
        found = labels(var)
        value, on_gain = float(found["value"][0]), float(found["target"][0, 0])
        assert value == pytest.approx(gain * on_gain, rel=1e-5)
        assert 0.5 * gain < value <= gain
        assert float(found["value_weight"][0]) == 1.0
    assert "value" not in labels(4.0, config.replace(distill_value_coef=0.0, distill_coef=1.0))


def test_the_value_term_moves_the_critic_onto_the_search_values():
    """One update's epochs from the same rollout, advantages and value targets zero: with the
    value term on (coefficient 5, targets 1 above the critic's values before the update, half
    the states weighing) the critic rises at the weighing states far more than PPO alone
    moves it, and the reported term is half the squared error at the start (0.5) or less;
    with the policy term off (``distill_coef`` 0) the distillation's policy metrics stay 0.
    ``value_loss`` weighs as ``policy_loss``: a state of weight 0 gets no gradient."""
    from purejaxrl.expert_iteration import value_loss

    setup = rollout_setup(CONFIG)
    env, network, runner = setup["env"], setup["network"], setup["runner"]
    after, transitions, _, _, window_hidden, _ = setup["collect"](runner)
    mask = env.action_mask(after.obs)

    def values_of(params):
        return ppo.apply_step(network, params, None, after.obs,
                              jnp.zeros(CONFIG.num_envs, bool))[2]

    weight = jnp.array([1.0, 0.0] * (CONFIG.num_envs // 2))
    distill = dict(obs=after.obs, mask=mask, target=jax.nn.one_hot(
        jnp.argmax(mask, axis=-1), mask.shape[-1], dtype=jnp.float32),
                   weight=jnp.zeros(CONFIG.num_envs), value=values_of(runner.params) + 1.0,
                   value_weight=weight)
    off = zero_advantage_epochs(setup, transitions, window_hidden, CONFIG, None)
    on = zero_advantage_epochs(setup, transitions, window_hidden,
                               CONFIG.replace(distill_value_coef=5.0), distill)
    before = np.asarray(values_of(runner.params))
    rise_on = (np.asarray(values_of(on[0])) - before)[np.asarray(weight) > 0]
    rise_off = (np.asarray(values_of(off[0])) - before)[np.asarray(weight) > 0]
    assert (rise_on > 0).all() and rise_on.mean() > 5 * abs(rise_off).mean()
    losses = on[2]
    assert 0 < float(losses["distill_value_loss"]) <= 0.5 + 1e-6
    assert float(losses["distill_loss"]) == 0.0 and float(losses["distill_labelled"]) == 0.0
    assert float(off[2]["distill_value_loss"]) == 0.0

    class Table:
        def apply(self, params, obs):
            return jnp.zeros(obs.shape + (2,)), params[obs]
    table, obs = jnp.zeros(2), jnp.array([0, 1])
    grads = jax.grad(lambda p: value_loss(Table(), p, obs, jnp.array([2.0, 3.0]),
                                          weight=jnp.array([1.0, 0.0])))(table)
    assert float(value_loss(Table(), table, obs, jnp.array([2.0, 3.0]),
                            weight=jnp.array([1.0, 0.0]))) == pytest.approx(2.0)
    assert float(grads[0]) == pytest.approx(-2.0) and float(grads[1]) == 0.0


def test_search_value_options_are_checked_before_any_work():
    """``--distill-value-coef`` needs the tree teacher and the value leaf (its values are
    then in the critic's units) and must be >= 0; with it alone (``--distill-coef`` 0) the
    teacher still labels."""
    on = TrainConfig(env="toy", num_envs=8, num_steps=4, num_minibatches=4, total_timesteps=64,
                     recurrent_core="none", distill_value_coef=1.0, distill_leaf="value")
    validate_config(on)
    assert on.distilling and not on.replace(distill_value_coef=0.0).distilling
    with pytest.raises(ConfigError, match="--distill-value-coef needs the tree teacher with "
                                          "--distill-leaf value"):
        validate_config(on.replace(distill_leaf="game"))
    with pytest.raises(ConfigError, match="--distill-value-coef needs the tree teacher"):
        validate_config(on.replace(distill_teacher="rollout"))
    with pytest.raises(ConfigError, match="--distill-value-coef must be >= 0"):
        validate_config(on.replace(distill_value_coef=-1.0))


def test_a_frozen_teacher_searches_with_its_own_weights_and_units():
    """``--distill-frozen-teacher``: the teacher's prior and critic are the frozen network's
    weights and its critic's units its own return statistics, not the fitted network's. The
    fitted table says position 2 is worth nothing, so its own search prefers action 0's gain;
    the frozen table says 0.8, which in the frozen units (return variance 4: a gain of 1 is
    worth 0.5) beats the gain, so the frozen teacher prefers action 1; in units where a gain
    of 1 is worth 10 (variance 0.01) the gain wins again."""
    env = TrainerEnv(Fork(), None)
    config = TrainConfig(env="toy", num_envs=1, num_minibatches=1, training_reward="gain",
                         distill_coef=1.0, distill_simulations=8, distill_leaf="value",
                         recurrent_core="none")
    fitted, frozen = jnp.zeros(3), jnp.array([0.0, 0.0, 0.8])

    def stats(var):
        return ppo.ReturnStatistics(count=jnp.float32(1.0), mean=jnp.float32(0.0),
                                    var=jnp.float32(var))

    def preferred(teacher):
        runner = fork_runner(1).replace(params=fitted, teacher=teacher)
        targets = jax.jit(lambda: ppo.search_distillation_targets(
            runner, config, env, ParamCritic(), jax.random.PRNGKey(0)))()
        return int(np.argmax(np.asarray(targets["target"][0])))

    assert preferred(None) == 0
    assert preferred(ppo.FrozenTeacher(params=frozen, return_stats=stats(4.0))) == 1
    assert preferred(ppo.FrozenTeacher(params=frozen, return_stats=stats(0.01))) == 0


def test_a_frozen_recurrent_teacher_searches_from_its_own_memory():
    """A recurrent frozen teacher's root starts from its own memory of the game (5
    observations: position 2 pays, action 1 preferred; zeros where the next step starts an
    episode: the gain wins), while the update fits the policy's step from the fitted
    network's memory (here 0), which the targets carry."""
    env = TrainerEnv(Fork(), None)
    config = TrainConfig(env="toy", num_envs=1, num_minibatches=1, training_reward="gain",
                         distill_coef=1.0, distill_simulations=8, distill_leaf="value",
                         recurrent_core="gru", sequence_length=None)
    preferred, fitted_memory = {}, {}
    for length in (3, 0):
        runner = fork_runner(1, hidden=jnp.zeros((1, 1)), lengths=[length]).replace(
            teacher=ppo.FrozenTeacher(params=None, return_stats=fork_runner(1).return_stats,
                                      hidden=jnp.full((1, 1), 5.0)))
        targets = jax.jit(lambda runner=runner: ppo.search_distillation_targets(
            runner, config, env, CountingCore(), jax.random.PRNGKey(0)))()
        preferred[length] = int(np.argmax(np.asarray(targets["target"][0])))
        fitted_memory[length] = float(targets["hidden"][0, 0])
    assert preferred == {3: 1, 0: 0}
    assert fitted_memory == {3: 0.0, 0: 0.0}


def fork_rollout() -> ppo.Transition:
    """A hand-made rollout of 3 steps of 3 fork envs at the start; the second env's episode
    starts at the second step."""
    steps, count = 3, 3
    obs, _ = Fork().reset(None, None)
    starts = jnp.array([[False, False, False], [False, True, False], [False, False, False]])
    zeros = jnp.zeros((steps, count))
    return ppo.Transition(
        obs=jax.tree.map(lambda x: jnp.broadcast_to(x, (steps, count) + x.shape), obs),
        mask=jnp.ones((steps, count, 2), bool), action=zeros.astype(jnp.int32),
        log_prob=zeros, value=zeros, reward=zeros, terminated=starts, truncated=starts,
        bootstrap_value=zeros, episode_start=starts)


def test_a_frozen_teachers_memory_follows_the_labelled_envs_games():
    """After a rollout the frozen teacher's memory is its core stepped along each labelled
    env's observations (the first 2 of 3 envs), zeroed where an episode started: 3 steps from
    5 give 8; an episode starting at the second step leaves 2 (zeroed, then 2 steps)."""
    env, transitions = TrainerEnv(Fork(), None), fork_rollout()
    teacher = ppo.FrozenTeacher(params=None, return_stats=None, hidden=jnp.full((2, 1), 5.0))
    memory = jax.jit(lambda: ppo.advance_teacher_memory(teacher, transitions, env,
                                                        CountingCore()))()
    assert np.asarray(memory[:, 0]).tolist() == [8.0, 2.0]


def test_a_frozen_teachers_memory_is_also_read_at_each_envs_unsure_step():
    """``--distill-where unsure``: the teacher searches each env's least sure state from its
    memory before that step's observation (not yet zeroed, as ``FrozenTeacher.hidden``): from
    5, before step 2 of three it holds 7; before step 1 of an env whose episode starts there,
    the 6 of the old episode (the search's root zeroes it where the episode starts). The
    memory after the rollout is the same as without the steps: 8 and 2."""
    env, transitions = TrainerEnv(Fork(), None), fork_rollout()
    teacher = ppo.FrozenTeacher(params=None, return_stats=None, hidden=jnp.full((2, 1), 5.0))
    after, at_steps = jax.jit(lambda: ppo.advance_teacher_memory(
        teacher, transitions, env, CountingCore(), jnp.array([2, 1, 0])))()
    assert np.asarray(after[:, 0]).tolist() == [8.0, 2.0]
    assert np.asarray(at_steps[:, 0]).tolist() == [7.0, 6.0]


@pytest.mark.parametrize("core", ["none", "gru"])
def test_unsure_states_are_each_envs_least_sure_state_of_the_rollout(core):
    """``--distill-where unsure``: the rollout keeps, per env, the state where the policy gave
    its own greedy move the least probability: that probability is the minimum over the
    rollout's steps of the greedy move's probability (recomputed here from the stored
    observations, stepping the core along them), its step is where it was met, and the
    observation, the core's memory before it (not yet zeroed) and the episode's length before
    it (0 exactly at an episode's first step) are that step's. Windows of 2 steps for the GRU: the
    choice carries across windows. Without the option the rollout keeps nothing."""
    config = CONFIG.replace(recurrent_core=core, sequence_length=None if core == "none" else 2,
                            max_episode_steps=3)
    setup = rollout_setup(config)
    env, network, runner = setup["env"], setup["network"], setup["runner"]
    assert setup["collect"](runner)[5] is None
    unsure_config = config.replace(distill_coef=1.0, distill_where="unsure")
    collect = jitted_collect(unsure_config, env, setup["env_params"], network,
                             setup["components"])
    _, transitions, _, _, _, unsure = collect(runner)
    hidden, confidences, memories, lengths = runner.hidden, [], [], []
    length = np.asarray(runner.episode.lengths)
    for t in range(config.num_steps):
        obs = env.expand_observation(jax.tree.map(lambda x, t=t: x[t], transitions.obs))
        memories.append(hidden)
        lengths.append(length)
        done = np.asarray(transitions.terminated[t] | transitions.truncated[t])
        length = np.where(done, 0, length + 1)
        starts = None if hidden is None else transitions.episode_start[t]
        hidden, logits, _ = ppo.apply_step(network, runner.params, hidden, obs, starts)
        probs = jax.nn.softmax(jnp.where(transitions.mask[t], logits, -jnp.inf), axis=-1)
        confidences.append(np.asarray(probs.max(axis=-1)))
    confidences = np.stack(confidences)
    step = np.asarray(unsure.step)
    np.testing.assert_array_equal(step, confidences.argmin(axis=0))
    np.testing.assert_allclose(np.asarray(unsure.confidence), confidences.min(axis=0),
                               rtol=1e-5)
    assert len(set(step.tolist())) > 1  # the envs' least sure steps differ
    envs = np.arange(config.num_envs)
    kept = jax.device_get(env.compact_observation(unsure.obs))
    stored = jax.device_get(transitions.obs)
    for a, b in zip(jax.tree.leaves(kept), jax.tree.leaves(stored)):
        np.testing.assert_array_equal(a, b[step, envs])
    np.testing.assert_array_equal(np.asarray(unsure.lengths), np.stack(lengths)[step, envs])
    assert (np.stack(lengths)[step, envs] > 0).any()
    if core == "gru":
        np.testing.assert_allclose(np.asarray(unsure.hidden),
                                   np.stack([np.asarray(m) for m in memories])[step, envs],
                                   rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(unsure.lengths) == 0,
                                      np.asarray(transitions.episode_start)[step, envs])
    else:
        assert unsure.hidden is None


def test_the_move_target_weighs_only_where_the_search_overrules_the_greedy_move():
    """``--distill-target move``: the target is the search's best move, one-hot, and weighs
    1 only where it is not the fitted network's greedy move (uniform logits: action 0). Where
    position 2 is worth 0.8 the search prefers action 1 and overrules; where it is worth
    nothing the search agrees (action 0) and the state weighs 0. A recurrent network's greedy
    move is read from its own memory, the teacher searching from the frozen one's."""
    env = TrainerEnv(Fork(), None)
    config = TrainConfig(env="toy", num_envs=1, num_minibatches=1, training_reward="gain",
                         distill_coef=1.0, distill_simulations=8, distill_leaf="value",
                         recurrent_core="none", distill_target="move")
    outcome = {}
    for worth in (0.8, 0.0):
        runner = fork_runner(1).replace(params=jnp.array([0.0, 0.0, worth]))
        targets = jax.jit(lambda runner=runner: ppo.search_distillation_targets(
            runner, config, env, ParamCritic(), jax.random.PRNGKey(0)))()
        outcome[worth] = (np.asarray(targets["target"][0]).tolist(),
                          float(targets["weight"][0]))
    assert outcome == {0.8: ([0.0, 1.0], 1.0), 0.0: ([1.0, 0.0], 0.0)}
    recurrent = config.replace(recurrent_core="gru", sequence_length=None,
                               distill_frozen_teacher=True)
    runner = fork_runner(1, hidden=jnp.zeros((1, 1))).replace(
        teacher=ppo.FrozenTeacher(params=None, return_stats=fork_runner(1).return_stats,
                                  hidden=jnp.full((1, 1), 5.0)))
    targets = jax.jit(lambda: ppo.search_distillation_targets(
        runner, recurrent, env, CountingCore(), jax.random.PRNGKey(0)))()
    assert np.asarray(targets["target"][0]).tolist() == [0.0, 1.0]
    assert float(targets["weight"][0]) == 1.0 and float(targets["hidden"][0, 0]) == 0.0


class LeaningParamCritic(ParamCritic):
    """``ParamCritic`` whose policy prefers action 0 by 2 logits."""

    def apply(self, params, obs):
        return jnp.array([0.0, -2.0]), params[obs.position]


def test_the_shift_target_holds_the_searchs_improvement_over_the_policy():
    """``--distill-target shift``: each label keeps, beside the improved policy, its logit
    shift over the fitted network's policy (log target - log policy on the legal actions), so
    that the shift added to the policy it was labelled under gives back the target exactly.
    On the fork with a network that leans 2 logits to action 0 and a critic that values
    position 2 at 0.8, the search moves weight to action 1: a positive shift there."""
    env = TrainerEnv(Fork(), None)
    config = TrainConfig(env="toy", num_envs=1, num_minibatches=1, training_reward="gain",
                         distill_coef=1.0, distill_simulations=8, distill_leaf="value",
                         recurrent_core="none", distill_target="shift",
                         distill_raw_values=True)
    runner = fork_runner(1).replace(params=jnp.array([0.0, 0.0, 0.8]))
    targets = jax.jit(lambda: ppo.search_distillation_targets(
        runner, config, env, LeaningParamCritic(), jax.random.PRNGKey(0)))()
    target, shift = np.asarray(targets["target"][0]), np.asarray(targets["shift"][0])
    log_policy = np.asarray(jax.nn.log_softmax(jnp.array([0.0, -2.0])))
    np.testing.assert_allclose(shift, np.log(target) - log_policy, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(jax.nn.softmax(jnp.array([0.0, -2.0]) + shift)),
                               target, rtol=1e-5, atol=1e-6)
    assert shift[1] - shift[0] > 0.1


def test_a_shift_target_pulls_by_its_shift_alone():
    """The relative target's loss: with a zero shift it has no gradient, whatever the policy
    and the label's improved policy (the label never pulls the policy back to where it was
    labelled), where the absolute target of the same label pulls; a shift towards the action
    the policy likes least raises that action's probability more than the update without the
    term. By hand: logits (0, 0) and shift (ln 3, 0) make the target (3/4, 1/4), a
    cross-entropy of ln 2 against the uniform policy."""
    setup = rollout_setup(CONFIG)
    env, network, runner = setup["env"], setup["network"], setup["runner"]
    after, transitions, _, _, window_hidden, _ = setup["collect"](runner)
    mask = env.action_mask(after.obs)
    logits = ppo.apply_step(network, runner.params, None, after.obs, None)[1]
    least_liked = jnp.argmin(jnp.where(mask, logits, jnp.inf), axis=-1)
    # The absolute target (all on the least liked action) is what a "policy" label would pull
    # towards; under "shift" only the shift counts.
    labels = dict(obs=after.obs, mask=mask,
                  target=jax.nn.one_hot(least_liked, mask.shape[-1], dtype=jnp.float32))
    def largest_gradient(shift):
        grads = jax.grad(lambda params: policy_loss(
            network, params, after.obs, labels["target"], mask, target_shift=shift)[0])(
                runner.params)
        return max(float(jnp.max(jnp.abs(g))) for g in jax.tree.leaves(grads))
    assert largest_gradient(jnp.zeros_like(logits)) < 1e-6  # rounding alone
    assert largest_gradient(None) > 1e-2  # the absolute target's pull
    shifted = CONFIG.replace(distill_coef=5.0, distill_target="shift")
    off = zero_advantage_epochs(setup, transitions, window_hidden, CONFIG, None)
    pulled = zero_advantage_epochs(setup, transitions, window_hidden, shifted, dict(
        labels, shift=3.0 * jax.nn.one_hot(least_liked, mask.shape[-1], dtype=jnp.float32)))

    def least_liked_log_prob(params):
        after_logits = ppo.apply_step(network, params, None, after.obs, None)[1]
        return np.asarray(log_prob_of(after_logits, mask, least_liked))
    assert np.all(least_liked_log_prob(pulled[0]) > least_liked_log_prob(off[0]) + 0.05)

    class Uniform:
        def apply(self, params, obs):
            return jnp.zeros((1, 2)), jnp.zeros(1)
    loss, fit = policy_loss(Uniform(), None, None, jnp.zeros((1, 2)), jnp.ones((1, 2), bool),
                            target_shift=jnp.array([[np.log(3.0), 0.0]]))
    assert float(loss) == pytest.approx(np.log(2.0), rel=1e-6)
    assert float(fit["target_entropy"]) == pytest.approx(
        -(0.75 * np.log(0.75) + 0.25 * np.log(0.25)), rel=1e-6)


def test_raw_values_let_the_teacher_overrule_only_for_a_real_difference():
    """``--distill-raw-values``: the tree teacher's Q-values stay in the critic's units. The
    network prefers action 0 by 2 logits; action 1 is worth gamma x 0.52 = 0.5195 against
    action 0's 0.5. Min-max normalised, that 0.02 weighs like any difference (about 5
    logits) and the move target overrules the network; raw, it weighs about 0.1 logit and
    the state is not labelled. A real difference (worth 1.2: 1.2 against 0.5) overrules in
    both."""
    env = TrainerEnv(Fork(), None)
    config = TrainConfig(env="toy", num_envs=1, num_minibatches=1, training_reward="gain",
                         distill_coef=1.0, distill_simulations=8, distill_leaf="value",
                         recurrent_core="none", distill_target="move")
    outcome = {}
    for worth, raw in ((0.52, False), (0.52, True), (1.2, True)):
        runner = fork_runner(1).replace(params=jnp.array([0.0, 0.0, worth]))
        targets = jax.jit(lambda runner=runner, raw=raw: ppo.search_distillation_targets(
            runner, config.replace(distill_raw_values=raw), env, LeaningParamCritic(),
            jax.random.PRNGKey(0)))()
        outcome[worth, raw] = (np.asarray(targets["target"][0]).tolist(),
                               float(targets["weight"][0]))
    assert outcome == {(0.52, False): ([0.0, 1.0], 1.0), (0.52, True): ([1.0, 0.0], 0.0),
                       (1.2, True): ([0.0, 1.0], 1.0)}


class LogitTable:
    """A feed-forward stand-in whose parameters are its logits for every observation."""

    def apply(self, params, obs):
        return jnp.broadcast_to(params, obs.action_mask.shape), jnp.zeros(
            obs.action_mask.shape[0])


def test_kept_move_targets_are_weighed_by_the_network_that_fits_them():
    """With kept labels (``weigh_overrules`` off) the move target keeps its own weight only,
    and each update weighs it by where its own network's greedy move disagrees: the same
    label (the search's move 1) weighs 1 for a network that prefers action 0 and 0 once the
    network prefers action 1, and a where-label's weight 0 stays 0."""
    env = TrainerEnv(Fork(), None)
    config = TrainConfig(env="toy", num_envs=1, num_minibatches=1, training_reward="gain",
                         distill_coef=1.0, distill_simulations=8, distill_leaf="value",
                         recurrent_core="none", distill_target="move")
    runner = fork_runner(1).replace(params=jnp.array([0.0, 0.0, 0.8]))
    kept = jax.jit(lambda: ppo.search_distillation_targets(
        runner, config, env, ParamCritic(), jax.random.PRNGKey(0), weigh_overrules=False))()
    assert np.asarray(kept["target"][0]).tolist() == [0.0, 1.0] and "weight" not in kept

    def weight(logits, label_weight=None):
        labels = kept if label_weight is None else dict(kept, weight=jnp.array([label_weight]))
        return float(ppo.weigh_overrules(labels, jnp.array(logits), LogitTable())["weight"][0])
    assert weight([1.0, 0.0]) == 1.0 and weight([0.0, 1.0]) == 0.0
    assert weight([1.0, 0.0], label_weight=0.0) == 0.0


def test_a_frozen_teacher_is_checked_before_any_work(tmp_path):
    """--distill-frozen-teacher needs the distillation on, the tree teacher, and a network to
    freeze: a run that does not start from a checkpoint's weights is refused before any work,
    with a message naming the option; --distill-target is policy or move, the tree teacher's
    only."""
    from purejaxrl.train import train
    from tests.trainer.toy_run import options
    frozen = CONFIG.replace(distill_coef=1.0, distill_frozen_teacher=True)
    validate_config(frozen)
    with pytest.raises(ConfigError, match="--distill-frozen-teacher needs a search teacher"):
        validate_config(frozen.replace(distill_coef=0.0))
    with pytest.raises(ConfigError, match="--distill-frozen-teacher applies to "
                                          "--distill-teacher tree only"):
        validate_config(frozen.replace(distill_teacher="rollout"))
    validate_config(frozen.replace(distill_target="move"))
    with pytest.raises(ConfigError, match="--distill-target must be one of"):
        validate_config(frozen.replace(distill_target="value"))
    with pytest.raises(ConfigError, match="--distill-target applies to --distill-teacher tree"):
        validate_config(CONFIG.replace(distill_coef=1.0, distill_teacher="rollout",
                                       distill_target="move"))
    with pytest.raises(ConfigError, match="--distill-frozen-teacher needs --resume CHECKPOINT "
                                          "--weights-only"):
        train(frozen, options(tmp_path, None))
    assert not any(tmp_path.iterdir())


@pytest.mark.slow  # extended suite (pytest -m slow): compiles HackMatrix with the search
def test_hackmatrix_run_distils_the_search_teacher(tmp_path, compile_cache_dir):
    """Two updates on HackMatrix with the real teacher (4 simulations, 1 fair world): the run
    completes and logs a positive distillation cross-entropy and KL, and no masked action."""
    from purejaxrl.train import train
    from tests.trainer.toy_run import options
    config = TrainConfig(num_envs=16, num_steps=8, total_timesteps=256, num_minibatches=4,
                         update_epochs=1, distill_coef=0.5, distill_simulations=4,
                         recurrent_core="none")
    result = train(config, options(tmp_path, compile_cache_dir))
    assert result.updates_done == 2
    for record in result.records:
        assert record["ppo/distill_loss"] > 0 and record["ppo/distill_kl"] > 0
        assert record["actions/masked_sampled"] == 0


@pytest.mark.slow  # extended suite (pytest -m slow): compiles HackMatrix with the search
def test_hackmatrix_run_distils_the_rollout_teacher(tmp_path, compile_cache_dir):
    """Two updates of the GRU default on HackMatrix with the rollout teacher (2 rollouts, the
    critic's leaf) labelling the first 8 of 16 envs: the run completes, the teacher overrules
    the untrained network somewhere and the fit then has a positive cross-entropy, and no
    masked action is sampled."""
    from purejaxrl.train import train
    from tests.trainer.toy_run import options
    config = TrainConfig(num_envs=16, num_steps=8, total_timesteps=256, num_minibatches=4,
                         update_epochs=1, distill_coef=0.5, distill_teacher="rollout",
                         distill_rollouts=2, distill_envs=8, distill_leaf="value")
    result = train(config, options(tmp_path, compile_cache_dir))
    assert result.updates_done == 2
    labelled = [record["ppo/distill_labelled"] for record in result.records]
    assert all(0.0 <= share <= 1.0 for share in labelled) and max(labelled) > 0
    for record in result.records:
        assert (record["ppo/distill_loss"] > 0) == (record["ppo/distill_labelled"] > 0)
        assert record["actions/masked_sampled"] == 0


@pytest.mark.slow  # extended suite (pytest -m slow): compiles HackMatrix with the search
def test_hackmatrix_frozen_teacher_stays_the_starting_network(tmp_path, compile_cache_dir):
    """A GRU run started from a checkpoint's weights with --distill-frozen-teacher (the first
    8 of 16 envs labelled): after two updates the fitted network has moved while the teacher
    is still the checkpoint's network and return statistics, bit for bit, with a memory for
    each labelled env; the run resumes from its own checkpoint with that same teacher. The
    labels are kept (--distill-replay 16: two updates of 8 fill the ring) and come back with
    the checkpoint: the third update overwrites the first update's slots and keeps the
    second's."""
    from purejaxrl.checkpoint import load_checkpoint
    from purejaxrl.train import train
    from tests.trainer.toy_run import assert_trees_equal, options
    source_config = TrainConfig(num_envs=16, num_steps=8, total_timesteps=128,
                                num_minibatches=4, update_epochs=1)
    source = train(source_config, options(tmp_path / "source", compile_cache_dir))
    start = load_checkpoint(source.last_checkpoint)
    config = source_config.replace(total_timesteps=256, distill_coef=0.5,
                                   distill_simulations=4, distill_envs=8,
                                   distill_leaf="value", distill_frozen_teacher=True,
                                   distill_replay=16)
    run = train(config, options(tmp_path / "frozen", compile_cache_dir), checkpoint=start,
                weights_only=True)
    assert run.updates_done == 2
    teacher = jax.device_get(run.runner_state.teacher)
    assert_trees_equal(teacher.params, start["runner_state"].params)
    assert_trees_equal(teacher.return_stats, start["runner_state"].return_stats)
    moved = [not np.array_equal(a, b) for a, b in zip(
        jax.tree.leaves(jax.device_get(run.runner_state.params)),
        jax.tree.leaves(start["runner_state"].params))]
    assert any(moved)
    assert teacher.hidden.shape == (8, config.core_width)
    assert all(record["ppo/distill_loss"] > 0 for record in run.records)
    resumed = train(config.replace(total_timesteps=384),
                    options(tmp_path / "frozen", compile_cache_dir),
                    checkpoint=load_checkpoint(run.last_checkpoint))
    assert resumed.updates_done == 3
    assert_trees_equal(jax.device_get(resumed.runner_state.teacher.params),
                       start["runner_state"].params)
    kept, later = (jax.device_get(state.labels) for state in (run.runner_state,
                                                                resumed.runner_state))
    assert kept.filled.all() and later.filled.all()
    assert kept.labels["hidden"].shape == (16, config.core_width)
    assert_trees_equal(jax.tree.map(lambda x: x[8:], later.labels),
                       jax.tree.map(lambda x: x[8:], kept.labels))
    assert any(not np.array_equal(a[:8], b[:8]) for a, b in zip(
        jax.tree.leaves(later.labels["obs"]), jax.tree.leaves(kept.labels["obs"])))
    # The fit draws on the ring: half of it weighs at the first update, all of it at the
    # second (the policy target weighs 1 a label), 0.75 in the chunk's record of the two;
    # and the fresh labels' KL is logged.
    assert [record["ppo/distill_labelled"] for record in run.records] == [0.75]
    assert all(record["ppo/distill_kl_fresh"] > 0 for record in run.records)


def test_a_frozen_recurrent_teachers_memory_of_some_envs_keeps_its_device_count():
    """The frozen recurrent teacher remembers the first distill_envs / num_devices envs of each
    device: on another device count the same rows would be other envs' games (the global
    shape does not change, so nothing else would notice). Such a resume is refused before any
    work; with every env labelled the memory follows the envs and moves."""
    from purejaxrl.train import check_resume
    base = TrainConfig(num_envs=8, num_steps=4, num_minibatches=4, total_timesteps=64,
                       recurrent_core="gru", core_width=8, hidden_width=16, hidden_depth=1,
                       distill_coef=0.5, distill_frozen_teacher=True, num_devices=4)
    some = base.replace(distill_envs=4)
    with pytest.raises(ConfigError, match="keeps its teacher per device: it resumes only on "
                                          "its 4 devices"):
        check_resume(some.replace(num_devices=1), {"config": some.to_dict(),
                                                   "num_processes": 1}, True, 1)
    check_resume(base.replace(num_devices=1), {"config": base.to_dict(), "num_processes": 1},
                 True, 1)
