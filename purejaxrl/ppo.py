"""Masked PPO, PureJaxRL style, for any env of ``envs.registry`` (HackMatrix, the toy corridor,
gymnax's): the whole algorithm, top to bottom. The env is read through
``env_protocol.TrainerEnv`` (its optional hooks: action mask, reward breakdown, training
rewards, metrics, stages).

1. environment factory            ``make_env``
2. named structs                  ``Transition``, ``EpisodeAccumulators``, ``RunnerState``,
                                  ``UpdateMetrics``
3. initial state                  ``make_optimizer``, ``init_runner_state``
4. rollout                        ``collect_rollout`` (acts from the observation it stores)
5. advantages                     ``normalize_rewards`` (running return std), ``compute_gae``
                                  (terminated / truncated / trace cut)
6. loss and minibatch SGD         ``ppo_loss``, ``update_epochs`` (minibatches of steps, or of
                                  whole BPTT windows with a recurrent core)
7. one update, K updates per jit  ``UpdateChunk`` (lax.scan of K updates under shard_map over
                                  all devices, runner state donated)

Data parallelism: the global env batch is split over a one-axis device mesh (every local
device; with several processes, every device of every process); every device
collects its share of the rollout, gradients and statistics are averaged (``pmean``) over the
axis, so parameters stay identical everywhere. Each env carries its own RNG key, so the
trajectories do not depend on how envs are split over devices.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from flax import struct
import jax
from jax import lax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from envs import registry
from purejaxrl.config import (BOARD_ENCODERS, ConfigError, TrainConfig, check_env_options,
                              env_defaults, given_over_defaults)
from purejaxrl.curriculum import StartArchive, curriculum_step, empty_archive
from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.expert_iteration import policy_loss as distillation_loss
from purejaxrl.expert_iteration import value_loss as search_value_loss
from purejaxrl import label_replay, self_imitation
from purejaxrl.search import (SearchSettings, critic_objective, feedforward_node,
                              make_recurrent_search_teacher, network_node, network_prior)
from purejaxrl.rollout_search import RolloutSettings, make_rollout_search
from purejaxrl.networks import (ActorCritic, apply_step, init_network, is_recurrent,
                                log_prob_of, make_network, masked_entropy, masked_logits,
                                masked_group_entropy, masked_log_probs, sample_masked,
                                step_recurrent)

DEVICE_AXIS = "devices"
CURRICULUM_KEY_TAG = 0x5747  # folds the curriculum's stream out of a seed's key
DISTILL_KEY_TAG = 0xD157  # folds the distillation search's stream out of an update's key
# The rollout teacher leaves the network's move only for a gain this many standard errors
# clear (SPEC §4.5: unguarded rollouts played worse than the network, guarded ones better).
DISTILL_ROLLOUT_MIN_GAIN_Z = 2.0
SIL_KEY_TAG = 0x5117  # folds the self-imitation shuffle out of an epoch's key


# ---------------------------------------------------------------------------- 1. environment

def make_env(config: TrainConfig) -> tuple[TrainerEnv, Any]:
    """(env, env_params) for ``config.env``, the env read through ``TrainerEnv``. A config the
    env cannot train with (an unknown id, a training reward, encoder or curriculum it does not
    offer) is a ``ConfigError`` naming the option, raised before anything is compiled."""
    check_env_options(config)  # an option the env does not take, or of the wrong kind
    try:
        env, params = registry.make(config.env, **config.env_option_values())
    except registry.UnknownEnvError as error:
        raise ConfigError(f"--env: {error}") from None
    except ValueError as error:  # an option value the env refuses
        raise ConfigError(f"--env {config.env}: {error}") from None
    if config.max_episode_steps is not None:
        params = params.replace(max_steps_in_episode=config.max_episode_steps)
    if hasattr(params, "shaping_gamma"):
        # Potential-based shaping must use the discount the agent optimises (decisions R7).
        params = params.replace(shaping_gamma=config.gamma)
    env = TrainerEnv(env, params)
    check_env_config(config, env)
    return env, params


def defaults_for_env(env_id: str) -> dict:
    """The TrainConfig fields whose defaults differ for ``env_id`` (``config.env_defaults``:
    PureJaxRL's configs for gymnax envs); ``ConfigError`` for an unknown id."""
    if env_id in registry.OWN_ENVS:
        return env_defaults(env_id, image_observation=False)
    try:
        env, params = registry.make(env_id)
    except registry.UnknownEnvError as error:
        raise ConfigError(f"--env: {error}") from None
    obs, _ = jax.eval_shape(env.reset, jax.random.PRNGKey(0), params)
    image = isinstance(obs, jax.ShapeDtypeStruct) and obs.ndim == 3
    return env_defaults(env_id, image)


def config_for_env(env_id: str, **fields) -> TrainConfig:
    """A config for ``env_id``: its defaults (``defaults_for_env``), then ``fields`` (env
    options given under ``env_options`` set over the env's own defaults)."""
    defaults = defaults_for_env(env_id)
    env_options = {**defaults.pop("env_options", {}), **dict(fields.pop("env_options", {}))}
    return TrainConfig(env=env_id, env_options=env_options,
                       **given_over_defaults(defaults, fields))


def check_env_config(config: TrainConfig, env: TrainerEnv) -> None:
    """The options of ``config`` that ``env`` must offer."""
    if config.training_reward not in env.training_reward_names:
        raise ConfigError(f"--training-reward {config.training_reward!r}: {config.env} offers "
                          f"{', '.join(env.training_reward_names)}")
    if config.curriculum_share > 0 and env.num_stages is None:
        raise ConfigError(f"--curriculum-share needs an env with stages; {config.env!r} has "
                          "none")
    if config.encoder in BOARD_ENCODERS and not env.has_board_view:
        raise ConfigError(f"--encoder {config.encoder} needs an env with a board view; "
                          f"{config.env!r} has none (use flat"
                          + (" or cnn)" if env.image_observation else ")"))
    if config.distilling and env.search_hooks is None:
        raise ConfigError(f"--distill-coef needs an env with search hooks (hackmatrix); "
                          f"{config.env!r} has none")
    if (config.distilling and config.distill_where == "acquire"
            and not hasattr(env.search_hooks, "acquisition_in_reach")):
        raise ConfigError(f"--distill-where acquire needs an env whose search hooks have "
                          f"acquisition_in_reach (hackmatrix); {config.env!r} has none")
    if config.explore_share > 0 and not env.has_exploration_target:
        raise ConfigError(f"--explore-share needs an env with an exploration_target "
                          f"(hackmatrix, toy); {config.env!r} has none")
    if config.group_entropy_coef > 0 and env.action_groups is None:
        raise ConfigError(f"--group-entropy-coef needs an env with action groups "
                          f"(hackmatrix, toy); {config.env!r} has none")
    if config.encoder == "cnn" and not env.image_observation:
        raise ConfigError(f"--encoder cnn needs image observations [H, W, C]; {config.env!r} "
                          "has none (use flat)")


# ---------------------------------------------------------------------------- 2. structs

@struct.dataclass
class Transition:
    """One env step, time-major in a rollout: ``obs`` is the observation ``action`` was chosen
    from, as the env stores it (``TrainerEnv.expand_observation`` gives it back exactly);
    ``mask`` (its legal actions), ``log_prob`` and ``value`` belong to that same choice."""

    obs: Any
    mask: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    bootstrap_value: jax.Array  # V(info["final_observation"]) where truncated, else 0
    # With a recurrent core: true on the first step of an episode (the hidden state was zeroed
    # before it), so the loss can replay the core over the sequence; None without one.
    episode_start: jax.Array | None = None


@struct.dataclass
class EpisodeAccumulators:
    """Running totals of the episode in progress, per env."""

    returns: jax.Array  # f32[N]
    lengths: jax.Array  # i32[N]
    breakdown: jax.Array  # f32[N, C] reward by component
    discounted_returns: jax.Array  # f32[N]: sum of gamma^k r_{t-k}, for reward normalisation


@struct.dataclass
class ReturnStatistics:
    """Running moments of the discounted return over all envs and steps so far (parallel
    Welford merge); rewards are divided by ``sqrt(var)`` when ``normalize_rewards`` is on."""

    count: jax.Array  # f32
    mean: jax.Array  # f32
    var: jax.Array  # f32

    @classmethod
    def initial(cls) -> "ReturnStatistics":
        # A tiny prior count (as in the usual RunningMeanStd) so the first merge is the batch's.
        return cls(count=jnp.float32(1e-4), mean=jnp.float32(0.0), var=jnp.float32(1.0))


@struct.dataclass
class FrozenTeacher:
    """The distillation teacher of ``--distill-frozen-teacher``: the network the run started
    from, held fixed (never updated), with the return statistics its critic's units come from
    and, for a recurrent core, its own memory in each labelled env's game (the first
    ``distill_envs_per_device`` envs of each device) after the last step, not yet zeroed where
    an episode has just ended (as ``RunnerState.hidden``); None for a feed-forward network."""

    params: Any
    return_stats: ReturnStatistics
    hidden: jax.Array | None = None


@struct.dataclass
class UnsureStates:
    """``--distill-where unsure``: per env, the state within the rollout where the policy gave
    its own greedy move the least probability (the search departs from the network mostly
    there, SPEC §4.5), as the rollout met it: the observation, the env state it was chosen
    in, the core's hidden state before it (as ``RunnerState.hidden``: not yet zeroed at an
    episode's first step), the episode's length before it (0 at a first step) and the
    rollout step (``step``; ``now`` counts the steps taken)."""

    confidence: jax.Array  # f32[N]: the greedy move's probability there
    obs: Any
    env_state: Any
    hidden: jax.Array | None
    lengths: jax.Array  # i32[N]
    step: jax.Array  # i32[N]
    now: jax.Array  # i32

    @classmethod
    def start(cls, runner: "RunnerState") -> "UnsureStates":
        count = runner.episode.lengths.shape[0]
        return cls(confidence=jnp.full(count, jnp.inf, jnp.float32), obs=runner.obs,
                   env_state=runner.env_state, hidden=runner.hidden,
                   lengths=runner.episode.lengths, step=jnp.zeros(count, jnp.int32),
                   now=jnp.int32(0))

    def seen(self, runner: "RunnerState", logits: jax.Array, mask: jax.Array) -> "UnsureStates":
        """These states after the policy chose from ``runner``'s (its ``logits``, ``mask``)."""
        confidence = jnp.exp(jnp.max(masked_log_probs(logits, mask), axis=-1))
        less = confidence < self.confidence
        pick = lambda new, old: jax.tree.map(  # noqa: E731
            lambda a, b: jnp.where(less.reshape(less.shape + (1,) * (a.ndim - 1)), a, b),
            new, old)
        obs, env_state, hidden, lengths, step = pick(
            (runner.obs, runner.env_state, runner.hidden, runner.episode.lengths,
             jnp.full_like(self.step, self.now)),
            (self.obs, self.env_state, self.hidden, self.lengths, self.step))
        return UnsureStates(confidence=jnp.minimum(confidence, self.confidence), obs=obs,
                            env_state=env_state, hidden=hidden, lengths=lengths, step=step,
                            now=self.now + 1)


@struct.dataclass
class RunnerState:
    params: Any
    opt_state: Any
    env_state: Any  # per env (leading axis N)
    obs: Any  # per env: the observation the next action is chosen from
    env_keys: jax.Array  # per env RNG keys (sampling and env steps)
    update_key: jax.Array  # shared RNG key (minibatch shuffles)
    episode: EpisodeAccumulators
    return_stats: ReturnStatistics  # replicated: identical on every device
    update_step: jax.Array  # i32: updates done
    # Start-state curriculum (purejaxrl/curriculum.py), None without one.
    curriculum: StartArchive | None = None
    # Per env: the recurrent core's hidden state after the last step (not yet zeroed where an
    # episode has just ended: the next step does that); None for a feed-forward network.
    hidden: jax.Array | None = None
    # Self-imitation's replay (purejaxrl/self_imitation.py), None without it.
    replay: self_imitation.ReplayWindows | None = None
    # Distillation's frozen teacher (``--distill-frozen-teacher``), None without one.
    teacher: FrozenTeacher | None = None
    # Distillation's kept labels (``--distill-replay``, purejaxrl/label_replay.py), None
    # without them.
    labels: label_replay.LabelReplay | None = None


@struct.dataclass
class UpdateMetrics:
    """What one update reports. Counts and sums are global (summed over devices); losses are
    means over minibatches, epochs and devices. ``active`` is 0 for the padding updates of a
    final partial chunk, which change nothing."""

    active: jax.Array
    episodes: jax.Array  # episodes that finished in this rollout
    return_sum: jax.Array
    length_sum: jax.Array
    breakdown_sum: jax.Array  # f32[C] over finished episodes
    # f32[num_stages + 1]: the stage at the end of finished episodes (f32[0] without stages)
    stage_hist: jax.Array
    truncations: jax.Array
    masked_actions_sampled: jax.Array  # sampled actions the mask forbade (must stay 0)
    # Finished episodes that had started from the curriculum's archive (left out of the
    # episode statistics above: they are parts of games).
    curriculum_episodes: jax.Array
    explored_actions: jax.Array  # actions the rollout took for the policy (explore_share)
    # f32[M]: the env's metrics (env.metrics): outcomes summed over finished episodes, counts
    # over every step
    env_metrics: jax.Array
    total_loss: jax.Array
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    normalized_entropy: jax.Array  # entropy / log(legal actions), over states with a choice
    # The entropy of the policy's marginal over the env's action groups (0 without groups).
    group_entropy: jax.Array
    approx_kl: jax.Array
    clip_fraction: jax.Array
    grad_norm: jax.Array
    # Search distillation (0 when off): the cross-entropy from the search's targets to the
    # policy, and the part of it the policy can still remove (KL).
    distill_loss: jax.Array
    distill_kl: jax.Array
    # The share of the teacher's states that weigh in the fit (1 where it labels every state).
    distill_labelled: jax.Array
    # With kept labels (``--distill-replay``): the KL from this update's fresh labels to the
    # policy before the update (``distill_kl`` is then the fit on the whole ring).
    distill_kl_fresh: jax.Array
    # ``--distill-value-coef`` (0 when off): half the weighted mean squared error of the
    # critic against the search's values at the labelled states.
    distill_value_loss: jax.Array
    # Self-imitation (0 when off): its policy term, and the share of the replay's steps whose
    # return still beats the critic.
    sil_loss: jax.Array
    sil_positive: jax.Array
    explained_variance: jax.Array
    learning_rate: jax.Array
    # Non-zero where the update was undone because a value came out non-finite: the sum of
    # the NONFINITE_* bits of what did (such an update also reports active 0).
    nonfinite: jax.Array

    @classmethod
    def zeros(cls, env: TrainerEnv) -> "UpdateMetrics":
        zero = jnp.float32(0.0)
        fields = {name: zero for name in cls.__dataclass_fields__}
        fields.update(breakdown_sum=jnp.zeros(len(env.reward_components), jnp.float32),
                      stage_hist=jnp.zeros(stage_bins(env), jnp.float32),
                      env_metrics=jnp.zeros(len(env.metrics), jnp.float32))
        return cls(**fields)


def stage_bins(env: TrainerEnv) -> int:
    """Bins of the stage histogram: stages 0..num_stages (none without stages)."""
    return 0 if env.num_stages is None else env.num_stages + 1


def metric_total(metrics: UpdateMetrics, env: TrainerEnv, name: str) -> float:
    """The total of the env metric ``name`` in ``metrics`` (host values, any leading axes);
    0 for an env without that metric."""
    names = [m.name for m in env.metrics]
    if name not in names:
        return 0.0
    return float(np.sum(np.asarray(metrics.env_metrics)[..., names.index(name)]))


NONFINITE_LOSS, NONFINITE_GRADIENT, NONFINITE_PARAMETERS = 1, 2, 4
NONFINITE_NAMES = {NONFINITE_LOSS: "loss", NONFINITE_GRADIENT: "gradient",
                   NONFINITE_PARAMETERS: "parameters"}


def nonfinite_bits(metrics: UpdateMetrics, params, num_seeds: int) -> jax.Array:
    """Per seed (a scalar for one seed), the ``NONFINITE_*`` bits of the loss, the gradient norm
    and the parameters after an update. The values are the same on every device (reduced over
    devices, or replicated), so every device takes the same decision."""
    def per_seed(x):
        return jnp.all(jnp.isfinite(x), axis=tuple(range(num_seeds > 1, jnp.ndim(x))))
    params_finite = jnp.all(jnp.stack([per_seed(x) for x in jax.tree.leaves(params)]), axis=0)
    return (jnp.where(per_seed(metrics.total_loss), 0, NONFINITE_LOSS)
            + jnp.where(per_seed(metrics.grad_norm), 0, NONFINITE_GRADIENT)
            + jnp.where(params_finite, 0, NONFINITE_PARAMETERS)).astype(jnp.float32)


def runner_state_specs(num_seeds: int = 1, curriculum: bool = False,
                       recurrent: bool = False, replay: bool = False,
                       teacher: bool = False, labels: bool = False) -> RunnerState:
    """PartitionSpecs: per-env fields split over the device axis, the rest replicated. With
    ``num_seeds > 1`` every field has a leading seed axis (never split). Each device's
    curriculum archive, self-imitation replay and kept distillation labels are its own
    (split); a recurrent core's hidden state is per env, and so is a frozen teacher's memory
    (of the labelled envs)."""
    split, same = (P(DEVICE_AXIS), P()) if num_seeds == 1 else (P(None, DEVICE_AXIS), P())
    return RunnerState(params=same, opt_state=same, env_state=split, obs=split, env_keys=split,
                       update_key=same, episode=split, return_stats=same, update_step=same,
                       curriculum=split if curriculum else None,
                       hidden=split if recurrent else None,
                       replay=split if replay else None,
                       teacher=FrozenTeacher(params=same, return_stats=same,
                                             hidden=split if recurrent else None)
                       if teacher else None,
                       labels=split if labels else None)


def config_runner_state_specs(config: TrainConfig) -> RunnerState:
    """``runner_state_specs`` for the runner state of ``config``."""
    return runner_state_specs(config.num_seeds, config.curriculum_share > 0,
                              config.recurrent_core != "none", config.sil_coef > 0,
                              config.distill_frozen_teacher, config.distill_replay > 0)


# ---------------------------------------------------------------------------- 3. init

def learning_rate_schedule(config: TrainConfig) -> Callable:
    """Constant, or linear anneal from ``lr`` to ``lr_floor * lr`` (default 0) over the run,
    stepping once per update."""
    steps_per_update = config.num_minibatches * config.update_epochs

    def schedule(count):
        if not config.anneal_lr:
            return jnp.float32(config.lr)
        done = (count // steps_per_update) / config.num_updates
        return config.lr * (1.0 - (1.0 - config.lr_floor) * done)
    return schedule


def make_optimizer(config: TrainConfig) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                       optax.adam(learning_rate=learning_rate_schedule(config), eps=1e-5))


def transition_example(env, obs, recurrent: bool) -> Transition:
    """A ``Transition`` of zeros for one step of the envs of ``obs`` (leading axis N), with the
    rollout's dtypes."""
    count = jax.tree.leaves(obs)[0].shape[0]
    zeros, no = jnp.zeros(count, jnp.float32), jnp.zeros(count, bool)
    return Transition(obs=env.compact_observation(obs), mask=env.action_mask(obs),
                      action=jnp.zeros(count, jnp.int32), log_prob=zeros, value=zeros,
                      reward=zeros, terminated=no, truncated=no, bootstrap_value=zeros,
                      episode_start=no if recurrent else None)


def init_runner_state(config: TrainConfig, env, env_params, network: ActorCritic,
                      optimizer: optax.GradientTransformation, num_components: int,
                      mesh: Mesh | None = None, first_device_only: bool = False) -> RunnerState:
    """The state before the first update, a pure function of ``config.seed`` (jitted).

    Env ``i`` is reset with row ``i`` of one global key split, whatever the layout. With a
    ``mesh`` every device builds only its own rows (``envs_per_device`` of them, at its
    position on the device axis) and the result is a global array sharded like
    ``runner_state_specs``: in a multi-process run no process creates another's envs, and the
    state is the same for any device or process count. ``first_device_only`` (no mesh): the
    first device's part alone, as that device would build it (``global_state_shapes``)."""

    def init_seed(seed, first_env, count):
        net_key, reset_key, env_key, update_key = jax.random.split(jax.random.PRNGKey(seed), 4)
        def rows(key):  # this device's envs of the global env axis
            return lax.dynamic_slice_in_dim(jax.random.split(key, config.num_envs), first_env,
                                            count)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(rows(reset_key), env_params)
        params = init_network(network, net_key, jax.tree.map(lambda x: x[0], obs))
        archive = None
        if config.curriculum_share > 0:
            # Its own stream per device (folded from the first env's row), leaving the keys
            # of a run without a curriculum as they are.
            archive_key = jax.random.fold_in(
                jax.random.fold_in(jax.random.PRNGKey(seed), CURRICULUM_KEY_TAG), first_env)
            archive = empty_archive(env_state, obs, env.num_stages, config.curriculum_slots,
                                    archive_key)
        hidden = network.initial_hidden(count) if is_recurrent(network) else None
        replay = None
        if config.sil_coef > 0:
            # This device's share of the replay (``count`` of the ``num_envs`` envs).
            replay = self_imitation.empty_replay(
                transition_example(env, obs, hidden is not None), hidden,
                config.sil_windows * count // config.num_envs, config.sil_item_length)
        teacher = None
        if config.distill_frozen_teacher:
            # Its weights are the starting checkpoint's (``train``); these hold the shapes.
            labelled = count * config.distill_envs_per_device // config.envs_per_device
            teacher = FrozenTeacher(
                params=params, return_stats=ReturnStatistics.initial(),
                hidden=None if hidden is None else network.initial_hidden(labelled))
        labels = None
        if config.distill_replay > 0:
            # This device's share of the kept labels (``count`` of the ``num_envs`` envs).
            labels = label_replay.empty_replay(env.compact_observation(obs),
                                               env.action_mask(obs), hidden,
                                               config.distill_replay * count // config.num_envs,
                                               with_values=config.distill_value_coef > 0)
        return RunnerState(
            params=params, opt_state=optimizer.init(params), env_state=env_state, obs=obs,
            env_keys=rows(env_key), update_key=update_key,
            episode=EpisodeAccumulators(returns=jnp.zeros(count, jnp.float32),
                                        lengths=jnp.zeros(count, jnp.int32),
                                        breakdown=jnp.zeros((count, num_components),
                                                            jnp.float32),
                                        discounted_returns=jnp.zeros(count, jnp.float32)),
            return_stats=ReturnStatistics.initial(),
            update_step=jnp.int32(0), curriculum=archive, hidden=hidden, replay=replay,
            teacher=teacher, labels=labels)

    def init(first_env, count):
        if config.num_seeds == 1:
            return init_seed(config.seed, first_env, count)
        # Seed s of a multi-seed run starts exactly where a single run of seed s starts.
        return jax.tree.map(lambda *leaves: jnp.stack(leaves),
                            *[init_seed(seed, first_env, count) for seed in config.seeds])

    if mesh is None:
        count = config.envs_per_device if first_device_only else config.num_envs
        return jax.jit(lambda: init(0, count))()
    per_device = config.num_envs // mesh.size

    def local_init():
        return init(lax.axis_index(DEVICE_AXIS) * per_device, per_device)
    return jax.jit(jax.shard_map(local_init, mesh=mesh, in_specs=(),
                                 out_specs=config_runner_state_specs(config),
                                 check_vma=False))()


def global_state_shapes(config: TrainConfig, env, env_params, network: ActorCritic,
                        optimizer: optax.GradientTransformation,
                        num_components: int) -> RunnerState:
    """The shapes and dtypes (``jax.ShapeDtypeStruct``) of the global runner state a run of
    ``config`` holds on its ``num_devices`` devices, computed on any machine: one device's part
    with every split field's device axis ``num_devices`` times as long. A per-device field
    whose size does not follow the envs (the curriculum's archive) is the concatenation of
    every device's own, as the sharded state is."""
    part = jax.eval_shape(lambda: init_runner_state(config, env, env_params, network,
                                                    optimizer, num_components,
                                                    first_device_only=True))

    def widen(spec, subtree):
        if DEVICE_AXIS not in spec:
            return subtree
        axis = tuple(spec).index(DEVICE_AXIS)
        return jax.tree.map(lambda x: jax.ShapeDtypeStruct(
            x.shape[:axis] + (x.shape[axis] * config.num_devices,) + x.shape[axis + 1:],
            x.dtype), subtree)
    return jax.tree.map(widen, config_runner_state_specs(config), part,
                        is_leaf=lambda x: isinstance(x, P))


def make_mesh(num_devices: int) -> Mesh:
    """A one-axis mesh over ``num_devices`` local devices; in a multi-process run, over every
    device of every process (the global batch is split over all of them)."""
    if jax.process_count() > 1:
        devices = jax.devices()
        if num_devices != len(devices):
            raise ConfigError(f"a multi-process run uses every device of every process: "
                              f"--num-devices must be {len(devices)} ({jax.process_count()} "
                              f"processes), got {num_devices}")
        return Mesh(np.array(devices), (DEVICE_AXIS,))
    devices = jax.local_devices()
    if num_devices > len(devices):
        raise ConfigError(f"--num-devices {num_devices} but only {len(devices)} devices are "
                          "available")
    return Mesh(np.array(devices[:num_devices]), (DEVICE_AXIS,))


def place_on_mesh(tree, mesh: Mesh, spec: P):
    """Global arrays (sharded by ``spec``) from host values that every process holds in full;
    each process materialises only the shards of its own devices."""
    sharding = NamedSharding(mesh, spec)

    def leaf(value):
        value = np.asarray(value)
        return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])
    return jax.tree.map(leaf, tree)


