"""How an env declares the options a training run may set on it (``EnvOption``), so that the
trainer's config, its command lines and its records carry them without naming any of them.

An env class lists its ``training_options`` as ``EnvOption``s (the contract's hook). The
trainer keeps the values a run sets in ``TrainConfig.env_options``, derives a command-line flag
per option (``--`` + the name with dashes), checks each value's kind before anything is built,
and leaves the values themselves to the env's constructor, which refuses what it cannot play
(a ``ValueError``, reported as a one-line error). Importing this module imports neither JAX
nor an env.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

KINDS = ("bool", "int", "float", "str", "names")
# What an option is to a trained policy: "game", the rules it is judged under (evaluation may
# set it); "training", a curriculum or shaping that only the training games have (cleared when
# the policy plays); "agent", part of the policy itself (an action or a view its network is
# built for: kept when it plays, and the baselines play without it).
ROLES = ("game", "training", "agent")
# Trainer settings an option may need (``requires``), each a condition the trainer checks on
# its own fields: "board_view", a network that reads the env's board view (an egocentric or
# attention encoder); "exploration", a share of exploration (``--explore-share`` > 0).
REQUIREMENTS = ("board_view", "exploration")
_SAME_AS_DEFAULT = object()  # ``absent`` not given


@dataclasses.dataclass(frozen=True)
class EnvOption:
    """One option an env's constructor takes for training.

    ``default`` is the value a training run uses when the option is not set (it may differ from
    the constructor's own default, which plays the original game). ``absent`` is the value a
    record written before the option existed ran with (a run is read back as it ran); it
    defaults to ``default``."""

    name: str
    kind: str
    default: Any
    role: str
    help: str
    requires: tuple[str, ...] = ()
    absent: Any = _SAME_AS_DEFAULT

    def __post_init__(self):
        assert self.kind in KINDS, (self.name, self.kind)
        assert self.role in ROLES, (self.name, self.role)
        assert all(need in REQUIREMENTS for need in self.requires), (self.name, self.requires)
        assert kind_error(self, self.default) is None, (self.name, self.default)
        if self.absent is _SAME_AS_DEFAULT:
            object.__setattr__(self, "absent", self.default)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclasses.dataclass(frozen=True)
class Judgement:
    """One set of rules the learning benchmark judges every policy under (the contract's
    ``JUDGEMENTS``, declared beside an env's training options).

    ``key`` is the ledger key its summaries are stored under; ``options``, the env's game
    options set for it (over the constructor's defaults, the original game). ``shown`` marks
    the judgement tables show (the honest one; an env without one shows its first). ``carried``
    are (summary key, column title) pairs of this judgement's figures a table shows beside the
    shown one (what the shown rules take away). ``tag`` is what the ledger overview writes for
    a label whose rows all hold this judgement; ``words``, how a seed's line names it."""

    key: str
    options: tuple[tuple[str, Any], ...] = ()
    shown: bool = False
    carried: tuple[tuple[str, str], ...] = ()
    tag: str = "-"
    words: str = ""


# The judgement of an env that declares none: the game as its constructor plays it.
AS_IT_IS = (Judgement("eval", shown=True),)


def shown_judgement(judgements: tuple[Judgement, ...]) -> Judgement:
    """The judgement tables show: the one marked ``shown``, else the first."""
    return next((judgement for judgement in judgements if judgement.shown), judgements[0])


def normalized(value: Any) -> Any:
    """A value as a config holds it: a list of names (JSON) becomes a tuple (hashable)."""
    return tuple(value) if isinstance(value, list) else value


def kind_error(option: EnvOption, value: Any) -> str | None:
    """Why ``value`` is not of ``option``'s kind (a one-line message naming its flag), or None."""
    ok = {"bool": lambda v: isinstance(v, bool),
          "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
          "float": lambda v: (isinstance(v, (int, float)) and not isinstance(v, bool)
                              and math.isfinite(v)),
          "str": lambda v: isinstance(v, str) and bool(v),
          "names": lambda v: isinstance(v, tuple) and all(isinstance(n, str) and n for n in v),
          }[option.kind](value)
    if ok:
        return None
    want = {"bool": "on or off (a boolean)", "int": "an integer", "float": "a finite number",
            "str": "a name", "names": "a list of names"}[option.kind]
    return f"{option.flag} must be {want}, got {value!r}"
