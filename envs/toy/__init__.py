"""The toy corridor: a tiny deterministic env with every optional hook of ``envs/contract.py``,
for testing the trainer without HackMatrix."""

from .corridor import (CORRIDOR_LENGTH, EXIT_CELL, NUM_ACTIONS, ToyCorridor, ToyEnvParams,
                       ToyObservation, ToyState)

__all__ = ["CORRIDOR_LENGTH", "EXIT_CELL", "NUM_ACTIONS", "ToyCorridor", "ToyEnvParams",
           "ToyObservation", "ToyState"]