def shard_runner_state(runner: RunnerState, mesh: Mesh, num_seeds: int = 1) -> RunnerState:
    """Place a runner state of global host values (e.g. a checkpoint's) on the mesh."""
    return jax.tree.map(lambda spec, subtree: place_on_mesh(subtree, mesh, spec),
                        runner_state_specs(num_seeds, runner.curriculum is not None,
                                           runner.hidden is not None,
                                           runner.replay is not None,
                                           runner.teacher is not None,
                                           runner.labels is not None), runner,
                        is_leaf=lambda x: isinstance(x, P))


def seed_slice(tree, index: int):
    """Seed ``index`` of a multi-seed value (leading seed axis on every leaf)."""
    return jax.tree.map(lambda x: x[index], tree)


# ---------------------------------------------------------------------------- 4. rollout

def episode_starts(runner: RunnerState) -> jax.Array | None:
    """Per env, whether the next step is the first of an episode (the episode's length counter
    is 0 exactly then: at the start of training and after every done); None for a
    feed-forward network, which needs no such flag."""
    return None if runner.hidden is None else runner.episode.lengths == 0


def exploration_share(config: TrainConfig, update_step: jax.Array) -> jax.Array:
    """``explore_share``, or with ``explore_anneal`` that share times the part of the run
    still to come (1 at the first update, 0 after the last)."""
    if not config.explore_anneal:
        return jnp.float32(config.explore_share)
    return config.explore_share * (1.0 - update_step / config.num_updates)


