"""Differential run (decisions R8): seeded random-valid-action trajectories played in lockstep
by the in-process env and our own server started with the same seed must agree on every reply
(observation, valid actions, reward breakdown, done, internal state). CI size; the long run is
scripts/parity_diff.py."""

import pytest

from envs.hackmatrix.swift_io.engines import InProcessEngine, ProtocolEngine, own_server_command
from envs.hackmatrix.swift_io.lockstep import lockstep

SEED = 7


@pytest.fixture(scope="module")
def fresh_pair(compilation_cache):
    """Both engines new, so their key streams start together (the session ones have been used).
    A throwaway in-process game compiles reset and step first, so that the server loads them
    from the persistent cache instead of compiling them again at the same time."""
    warm_up = InProcessEngine(seed=SEED + 1)
    warm_up.reset()
    warm_up.step(warm_up.valid_actions()[0])
    server = ProtocolEngine(own_server_command(SEED))
    yield InProcessEngine(seed=SEED), server
    server.close()


def test_in_process_and_server_agree_step_by_step(fresh_pair):
    """3 trajectories x 60 steps: no divergence; a divergence prints the board and both values."""
    reference, candidate = fresh_pair
    divergence, compared = lockstep(reference, candidate, trajectories=3, steps=60, seed=SEED)
    assert divergence is None, divergence.report()
    assert compared >= 3  # the run really stepped (an episode ends early on death or victory)
