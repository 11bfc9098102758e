"""Driver of the parity harness for two engines that share the key stream: random play on both
in lockstep, every reply compared (tests/parity/test_differential.py, scripts/parity_diff.py
without --binary). Against the Swift build, whose randomness is its own, the driver is
``oracle.OracleLockstep``."""

import numpy as np

from ..viz.render_text import render_text
from .compare import json_differences
from .divergence import Divergence
from .engines import Engine, InProcessEngine


def lockstep(reference: InProcessEngine, candidate: Engine, *, trajectories: int, steps: int,
             seed: int = 0, progress=None):
    """Play ``trajectories`` random-valid-action games of at most ``steps`` steps on both engines
    in lockstep, comparing every reply; stops at the first difference.

    Both engines are reset at the start of each trajectory, so they must share the key stream:
    our server started with the reference's seed, nothing sent to either before. (The Swift
    build has its own randomness: ``oracle.OracleLockstep`` is the lockstep run against it.)
    Actions are drawn uniformly from the valid actions with ``numpy`` seeded by ``seed``.
    Returns (Divergence or None, number of steps compared)."""
    rng = np.random.default_rng(seed)
    compared = 0

    def diverged(t, k, request, ref, cand, board):
        diffs = json_differences(ref, cand)
        return Divergence(t, k, request, diffs, board) if diffs else None

    for t in range(trajectories):
        board = "(no game yet)" if reference.state is None else render_text(reference.state,
                                                                           reveal=True)
        divergence = diverged(t, 0, "reset", reference.reset(), candidate.reset(), board)
        if divergence:
            return divergence, compared
        for k in range(steps):
            board = render_text(reference.state, reveal=True)
            valid = reference.valid_actions()
            divergence = diverged(t, k, "getValidActions", valid, candidate.valid_actions(), board)
            if divergence:
                return divergence, compared
            if not valid:
                break
            action = int(rng.choice(valid))
            ref, cand = reference.step(action), candidate.step(action)
            divergence = diverged(t, k, f"step {action}", ref._asdict(), cand._asdict(), board)
            if divergence is None:
                divergence = diverged(t, k, f"getInternalState after step {action}",
                                      reference.internal_state(), candidate.internal_state(),
                                      board)
            if divergence:
                return divergence, compared
            compared += 1
            if progress is not None:
                progress(t, k)
            if ref.done:
                break
    return None, compared