def explore(env, obs, sampled: jax.Array, action_keys: jax.Array, share):
    """(actions, explored): where the env's exploration target is in reach, its action with
    probability ``share`` instead of the policy's ``sampled`` one. The draw comes from a key
    folded from each env's action key, so a run without exploration keeps its key streams."""
    offered, target = env.exploration_target(obs)
    draw = jax.vmap(lambda key: jax.random.uniform(jax.random.fold_in(key, 1)))(action_keys)
    explored = offered & (draw < share)
    return jnp.where(explored, target, sampled), explored


def collect_rollout(runner: RunnerState, config: TrainConfig, env, env_params,
                    network: ActorCritic, reward_components: tuple[str, ...]):
    """``num_steps`` vectorised env steps. Returns the new runner state, the time-major
    ``Transition`` batch, per-step statistics (arrays [T, N, ...]), the discounted return
    of each env after each step (f32[T, N], for reward normalisation) and, with a recurrent
    core, its hidden state at the start of each BPTT window (f32[T / sequence_length, N, C];
    None without a core). The hidden state is zeroed before an episode's first step and
    carried otherwise. Last, with ``distill_where`` "unsure", each env's least sure state of
    the rollout (``UnsureStates``); else None."""

    def step(carry, _):
        runner, unsure = carry
        obs = runner.obs
        mask = env.action_mask(obs)
        episode_start = episode_starts(runner)
        hidden, logits, value = apply_step(network, runner.params, runner.hidden, obs,
                                           episode_start)
        if unsure is not None:
            unsure = unsure.seen(runner, logits, mask)
        keys = jax.vmap(lambda k: jax.random.split(k, 3))(runner.env_keys)
        env_keys, action_keys, step_keys = keys[:, 0], keys[:, 1], keys[:, 2]
        action = jax.vmap(sample_masked)(action_keys, logits, mask)
        explored = jnp.zeros(action.shape, bool)
        if config.explore_share > 0:
            action, explored = explore(env, obs, action, action_keys,
                                       exploration_share(config, runner.update_step))
        # The policy's own log-probability, also of an explored action (config.explore_share).
        log_prob = log_prob_of(logits, mask, action)
        next_obs, env_state, reward, terminated, truncated, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(step_keys, runner.env_state, action, env_params)

        # A truncated episode is bootstrapped from its final observation, seen with the hidden
        # state this step produced (the episode would have gone on with it); the network only
        # runs on steps where some env was truncated (rare), not on every step.
        def final_observation_value():
            go_on = None if hidden is None else jnp.zeros_like(episode_start)
            final_value = apply_step(network, runner.params, hidden, info["final_observation"],
                                     go_on)[2]
            return jnp.where(truncated, final_value, 0.0)
        bootstrap_value = lax.cond(jnp.any(truncated), final_observation_value,
                                   lambda: jnp.zeros_like(value))

        done = terminated | truncated
        archive, from_archive = runner.curriculum, jnp.zeros_like(done)
        if archive is not None:
            env_state, next_obs, archive, from_archive = curriculum_step(
                archive, env_state, next_obs, info, done, env.num_stages,
                config.curriculum_slots, config.curriculum_share)
        # Whole games only: an episode started from the archive is a part of one.
        counted = done & ~from_archive
        if reward_components:
            breakdown = jnp.stack([info["reward_breakdown"][name]
                                   for name in reward_components], -1)
        else:
            breakdown = jnp.zeros(reward.shape + (0,), jnp.float32)
        optimised = env.training_reward(config.training_reward, reward,
                                        info.get("reward_breakdown", {}))
        ep = runner.episode
        ep_return = ep.returns + reward
        ep_length = ep.lengths + 1
        ep_breakdown = ep.breakdown + breakdown
        discounted = ep.discounted_returns * config.gamma + optimised
        done_f = counted.astype(jnp.float32)
        bins = stage_bins(env)
        # Outcomes count at the end of whole episodes only; counts on every step.
        at_end = jnp.asarray([m.at_end for m in env.metrics], bool)
        metric_values = env.metric_values(obs, action, info)
        stats = {
            "episodes": done_f,
            "return_sum": ep_return * done_f,
            "length_sum": ep_length * done_f,
            "breakdown_sum": ep_breakdown * done_f[:, None],
            "stage_hist": (jax.nn.one_hot(jnp.clip(info["stage"], 0, bins - 1), bins)
                           * done_f[:, None]) if bins else jnp.zeros(done.shape + (0,)),
            "truncations": (truncated & ~terminated & counted).astype(jnp.float32),
            "masked_actions_sampled": (~jnp.take_along_axis(
                mask, action[:, None], axis=-1)[:, 0]).astype(jnp.float32),
            "curriculum_episodes": from_archive.astype(jnp.float32),
            "explored_actions": explored.astype(jnp.float32),
            "env_metrics": jnp.where(at_end, metric_values * done_f[:, None], metric_values),
        }
        def keep(x):  # an accumulator restarts where the episode ended
            return jnp.where(done.reshape(done.shape + (1,) * (x.ndim - 1)), 0, x)
        episode = EpisodeAccumulators(returns=keep(ep_return), lengths=keep(ep_length),
                                      breakdown=keep(ep_breakdown),
                                      discounted_returns=keep(discounted))
        transition = Transition(obs=env.compact_observation(obs), mask=mask, action=action,
                                log_prob=log_prob, value=value, reward=optimised,
                                terminated=terminated, truncated=truncated,
                                bootstrap_value=bootstrap_value, episode_start=episode_start)
        # After a done step, next_obs is the reset observation (auto-reset), so the next action
        # is chosen from the new episode's first observation (and the episode's zeroed length
        # marks it as a start, where the next step zeroes the hidden state).
        runner = runner.replace(env_state=env_state, obs=next_obs, env_keys=env_keys,
                                episode=episode, curriculum=archive, hidden=hidden)
        return (runner, unsure), (transition, stats, discounted)

    unsure = (UnsureStates.start(runner)
              if config.distilling and config.distill_where == "unsure" else None)
    windows = config.windows_per_env if runner.hidden is not None else 1
    if windows == 1:
        window_hidden = None if runner.hidden is None else runner.hidden[None]
        (runner, unsure), (transitions, stats, discounted) = lax.scan(
            step, (runner, unsure), None, length=config.num_steps)
        return runner, transitions, stats, discounted, window_hidden, unsure

    def window(carry, _):
        start_hidden = carry[0].hidden
        carry, outputs = lax.scan(step, carry, None, length=config.sequence_length)
        return carry, (outputs, start_hidden)
    (runner, unsure), (outputs, window_hidden) = lax.scan(window, (runner, unsure), None,
                                                          length=windows)
    transitions, stats, discounted = jax.tree.map(
        lambda x: x.reshape((config.num_steps,) + x.shape[2:]), outputs)
    return runner, transitions, stats, discounted, window_hidden, unsure


