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
    """(env, its default params). ``options`` are training options (``TrainConfig``'s
    reward_shaping, close_undo_exploit, undo_pays_once, start_programs, start_programs_share,
    start_programs_pool, program_potential, program_potential_pool, program_block_pool,
    program_block_share, explore_pool):
    each env receives those it names in ``training_options`` and ignores the rest. An unknown
    id, or a gymnax env whose actions are not discrete, raises ``UnknownEnvError``."""
    if env_id in OWN_ENVS:
        cls = _own_class(env_id)
        taken = getattr(cls, "training_options", ())
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


def takes_option(env_id: str, option: str) -> bool:
    """Whether ``env_id`` is one of our envs that takes the training option ``option`` (a
    gymnax env takes none)."""
    return env_id in OWN_ENVS and option in getattr(_own_class(env_id), "training_options", ())


def env_version(env_id: str):
    """The contract version an env declares (``version``), None if it declares none or the id
    is unknown. Checkpoints record it; a checkpoint of another version is refused."""
    if env_id not in OWN_ENVS:
        return None
    return getattr(_own_class(env_id), "version", None)
