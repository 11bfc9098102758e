"""A trained policy from a checkpoint, checked before it plays: the one loader of the tools that
play checkpoints (``scripts/evaluate.py``, ``scripts/watch_agent.py``)."""

from __future__ import annotations

import dataclasses

import jax

from envs import registry
from purejaxrl import ppo
from purejaxrl.checkpoint import CheckpointError, load_checkpoint
from purejaxrl.config import ConfigError, TrainConfig
from purejaxrl.networks import init_network


class PolicyError(Exception):
    """A checkpoint that cannot play here; ``code`` is the exit status a command gives (1: a
    file that cannot be used, 2: a request that does not fit it)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


@dataclasses.dataclass
class Policy:
    config: TrainConfig
    params: object
    checkpoint: dict
    built: tuple  # ppo.build(config): env, env_params, network, optimizer, reward components

    @property
    def env(self):
        return self.built[0]

    @property
    def network(self):
        return self.built[2]


# The options a record keeps of a policy's config (besides its env options of roles "game" and
# "agent": the rules it played under and its own actions and view).
RECORDED_FIELDS = ("max_episode_steps", "gamma")


def env_options_of(config: TrainConfig) -> dict:
    """What a game was played under, as JSON: the env options of roles "game" and "agent" and
    ``RECORDED_FIELDS`` (an episode record's and an evaluation row's ``env_options``)."""
    values = config.env_option_values()
    options = {name: list(values[name]) if isinstance(values[name], tuple) else values[name]
               for name, option in config.declared_env_options().items()
               if option.role != "training"}
    return {**options, **{name: getattr(config, name) for name in RECORDED_FIELDS}}


def config_for_options(options: dict, env: str = "hackmatrix") -> TrainConfig:
    """The config a game recorded with ``env_options_of``'s ``options`` is played again under.
    A record that predates an option was played without it (the option's ``absent``)."""
    declared = TrainConfig(env=env).declared_env_options()
    env_options = {name: option.absent for name, option in declared.items()
                   if option.role != "training"}
    env_options.update({name: value for name, value in options.items() if name in declared})
    return TrainConfig(env=env, env_options=env_options,
                       **{name: options[name] for name in RECORDED_FIELDS if name in options})


def load_policy(path: str) -> Policy:
    """The checkpoint at ``path`` (a file or a run directory: its newest) with its config, its
    parameters and the env and network they were trained with. Refused (``PolicyError``): an
    unreadable checkpoint, a config of an incompatible trainer, an env whose contract version
    (``registry.env_version``) differs from the one the run was trained on, no parameters, or
    parameters that do not fit the network the config builds."""
    try:
        checkpoint = load_checkpoint(path)
    except CheckpointError as error:
        raise PolicyError(str(error)) from None
    where = checkpoint["path"]
    try:
        config = TrainConfig.from_dict(checkpoint["config"])
    except (ConfigError, TypeError, ValueError) as error:
        raise PolicyError(f"{where} was written by an incompatible trainer version: "
                          f"{error}") from None
    config = config.for_play()
    saved, current = checkpoint.get("env_version"), registry.env_version(config.env)
    if None not in (saved, current) and saved != current:
        raise PolicyError(f"{where} was trained on environment version {saved!r}, this code is "
                          f"version {current!r}: incompatible environment")
    params = getattr(checkpoint["runner_state"], "params", None)
    if params is None:
        raise PolicyError(f"{where} holds no network parameters")
    try:
        built = ppo.build(config)
    except ConfigError as error:
        raise PolicyError(f"{where}: {error}") from None
    env, env_params, network = built[:3]
    obs, _ = jax.eval_shape(env.reset, jax.random.PRNGKey(0), env_params)
    expected = jax.eval_shape(lambda key, obs: init_network(network, key, obs),
                              jax.random.PRNGKey(0), obs)
    shapes = lambda tree: (jax.tree.structure(tree),  # noqa: E731
                           [tuple(x.shape) for x in jax.tree.leaves(tree)])
    if shapes(expected) != shapes(params):
        raise PolicyError(f"{where}: the saved network does not fit this environment's "
                          "observation/action sizes (checkpoint from an incompatible "
                          "environment version)")
    return Policy(config=config, params=params, checkpoint=checkpoint, built=built)