# ---------------------------------------------------------------------------- 5. advantages

def update_return_statistics(stats: ReturnStatistics, discounted_returns: jax.Array,
                             axis_name: str | None) -> ReturnStatistics:
    """Merge the rollout's discounted returns (every env, every step, every device) into the
    running moments."""
    moments = jnp.stack([jnp.mean(discounted_returns), jnp.mean(jnp.square(discounted_returns))])
    if axis_name is not None:
        moments = lax.pmean(moments, axis_name)
    batch_count = jnp.float32(discounted_returns.size) * (
        1 if axis_name is None else lax.psum(1, axis_name))
    batch_mean, batch_var = moments[0], jnp.maximum(moments[1] - moments[0] ** 2, 0.0)
    total = stats.count + batch_count
    delta = batch_mean - stats.mean
    mean = stats.mean + delta * batch_count / total
    m2 = (stats.var * stats.count + batch_var * batch_count
          + jnp.square(delta) * stats.count * batch_count / total)
    return ReturnStatistics(count=total, mean=mean, var=m2 / total)


def reward_scale(stats: ReturnStatistics) -> jax.Array:
    """1 / std of the discounted return (PureJaxRL's NormalizeVecReward): the return is
    rescaled, never shifted, so the optimal policy is unchanged."""
    return lax.rsqrt(stats.var + 1e-8)


def critic_units(config: TrainConfig, stats: ReturnStatistics):
    """What one unit of training reward is worth in the critic's units: ``reward_scale``
    under ``normalize_rewards``, else 1."""
    return reward_scale(stats) if config.normalize_rewards else 1.0


