"""What the command lines share: one-line usage errors, number types that refuse NaN and
infinity while the arguments are parsed, and the flags of the envs' own training options."""

from __future__ import annotations

import argparse
import math

from envs import registry
from envs.command_line import ArgumentParser  # noqa: F401  (the command lines' parser)
from envs.options import ROLES
from envs.registry import OWN_ENVS


def finite_float(text: str) -> float:
    """``float`` for argparse, without NaN and infinity (a hyperparameter that would train
    non-finite weights)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def name_list(text: str) -> tuple[str, ...]:
    """A comma-separated list of names for argparse (``reset,siph+`` -> ("reset", "siph+")), or
    ``none`` for no names (how the help prints an empty list: a default list is set back to
    empty so); an empty name is refused. Which names are known is the env's to say."""
    if text.strip() == "none":
        return ()
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return names


def add_env_option_flags(parser: argparse.ArgumentParser, roles=ROLES,
                         trainer_defaults: bool = False) -> None:
    """A flag for each training option of our envs of one of ``roles`` (``envs/options.py``:
    ``--`` + its name), its default "not given" (None); the help names the envs that take it
    and its default (``trainer_defaults``: where the trainer starts an env that declares one,
    ``registry.trainer_defaults``, else the option's own). An env that does not take a given
    one refuses it (``validate_config``)."""
    group = parser.add_argument_group("environment options (each env takes its own; "
                                      "envs/options.py)")
    trainer = {env_id: registry.trainer_defaults(env_id).get("env_options", {})
               for env_id in OWN_ENVS} if trainer_defaults else {}
    for name, (option, env_ids) in env_option_table().items():
        if option.role not in roles:
            continue
        shown = option_value_text(option.default)
        starts = [(env_id, trainer[env_id][name]) for env_id in env_ids
                  if name in trainer.get(env_id, {})]
        if starts:
            shown = "; ".join(f"{option_value_text(value)} ({env_id}'s trainer default; the "
                              f"option's own {shown})" for env_id, value in starts)
        kind = {"bool": dict(action=argparse.BooleanOptionalAction),
                "int": dict(type=int, metavar="K"), "float": dict(type=finite_float, metavar="X"),
                "str": dict(metavar="NAME"), "names": dict(type=name_list, metavar="NAMES")}
        group.add_argument(option.flag, dest=name, **kind[option.kind],
                           help=f"({', '.join(env_ids)}) {option.help}; default {shown}")


def option_value_text(value) -> str:
    """An env option's value as the command lines print it: on/off, names joined by commas
    (none for no names), or the value."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(value) or "none"
    return str(value)


def env_option_table() -> dict:
    """{name: (EnvOption, the ids of our envs that take it)} over every env of ours."""
    table = {}
    for env_id in OWN_ENVS:
        for option in registry.training_options(env_id):
            known, takers = table.get(option.name, (option, ()))
            assert known.kind == option.kind, f"option {option.name} differs between envs"
            table[option.name] = (known, takers + (env_id,))
    return table


def env_options_from_args(args) -> dict:
    """The env options given on the command line."""
    return {name: getattr(args, name) for name in env_option_table()
            if getattr(args, name, None) is not None}
