"""Environments by id, in the manner of ``gymnax.make``: the one place where the trainer
(``purejaxrl/``) meets the environments. Ids: ``hackmatrix`` (the default), ``toy`` (the test
corridor) and every gymnax id with a discrete action space (``CartPole-v1``,
``Breakout-MinAtar``, ...). What an env gives the trainer is ``envs/contract.py``.

Importing this module imports neither JAX nor an env (gymnax creates arrays at import, which
must wait for ``jax.distributed.initialize`` in a multi-process run).
"""

from __future__ import annotations

import importlib

DEFAULT_ENV = "hackmatrix"
# Our own envs: id -> "module:class".
OWN_ENVS = {"hackmatrix": "envs.hackmatrix:HackMatrix", "toy": "envs.toy:ToyCorridor"}
# The training options of our envs that take some, where they can be read without importing
# JAX: id -> a module with ``TRAINING_OPTIONS`` (the class's ``training_options``),
# ``check_values(values)`` (a ValueError for values the env cannot play) and optionally
# ``JUDGEMENTS`` (``envs/options.py``'s ``Judgement``: the rules the learning benchmark judges
# a policy under) and ``TRAINER_DEFAULTS`` (where the trainer's command lines start for the
# env: ``trainer_defaults``).
OWN_ENV_OPTIONS = {"hackmatrix": "envs.hackmatrix.options"}


class UnknownEnvError(ValueError):
    """An env id that names no env the trainer can use; the message says which ids can."""


def gymnax_ids() -> tuple[str, ...]:
    import gymnax
    return tuple(gymnax.registered_envs)


def env_ids() -> tuple[str, ...]:
    return tuple(OWN_ENVS) + gymnax_ids()


def _own_class(env_id: str) -> type:
    module, name = OWN_ENVS[env_id].split(":")
    return getattr(importlib.import_module(module), name)


def _unknown(env_id: str) -> UnknownEnvError:
    return UnknownEnvError(f"unknown env {env_id!r}: use {', '.join(OWN_ENVS)} or a gymnax id "
                           f"({', '.join(gymnax_ids())})")


def make(env_id: str, **options):
    """(env, its default params). ``options`` are training options (``envs/options.py``): each
    env receives those of its ``training_options`` and ignores the rest. An unknown id, or a
    gymnax env whose actions are not discrete, raises ``UnknownEnvError``; a value the env
    cannot play, its ``ValueError``."""
    if env_id in OWN_ENVS:
        cls = _own_class(env_id)
        taken = {option.name for option in getattr(cls, "training_options", ())}
        env = cls(**{name: value for name, value in options.items() if name in taken})
        return env, env.default_params
    if env_id not in gymnax_ids():
        raise _unknown(env_id)
    import gymnax
    from gymnax.environments import spaces
    env, params = gymnax.make(env_id)
    if not isinstance(env.action_space(params), spaces.Discrete):
        raise UnknownEnvError(f"{env_id} has a {type(env.action_space(params)).__name__} "
                              "action space; the trainer supports discrete actions only")
    return env, params


def training_options(env_id: str) -> tuple:
    """The ``EnvOption``s a training run may set on ``env_id`` (none for a gymnax env or an
    unknown id), read without importing JAX."""
    if env_id not in OWN_ENV_OPTIONS:
        return ()
    return importlib.import_module(OWN_ENV_OPTIONS[env_id]).TRAINING_OPTIONS


def trainer_defaults(env_id: str) -> dict:
    """Where the trainer's command lines start for ``env_id``, over ``TrainConfig``'s defaults:
    config fields, and under ``env_options`` the env options (a fresh dict; empty for an env
    that declares none, a gymnax env or an unknown id), read without importing JAX."""
    if env_id not in OWN_ENV_OPTIONS:
        return {}
    declared = getattr(importlib.import_module(OWN_ENV_OPTIONS[env_id]), "TRAINER_DEFAULTS", {})
    defaults = dict(declared)
    if "env_options" in defaults:
        defaults["env_options"] = dict(defaults["env_options"])
    return defaults


def check_option_values(env_id: str, values: dict) -> None:
    """A ``ValueError`` where ``env_id`` cannot play the training options ``values`` (every
    option it takes, at a run's values), without building the env or importing JAX."""
    if env_id in OWN_ENV_OPTIONS:
        importlib.import_module(OWN_ENV_OPTIONS[env_id]).check_values(values)


def judgements(env_id: str) -> tuple:
    """The ``Judgement``s the learning benchmark judges a policy of ``env_id`` under, read
    without importing JAX: the env's own ``JUDGEMENTS``, else the game as it is (``AS_IT_IS``:
    a gymnax env, an own env that declares none, an unknown id)."""
    from envs.options import AS_IT_IS
    if env_id not in OWN_ENV_OPTIONS:
        return AS_IT_IS
    return getattr(importlib.import_module(OWN_ENV_OPTIONS[env_id]), "JUDGEMENTS", AS_IT_IS)


def takes_option(env_id: str, option: str) -> bool:
    """Whether ``env_id`` is one of our envs that takes the training option ``option`` (a
    gymnax env takes none)."""
    return any(declared.name == option for declared in training_options(env_id))


def env_version(env_id: str):
    """The contract version an env declares (``version``), None if it declares none or the id
    is unknown. Checkpoints record it; a checkpoint of another version is refused."""
    if env_id not in OWN_ENVS:
        return None
    return getattr(_own_class(env_id), "version", None)