def compute_gae(rewards, values, terminated, truncated, bootstrap_values, last_value,
                gamma: float, gae_lambda: float):
    """Generalised advantage estimation over time-major arrays [T, ...].

    ``values[t]`` is V(obs the action at t was chosen from); ``last_value`` is V(obs after the
    last step). The value of the next state is: 0 after a terminal step (no bootstrapping);
    ``bootstrap_values[t]`` = V(final observation) after a truncated step (the episode would have
    gone on); else the next stored value. The trace (lambda-return) is cut at every episode end,
    because the next stored step belongs to a new episode.
    """
    def backward(carry, step):
        next_value, next_advantage = carry
        reward, value, term, trunc, boot = step
        next_state_value = jnp.where(term, 0.0, jnp.where(trunc, boot, next_value))
        delta = reward + gamma * next_state_value - value
        continues = 1.0 - (term | trunc).astype(jnp.float32)
        advantage = delta + gamma * gae_lambda * continues * next_advantage
        return (value, advantage), advantage

    _, advantages = lax.scan(
        backward, (last_value, jnp.zeros_like(last_value)),
        (rewards, values, terminated, truncated, bootstrap_values), reverse=True)
    return advantages, advantages + values


# ---------------------------------------------------------------------------- 6. loss and SGD

def normalize_advantages(advantages: jax.Array, axis_name: str | None) -> jax.Array:
    """Normalise with statistics of the *global* minibatch (the union over devices)."""
    mean = jnp.mean(advantages)
    mean_sq = jnp.mean(jnp.square(advantages))
    if axis_name is not None:
        mean, mean_sq = lax.pmean((mean, mean_sq), axis_name)
    std = jnp.sqrt(jnp.maximum(mean_sq - jnp.square(mean), 0.0))
    return (advantages - mean) / (std + 1e-8)


def ppo_loss(params, network: ActorCritic, batch: Transition, advantages, targets,
             config: TrainConfig, initial_hidden=None, group_matrix=None):
    """The clipped PPO loss of a minibatch. A feed-forward minibatch holds steps; a recurrent
    one holds n sequences [L, n, ...] (BPTT windows), whose core is replayed from
    ``initial_hidden`` (f32[n, C], the rollout's hidden state at each window's start) with the
    recorded episode starts. With the env's ``group_matrix`` (f32[A, G], its action groups)
    the entropy of the policy's marginal over the groups is logged, and rewarded with
    ``group_entropy_coef``."""
    obs = network.env.expand_observation(batch.obs)
    if initial_hidden is None:
        logits, value = network.apply(params, obs)
    else:
        _, logits, value = network.apply(params, initial_hidden, obs, batch.episode_start)
    mask = batch.mask
    log_prob = log_prob_of(logits, mask, batch.action)
    log_ratio = log_prob - batch.log_prob
    ratio = jnp.exp(log_ratio)
    clipped_ratio = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
    policy_loss = jnp.mean(jnp.maximum(-advantages * ratio, -advantages * clipped_ratio))

    value_error = jnp.square(value - targets)
    if config.clip_value_loss:
        clipped_value = batch.value + jnp.clip(value - batch.value, -config.clip_eps,
                                               config.clip_eps)
        value_error = jnp.maximum(value_error, jnp.square(clipped_value - targets))
    value_loss = 0.5 * jnp.mean(value_error)

    entropies = masked_entropy(logits, mask)
    entropy = jnp.mean(entropies)
    total = policy_loss + config.vf_coef * value_loss - config.ent_coef * entropy
    group_entropy = jnp.float32(0.0)
    if group_matrix is not None:
        group_entropy = jnp.mean(masked_group_entropy(logits, mask, group_matrix))
        if config.group_entropy_coef > 0:
            total = total - config.group_entropy_coef * group_entropy
    # 1 = uniform over the legal actions, 0 = deterministic; comparable across states whose
    # legal-action counts differ (a forced move has no entropy to lose and is left out).
    legal = jnp.sum(mask, axis=-1)
    has_choice = legal > 1
    normalized = entropies / jnp.log(jnp.where(has_choice, legal, 2).astype(jnp.float32))
    aux = {
        "total_loss": total, "policy_loss": policy_loss, "value_loss": value_loss,
        "entropy": entropy, "group_entropy": group_entropy,
        "normalized_entropy": jnp.sum(jnp.where(has_choice, normalized, 0.0))
        / jnp.maximum(jnp.sum(has_choice), 1),
        # Low-variance KL estimator (Schulman); sampled actions are always legal.
        "approx_kl": jnp.mean((ratio - 1.0) - log_ratio),
        "clip_fraction": jnp.mean((jnp.abs(ratio - 1.0) > config.clip_eps).astype(jnp.float32)),
    }
    return total, aux


def minibatch_rows(key, count: int, config: TrainConfig):
    """A shuffle of ``count`` items (steps or sequences) cut into ``num_minibatches`` rows of
    indices, i32[M, count / M]: minibatch m holds the items of row m."""
    return jax.random.permutation(key, count).reshape((config.num_minibatches, -1))


def step_minibatch(transitions: Transition, advantages, targets, rows, config: TrainConfig):
    """Feed-forward: the steps of one row of ``minibatch_rows`` over the [T, N] steps
    flattened (step t * N + n), gathered from the rollout as they are needed, so the update
    never holds a shuffled copy of the whole rollout (no hidden state: None)."""
    local_batch = config.num_steps * config.envs_per_device
    return jax.tree.map(lambda x: x.reshape((local_batch,) + x.shape[2:])[rows],
                        (transitions, advantages, targets)) + (None,)


def sequence_minibatch(transitions: Transition, advantages, targets, window_hidden, rows,
                       config: TrainConfig):
    """Recurrent: each env's T steps are cut into windows (``window_hidden`` f32[W, N, C], the
    hidden state at each window's start: W = 1 is the whole rollout), sequence w * N + n being
    env n's window w; one row of ``minibatch_rows`` over the W * N sequences gives a group,
    time-major [T / W, n, ...], with the hidden states its sequences start from, so the loss
    replays the core exactly as the rollout ran it. Gathered straight from the [T, N] rollout:
    no shuffled or window-major copy of it is made."""
    windows, envs = window_hidden.shape[:2]
    length = config.num_steps // windows
    window, env = rows // envs, rows % envs
    steps = window[None, :] * length + jnp.arange(length)[:, None]  # [T / W, n]
    sequences = jax.tree.map(lambda x: x[steps, env[None, :]],
                             (transitions, advantages, targets))
    return sequences + (window_hidden[window, env],)


def update_epochs(params, opt_state, transitions: Transition, advantages, targets, key,
                  config: TrainConfig, network: ActorCritic,
                  optimizer: optax.GradientTransformation, axis_name: str | None,
                  window_hidden=None, distill=None, group_matrix=None, replay=None):
    """``update_epochs`` passes of shuffled minibatch SGD over this device's share of the batch;
    gradients are averaged over devices before each optimizer step. With a recurrent core
    (``window_hidden``: the hidden state at each BPTT window's start) minibatches hold whole
    sequences, not single steps. With search distillation (``distill``: per env ``obs``,
    ``target`` and ``mask``) every minibatch also fits an equal share of the targets,
    weighted by ``distill_coef``. With self-imitation (``replay``, purejaxrl/self_imitation.py)
    every minibatch also imitates an equal share of the replay, weighted by ``sil_coef``."""

    def loss(params, batch, adv, tgt, hidden, distilled, imitated):
        total, aux = ppo_loss(params, network, batch, adv, tgt, config, hidden, group_matrix)
        aux = dict(aux, distill_loss=jnp.float32(0.0), distill_kl=jnp.float32(0.0),
                   distill_labelled=jnp.float32(0.0), distill_value_loss=jnp.float32(0.0),
                   sil_loss=jnp.float32(0.0), sil_positive=jnp.float32(0.0))
        if distilled is not None and "value" in distilled:
            value_fit = search_value_loss(network, params, distilled["obs"], distilled["value"],
                                          distilled.get("hidden"), distilled["value_weight"],
                                          axis_name)
            total = total + config.distill_value_coef * value_fit
            aux.update(distill_value_loss=value_fit)
        if distilled is not None:
            cross_entropy, fit = distillation_loss(
                network, params, distilled["obs"], distilled["target"], distilled["mask"],
                distilled.get("hidden"), distilled.get("weight"), axis_name,
                distilled.get("shift"))
            total = total + config.distill_coef * cross_entropy
            weight = distilled.get("weight")
            aux.update(distill_loss=cross_entropy, distill_kl=fit["kl"],
                       distill_labelled=(jnp.float32(1.0) if weight is None
                                         else jnp.mean(weight)))
        if imitated is not None:
            sil_total, sil = self_imitation.self_imitation_loss(network, params, imitated)
            total = total + config.sil_coef * sil_total
            aux.update(sil)
        return total, dict(aux, total_loss=total)

    def minibatch_step(carry, minibatch):
        params, opt_state = carry
        rows, distilled, imitated = minibatch
        if window_hidden is None:
            batch, adv, tgt, hidden = step_minibatch(transitions, advantages, targets, rows,
                                                     config)
        else:
            batch, adv, tgt, hidden = sequence_minibatch(transitions, advantages, targets,
                                                         window_hidden, rows, config)
        if config.normalize_advantages:
            adv = normalize_advantages(adv, axis_name)
        grads, aux = jax.grad(loss, has_aux=True)(params, batch, adv, tgt, hidden, distilled,
                                                  imitated)
        if axis_name is not None:
            grads, aux = lax.pmean((grads, aux), axis_name)
        aux["grad_norm"] = optax.tree.norm(grads)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), aux

    def epoch(carry, epoch_key):
        items = (config.num_steps * config.envs_per_device if window_hidden is None
                 else window_hidden.shape[0] * window_hidden.shape[1])
        rows = minibatch_rows(epoch_key, items, config)
        distilled = None
        if distill is not None:
            order = jax.random.permutation(jax.random.fold_in(epoch_key, 1),
                                           distill["target"].shape[0])
            distilled = jax.tree.map(
                lambda x: x[order].reshape((config.num_minibatches, -1) + x.shape[1:]), distill)
        imitated = None
        if replay is not None:
            imitated = self_imitation.minibatch_shares(
                replay, jax.random.fold_in(epoch_key, SIL_KEY_TAG), config.num_minibatches)
        return lax.scan(minibatch_step, carry, (rows, distilled, imitated))

    (params, opt_state), aux = lax.scan(epoch, (params, opt_state),
                                        jax.random.split(key, config.update_epochs))
    means = jax.tree.map(jnp.mean, aux)
    if distill is not None:
        # Each minibatch's KL is the weighted mean over its labels; one whose labels all weigh
        # nothing (a label ring still filling, a move target that overrules nowhere in it)
        # says 0, which a plain mean would count: weigh the minibatches by their labelled share.
        labelled = means["distill_labelled"]
        means["distill_kl"] = jnp.where(
            labelled > 0, jnp.mean(aux["distill_kl"] * aux["distill_labelled"])
            / jnp.maximum(labelled, 1e-12), 0.0)
    return params, opt_state, means


