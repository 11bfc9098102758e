"""The command lines' parser: a usage error is one line, not the whole usage. Defined here, in
the layer below the trainer, so that the env's own command lines (the protocol server) and the
trainer's (``purejaxrl.cli.parsing`` re-exports it) answer bad input alike."""

from __future__ import annotations

import argparse


class ArgumentParser(argparse.ArgumentParser):
    """An unknown flag or a bad value is one line on stderr (``error: ...``, pointing at
    ``--help``), exit 2, instead of the whole usage."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")
