"""The oracle lockstep harness (issue 14) without the Swift binary: an in-process game with its
own key stream stands in for Swift (same protocol JSON, other draws), so the harness has to do
against it exactly what it does against Swift: match the enemy order, WARP's pick and POLY's
types, adopt spawns and new boards, and resolve hidden values as they are revealed. The runs are
seeded, hence deterministic; scripts/swift_soak.py runs the same loop against the real binary."""

import jax
import numpy as np
import pytest

from envs.hackmatrix.core.constants import DAEMON, POLY, PROGRAM_ACTION_OFFSET, UNDO, WAIT, WARP
from envs.hackmatrix.swift_io.adoption import Notes
from envs.hackmatrix.swift_io.draw_fitting import Draws, place_in_order
from envs.hackmatrix.swift_io.engines import InProcessEngine
from envs.hackmatrix.swift_io.oracle import OracleLockstep, SwiftStep, _Candidate, _mirror_functions
from envs.hackmatrix.swift_io.scenario import set_state

from scripts import swift_soak

SEARCH_BATCH = 32  # small batches: one compile, enough for these runs


@pytest.fixture(scope="module")
def stand_in(compilation_cache):
    """The game that plays Swift's part: our own, with a key stream of its own."""
    return InProcessEngine(seed=2024)


def lockstep(stand_in, **options):
    return OracleLockstep(stand_in, seed=1, search_batch=SEARCH_BATCH, **options)


def test_slot_placement_realises_either_order_of_two_contending_enemies(compilation_cache):
    """The harness's replica of the engine's key plumbing: placing enemies in the slots that a
    draw key shuffles first gives the processing order asked for (game-rules §7.4). Daemons A at
    (2,0) and B at (1,1) both step onto (1,0) next to the player at (0,0) ((0,1) is a block):
    whichever acts first gets it, the other falls back (A up to (3,0), B up to (2,1), §7.5)."""
    oracle = lockstep(None)
    scenario = {"player": {"row": 0, "col": 0, "energy": 1}, "ownedPrograms": [10],
                "blocks": [{"row": 0, "col": 1, "type": "data", "points": 1}],
                "enemies": [{"type": "daemon", "row": 2, "col": 0, "hp": 3},
                            {"type": "daemon", "row": 1, "col": 1, "hp": 3}]}
    state = jax.tree.map(np.array, jax.device_get(set_state(scenario)))
    fn = _mirror_functions(oracle.env, SEARCH_BATCH)
    keys = jax.random.split(jax.random.PRNGKey(5), 64)
    shuffle0, shuffle1, bits = (np.asarray(x) for x in fn.draws(keys))
    draws = Draws(np.asarray(keys), shuffle0, shuffle1, bits, np.argsort(shuffle0, axis=1))
    outcomes = {}
    for order in ([0, 1], [1, 0]):
        placed = place_in_order(state, order, 0, draws)
        new = fn.step(draws.keys[0], placed, np.int32(PROGRAM_ACTION_OFFSET + WAIT))[0]
        e = jax.device_get(new.enemies)
        live = sorted((int(e.seq[s]), int(e.row[s]), int(e.col[s]))
                      for s in np.flatnonzero(e.active))
        outcomes[tuple(order)] = [(row, col) for _, row, col in live]
    assert outcomes[(0, 1)] == [(1, 0), (2, 1)]
    assert outcomes[(1, 0)] == [(3, 0), (1, 0)]


def test_an_adopted_transmissions_countdown_is_checked():
    """The mirror adopts Swift's new transmissions with Swift's countdown, so only the support
    check can see a wrong one: a new transmission whose turnsUntilSpawn is not the one every
    generation path gives (1) is a problem; the right one is none (until stop 81 it was
    copied unchecked)."""
    from envs.hackmatrix.swift_io.adoption import spawn_problems
    oracle = lockstep(None)
    fn = _mirror_functions(oracle.env, SEARCH_BATCH)
    before = jax.tree.map(np.array, jax.device_get(set_state(
        {"player": {"row": 0, "col": 0}})))
    assert spawn_problems(fn, before, [(3, 3)], 1, countdowns=[1]) == []
    (problem,) = spawn_problems(fn, before, [(3, 3)], 1, countdowns=[2])
    assert problem == "spawn: a new transmission's countdown is not 1: [((3, 3), 2)]"