def teacher_hooks(runner: RunnerState, config: TrainConfig, env: TrainerEnv,
                  network: ActorCritic) -> tuple[dict, float]:
    """The distillation teacher's search hooks (fair worlds) and discount: the env's
    objective (``distill_leaf`` "game"), or the network's (``"value"``: its training reward
    in the critic's units, its gamma, the critic at the leaves)."""
    hooks = env.search_hooks
    objective, gamma = {}, hooks.DEFAULT_GAMMA
    if config.distill_leaf == "value":  # the network's objective replaces the game's
        params, return_stats = teacher_network(runner)
        objective = critic_objective(env, network, params, config.training_reward,
                                     critic_units(config, return_stats))
        gamma = config.gamma
    return {**hooks.make_hooks(env.env, fair=True, gamma=gamma), **objective}, gamma


def teacher_network(runner: RunnerState) -> tuple[Any, ReturnStatistics]:
    """The teacher's weights and return statistics: the frozen teacher's
    (``--distill-frozen-teacher``), else those of the network being fitted."""
    if runner.teacher is not None:
        return runner.teacher.params, runner.teacher.return_stats
    return runner.params, runner.return_stats


def advance_teacher_memory(teacher: FrozenTeacher, transitions: Transition, env: TrainerEnv,
                           network: ActorCritic, at_steps: jax.Array | None = None):
    """A recurrent frozen teacher's memory after a rollout: its core stepped along each
    labelled env's observations of the rollout from its memory before it, zeroed where an
    episode started, as the rollout steps the fitted network's core (``collect_rollout``).
    With ``at_steps`` (i32[N], a rollout step per env: ``UnsureStates.step``) also its memory
    before that step's observation (not yet zeroed, as ``FrozenTeacher.hidden``): (after,
    at those steps)."""
    labelled = teacher.hidden.shape[0]

    def step(carry, inputs):
        hidden, kept = carry
        transition, index = inputs
        if kept is not None:
            kept = jnp.where((at_steps[:labelled] == index)[:, None], hidden, kept)
        obs = env.expand_observation(jax.tree.map(lambda x: x[:labelled], transition.obs))
        hidden, _, _ = apply_step(network, teacher.params, hidden, obs,
                                  transition.episode_start[:labelled])
        return (hidden, kept), None
    start = (teacher.hidden, None if at_steps is None else teacher.hidden)
    steps = None if at_steps is None else jnp.arange(transitions.action.shape[0])
    (hidden, kept), _ = lax.scan(step, start, (transitions, steps))
    return hidden if at_steps is None else (hidden, kept)


def player_memory(runner: RunnerState, network: ActorCritic) -> jax.Array:
    """Per env, the recurrent core's memory before the next observation: the runner's hidden
    state, zeros where the next step starts an episode."""
    count = runner.hidden.shape[0]
    return jnp.where(episode_starts(runner)[:, None], network.initial_hidden(count),
                     runner.hidden)


def search_distillation_targets(runner: RunnerState, config: TrainConfig, env: TrainerEnv,
                                network: ActorCritic, key, weigh_overrules: bool = True) -> dict:
    """Per env, at the state the next rollout starts from: the observation, its mask and the
    search teacher's target (``search.make_search_teacher``: Gumbel MuZero's improved policy
    of a fair search with the current network as prior, f32[N, A]; with a frozen teacher,
    the network the run started from, from its own memory). The env's search hooks
    supply the model and the re-drawn worlds; the objective and the leaf values are the
    env's (``distill_leaf`` "game") or the teacher network's (``"value"``:
    ``critic_objective``). With ``weigh_overrules`` off, the move target (``distill_target``
    "move") is not yet weighed by where it overrules (``weigh_overrules``): kept labels are
    weighed when they are fitted, by the network of that update."""
    if config.distill_envs is not None:  # the first envs of this device alone are labelled
        first = config.distill_envs_per_device
        runner = runner.replace(
            obs=jax.tree.map(lambda x: x[:first], runner.obs),
            env_state=jax.tree.map(lambda x: x[:first], runner.env_state),
            hidden=None if runner.hidden is None else runner.hidden[:first],
            episode=runner.episode.replace(lengths=runner.episode.lengths[:first]))
    if config.distill_teacher == "rollout":
        return rollout_distillation_targets(runner, config, env, network, key)
    hooks = env.search_hooks
    search_hooks, gamma = teacher_hooks(runner, config, env, network)
    settings = SearchSettings(num_simulations=config.distill_simulations,
                              num_worlds=config.distill_worlds, gamma=gamma,
                              rescale_values=not config.distill_raw_values)
    count = jax.tree.leaves(runner.obs)[0].shape[0]
    keys = jax.random.split(key, count)
    mask = env.action_mask(runner.obs)
    labelled = hooks.acquisition_in_reach if config.distill_where == "acquire" else None
    mix = dict(uniform_share=config.distill_prior_mix, group_matrix=env.action_group_matrix(),
               mix_where=labelled)
    # Only the labelled states weigh in the fit (every state where the teacher labels all).
    weight = ({} if labelled is None
              else dict(weight=jax.vmap(labelled)(runner.obs).astype(jnp.float32)))
    params, _ = teacher_network(runner)
    if runner.hidden is None:
        leaf_value = search_hooks.pop("leaf_value")
        teacher = make_recurrent_search_teacher(
            settings=settings, node_fn=feedforward_node(network_prior(network, params, **mix),
                                                        leaf_value), **search_hooks)
        teaching = jax.vmap(teacher, in_axes=(0, 0, 0, None))(keys, runner.obs,
                                                              runner.env_state, ())
        targets = dict(obs=runner.obs, target=teaching.target, mask=mask, **weight)
        return overruling_targets(with_search_values(targets, teaching, config), runner,
                                  config, network, weigh_overrules)
    # A recurrent network: every node of the tree is evaluated from its parent's hidden state
    # (``network_node``), the root from the memory the env's player holds before this
    # observation (zeros at an episode's first step); the update fits the policy's step from
    # that same memory. A frozen teacher searches from its own memory of the game, and the
    # update fits the policy's step from the fitted network's.
    leaf_value = search_hooks.pop("leaf_value")
    node = network_node(network, params, **mix,
                        leaf_value=None if config.distill_leaf == "value" else leaf_value)
    teacher = make_recurrent_search_teacher(settings=settings, node_fn=node, **search_hooks)
    memory = player_memory(runner, network)
    teacher_memory = memory
    if runner.teacher is not None:
        teacher_memory = jnp.where(episode_starts(runner)[:, None],
                                   network.initial_hidden(count), runner.teacher.hidden)
    teaching = jax.vmap(teacher)(keys, runner.obs, runner.env_state, teacher_memory)
    targets = dict(obs=runner.obs, target=teaching.target, mask=mask, hidden=memory, **weight)
    return overruling_targets(with_search_values(targets, teaching, config), runner, config,
                              network, weigh_overrules)


