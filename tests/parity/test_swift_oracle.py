"""Checks against the real Swift game (issue 14). They need the Swift build: set
$HACKMATRIX_BINARY (``python scripts/swift_oracle.py SWIFT_SOURCE_DIR`` builds it and prints the
line). Without it they skip: CI has no copy of the Swift source. Small on purpose (seconds of
play); the long runs are scripts/swift_soak.py and scripts/swift_generation_stats.py."""

import os

import pytest

from envs.hackmatrix import HackMatrix
from envs.hackmatrix.swift_io.engines import ProtocolEngine
from envs.hackmatrix.swift_io.oracle import OracleLockstep
from envs.hackmatrix.swift_io.swift_build import BINARY_ENV_VAR

from scripts import swift_generation_stats, swift_soak

BINARY = os.environ.get(BINARY_ENV_VAR)
pytestmark = pytest.mark.skipif(
    not BINARY, reason=f"no Swift build: set {BINARY_ENV_VAR} (python scripts/swift_oracle.py "
                       "SWIFT_SOURCE_DIR builds it and prints the line)")


@pytest.fixture(scope="module")
def swift(compilation_cache):
    engine = ProtocolEngine([BINARY, "--headless-cli"])
    yield engine
    engine.close()


def test_the_protocol_backend_is_the_swift_binary(protocol_engine):
    """With $HACKMATRIX_BINARY set, the parity suite's protocol engine is that binary: it accepts
    setState at stage 0, which our server refuses (decisions R10), and Swift plays it."""
    assert protocol_engine.command == [BINARY, "--headless-cli"]
    observation = protocol_engine.set_state({"player": {"row": 5, "col": 4}, "stage": 0})
    assert observation["stage"] == 0
    after = protocol_engine.step(3).observation  # onto the exit: stage 0 -> 1, a stage-1 board
    assert after["stage"] == 1 and (after["playerRow"], after["playerCol"]) == (5, 5)


def test_lockstep_soak_against_swift(swift):
    """The mirror reproduces every Swift reply for 400 steps of both policies from both starts
    (scripts/swift_soak.py's loop), with random draws of every common kind among them."""
    oracle = OracleLockstep(swift, seed=0, search_batch=32)
    report = swift_soak.soak(oracle, steps=400, max_steps=80, seed=0, max_divergences=1)
    assert report["divergences"] == [], report["divergences"][0]["differences"]
    stats = report["oracle"]
    for name in ("draws_enemy_order", "draws_spawn", "draws_stage_generation", "adopted_spawns",
                 "kinds_revealed_hatching"):
        assert stats.get(name, 0) > 0, (name, stats)


@pytest.mark.parametrize("stage", [1, 2, swift_generation_stats.SPAWNS,
                                   swift_generation_stats.OUTCOMES])
def test_generation_statistics_against_swift(swift, stage):
    """1000 boards from each engine (stage 1 from reset, stage 2 through a stage advance), 1000
    in-game spawns of each fixed scenario (cells, count, hatched enemy types), and 1000 of each
    random outcome (WARP's target, POLY's type, the enemies' order): no feature of
    scripts/swift_generation_stats.py below p = 0.001 on two independent samples (a fluke has
    to happen twice: about 3e-5 per run; a real difference shows both times)."""
    _, failures, _, _ = swift_generation_stats.checked_stage(
        swift, HackMatrix(), stage, boards=1000, permutations=1000,
        seed=stage if isinstance(stage, int) else 3)
    assert not failures, failures