def test_outcome_frequencies_run_against_a_protocol_engine(protocol_engine):
    """scripts/swift_generation_stats.py's outcome set (WARP's target, POLY's type, the enemies'
    order: laws the soak's mirror reproduces case by case but never counts) against our own
    server standing in for Swift: every scenario's outcome is random on both sides (more than
    one value each) and no law differs (the script's confirmation rule). Against the binary:
    tests/parity/test_swift_oracle.py."""
    from envs.hackmatrix import HackMatrix
    from scripts import swift_generation_stats as stats
    rows, failures, _, _ = stats.checked_stage(protocol_engine, HackMatrix(), stats.OUTCOMES,
                                               200, 100, 0)
    assert [row["feature"] for row in rows] == list(stats.OUTCOME_SCENARIOS)
    assert all(row["test"].startswith("chi-square") for row in rows), rows
    assert failures == []


def test_spawn_statistics_compare_cells_and_hatched_types(protocol_engine):
    """scripts/swift_generation_stats.py's spawn set compares, for each fixed scenario, the cells
    of the new transmissions, their count and the enemy types they hatch into (game-rules §3.6:
    uniform over the 4 at construction), read from the observation under SHOW on the protocol
    side and from the state on ours. Against our own server standing in for Swift: every new
    transmission is named, the types are spread over more than one kind on both sides, and no
    law differs. Against the binary: tests/parity/test_swift_oracle.py."""
    from envs.hackmatrix import HackMatrix
    from scripts import swift_generation_stats as stats
    served = [spawns for scenario, action in stats.SPAWN_SCENARIOS.values()
              for spawns in stats.swift_spawns(protocol_engine, scenario, action, 50)]
    assert all(len(spawns) >= 1 for spawns in served)
    assert len({kind for spawns in served for _, kind in spawns}) > 1
    rows, failures, _, _ = stats.checked_stage(protocol_engine, HackMatrix(), stats.SPAWNS,
                                               200, 100, 0)
    features = [row["feature"] for row in rows]
    for name in stats.SPAWN_SCENARIOS:
        assert f"{name}: enemy types" in features, features
    types = [row for row in rows if row["feature"].endswith("enemy types")]
    assert all(row["test"].startswith("permutation chi-square") for row in types), types
    assert failures == []


def crowd(program: int, enemies: int, kind: int | None = None) -> dict:
    """A scenario with ``enemies`` enemies around the player and ``program`` owned."""
    cells = [(r, c) for r in range(6) for c in range(6) if (r, c) not in ((0, 0), (5, 5))]
    rng = np.random.default_rng(enemies)
    chosen = [cells[i] for i in rng.permutation(len(cells))[:enemies]]
    return {"player": {"row": 0, "col": 0, "credits": 20, "energy": 20},
            "ownedPrograms": [PROGRAM_ACTION_OFFSET + program],
            "enemies": [{"type": ("virus", "daemon", "glitch", "cryptog")[
                kind if kind is not None else i % 4], "row": r, "col": c, "hp": 2}
                for i, (r, c) in enumerate(chosen)]}


@pytest.mark.parametrize("program,enemies,fit", [
    (POLY, 9, "poly_fits"),  # 3^9 equally likely type assignments
    (WARP, 24, "warp_fits"),  # 24 targets
    (WAIT, 14, "order_fits"),  # 14 enemies (4 of them viruses) pressing on the player
])
def test_draws_of_another_key_are_fitted(stand_in, program, enemies, fit):
    """With no random key search, the stand-in's POLY types, WARP pick and enemy order (drawn
    from its own key) are realised by fitting the mirror's draws (§4.4, §4.5, §7.4); everything
    compared then matches. The seeds are fixed so that the mirror's first key does not already
    give the stand-in's outcome."""
    oracle = lockstep(stand_in, search_rounds=0)
    oracle.set_state(crowd(program, enemies, DAEMON if program == POLY else None))
    oracle.step(PROGRAM_ACTION_OFFSET + program)
    assert oracle.stats[fit] == 1