def with_search_values(targets: dict, teaching, config: TrainConfig) -> dict:
    """``--distill-value-coef``: the labels also carry the search's value of each state
    (``value``, in the critic's units) and its weight in the critic's fit (``value_weight``:
    every labelled state, times any ``distill_where`` label; not the move target's overrule
    weight, which says where the policy should move, not where the value is known)."""
    if config.distill_value_coef <= 0:
        return targets
    count = teaching.value.shape[0]
    return dict(targets, value=lax.stop_gradient(teaching.value),
                value_weight=targets.get("weight", jnp.ones(count, jnp.float32)))


def overruling_targets(targets: dict, runner: RunnerState, config: TrainConfig,
                       network: ActorCritic, weigh: bool = True) -> dict:
    """The tree teacher's targets in the form ``distill_target`` asks: "policy", its improved
    policy as it is; "move", its best move (the improved policy's argmax) one-hot, weighing
    only where it is not the fitted network's greedy move (times any label weight;
    ``weigh_overrules``, left to the caller when ``weigh`` is off), so that the fit moves the
    policy where the search overrules it and leaves its entropy alone where the two agree
    (the rollout teacher's form, SPEC §4.5); "shift", the improved policy with its logit
    shift over the fitted network's policy (``shift``: log target - log policy on the legal
    actions, 0 elsewhere), which the fit adds to the policy of the moment
    (``expert_iteration.policy_loss``'s ``target_shift``)."""
    target = lax.stop_gradient(targets["target"])
    if config.distill_target == "policy":
        return dict(targets, target=target)
    if config.distill_target == "shift":
        mask = targets["mask"]
        log_policy = jax.nn.log_softmax(labelled_logits(targets, runner.params, network))
        shift = jnp.where(mask, jnp.log(jnp.maximum(target, 1e-30)) - log_policy, 0.0)
        return dict(targets, target=target, shift=lax.stop_gradient(shift))
    move = jnp.argmax(target, axis=-1)
    targets = dict(targets, target=jax.nn.one_hot(move, target.shape[-1], dtype=jnp.float32))
    return weigh_overrules(targets, runner.params, network) if weigh else targets


def weigh_overrules(targets: dict, params, network: ActorCritic) -> dict:
    """Move targets (one-hot) weighing only where the move is not the greedy move of the
    network ``params`` (read from each label's memory, for a recurrent one), times their own
    weight."""
    greedy = jnp.argmax(labelled_logits(targets, params, network), axis=-1)
    overrules = (jnp.argmax(targets["target"], axis=-1) != greedy).astype(jnp.float32)
    return dict(targets, weight=overrules * targets.get("weight", 1.0))


def labelled_logits(targets: dict, params, network: ActorCritic) -> jax.Array:
    """The masked logits of the network ``params`` at each label's observation (a recurrent
    one stepped once from the label's memory)."""
    count, hidden = targets["target"].shape[0], targets.get("hidden")
    _, logits, _ = apply_step(network, params, hidden, targets["obs"],
                              None if hidden is None else jnp.zeros(count, jnp.bool_))
    return masked_logits(logits, targets["mask"])


def keep_labels(labels: label_replay.LabelReplay, fresh: dict, runner: RunnerState,
                config: TrainConfig, env: TrainerEnv, network: ActorCritic, axis_name):
    """``--distill-replay``: (the ring with this update's ``fresh`` labels written in, the
    whole ring as the fit's labels, the KL from the fresh labels to the policy before the
    update). The move target weighs where this update's network disagrees, on the ring and
    the fresh labels alike; the fresh labels' KL says how well the network predicts labels it
    has not yet fitted (the fit on the ring, ``distill_kl``, mostly says it memorised them)."""
    labels = label_replay.store(labels, dict(fresh, obs=env.compact_observation(fresh["obs"])),
                                runner.update_step)
    fitted = label_replay.fitted_labels(labels)
    fitted = dict(fitted, obs=env.expand_observation(fitted["obs"]))
    if config.distill_target == "move":
        fresh = weigh_overrules(fresh, runner.params, network)
        fitted = weigh_overrules(fitted, runner.params, network)
    _, fit = distillation_loss(network, runner.params, fresh["obs"], fresh["target"],
                               fresh["mask"], fresh.get("hidden"), fresh.get("weight"),
                               axis_name)
    fresh_kl = fit["kl"] if axis_name is None else lax.pmean(fit["kl"], axis_name)
    return labels, fitted, fresh_kl


def rollout_distillation_targets(runner: RunnerState, config: TrainConfig, env: TrainerEnv,
                                 network: ActorCritic, key) -> dict:
    """``search_distillation_targets`` of the rollout teacher (``rollout_search``: the
    network ranks the candidates, plays the rollouts and, with the value leaf, ends them; fair
    worlds; the paired-gain guard at ``DISTILL_ROLLOUT_MIN_GAIN_Z`` and the minimum gain
    ``distill_min_gain``). The target is the teacher's move (one-hot); a state weighs 1 where
    that move is not the network's greedy one, else 0 (times the hooks' label with
    ``distill_where`` acquire); ``gain`` is that move's mean gain over the greedy one."""
    hooks = env.search_hooks
    search_hooks, gamma = teacher_hooks(runner, config, env, network)
    leaf_value = search_hooks.pop("leaf_value")
    settings = RolloutSettings(num_rollouts=config.distill_rollouts, gamma=gamma,
                               min_gain_z=DISTILL_ROLLOUT_MIN_GAIN_Z,
                               min_gain=config.distill_min_gain)
    count = jax.tree.leaves(runner.obs)[0].shape[0]
    mask = env.action_mask(runner.obs)
    if runner.hidden is None:
        node = feedforward_node(network_prior(network, runner.params), leaf_value)
        memory = jnp.zeros((count, 0))  # a feed-forward network holds nothing
        logits, _ = network.apply(runner.params, runner.obs)
    else:
        node = network_node(network, runner.params,
                            leaf_value=None if config.distill_leaf == "value" else leaf_value)
        memory = player_memory(runner, network)
        _, logits, _ = step_recurrent(network, runner.params, memory, runner.obs,
                                      jnp.zeros(count, jnp.bool_))
    search = make_rollout_search(settings=settings, node_fn=node, **search_hooks)
    action, scores, _ = jax.vmap(search)(jax.random.split(key, count), runner.obs,
                                         runner.env_state, memory)
    greedy = jnp.argmax(masked_logits(logits, mask), axis=-1)
    weight = (action != greedy).astype(jnp.float32)
    # The teacher's mean gain over the greedy move (0 where they agree); the fit ignores it.
    take = lambda a: jnp.take_along_axis(scores, a[:, None], axis=-1)[:, 0]  # noqa: E731
    gain = jnp.where(weight > 0, take(action) - take(greedy), 0.0)
    if config.distill_where == "acquire":
        weight = weight * jax.vmap(hooks.acquisition_in_reach)(runner.obs).astype(jnp.float32)
    target = jax.nn.one_hot(action, mask.shape[-1], dtype=jnp.float32)
    hidden = {} if runner.hidden is None else dict(hidden=memory)
    return dict(obs=runner.obs, target=target, mask=mask, weight=weight, gain=gain, **hidden)


def explained_variance(values, targets, axis_name: str | None):
    """1 - Var(targets - values) / Var(targets) over the global batch."""
    moments = jnp.stack([jnp.mean(targets), jnp.mean(jnp.square(targets)),
                         jnp.mean(targets - values), jnp.mean(jnp.square(targets - values))])
    if axis_name is not None:
        moments = lax.pmean(moments, axis_name)
    var_targets = moments[1] - moments[0] ** 2
    var_residual = moments[3] - moments[2] ** 2
    return jnp.where(var_targets > 0, 1.0 - var_residual / jnp.maximum(var_targets, 1e-12),
                     jnp.nan)


# ---------------------------------------------------------------------------- 7. update chunk

