"""Training configuration: the hyperparameters that define a run, the options that only steer
how it is run, validation, and the batch auto-scaling rule.

``TrainConfig`` holds everything that changes the numbers a run produces; a checkpoint may only
be resumed under the same ``TrainConfig``. ``RunOptions`` holds what does not (where to write,
how often to save, wandb), so those may change on resume.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Optional

from flax import struct

from envs.compile_cache import DEFAULT_COMPILE_CACHE_DIR, compile_cache_problem
from envs import registry
from envs.options import REQUIREMENTS, kind_error, normalized
from envs.registry import DEFAULT_ENV, OWN_ENVS

ACTIVATION_CHOICES = ("tanh", "relu")
ENCODER_CHOICES = ("flat", "egocentric", "egocentric-conv", "attention", "cnn")
# The encoders that read the env's board view (``board_view``).
BOARD_ENCODERS = ("egocentric", "egocentric-conv", "attention")
COMPUTE_DTYPE_CHOICES = ("float32", "bfloat16")
RECURRENT_CORE_CHOICES = ("none", "gru")

# Reference batch of the auto-scaling rule (P2): 256 envs x 128 steps, 4 minibatches of 8192,
# 4 epochs.
REFERENCE_BATCH = 256 * 128
REFERENCE_MINIBATCHES = 4
REFERENCE_EPOCHS = 4
MIN_EPOCHS = 2
# Above the reference batch the minibatch stays near this size (more gradient steps per
# update): at 2048 x 128 it gives 128 minibatches, which learned faster than 32 of 8192
# (SPEC §4.4, ablation "minibatch 2048 + lr 5e-4").
LARGE_BATCH_MINIBATCH_SIZE = 2048

# TrainConfig's defaults are the toy corridor's (which tests them) and the base of
# HackMatrix's: our envs may declare where the command lines start over them
# (``registry.trainer_defaults``; HackMatrix's best configuration). A gymnax env starts from
# PureJaxRL's config instead (its public configs are the reference, SPEC §2):
# purejaxrl/ppo.py's (CartPole-v1) for vector observations, examples/brax_minatar.ipynb's
# ("tuned for gymnax's MinAtar environments") for images. Both: 64x2 separate actor and critic,
# clipped value loss, the env's own reward, no reward normalisation, no recurrent core.
_PUREJAXRL_COMMON = dict(hidden_width=64, hidden_depth=2, separate_torsos=True,
                         recurrent_core="none", sequence_length=None,
                         clip_value_loss=True, training_reward="env", normalize_rewards=False,
                         anneal_lr=True, gamma=0.99, gae_lambda=0.95, clip_eps=0.2,
                         ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5)
GYMNAX_VECTOR_DEFAULTS = dict(_PUREJAXRL_COMMON, encoder="flat", activation="tanh", lr=2.5e-4,
                              num_envs=4, num_steps=128, total_timesteps=500_000,
                              update_epochs=4, num_minibatches=4)
# The CNN is ours (PureJaxRL flattens MinAtar's image into its MLP: --encoder flat).
GYMNAX_IMAGE_DEFAULTS = dict(_PUREJAXRL_COMMON, encoder="cnn", activation="relu", lr=5e-3,
                             num_envs=64, num_steps=128, total_timesteps=10_000_000,
                             update_epochs=4, num_minibatches=8)


def env_defaults(env_id: str, image_observation: bool) -> dict:
    """The defaults of ``env_id`` where they differ from TrainConfig's: an own env's declared
    ones (``registry.trainer_defaults``, env options under ``env_options``), PureJaxRL's
    configs for a gymnax env."""
    if env_id in OWN_ENVS:
        return registry.trainer_defaults(env_id)
    return dict(GYMNAX_IMAGE_DEFAULTS if image_observation else GYMNAX_VECTOR_DEFAULTS)


def given_over_defaults(defaults: dict, given: dict) -> dict:
    """The fields ``given`` (a command line's, a caller's) over an env's ``defaults``
    (``env_defaults``). A default that only qualifies another field does not outlive that
    field turned off: the learning-rate floor is where the anneal ends, so ``anneal_lr``
    given False without a floor of its own drops a default floor (TrainConfig's, none, then
    holds) instead of having ``validate_config`` refuse a floor nobody asked for."""
    merged = {**defaults, **given}
    if given.get("anneal_lr") is False and "lr_floor" not in given:
        merged.pop("lr_floor", None)
    return merged



class ConfigError(ValueError):
    """A configuration value that cannot be trained with; the message names the option."""


@struct.dataclass
class TrainConfig:
    """Everything that changes the numbers of a run. All fields are static (not traced)."""

    # Environment: an id of envs.registry, and the training options a run sets on it (the
    # env's ``training_options``, envs/options.py): (name, value) pairs, sorted by name, of
    # the options set to another value than the env's default (``env_option_values`` has
    # them all), so that one run has one config however its options were written. A dict is
    # accepted and stored as pairs.
    env: str = struct.field(pytree_node=False, default=DEFAULT_ENV)
    env_options: tuple = struct.field(pytree_node=False, default=())
    max_episode_steps: Optional[int] = struct.field(pytree_node=False, default=None)
    # What PPO optimises: the env's reward, or "progress" (ppo.training_reward).
    training_reward: str = struct.field(pytree_node=False, default="progress")
    # Start-state curriculum (purejaxrl/curriculum.py): the share of ended training episodes
    # that restart from an archived stage start (0: off), and the archive's slots per stage.
    curriculum_share: float = struct.field(pytree_node=False, default=0.0)
    curriculum_slots: int = struct.field(pytree_node=False, default=64)
    # Batch
    total_timesteps: int = struct.field(pytree_node=False, default=50_000_000)
    num_envs: int = struct.field(pytree_node=False, default=256)
    num_steps: int = struct.field(pytree_node=False, default=128)
    num_minibatches: int = struct.field(pytree_node=False, default=REFERENCE_MINIBATCHES)
    update_epochs: int = struct.field(pytree_node=False, default=REFERENCE_EPOCHS)
    # PPO
    lr: float = struct.field(pytree_node=False, default=5e-4)
    anneal_lr: bool = struct.field(pytree_node=False, default=True)
    # Where the linear anneal ends, as a fraction of ``lr`` (0: PureJaxRL's anneal to 0). A
    # floor keeps the policy moving in a long run's second half, where the anneal alone
    # shrinks each update's step (and its KL) twenty-fold.
    lr_floor: float = struct.field(pytree_node=False, default=0.0)
    gamma: float = struct.field(pytree_node=False, default=0.995)
    gae_lambda: float = struct.field(pytree_node=False, default=0.95)
    clip_eps: float = struct.field(pytree_node=False, default=0.2)
    clip_value_loss: bool = struct.field(pytree_node=False, default=False)
    ent_coef: float = struct.field(pytree_node=False, default=0.01)
    # An entropy bonus on the policy's marginal over the env's kinds of action
    # (``action_groups``; HackMatrix: direction, siphon, program), so a rare kind keeps being
    # tried where it is legal after the per-action entropy has collapsed. 0: off.
    group_entropy_coef: float = struct.field(pytree_node=False, default=0.0)
    # Exploration of a rare action the env names (its ``exploration_target``; HackMatrix: the
    # siphon where it would acquire a program not owned): where it is in reach, the rollout
    # takes that action with this probability instead of the policy's sample, and the update
    # treats it as the policy's own sample (the stored log-probability is the policy's). The
    # gradient is then biased towards what such a transition's advantage says, about share /
    # pi(action) times the on-policy push, which is the point: the on-policy gradient of an
    # action sampled 1e-4 of the time is too small to escape from. The critic learns from the
    # mixed behaviour. Evaluation never forces anything. 0: off.
    explore_share: float = struct.field(pytree_node=False, default=0.0)
    # Anneal that share linearly to 0 over the run (as --anneal-lr does the learning rate), so
    # the last updates are on-policy again.
    explore_anneal: bool = struct.field(pytree_node=False, default=False)
    vf_coef: float = struct.field(pytree_node=False, default=0.5)
    max_grad_norm: float = struct.field(pytree_node=False, default=0.5)
    normalize_advantages: bool = struct.field(pytree_node=False, default=True)
    # Divide rewards by the running std of the discounted return (the critic's targets stay
    # near unit scale while stage payouts grow from 1 to 64 and victory pays ~2564).
    normalize_rewards: bool = struct.field(pytree_node=False, default=True)
    # Network
    hidden_width: int = struct.field(pytree_node=False, default=256)
    hidden_depth: int = struct.field(pytree_node=False, default=2)
    activation: str = struct.field(pytree_node=False, default="tanh")
    encoder: str = struct.field(pytree_node=False, default="egocentric")
    cell_features: int = struct.field(pytree_node=False, default=8)  # egocentric embedding
    # Shared by default: the first layer (1545 inputs) is most of the compute on CPU; a shared
    # torso halves it (SPEC.md §4 has both measured).
    separate_torsos: bool = struct.field(pytree_node=False, default=False)
    compute_dtype: str = struct.field(pytree_node=False, default="float32")
    # Recurrent core between the torso and the heads (networks.RecurrentActorCritic): "none"
    # (feed-forward) or "gru", a GRU cell of ``core_width`` features whose hidden state is
    # carried per env and zeroed where an episode starts. A 128-wide GRU with 8-step windows
    # is the default: on the standard tier every seed of it was ahead of every feed-forward
    # seed, per step and per wall-clock hour (SPEC §4.4).
    recurrent_core: str = struct.field(pytree_node=False, default="gru")
    core_width: int = struct.field(pytree_node=False, default=128)
    # A hidden layer of this width in each of the actor and critic heads, after the shared
    # layers (the core, or the torso of a feed-forward network); 0: linear heads.
    head_width: int = struct.field(pytree_node=False, default=0)
    # Backpropagation through time: each env's rollout is cut into windows of this many steps,
    # which the update replays from the hidden state the rollout had at each window's start.
    # None: one window of the whole rollout (PureJaxRL's ppo_rnn). Shorter windows make the
    # update's sequential scan shorter and its minibatches wider (SPEC §4.2). A feed-forward
    # network has no sequence: the field is ignored there.
    sequence_length: Optional[int] = struct.field(pytree_node=False, default=8)
    # Search distillation (kickstarting with a search teacher, SPEC §4.5): each update also
    # fits the policy, with weight ``distill_coef``, to Gumbel MuZero's improved policy at
    # every env's state after the rollout: a fair search of ``distill_simulations`` in
    # ``distill_worlds`` re-drawn worlds, the network as prior (envs with search hooks).
    # 0: off.
    distill_coef: float = struct.field(pytree_node=False, default=0.0)
    distill_simulations: int = struct.field(pytree_node=False, default=16)
    distill_worlds: int = struct.field(pytree_node=False, default=1)
    # The teacher's objective and leaf values: "game", the env's own (HackMatrix: stage points
    # and the exit-distance leaf); "value", the network's (its training reward in the critic's
    # units, its gamma, the critic as leaf value: AlphaZero's teacher).
    distill_leaf: str = struct.field(pytree_node=False, default="game")
    # Where the teacher labels: "always", every env's state after the rollout; "acquire", only
    # those where the env's search hooks say a siphon would acquire a program
    # (``acquisition_in_reach``), the others weigh nothing in the fit; "unsure", each env's
    # state within the rollout where the policy gave its own greedy move the least probability
    # (``ppo.UnsureStates``: the search departs from the network mostly there, SPEC §4.5).
    # ``distill_prior_mix``: a share of uniform over the env's action groups (over the
    # actions for an env without groups) mixed into the teacher's prior at the states it
    # labels (``search.mix_uniform_where``), so that it can choose what the network vetoes
    # (SPEC §4.5).
    distill_where: str = struct.field(pytree_node=False, default="always")
    distill_prior_mix: float = struct.field(pytree_node=False, default=0.0)
    # The teacher: "tree", the Gumbel MuZero search above; "rollout", the Monte-Carlo rollout
    # search (purejaxrl/rollout_search.py: ``distill_rollouts`` rollouts in fair worlds of
    # each of the network's top candidates, with the paired-gain guard), whose target is its
    # move, weighed only at the states where that move overrules the network's greedy one
    # (the improvement alone: where they agree the target would only sharpen the policy).
    distill_teacher: str = struct.field(pytree_node=False, default="tree")
    distill_rollouts: int = struct.field(pytree_node=False, default=8)
    # The rollout teacher overrules the network only where its move's mean gain over the
    # greedy one exceeds this, in its return's units (the critic's with ``distill_leaf``
    # "value"), besides the paired-gain guard: that guard lets any gain through where the
    # rollouts' draws barely differ.
    distill_min_gain: float = struct.field(pytree_node=False, default=0.0)
    # How many envs' states the teacher labels each update (the first ones of each device;
    # None: every env). A rollout teacher's state costs hundreds of model steps.
    distill_envs: Optional[int] = struct.field(pytree_node=False, default=None)
    # A frozen teacher: its prior and critic are the network the run started from (the
    # ``--resume CHECKPOINT --weights-only`` weights and return statistics), held fixed, not
    # the network being fitted, so that the fit cannot drag its own teacher along (SPEC §4.5,
    # stop 73's collapse). With a recurrent core the teacher carries its own memory through
    # the labelled envs' games.
    distill_frozen_teacher: bool = struct.field(pytree_node=False, default=False)
    # The tree teacher's target: "policy", its improved policy; "move", its best move,
    # weighing only where it overrules the fitted network's greedy move; "shift", its
    # improvement alone: the labels keep the search's logit shift over the fitted network's
    # policy at labelling time (log target - log policy), and the fit moves the policy of the
    # moment by that shift (softmax(its own logits, held fixed, + the shift)), so that a label
    # never pulls the policy back to where it was labelled (SPEC §4.5, stop 90).
    distill_target: str = struct.field(pytree_node=False, default="policy")
    # Labels kept across updates (purejaxrl/label_replay.py): 0 fits each update's fresh labels
    # alone; N keeps the last N labelled states (split over the devices) and every minibatch
    # fits an equal share of all of them. Sound with a frozen teacher, whose labels never age.
    distill_replay: int = struct.field(pytree_node=False, default=0)
    # The tree teacher's Q-values in its objective's units instead of min-max normalised per
    # node (``SearchSettings.rescale_values`` off): its improved policy, and so its move,
    # departs from the prior only where a Q difference is of a size that matters, not
    # wherever one action's estimate is ahead by noise (SPEC §4.5).
    distill_raw_values: bool = struct.field(pytree_node=False, default=False)
    # The search's values as the critic's target (tree teacher, ``distill_leaf`` "value", so
    # that they are in the critic's units): each update also fits the value head, with weight
    # ``distill_value_coef``, to the teacher's value at every labelled state (its improved
    # policy's mean of the completed root Q-values, ``search.Teaching.value``), as AlphaZero
    # and MuZero fit their values to what the search found. 0: off. It labels with
    # ``distill_coef`` 0 too (the search's values alone).
    distill_value_coef: float = struct.field(pytree_node=False, default=0.0)
    # Self-imitation (purejaxrl/self_imitation.py): each update also imitates, with weight
    # ``sil_coef``, the actions of a replay of the agent's best recent items (steps, or BPTT
    # windows with a recurrent core) whose return still beats the critic; the replay holds
    # ``sil_windows`` items, ``sil_windows_per_update`` of them from each rollout (both split
    # evenly over the devices, so a checkpoint's shapes do not depend on the device count).
    # 0: off.
    sil_coef: float = struct.field(pytree_node=False, default=0.0)
    sil_windows: int = struct.field(pytree_node=False, default=1024)
    sil_windows_per_update: int = struct.field(pytree_node=False, default=128)
    # Data parallelism: the number of devices the global env batch is split over.
    num_devices: int = struct.field(pytree_node=False, default=1)
    seed: int = struct.field(pytree_node=False, default=0)
    # Independent runs of seeds seed..seed+num_seeds-1, vmapped in one compiled program (each
    # with its own envs, parameters and optimiser; nothing is shared but the executable).
    num_seeds: int = struct.field(pytree_node=False, default=1)

    def __post_init__(self):
        options = self.env_options.items() if isinstance(self.env_options, dict) \
            else self.env_options
        declared = self.declared_env_options() if isinstance(self.env, str) else {}
        object.__setattr__(self, "env_options", tuple(sorted(
            (name, normalized(value)) for name, value in options
            if name not in declared or normalized(value) != declared[name].default)))

    def declared_env_options(self) -> dict:
        """{name: EnvOption} of the options ``self.env`` takes (none for a gymnax env)."""
        return {option.name: option for option in registry.training_options(self.env)}

    def env_option_values(self) -> dict:
        """Every option ``self.env`` takes, at the value this run sets or the env's default
        (and any option set that the env does not take, for ``validate_config`` to refuse)."""
        return {**{name: option.default for name, option in self.declared_env_options().items()},
                **dict(self.env_options)}

    def env_option(self, name: str):
        """The value of the env option ``name`` in this run (set, or the env's default)."""
        values = self.env_option_values()
        if name not in values:
            raise KeyError(f"env {self.env!r} takes no option {name!r}")
        return values[name]

    def with_env_options(self, **values) -> "TrainConfig":
        """This config with the env options ``values`` set (over those it sets already)."""
        return self.replace(env_options={**dict(self.env_options), **values})

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed, self.seed + self.num_seeds))

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // self.batch_size

    @property
    def envs_per_device(self) -> int:
        return self.num_envs // self.num_devices

    @property
    def distilling(self) -> bool:
        """Whether a search teacher labels states each update (for its policy targets, its
        values, or both)."""
        return self.distill_coef > 0 or self.distill_value_coef > 0

    @property
    def distill_envs_per_device(self) -> int:
        """The envs of each device whose states the distillation teacher labels (its first
        ones)."""
        return (self.envs_per_device if self.distill_envs is None
                else self.distill_envs // self.num_devices)

    @property
    def windows_per_env(self) -> int:
        """The BPTT windows each env's rollout is cut into (1: the whole rollout, and always
        for a feed-forward network)."""
        if self.recurrent_core == "none":
            return 1
        return self.num_steps // (self.sequence_length or self.num_steps)

    @property
    def sil_item_length(self) -> int:
        """The steps of one self-imitation item: a BPTT window, or one step without a core."""
        if self.recurrent_core == "none":
            return 1
        return self.num_steps // self.windows_per_env

    def without_unused_fields(self) -> "TrainConfig":
        """This config with what means nothing for its network cleared, so that a run's
        record says what it ran: no BPTT window without a recurrent core."""
        if self.recurrent_core == "none":
            return self.replace(sequence_length=None)
        return self

    def agent_env_options(self) -> dict:
        """The env options that are part of the agent, not of its training (role "agent":
        HackMatrix's acquire macro, an action the network chooses), at this run's values: a
        policy is judged on the game with them, and the baselines without."""
        values = self.env_option_values()
        return {name: values[name] for name, option in self.declared_env_options().items()
                if option.role == "agent"}

    def for_play(self) -> "TrainConfig":
        """This config as a trained policy plays it: the env options of role "training"
        (HackMatrix's start-programs and program-block curricula, its program shaping) back at
        their defaults, so that a policy plays the game's own start for the game's own reward
        and evaluation's returns compare with every other policy's."""
        declared = self.declared_env_options()
        return self.replace(env_options={
            name: value for name, value in self.env_options
            if name not in declared or declared[name].role != "training"})

    def to_dict(self) -> dict:
        """The fields as JSON holds them (a tuple of names is a list; ``env_options`` a dict
        of every option the env takes, at its value in this run), as a checkpoint's metadata
        and the ledgers record them; ``from_dict`` reads them back."""
        def plain(value):
            return list(value) if isinstance(value, tuple) else value
        record = {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}
        record["env_options"] = {name: plain(value)
                                 for name, value in self.env_option_values().items()}
        return record

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        """The config a checkpoint recorded. A field the checkpoint predates takes the value
        that reproduces the behaviour of its time (``FIELDS_ADDED_LATER``), not today's
        default; so does an env option (its ``absent`` value). A record written before the env
        options had their own field holds them as fields of their own: those the env takes
        become its options, the others (which it ignored) are dropped."""
        values = dict(values)
        env_id = values.get("env", DEFAULT_ENV)
        declared = {option.name: option for option in registry.training_options(env_id)}
        if "env_options" not in values:
            legacy = {name: values.pop(name) for name in LEGACY_ENV_OPTION_FIELDS
                      if name in values}
            values["env_options"] = {name: legacy.get(name, option.absent)
                                     for name, option in declared.items()}
        elif not isinstance(values["env_options"], dict):
            raise ConfigError(f"env_options must be a mapping, got {values['env_options']!r}")
        else:
            values["env_options"] = {**{name: option.absent
                                        for name, option in declared.items()},
                                     **values["env_options"]}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown config fields: {', '.join(unknown)}")
        return cls(**{**FIELDS_ADDED_LATER, **values})


DISTILL_LEAVES = ("game", "value")
DISTILL_TEACHERS = ("tree", "rollout")
DISTILL_TARGETS = ("policy", "move", "shift")
# Where a search's prior is opened (its uniform share) and, for distillation, where the
# teacher labels: every state, or where the env's search hooks say a program can be acquired
# (``acquisition_in_reach``). Distillation's --distill-where and evaluate.py's
# --search-prior-mix-where.
SEARCH_WHERE = ("always", "acquire")
# Distillation's --distill-where: those, or each env's least sure state of the rollout.
DISTILL_WHERE = SEARCH_WHERE + ("unsure",)

# Fields that take an int or None (the default None means "off" or "the whole"): a
# checkpoint's config may hold either.
OPTIONAL_INT_FIELDS = frozenset(name for name, hint in typing.get_type_hints(TrainConfig).items()
                                if hint == Optional[int])

# Fields introduced after checkpoints existed, with the value that reproduces the older runs,
# as a checkpoint's JSON config holds it (``from_dict`` reads a list of names as a tuple).
FIELDS_ADDED_LATER = {"encoder": "flat", "cell_features": 8, "normalize_rewards": False,
                      "training_reward": "env", "num_seeds": 1,
                      "curriculum_share": 0.0, "curriculum_slots": 64,
                      "recurrent_core": "none", "core_width": 256, "sequence_length": None,
                      "distill_coef": 0.0, "distill_simulations": 16, "distill_worlds": 1,
                      "distill_leaf": "game", "distill_where": "always",
                      "distill_prior_mix": 0.0, "distill_teacher": "tree",
                      "distill_rollouts": 8, "distill_min_gain": 0.0, "distill_envs": None,
                      "distill_frozen_teacher": False, "distill_target": "policy",
                      "distill_replay": 0, "distill_raw_values": False,
                      "distill_value_coef": 0.0,
                      "group_entropy_coef": 0.0, "explore_share": 0.0, "lr_floor": 0.0,
                      "explore_anneal": False, "head_width": 0,
                      "sil_coef": 0.0, "sil_windows": 1024, "sil_windows_per_update": 128}
# The names under which records written before ``env_options`` (stop 68) held the env's
# options, each a field of its own: ``from_dict`` moves those the env takes into
# ``env_options`` (a record that lacks one ran with the option's ``absent`` value).
LEGACY_ENV_OPTION_FIELDS = ("reward_shaping", "close_undo_exploit", "undo_pays_once",
                            "start_programs", "start_programs_share", "start_programs_pool",
                            "program_potential", "program_potential_pool",
                            "program_block_pool", "program_block_share", "explore_pool",
                            "acquire_macro", "acquire_macro_pool", "acquire_macro_from_stage",
                            "exit_distance_view")


@dataclasses.dataclass
class RunOptions:
    """How a run is driven and recorded; none of it changes the trained numbers."""

    run_name: Optional[str] = None
    checkpoint_dir: str = "checkpoints"
    save_interval_minutes: float = 10.0
    save_interval: Optional[int] = None  # in updates; None = by time only
    keep_checkpoints: int = 3
    updates_per_chunk: int = 10  # updates compiled into one jitted lax.scan
    eval_interval: Optional[int] = None  # in updates; None = no periodic evaluation
    eval_envs: int = 64
    wandb: bool = True
    wandb_project: str = "hackmatrix"
    wandb_entity: Optional[str] = None
    wandb_mode: str = "online"
    # Upload every checkpoint as a version of one wandb artifact (--wandb-checkpoints): off by
    # default, a checkpoint is a whole training state that others would download.
    artifact: bool = False
    compile_cache_dir: Optional[str] = DEFAULT_COMPILE_CACHE_DIR  # None disables the cache
    quiet: bool = False
    # Live progress inside a chunk: a host callback per update (off with quiet). Without it
    # the chunk is kept in the persistent compile cache.
    progress: bool = True
    progress_interval_s: float = 10.0  # plain progress lines (stdout not a terminal): how often


def config_differences(a: TrainConfig, b: TrainConfig) -> list[str]:
    """Names of the fields whose values differ, formatted ``name: a != b``; an env option is
    named by itself (``start_programs: 0 != 1``), as its flag names it."""
    def flat(config):
        record = config.to_dict()
        options = record.pop("env_options")
        return {**record, **options}
    left, right = flat(a), flat(b)
    return [f"{name}: {left.get(name)!r} != {right.get(name)!r}"
            for name in dict.fromkeys([*left, *right]) if left.get(name) != right.get(name)]


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _divisor_nearest(n: int, key) -> int:
    """The divisor of ``n`` minimising ``key(d)``; ties go to the larger divisor."""
    return min(_divisors(n), key=lambda d: (key(d), -d))


@dataclasses.dataclass(frozen=True)
class AutoScaled:
    num_minibatches: int
    update_epochs: int
    minibatch_size: int
    minibatches_explicit: bool
    epochs_explicit: bool

    def describe(self) -> str:
        def origin(explicit):
            return "explicit" if explicit else "auto"
        return (f"num_minibatches={self.num_minibatches} ({origin(self.minibatches_explicit)}), "
                f"minibatch_size={self.minibatch_size}, "
                f"update_epochs={self.update_epochs} ({origin(self.epochs_explicit)})")


def auto_scale_for_batch_size(num_envs: int, num_steps: int,
                              num_minibatches: Optional[int] = None,
                              update_epochs: Optional[int] = None,
                              num_devices: int = 1,
                              whole_sequences: bool = False,
                              sequence_length: Optional[int] = None) -> AutoScaled:
    """Derive minibatch count and epochs from the batch size (issue P2).

    Reference: 256 x 128 = 32768 samples, 4 minibatches of 8192, 4 epochs. A larger batch
    keeps the minibatch near ``LARGE_BATCH_MINIBATCH_SIZE`` (2048) by raising the minibatch
    count, and lowers the epochs in proportion to the batch growth, never below 2. A smaller
    batch keeps 4 minibatches and 4 epochs. The minibatch count is always a divisor of the
    per-device batch (each device shuffles and splits its own share), chosen nearest to the
    target. With ``whole_sequences`` (a recurrent core: minibatches hold whole sequences of
    ``sequence_length`` steps, default the whole rollout) it is a divisor of the per-device
    count of sequences instead. An explicitly passed value wins for its own dimension only.
    """
    batch = num_envs * num_steps
    # A length that does not divide the rollout counts as one window; validate_config refuses it.
    windows = (num_steps // sequence_length
               if sequence_length and num_steps % sequence_length == 0 else 1)
    local_batch = ((num_envs // num_devices) * windows if whole_sequences
                   else batch // num_devices)
    if num_minibatches is None:
        if batch <= REFERENCE_BATCH:
            target = REFERENCE_MINIBATCHES
            minibatches = _divisor_nearest(local_batch, key=lambda d: abs(d - target))
        else:
            minibatches = _divisor_nearest(
                local_batch, key=lambda d: abs(batch / d - LARGE_BATCH_MINIBATCH_SIZE))
    else:
        minibatches = num_minibatches
    if update_epochs is None:
        if batch <= REFERENCE_BATCH:
            epochs = REFERENCE_EPOCHS
        else:
            epochs = max(MIN_EPOCHS, round(REFERENCE_EPOCHS * REFERENCE_BATCH / batch))
    else:
        epochs = update_epochs
    return AutoScaled(num_minibatches=minibatches, update_epochs=epochs,
                      minibatch_size=batch // max(minibatches, 1),
                      minibatches_explicit=num_minibatches is not None,
                      epochs_explicit=update_epochs is not None)


def auto_scale_config(config: TrainConfig, num_minibatches: Optional[int] = None,
                      update_epochs: Optional[int] = None) -> tuple[TrainConfig, AutoScaled]:
    """``config`` with its minibatch count and epochs auto-scaled for its batch, its network
    (whole sequences with a recurrent core) and its devices; an explicit value wins for its
    own dimension. Also returns the ``AutoScaled`` record (what was derived, for printing)."""
    scaled = auto_scale_for_batch_size(config.num_envs, config.num_steps, num_minibatches,
                                       update_epochs, config.num_devices,
                                       whole_sequences=config.recurrent_core != "none",
                                       sequence_length=config.sequence_length)
    return config.replace(num_minibatches=scaled.num_minibatches,
                          update_epochs=scaled.update_epochs), scaled


def validate_config(config: TrainConfig) -> None:
    """Raise ``ConfigError`` naming the first bad option; cheap, runs before any compile."""
    def need(condition: bool, message: str):
        if not condition:
            raise ConfigError(message)

    defaults = TrainConfig()
    for name, value in config.to_dict().items():
        if isinstance(getattr(defaults, name), float):
            need(isinstance(value, (int, float)) and math.isfinite(value),
                 f"--{name.replace('_', '-')} must be a finite number, got {value!r}")
    need(isinstance(config.env, str) and config.env, f"--env must be an env id, got {config.env!r}")
    need(config.max_episode_steps is None or config.max_episode_steps >= 1,
         f"--max-episode-steps must be >= 1, got {config.max_episode_steps}")
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs", "hidden_width",
                 "num_devices", "num_seeds", "core_width"):
        value = getattr(config, name)
        need(isinstance(value, int) and value >= 1,
             f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
    need(config.hidden_depth >= 0, f"--hidden-depth must be >= 0, got {config.hidden_depth}")
    need(isinstance(config.head_width, int) and config.head_width >= 0,
         f"--head-width must be a non-negative integer, got {config.head_width!r}")
    need(config.num_envs % config.num_devices == 0,
         f"--num-envs {config.num_envs} cannot be split evenly over {config.num_devices} "
         f"devices; use a multiple of {config.num_devices}")
    local_batch = config.envs_per_device * config.num_steps
    need(local_batch % config.num_minibatches == 0,
         f"--num-minibatches {config.num_minibatches} must divide the per-device batch "
         f"({config.envs_per_device} envs x {config.num_steps} steps = {local_batch})")
    need(config.recurrent_core in RECURRENT_CORE_CHOICES,
         f"--recurrent-core must be one of {RECURRENT_CORE_CHOICES}, got "
         f"{config.recurrent_core!r}")
    if config.recurrent_core != "none" and config.sequence_length is not None:
        need(isinstance(config.sequence_length, int) and config.sequence_length >= 1
             and config.num_steps % config.sequence_length == 0,
             f"--sequence-length must be a positive divisor of --num-steps "
             f"({config.num_steps}), got {config.sequence_length!r} (the default is "
             f"{TrainConfig.sequence_length} with --recurrent-core {TrainConfig.recurrent_core}; "
             "pass another --sequence-length, or --recurrent-core none)")
    if config.recurrent_core != "none":
        # Minibatches hold whole sequences (ppo.sequence_minibatches), so they split those.
        sequences = config.envs_per_device * config.windows_per_env
        need(sequences % config.num_minibatches == 0,
             f"--num-minibatches {config.num_minibatches} must divide the sequences per device "
             f"({config.envs_per_device} envs x {config.windows_per_env} windows = "
             f"{sequences}) with --recurrent-core {config.recurrent_core}: minibatches hold "
             "whole sequences")
        need(not config.separate_torsos,
             f"--separate-torsos is not available with --recurrent-core "
             f"{config.recurrent_core}: actor and critic share the core (use "
             "--no-separate-torsos)")
    need(not config.explore_anneal or config.explore_share > 0,
         "--explore-anneal needs --explore-share P > 0 (the share it anneals from)")
    check_env_options(config)
    need(config.distill_coef >= 0, f"--distill-coef must be >= 0, got {config.distill_coef}")
    need(isinstance(config.distill_value_coef, (int, float)) and config.distill_value_coef >= 0,
         f"--distill-value-coef must be >= 0, got {config.distill_value_coef!r}")
    if config.distill_value_coef > 0:
        need(config.distill_teacher == "tree" and config.distill_leaf == "value",
             "--distill-value-coef needs the tree teacher with --distill-leaf value (the "
             "search's values are then in the critic's units)")
    if config.distilling:
        for name in ("distill_simulations", "distill_worlds"):
            value = getattr(config, name)
            need(isinstance(value, int) and value >= 1,
                 f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
        need(config.distill_leaf in DISTILL_LEAVES,
             f"--distill-leaf must be one of {DISTILL_LEAVES}, got {config.distill_leaf!r}")
        need(config.distill_where in DISTILL_WHERE,
             f"--distill-where must be one of {DISTILL_WHERE}, got {config.distill_where!r}")
        need(isinstance(config.distill_prior_mix, (int, float))
             and 0.0 <= config.distill_prior_mix <= 1.0,
             f"--distill-prior-mix must be in [0, 1], got {config.distill_prior_mix!r}")
        need(config.distill_teacher in DISTILL_TEACHERS,
             f"--distill-teacher must be one of {DISTILL_TEACHERS}, "
             f"got {config.distill_teacher!r}")
        need(isinstance(config.distill_rollouts, int) and config.distill_rollouts >= 2,
             f"--distill-rollouts must be an integer >= 2 (the guard needs a standard error), "
             f"got {config.distill_rollouts!r}")
        need(isinstance(config.distill_min_gain, (int, float))
             and 0.0 <= config.distill_min_gain < float("inf"),
             f"--distill-min-gain must be a finite number >= 0, "
             f"got {config.distill_min_gain!r}")
        need(config.distill_min_gain == 0.0 or config.distill_teacher == "rollout",
             "--distill-min-gain applies to --distill-teacher rollout only")
        need(not config.distill_frozen_teacher or config.distill_teacher == "tree",
             "--distill-frozen-teacher applies to --distill-teacher tree only")
        need(config.distill_target in DISTILL_TARGETS,
             f"--distill-target must be one of {DISTILL_TARGETS}, got {config.distill_target!r}")
        need(config.distill_target == "policy" or config.distill_teacher == "tree",
             "--distill-target applies to --distill-teacher tree only (the rollout teacher's "
             "target is always its overruling move)")
        if config.distill_envs is not None:
            devices = config.num_devices
            need(isinstance(config.distill_envs, int) and 1 <= config.distill_envs
                 <= config.num_envs and config.distill_envs % devices == 0,
                 f"--distill-envs must be in [1, --num-envs {config.num_envs}] and divisible "
                 f"by the device count ({devices}), got {config.distill_envs!r}")
        labelled = config.distill_envs_per_device
        # Every minibatch fits an equal share of the envs' search targets.
        need(labelled % config.num_minibatches == 0,
             f"--num-minibatches {config.num_minibatches} must divide the envs per device "
             f"the teacher labels ({labelled}) with --distill-coef: each minibatch fits an "
             "equal share of the envs' search targets")
    need(not config.distill_raw_values or (config.distilling
                                           and config.distill_teacher == "tree"),
         "--distill-raw-values needs a search teacher (--distill-coef or --distill-value-coef "
         "> 0) and the tree teacher (its Q-values)")
    need(not config.distill_frozen_teacher or config.distilling,
         "--distill-frozen-teacher needs a search teacher (--distill-coef or "
         "--distill-value-coef > 0: the teacher it freezes)")
    need(isinstance(config.distill_replay, int) and not isinstance(config.distill_replay, bool)
         and config.distill_replay >= 0,
         f"--distill-replay must be an integer >= 0, got {config.distill_replay!r}")
    if config.distill_replay > 0:
        need(config.distill_target != "shift",
             "--distill-target shift fits each update's fresh labels: it cannot go with "
             "--distill-replay")
        need(config.distilling,
             "--distill-replay needs a search teacher (--distill-coef or "
             "--distill-value-coef > 0: the labels it keeps)")
        need(config.distill_teacher == "tree",
             "--distill-replay applies to --distill-teacher tree only")
        devices, labelled = config.num_devices, config.distill_envs_per_device
        need(config.distill_replay % devices == 0
             and (config.distill_replay // devices) % config.num_minibatches == 0,
             f"--distill-replay {config.distill_replay} must be a multiple of the device count "
             f"({devices}) times --num-minibatches ({config.num_minibatches}): each device "
             "keeps its share and every minibatch fits an equal part of it")
        need(config.distill_replay // devices >= labelled,
             f"--distill-replay {config.distill_replay} must hold at least one update's labels "
             f"({labelled * devices})")
    need(isinstance(config.sil_coef, (int, float)) and config.sil_coef >= 0,
         f"--sil-coef must be >= 0, got {config.sil_coef!r}")
    if config.sil_coef > 0:
        for name in ("sil_windows", "sil_windows_per_update"):
            value = getattr(config, name)
            need(isinstance(value, int) and value >= 1,
                 f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
        for name in ("sil_windows", "sil_windows_per_update"):
            need(getattr(config, name) % config.num_devices == 0,
                 f"--{name.replace('_', '-')} {getattr(config, name)} must be a multiple of "
                 f"the device count ({config.num_devices}): each device keeps its share")
        need(config.sil_windows % config.sil_windows_per_update == 0,
             f"--sil-windows-per-update {config.sil_windows_per_update} must divide "
             f"--sil-windows {config.sil_windows} (the replay is a ring of whole rollouts' "
             "blocks)")
        need(config.sil_windows // config.num_devices % config.num_minibatches == 0,
             f"--num-minibatches {config.num_minibatches} must divide the --sil-windows per "
             f"device ({config.sil_windows // config.num_devices}): each minibatch imitates "
             "an equal share of the replay")
        need(config.sil_windows_per_update <= config.num_steps * config.num_envs
             // config.sil_item_length,
             f"--sil-windows-per-update {config.sil_windows_per_update} is more than a "
             f"rollout's items ({config.num_steps * config.num_envs // config.sil_item_length})")
    need(config.total_timesteps >= config.batch_size,
         f"--total-timesteps {config.total_timesteps} is smaller than one batch "
         f"({config.num_envs} envs x {config.num_steps} steps = {config.batch_size})")
    need(config.lr > 0, f"--lr must be > 0, got {config.lr}")
    need(0.0 <= config.lr_floor <= 1.0, f"--lr-floor must be in [0, 1], got {config.lr_floor}")
    need(config.anneal_lr or config.lr_floor == 0.0,
         f"--lr-floor {config.lr_floor} is where the anneal ends: it needs --anneal-lr "
         "(without the anneal the rate is constant)")
    need(0.0 <= config.gamma <= 1.0, f"--gamma must be in [0, 1], got {config.gamma}")
    need(0.0 <= config.gae_lambda <= 1.0,
         f"--gae-lambda must be in [0, 1], got {config.gae_lambda}")
    need(config.clip_eps > 0, f"--clip-eps must be > 0, got {config.clip_eps}")
    need(config.ent_coef >= 0, f"--ent-coef must be >= 0, got {config.ent_coef}")
    need(0.0 <= config.explore_share <= 1.0,
         f"--explore-share must be in [0, 1], got {config.explore_share}")
    need(config.group_entropy_coef >= 0,
         f"--group-entropy-coef must be >= 0, got {config.group_entropy_coef}")
    need(config.vf_coef >= 0, f"--vf-coef must be >= 0, got {config.vf_coef}")
    need(config.max_grad_norm > 0, f"--max-grad-norm must be > 0, got {config.max_grad_norm}")
    need(isinstance(config.training_reward, str) and config.training_reward,
         f"--training-reward must be a name, got {config.training_reward!r}")
    need(0.0 <= config.curriculum_share <= 1.0,
         f"--curriculum-share must be in [0, 1], got {config.curriculum_share}")
    need(isinstance(config.curriculum_slots, int) and config.curriculum_slots >= 1,
         f"--curriculum-slots must be a positive integer, got {config.curriculum_slots!r}")
    need(config.encoder in ENCODER_CHOICES,
         f"--encoder must be one of {ENCODER_CHOICES}, got {config.encoder!r}")
    need(isinstance(config.cell_features, int) and config.cell_features >= 1,
         f"--cell-features must be a positive integer, got {config.cell_features!r}")
    # Imported here, not at the top: networks imports gymnax, whose import starts the XLA
    # backend, and a multi-host run must call jax.distributed.initialize before that.
    from purejaxrl.networks import ATTENTION_HEADS
    need(config.encoder != "attention" or config.cell_features % ATTENTION_HEADS == 0,
         f"--cell-features {config.cell_features} must be a multiple of the attention "
         f"encoder's {ATTENTION_HEADS} heads (e.g. 32)")
    need(config.activation in ACTIVATION_CHOICES,
         f"--activation must be one of {ACTIVATION_CHOICES}, got {config.activation!r}")
    need(config.compute_dtype in COMPUTE_DTYPE_CHOICES,
         f"--compute-dtype must be one of {COMPUTE_DTYPE_CHOICES}, got {config.compute_dtype!r}")


# What each of an option's ``requires`` (envs/options.py) asks of the trainer's config, and what
# an option's flag then needs, said of the config that lacks it.
_REQUIREMENT_MET = {
    "board_view": (lambda config: config.encoder in BOARD_ENCODERS,
                   lambda config: f"a board encoder ({', '.join(BOARD_ENCODERS)}): --encoder "
                                  f"{config.encoder} does not read the board view"),
    "exploration": (lambda config: config.explore_share > 0,
                    lambda config: "--explore-share P > 0 (the share it explores)"),
}
assert set(_REQUIREMENT_MET) == set(REQUIREMENTS)


def check_env_options(config: TrainConfig) -> None:
    """Every env option the config sets is one its env takes, of the option's kind, and with
    what the option requires of the trainer; then the env's own check of the values
    (``registry.check_option_values``, the one its constructor runs), before JAX is needed."""
    declared = config.declared_env_options()
    for name, value in config.env_options:
        if name not in declared:
            takers = [env_id for env_id in OWN_ENVS if registry.takes_option(env_id, name)]
            raise ConfigError(f"--{name.replace('_', '-')} needs an env that takes it "
                              f"({', '.join(takers) or 'none does'}); {config.env!r} does not")
        option = declared[name]
        error = kind_error(option, value)
        if error:
            raise ConfigError(error)
        if value != option.default:
            for need in option.requires:
                met, wanted = _REQUIREMENT_MET[need]
                if not met(config):
                    raise ConfigError(f"{option.flag} needs {wanted(config)}")
    try:
        registry.check_option_values(config.env, config.env_option_values())
    except ValueError as error:
        raise ConfigError(f"--env {config.env}: {error}") from None


# Adam moves every parameter by about the learning rate per step: above this, a run blows up
# (--lr 1e6 on HackMatrix: parameters near 6e6 after 20 updates) while every value stays finite.
LR_WARNING_ABOVE = 0.1


def config_warnings(config: TrainConfig) -> list[str]:
    """Values that train but almost surely not as meant (the run goes on)."""
    warnings = []
    if config.lr > LR_WARNING_ABOVE:
        warnings.append(f"--lr {config.lr:g} is far above the learning rates PPO trains with "
                        f"(default {TrainConfig().lr:g}): Adam moves every parameter by about "
                        "that much per step, so the run will likely blow up")
    if config.distill_replay > 0 and not config.distill_frozen_teacher:
        warnings.append(f"--distill-replay {config.distill_replay} without "
                        "--distill-frozen-teacher: the teacher is the network being fitted, "
                        "so kept labels are a moving teacher's old ones, fitted again")
    return warnings


def validate_run_options(options: RunOptions) -> None:
    def need(condition: bool, message: str):
        if not condition:
            raise ConfigError(message)

    need(math.isfinite(options.save_interval_minutes) and options.save_interval_minutes > 0,
         f"--save-interval-minutes must be > 0, got {options.save_interval_minutes}")
    need(options.save_interval is None or options.save_interval >= 1,
         f"--save-interval must be >= 1, got {options.save_interval}")
    need(options.keep_checkpoints >= 1,
         f"--keep-checkpoints must be >= 1, got {options.keep_checkpoints}")
    need(options.updates_per_chunk >= 1,
         f"--updates-per-chunk must be >= 1, got {options.updates_per_chunk}")
    need(options.eval_interval is None or options.eval_interval >= 1,
         f"--eval-interval must be >= 1, got {options.eval_interval}")
    need(options.eval_envs >= 1, f"--eval-envs must be >= 1, got {options.eval_envs}")
    need(options.progress_interval_s >= 0,
         f"progress_interval_s must be >= 0, got {options.progress_interval_s}")
    need(options.wandb_mode in ("online", "offline", "disabled"),
         f"--wandb-mode must be online, offline or disabled, got {options.wandb_mode!r}")
    if options.run_name is not None:
        need(options.run_name and "/" not in options.run_name
             and options.run_name not in (".", ".."),
             f"--run-name must be a plain directory name, got {options.run_name!r}")
    # Before the run directory is claimed: a cache path that is a file fails there otherwise.
    cache_problem = compile_cache_problem(options.compile_cache_dir)
    need(cache_problem is None, f"--compile-cache-dir {options.compile_cache_dir}: {cache_problem}")