def test_soak_loop_against_an_engine_with_other_draws(stand_in):
    """scripts/swift_soak.py's loop (both starts, both policies) against the stand-in: no
    divergence in 300 steps, and every kind of draw and hidden value came up."""
    oracle = lockstep(stand_in)
    report = swift_soak.soak(oracle, steps=300, max_steps=60, seed=3, max_divergences=1)
    assert report["divergences"] == [], report["divergences"][0]["differences"]
    assert report["steps"] == 300
    stats = report["oracle"]
    for name in ("draws_enemy_order", "draws_spawn", "draws_stage_generation", "adopted_spawns",
                 "adopted_boards", "kinds_revealed_hatching", "resets", "scenarios"):
        assert stats.get(name, 0) > 0, (name, stats)


def test_undo_beyond_the_ring_is_the_documented_r3_departure():
    """Our UNDO history keeps the 8 newest snapshots, Swift's is unbounded (decisions R3): when
    our ring is empty while Swift still holds a snapshot, Swift can UNDO and we cannot; the
    oracle names exactly that difference the R3 departure, and nothing else."""
    oracle = lockstep(None)
    state = jax.tree.map(np.array, jax.device_get(set_state(
        {"player": {"row": 0, "col": 0, "credits": 3},
         "ownedPrograms": [PROGRAM_ACTION_OFFSET + UNDO]})))
    ours = np.zeros(28, bool)
    ours[[0, 3]] = True  # up, right; UNDO is masked with an empty ring
    candidate = _Candidate(state, 0.0, False, {}, {}, Notes(), False, False, ours)
    swift = SwiftStep({}, 0.0, False, {}, {}, [0, 3, PROGRAM_ACTION_OFFSET + UNDO])
    difference = ["validActions: [0, 3] != [0, 3, 14]"]
    assert not oracle._ring_exhausted(candidate, difference, swift)  # Swift's stack empty too
    oracle.shadow = [Notes()]  # one snapshot beyond our ring
    assert oracle._ring_exhausted(candidate, difference, swift)
    assert not oracle._ring_exhausted(candidate, difference + ["observation.turn: 1 != 2"], swift)
    other = SwiftStep({}, 0.0, False, {}, {}, [0, 1, 3, PROGRAM_ACTION_OFFSET + UNDO])
    assert not oracle._ring_exhausted(candidate, difference, other)


def test_a_divergence_at_a_games_start_is_reported_and_dumped(stand_in, tmp_path, capsys,
                                                               monkeypatch):
    """A start (reset or setState) Swift answers otherwise has no Swift step to keep: the soak
    reports it at the trajectory's start and writes its dump with no Swift reply (until stop
    81 the dump crashed the soak and the report was lost)."""
    import pickle

    from envs.hackmatrix.swift_io.divergence import OracleDivergence
    oracle = lockstep(stand_in)

    def diverging_start(*args, **kwargs):
        raise OracleDivergence("reset", "reset", ["observation.turn: 0 != 1"], "board")
    monkeypatch.setattr(oracle, "reset", diverging_start)
    monkeypatch.setattr(oracle, "set_state", diverging_start)
    report = swift_soak.soak(oracle, steps=10, max_steps=5, seed=3, max_divergences=1,
                             dump_dir=str(tmp_path))
    (divergence,) = report["divergences"]
    assert divergence["kind"] == "reset"
    assert "), its start: divergence (reset)" in capsys.readouterr().out
    with open(divergence["dump"], "rb") as handle:
        assert pickle.load(handle)["swift"] is None
