"""What the command lines share: one-line usage errors, and number types that refuse NaN and
infinity while the arguments are parsed."""

from __future__ import annotations

import argparse
import math


class ArgumentParser(argparse.ArgumentParser):
    """An unknown flag or a bad value is one line on stderr (``error: ...``, pointing at
    ``--help``), exit 2, instead of the whole usage."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


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
    """A comma-separated list of names for argparse (``reset,siph+`` -> ("reset", "siph+")); an
    empty name is refused. Which names are known is the env's to say."""
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return names