def ppo_update(runner: RunnerState, config: TrainConfig, env, env_params, network: ActorCritic,
               optimizer: optax.GradientTransformation, reward_components: tuple[str, ...],
               axis_name: str | None):
    """One PPO update on this device's envs: rollout, GAE, epochs of minibatch SGD."""
    learning_rate = learning_rate_schedule(config)(
        runner.update_step * config.num_minibatches * config.update_epochs)
    runner, transitions, stats, discounted, window_hidden, unsure = collect_rollout(
        runner, config, env, env_params, network, reward_components)
    _, _, last_value = apply_step(network, runner.params, runner.hidden, runner.obs,
                                  episode_starts(runner))
    rewards = transitions.reward
    if config.normalize_rewards:
        # Values are learned in the scaled units; the logged returns stay raw.
        runner = runner.replace(return_stats=update_return_statistics(
            runner.return_stats, discounted, axis_name))
        rewards = rewards * reward_scale(runner.return_stats)
    advantages, targets = compute_gae(
        rewards, transitions.value, transitions.terminated, transitions.truncated,
        transitions.bootstrap_value, last_value, config.gamma, config.gae_lambda)

    update_key, shuffle_key = jax.random.split(runner.update_key)
    if axis_name is not None:
        # Each device shuffles its own share differently.
        shuffle_key = jax.random.fold_in(shuffle_key, lax.axis_index(axis_name))
    distill = None
    labelled_runner = runner  # the states the teacher labels: after the rollout, or unsure ones
    if runner.teacher is not None and runner.teacher.hidden is not None:
        if unsure is None:
            runner = labelled_runner = runner.replace(teacher=runner.teacher.replace(
                hidden=advance_teacher_memory(runner.teacher, transitions, env, network)))
        else:  # the teacher searches the unsure states from its memory there
            after, at_unsure = advance_teacher_memory(runner.teacher, transitions, env,
                                                      network, unsure.step)
            runner = runner.replace(teacher=runner.teacher.replace(hidden=after))
            labelled_runner = runner.replace(teacher=runner.teacher.replace(hidden=at_unsure))
    if unsure is not None:
        labelled_runner = labelled_runner.replace(
            obs=unsure.obs, env_state=unsure.env_state, hidden=unsure.hidden,
            episode=runner.episode.replace(lengths=unsure.lengths))
    labels, fresh_kl = runner.labels, jnp.float32(0.0)
    if config.distilling:
        distill = search_distillation_targets(
            labelled_runner, config, env, network,
            jax.random.fold_in(shuffle_key, DISTILL_KEY_TAG), weigh_overrules=labels is None)
        if labels is not None:  # this update's labels join the kept ones, all fitted
            labels, distill, fresh_kl = keep_labels(labels, distill, runner, config, env,
                                                    network, axis_name)
    replay = runner.replay
    if replay is not None:
        replay = self_imitation.store(replay, transitions, targets, window_hidden,
                                      runner.update_step,
                                      config.sil_windows_per_update // config.num_devices)
    params, opt_state, losses = update_epochs(
        runner.params, runner.opt_state, transitions, advantages, targets, shuffle_key, config,
        network, optimizer, axis_name, window_hidden, distill, env.action_group_matrix(),
        replay)

    sums = jax.tree.map(lambda x: jnp.sum(x, axis=(0, 1)), stats)
    if axis_name is not None:
        sums = lax.psum(sums, axis_name)
    metrics = UpdateMetrics(
        active=jnp.float32(1.0), **sums, **losses, distill_kl_fresh=fresh_kl,
        explained_variance=explained_variance(transitions.value, targets, axis_name),
        learning_rate=jnp.asarray(learning_rate, jnp.float32), nonfinite=jnp.float32(0.0))
    runner = runner.replace(params=params, opt_state=opt_state, update_key=update_key,
                            update_step=runner.update_step + 1, replay=replay, labels=labels)
    return runner, metrics


class UpdateChunk:
    """``updates_per_chunk`` PPO updates as one jitted ``lax.scan``, over all devices of
    ``mesh``. Compiled once (ahead of time, by ``compile``); a final partial chunk runs the same
    executable with fewer active updates (``num_active``), the rest are skipped by ``lax.cond``.
    The runner state argument is donated.

    ``on_update(update_count, total_loss)`` (live progress), if given, is called on the host at
    the end of every update with the count of updates done and that update's total loss: a
    ``jax.debug.callback`` from one device of process 0, so once per update for any device or
    process count. JAX does not cache a program with a host callback persistently, so such a
    chunk compiles at every start."""

    def __init__(self, config: TrainConfig, env, env_params, network: ActorCritic,
                 optimizer: optax.GradientTransformation, reward_components: tuple[str, ...],
                 updates_per_chunk: int, mesh: Mesh,
                 on_update: Callable[[np.ndarray, np.ndarray], None] | None = None):
        self.config = config
        self.updates_per_chunk = updates_per_chunk
        self.mesh = mesh
        self.trace_count = 0
        self.compile_seconds = None
        self._compiled = None
        reporting_device = [d.process_index for d in mesh.devices.flat].index(0)

        def seed_update(runner: RunnerState):
            return ppo_update(runner, config, env, env_params, network, optimizer,
                              reward_components, DEVICE_AXIS)

        # Seeds are a batch axis of the same update (collectives still run over devices).
        update_all = seed_update if config.num_seeds == 1 else jax.vmap(seed_update)

        def update(runner: RunnerState):
            previous = runner
            runner, metrics = update_all(runner)
            # An update that makes the loss, the gradient or the parameters non-finite is
            # undone (for every seed, so that they stay at one update) and reported: the
            # runner state stays the last finite one, which the host saves.
            bits = nonfinite_bits(metrics, runner.params, config.num_seeds)
            finite = jnp.all(bits == 0)
            runner = jax.tree.map(lambda new, old: jnp.where(finite, new, old), runner, previous)
            metrics = metrics.replace(active=jnp.where(finite, metrics.active, 0.0),
                                      nonfinite=bits)
            if on_update is not None:
                # The loss is averaged over every minibatch step; reading it makes the host
                # call wait for the end of the update (XLA orders a host call by the buffers it
                # reads, and the counter alone is ready at the start). Once per update, not
                # per seed: every seed is at the same update.
                count = runner.update_step if config.num_seeds == 1 else runner.update_step[0]
                loss = jnp.mean(metrics.total_loss)
                lax.cond(lax.axis_index(DEVICE_AXIS) == reporting_device,
                         lambda: jax.debug.callback(on_update, count, loss),
                         lambda: None)
            return runner, metrics

        def skipped(runner: RunnerState):
            zeros = UpdateMetrics.zeros(env)
            if config.num_seeds > 1:
                zeros = jax.tree.map(lambda x: jnp.zeros((config.num_seeds,) + x.shape,
                                                         x.dtype), zeros)
            return runner, zeros

        def local_chunk(runner: RunnerState, num_active):
            self.trace_count += 1  # Python side effect: runs once per trace

            def body(carry, index):
                runner, finite = carry
                runner, metrics = lax.cond((index < num_active) & finite, update, skipped,
                                           runner)
                # After an undone update the chunk skips the rest: the host stops the run.
                return (runner, finite & jnp.all(metrics.nonfinite == 0)), metrics
            (runner, _), metrics = lax.scan(body, (runner, jnp.bool_(True)),
                                            jnp.arange(updates_per_chunk))
            return runner, metrics

        specs = config_runner_state_specs(config)
        chunk = jax.shard_map(local_chunk, mesh=mesh, in_specs=(specs, P()),
                              out_specs=(specs, P()), check_vma=False)
        self._jitted = jax.jit(chunk, donate_argnums=(0,))

    def lower(self, runner: RunnerState) -> jax.stages.Lowered:
        """Trace and lower for the shapes of ``runner`` (no XLA compilation yet)."""
        return self._jitted.lower(runner, np.int32(self.updates_per_chunk))

    def compile(self, runner: RunnerState | None = None, *,
                lowered: jax.stages.Lowered | None = None) -> float:
        """Compile ahead of time, from ``lowered`` (``self.lower(runner)``) or tracing
        ``runner`` first; the chunk then runs this executable. Returns the seconds taken."""
        start = time.perf_counter()
        self._compiled = (lowered if lowered is not None else self.lower(runner)).compile()
        self.compile_seconds = time.perf_counter() - start
        return self.compile_seconds

    def memory_mb(self) -> dict | None:
        """What XLA's buffer assignment of the compiled chunk holds per device, in MB:
        ``arguments`` (the runner state, donated, so ``outputs`` alias it) and ``temporaries``
        (the rollout, the update's working set); None if the backend does not say. The peak
        a device needs is about arguments + temporaries: a batch that does not fit is known
        from the compile alone."""
        analysis = self._compiled.memory_analysis() if self._compiled is not None else None
        if analysis is None:
            return None
        mb = lambda size: round(size / 2**20, 3)  # noqa: E731
        return {"arguments": mb(analysis.argument_size_in_bytes),
                "outputs": mb(analysis.output_size_in_bytes),
                "aliased": mb(analysis.alias_size_in_bytes),
                "temporaries": mb(analysis.temp_size_in_bytes)}

    def __call__(self, runner: RunnerState, num_active: int):
        if self._compiled is None:
            self.compile(runner)
        if not 1 <= num_active <= self.updates_per_chunk:
            raise ValueError(f"num_active must be in 1..{self.updates_per_chunk}, got {num_active}")
        return self._compiled(runner, np.int32(num_active))


def build(config: TrainConfig):
    """Everything static a run needs: (env, env_params, network, optimizer, reward component
    names)."""
    env, env_params = make_env(config)
    if (config.distilling and config.distill_leaf == "value"
            and hasattr(env.search_hooks, "critic_leaf_problem")):
        problem = env.search_hooks.critic_leaf_problem(config.env_option_values())
        if problem:
            raise ConfigError(f"--distill-leaf value: {problem}")
    return env, env_params, make_network(config, env), make_optimizer(config), \
        env.reward_components
