"""Rewards (programs-rewards-observation §8, §11, errata E1/E2/O10, decisions R7).

Expected values are derived by hand from the §8.2 formulas (Swift-correct values, not the ⚠
ones of §11.2). Tolerance 1e-5 as ruled in R7, widened to a relative 1e-6 for totals in the
thousands, where one float32 ulp (2.4e-4 at 2564) is already larger than 1e-5.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix.core import bitboard
from envs.hackmatrix.core import constants as C
from envs.hackmatrix.core.rewards import (REWARD_FIELDS, SWIFT_KEYS, RewardBreakdown, RewardInputs,
                                          bfs_distance, compute_reward, exit_distance,
                                          player_exit_distance, siphon_quality, total_reward)
from envs.hackmatrix.core.state import blank_state

TOL = 1e-5
REL = 1e-6


def _rewarder(**options):
    def run(inputs):
        breakdown = compute_reward(inputs, **options)
        return breakdown, total_reward(breakdown)
    return jax.jit(run)


SWIFT = _rewarder()
POTENTIAL_099 = _rewarder(shaping="potential", gamma=0.99)
POTENTIAL_1 = _rewarder(shaping="potential", gamma=1.0)
BFS = jax.jit(bfs_distance)
EXIT_DISTANCE = jax.jit(exit_distance)
PLAYER_EXIT_DISTANCE = jax.jit(player_exit_distance)
SIPHON_QUALITY = jax.jit(siphon_quality)

_BOOL_INPUTS = {"success", "stage_advanced", "game_won", "player_died", "data_siphon_collected",
                "siphon_used", "siphon_optimal", "reset_wasteful", "died_to_siphon_enemy"}


def inputs(**overrides) -> RewardInputs:
    """Neutral inputs: a successful action that changes nothing; player (0,0), exit (5,5) on an
    open board (distance 10 before and after), HP 3, stage 1 (§11.1/§11.2 defaults)."""
    values = dict(old_score=0, old_hp=3, old_credits=0, old_energy=0, old_distance=10,
                  new_distance=10, success=True, stage_advanced=False, game_won=False,
                  player_died=False, total_kills=0, data_siphon_collected=False, siphon_used=False,
                  siphon_optimal=True, missed_credits=0, missed_energy=0, reset_wasteful=False,
                  died_to_siphon_enemy=False, score=0, hp=3, credits=0, energy=0, stage=1)
    unknown = set(overrides) - set(values)
    assert not unknown, unknown
    values.update(overrides)
    return RewardInputs(**{k: jnp.asarray(v, jnp.bool_ if k in _BOOL_INPUTS else jnp.int32)
                           for k, v in values.items()})


def components(breakdown: RewardBreakdown) -> dict:
    return {name: float(getattr(breakdown, name)) for name in REWARD_FIELDS}


def check(inp, expected_total, **expected_components):
    """Total, and every component: the named ones as given, step_penalty -0.01, others 0."""
    breakdown, total = SWIFT(inp)
    want = {name: 0.0 for name in REWARD_FIELDS}
    want["step_penalty"] = -0.01
    want.update(expected_components)
    got = components(breakdown)
    for name in REWARD_FIELDS:
        assert got[name] == pytest.approx(want[name], abs=TOL), name
    assert float(total) == pytest.approx(expected_total, rel=REL, abs=TOL)
    return breakdown


# ---------------------------------------------------------------------------------------------
# breakdown plumbing


def test_breakdown_has_15_float32_fields_in_swift_order():
    """§8.2: 15 components in evaluation order; §8.10: 14 Swift keys, none for step_penalty."""
    assert REWARD_FIELDS == (
        "step_penalty", "stage_completion", "score_gain", "kills", "data_siphon",
        "distance_shaping", "victory", "death_penalty", "resource_gain", "resource_holding",
        "damage_penalty", "hp_recovery", "siphon_quality", "program_waste",
        "siphon_death_penalty")
    assert tuple(RewardBreakdown.__dataclass_fields__) == REWARD_FIELDS
    assert set(SWIFT_KEYS) == set(REWARD_FIELDS) - {"step_penalty"}
    assert sorted(SWIFT_KEYS.values()) == sorted([
        "stage", "score", "kills", "dataSiphon", "distance", "victory", "death", "resourceGain",
        "resourceHolding", "damagePenalty", "hpRecovery", "siphonQuality", "programWaste",
        "siphonDeathPenalty"])
    breakdown, total = SWIFT(inputs())
    assert all(getattr(breakdown, n).dtype == jnp.float32 for n in REWARD_FIELDS)
    assert total.dtype == jnp.float32


def test_no_op_pays_only_the_step_penalty():
    """§8.2 #0 alone: a successful action changing nothing pays -0.01."""
    check(inputs(), -0.01)


def test_failed_action_pays_all_zeros():
    """§8.9: a failed action gives an all-zero breakdown and total 0, no step penalty."""
    busy = inputs(success=False, stage_advanced=True, game_won=True, stage=8, score=20,
                  old_score=3, total_kills=2, player_died=True, hp=0, old_hp=1, credits=9,
                  data_siphon_collected=True, siphon_used=True, siphon_optimal=False,
                  missed_credits=4, reset_wasteful=True, died_to_siphon_enemy=True,
                  new_distance=3)
    for rewarder in (SWIFT, POTENTIAL_099):
        breakdown, total = rewarder(busy)
        assert all(v == 0.0 for v in components(breakdown).values())
        assert float(total) == 0.0


def test_total_is_the_left_to_right_float32_sum():
    """§8.2 'Total': one left-to-right sum in evaluation order, equal to the breakdown sum."""
    inp = inputs(stage_advanced=True, stage=4, old_distance=1, old_hp=2, hp=3, credits=10,
                 energy=5, old_credits=13, score=7, old_score=2, total_kills=1)
    breakdown, total = SWIFT(inp)
    running = np.float32(0.0)
    for name in REWARD_FIELDS:
        running = np.float32(running + np.float32(getattr(breakdown, name)))
    assert float(total) == float(running)
    assert float(total) == pytest.approx(sum(components(breakdown).values()), abs=TOL)


# ---------------------------------------------------------------------------------------------
# each component alone (§8.2) and the §11.2 "basic" table


@pytest.mark.parametrize("stage_after,paid", [(2, 1), (3, 2), (4, 4), (5, 8), (6, 16), (7, 32),
                                              (8, 64), (9, 100), (1, 0), (10, 0)])
def test_stage_completion_table(stage_after, paid):
    """§8.2 #1: k = stage - 1 (stage after the increment) pays table[k-1] iff 1 <= k <= 8.
    Stage 9 (only via setState, errata E1) pays 100; stage 10 pays nothing."""
    check(inputs(stage_advanced=True, stage=stage_after, old_distance=0), -0.01 + paid,
          stage_completion=paid)


def test_winning_step_pays_64_not_100():
    """§8.4: victory leaves the stage at 8, so the winning step's completion pays 64."""
    check(inputs(stage_advanced=True, game_won=True, stage=8, old_distance=0),
          -0.01 + 64 + 500, stage_completion=64, victory=500)


def test_score_gain():
    """§8.2 #2: (score - old) * 0.5, signed; no change pays nothing."""
    check(inputs(score=10), -0.01 + 5.0, score_gain=5.0)
    check(inputs(score=5, old_score=5), -0.01)
    check(inputs(score=1, old_score=5), -0.01 - 2.0, score_gain=-2.0)


@pytest.mark.parametrize("kills", [1, 2])
def test_kills(kills):
    """§8.2 #3: totalKills * 0.3 (the count is the env's §1.1 bookkeeping)."""
    check(inputs(total_kills=kills), -0.01 + 0.3 * kills, kills=0.3 * kills)


def test_data_siphon_collected():
    """§8.2 #4: +1.0 for walking onto a data-siphon cell."""
    check(inputs(data_siphon_collected=True), 0.99, data_siphon=1.0)


def test_victory_bonus():
    """§8.2 #6: 500 + 100 * score (victory alone; §11.2 scores 10 and 0)."""
    check(inputs(game_won=True, score=10, old_score=10), -0.01 + 1500, victory=1500)
    check(inputs(game_won=True), -0.01 + 500, victory=500)


@pytest.mark.parametrize("stage,penalty", [(1, -0.0), (2, -0.5), (3, -1.5), (4, -3.5),
                                           (5, -7.5), (6, -15.5), (7, -31.5), (8, -63.5)])
def test_death_penalty_table(stage, penalty):
    """§8.3 alone: -0.5 * sum(table[0..stage-2]) (a dead player stepping again, HP 0 -> 0);
    stage 1 evaluates to negative zero."""
    breakdown = check(inputs(player_died=True, old_hp=0, hp=0, stage=stage), -0.01 + penalty,
                      death_penalty=penalty)
    if stage == 1:
        assert np.signbit(np.float32(breakdown.death_penalty))


@pytest.mark.parametrize("stage,total", [(1, -1.01), (2, -1.51), (4, -4.51), (8, -64.51)])
def test_death_from_one_hp(stage, total):
    """§11.2: death from HP 1 = step + damage -1 + death penalty; the distance delta is 0 on
    death even if the BFS distance fell (§8.5)."""
    check(inputs(player_died=True, old_hp=1, hp=0, stage=stage, new_distance=2), total,
          damage_penalty=-1.0, death_penalty=total + 1.01)


@pytest.mark.parametrize("dc,de,paid", [(10, 0, 0.5), (0, 8, 0.4), (5, 3, 0.4), (-5, -3, -0.4)])
def test_resource_gain_is_signed(dc, de, paid):
    """§8.2 #8: (dC + dE) * 0.05, signed: spending is penalised."""
    check(inputs(old_credits=20, old_energy=20, credits=20 + dc, energy=20 + de), -0.01 + paid,
          resource_gain=paid)


def test_resource_holding_only_on_stage_advance():
    """§8.2 #9: (credits + energy) * 0.01 when the stage advanced (alone: stage 10 pays no
    completion, errata E1); holding 100 C / 50 E without completion pays nothing."""
    check(inputs(stage_advanced=True, stage=10, old_distance=0, credits=100, old_credits=100,
                 energy=50, old_energy=50), -0.01 + 1.5, resource_holding=1.5)
    check(inputs(credits=100, old_credits=100, energy=50, old_energy=50), -0.01)


@pytest.mark.parametrize("stage,credits,energy,paid", [(3, 10, 5, 2 + 0.15), (4, 20, 10, 4 + 0.3)])
def test_stage_completion_with_holdings(stage, credits, energy, paid):
    """§11.2: completion at stage s (field s) with holdings pays table + (C + E) * 0.01."""
    check(inputs(stage_advanced=True, stage=stage, old_distance=0, credits=credits,
                 old_credits=credits, energy=energy, old_energy=energy), -0.01 + paid,
          stage_completion=paid - (credits + energy) * 0.01,
          resource_holding=(credits + energy) * 0.01)


def test_damage_and_recovery_split():
    """§8.2 #10/#11: HP 3 -> 2 is -1; 3 -> 1 is damage -2 / recovery 0; 1 -> 3 is 0 / +2."""
    check(inputs(old_hp=3, hp=2), -1.01, damage_penalty=-1.0)
    check(inputs(old_hp=3, hp=1), -2.01, damage_penalty=-2.0)
    check(inputs(old_hp=1, hp=3), 1.99, hp_recovery=2.0)


def test_undo_lowering_hp_is_damage():
    """errata E2: UNDO can lower HP by several points; the reward reads it as damage."""
    check(inputs(old_hp=3, hp=1, credits=4, old_credits=4), -2.01, damage_penalty=-2.0)


def test_reset_waste():
    """§8.2 #13 and §11.2: RESET from HP 2 is +1 - 0.3 (energy held equal here); from HP 1 is
    +2 with no waste; a move healing 2 -> 3 has no waste."""
    check(inputs(old_hp=2, hp=3, reset_wasteful=True), -0.01 + 1.0 - 0.3, hp_recovery=1.0,
          program_waste=-0.3)
    check(inputs(old_hp=1, hp=3), -0.01 + 2.0, hp_recovery=2.0)
    check(inputs(reset_wasteful=True), -0.31, program_waste=-0.3)


def test_siphon_with_score_and_resources():
    """§11.2: a siphon gaining 10 score, 5 C and 3 E pays 5.0 + 0.4."""
    check(inputs(siphon_used=True, score=10, credits=5, energy=3), -0.01 + 5.4, score_gain=5.0,
          resource_gain=0.4)


@pytest.mark.parametrize("died,old_hp,hp,stage,total", [
    (True, 1, 0, 1, -11.01), (False, 1, 0, 1, -1.01), (True, 1, 0, 4, -14.51)])
def test_siphon_death_penalty(died, old_hp, hp, stage, total):
    """§8.7 and §11.2: -10 on top of death and damage penalties when flagged."""
    check(inputs(player_died=True, old_hp=old_hp, hp=hp, stage=stage, died_to_siphon_enemy=died),
          total, damage_penalty=-1.0, death_penalty={1: -0.0, 4: -3.5}[stage],
          siphon_death_penalty=-10.0 if died else 0.0)
    check(inputs(died_to_siphon_enemy=True), -10.01, siphon_death_penalty=-10.0)
    check(inputs(old_hp=3, hp=2), -1.01, damage_penalty=-1.0)  # alive: never flagged


# ---------------------------------------------------------------------------------------------
# siphon-quality reward (§11.1, §11.2)


@pytest.mark.parametrize("used,optimal,credits,energy,paid", [
    (True, False, 10, 0, -0.25), (True, False, 10, 10, -0.5), (True, True, 0, 0, 0.0),
    (False, False, 20, 20, 0.0), (True, False, 8, 4, -0.3), (False, False, 100, 100, 0.0),
    (True, True, 10, 5, 0.0)])
def test_siphon_quality_reward(used, optimal, credits, energy, paid):
    """§8.2 #12: -0.5 * (missedC + missedE) * 0.05, only for a used, non-optimal siphon."""
    check(inputs(siphon_used=used, siphon_optimal=optimal, missed_credits=credits,
                 missed_energy=energy), -0.01 + paid, siphon_quality=paid)


def test_suboptimal_siphon_lowers_total_below_baseline():
    """§11.1: a sub-optimal siphon's total is below the -0.01 baseline."""
    _, baseline = SWIFT(inputs())
    _, worse = SWIFT(inputs(siphon_used=True, siphon_optimal=False, missed_credits=10))
    assert float(baseline) == pytest.approx(-0.01, abs=TOL) and float(worse) < float(baseline)


# ---------------------------------------------------------------------------------------------
# §8.11 worked examples


@pytest.mark.parametrize("name,overrides,total", [
    ("move closer", dict(new_distance=9), 0.04),
    ("move away", dict(old_distance=9), -0.01),
    ("attack kills", dict(total_kills=1), 0.29),
    ("SIPH+", dict(old_credits=5), -0.26),
    ("EXCH", dict(old_credits=4, energy=4), -0.01),
    ("RESET at 2 HP", dict(old_energy=4, old_hp=2, hp=3, reset_wasteful=True), 0.49),
    ("exit completes stage 3", dict(stage_advanced=True, stage=4, old_distance=1, new_distance=7,
                                    old_hp=2, hp=3, credits=10, old_credits=10, energy=5,
                                    old_energy=5), 5.19),
    ("win from next to the exit", dict(stage_advanced=True, game_won=True, stage=8,
                                       old_distance=1, new_distance=0, score=20, old_score=20),
     2564.04),
    ("die on stage 3 to a siphon enemy", dict(player_died=True, old_hp=1, hp=0, stage=3,
                                              died_to_siphon_enemy=True), -12.51),
])
def test_worked_examples(name, overrides, total):
    """§8.11 rows, each derived from the §8.2 formulas."""
    _, got = SWIFT(inputs(**overrides))
    assert float(got) == pytest.approx(total, rel=REL, abs=TOL), name


# ---------------------------------------------------------------------------------------------
# distance: BFS (§8.5) and shaping


def board(*cells):
    return bitboard.from_bool(jnp.isin(jnp.arange(36), jnp.asarray(
        [r * 6 + c for r, c in cells] or [-1])))


ROW3_COLS1_5 = board(*[(3, c) for c in range(1, 6)])
ROW3_COLS0_4 = board(*[(3, c) for c in range(5)])
ROW1_FULL = board(*[(1, c) for c in range(6)])
EXIT_BLOCKED = board((5, 5))
WALLED_22 = board((3, 2), (1, 2), (2, 1), (2, 3))
EMPTY = board()


def cell(row, col):
    return row * 6 + col


@pytest.mark.parametrize("blocks,start,target,distance,reachable", [
    (EMPTY, (2, 2), (2, 2), 0, True),
    (EMPTY, (2, 2), (2, 3), 1, True),
    (EMPTY, (0, 0), (5, 5), 10, True),
    (ROW3_COLS1_5, (2, 3), (4, 3), 8, True),
    (ROW1_FULL, (0, 0), (5, 5), 0, False),
    (EXIT_BLOCKED, (5, 4), (5, 5), 1, True),
    (WALLED_22, (2, 2), (5, 5), 0, False),
    (WALLED_22, (0, 0), (2, 2), 0, False),
    (board((0, 0)), (0, 0), (0, 2), 2, True),  # the start cell is never tested
    (board((0, 1), (1, 0)), (0, 0), (0, 1), 1, True),  # adjacent target on a block
])
def test_bfs_distance(blocks, start, target, distance, reachable):
    """§8.5 / §11.2 BFS: start == target is 0; a target on a block is reachable; other blocks
    are impassable; no path gives reachable False and distance 0."""
    got, ok = BFS(blocks, cell(*start), cell(*target))
    assert int(got) == distance and bool(ok) == reachable
    assert int(EXIT_DISTANCE(blocks, cell(*start), cell(*target))) == distance


def test_player_exit_distance_uses_exit_position_and_all_blocks():
    """§8.1: BFS from the player to exitPosition; siphoned blocks are obstacles too."""
    state = blank_state()
    content = np.zeros(36, np.int32)
    content[[cell(1, c) for c in range(5)]] = C.BLOCK
    siphoned = np.zeros(36, bool)
    siphoned[cell(1, 0)] = True
    state = state.replace(grid=state.grid.replace(content=jnp.asarray(content),
                                                  siphoned=jnp.asarray(siphoned)),
                          exit_row=jnp.int32(2), exit_col=jnp.int32(0))
    # (0,0) -> (0,5) -> (1,5) -> (2,5) -> (2,0): 5 + 1 + 1 + 5 = 12.
    assert int(PLAYER_EXIT_DISTANCE(state)) == 12


@pytest.mark.parametrize("blocks,old,new,paid", [
    (EMPTY, (0, 0), (1, 0), 0.05),
    (EMPTY, (1, 0), (0, 0), 0.0),
    (ROW3_COLS0_4, (2, 4), (2, 5), 0.05),
    (ROW1_FULL, (0, 0), (0, 1), 0.0),
    (EXIT_BLOCKED, (4, 4), (5, 4), 0.05),
])
def test_distance_shaping_from_bfs(blocks, old, new, paid):
    """§11.2 'Distance shaping': max(old - new, 0) * 0.05 with Swift distances (no path 0)."""
    exit_cell = cell(5, 5)
    d_old = EXIT_DISTANCE(blocks, cell(*old), exit_cell)
    d_new = EXIT_DISTANCE(blocks, cell(*new), exit_cell)
    check(inputs(old_distance=d_old, new_distance=d_new), -0.01 + paid, distance_shaping=paid)


def test_distance_delta_rules():
    """§8.5: exit reached pays the old distance (stage 10: no completion pay); death pays 0;
    a path that becomes unreachable (new 0) pays the old distance."""
    check(inputs(stage_advanced=True, stage=10, old_distance=6, new_distance=9), -0.01 + 0.3,
          distance_shaping=0.3)
    check(inputs(player_died=True, old_hp=0, hp=0, old_distance=6, new_distance=1),
          -0.01, death_penalty=-0.0)
    check(inputs(old_distance=6, new_distance=0), -0.01 + 0.3, distance_shaping=0.3)


# ---------------------------------------------------------------------------------------------
# siphon quality (§8.6, §11.2, errata O10)


def grid_state(player, blocks=(), credits=(), energy=(), siphoned=(), owned=()):
    """blocks: (row, col, points, program, question); credits/energy: (row, col, amount)."""
    state = blank_state()
    g = {name: np.array(getattr(state.grid, name)) for name in
         ("content", "points", "program", "question", "credits", "energy", "siphoned")}
    for row, col, points, program, question in blocks:
        i = cell(row, col)
        g["content"][i], g["points"][i], g["program"][i] = C.BLOCK, points, program
        g["question"][i] = question
    for row, col, amount in credits:
        g["credits"][cell(row, col)] = amount
    for row, col, amount in energy:
        g["energy"][cell(row, col)] = amount
    for row, col in siphoned:
        g["siphoned"][cell(row, col)] = True
    rank = np.full(23, -1, np.int32)
    rank[list(owned)] = np.arange(len(owned))
    return state.replace(
        grid=state.grid.replace(**{k: jnp.asarray(v) for k, v in g.items()}),
        player=state.player.replace(row=jnp.int32(player[0]), col=jnp.int32(player[1])),
        program_rank=jnp.asarray(rank))


def quality(state):
    optimal, credits, energy = SIPHON_QUALITY(state)
    return bool(optimal), int(credits), int(energy)


def data(row, col, points, question=False):
    return (row, col, points, -1, question)


def program(row, col, program_type, question=False):
    return (row, col, 0, program_type, question)


@pytest.mark.parametrize("name,state,expected", [
    ("data block, nothing elsewhere",
     grid_state((3, 2), blocks=[data(3, 3, 5)]), (True, 0, 0)),
    ("same block reachable with 10 credits",
     grid_state((2, 1), blocks=[data(2, 2, 5)], credits=[(2, 4, 10)]), (False, 10, 0)),
    ("two blocks reachable only from here",
     grid_state((2, 2), blocks=[data(1, 2, 3), data(3, 2, 7)], credits=[(0, 1, 20)]),
     (True, 0, 0)),
    ("unowned program block, 5 credits beyond it",
     grid_state((2, 1), blocks=[program(2, 2, C.DEBUG)], credits=[(2, 4, 5)]), (False, 5, 0)),
    ("the only block already siphoned",
     grid_state((2, 1), blocks=[data(2, 2, 5)], siphoned=[(2, 2)]), (True, 0, 0)),
    ("the block's program already owned",
     grid_state((2, 1), blocks=[program(2, 2, C.DEBUG)], owned=[C.DEBUG]), (True, 0, 0)),
])
def test_siphon_quality_spec_cases(name, state, expected):
    """§11.2 'Siphon-quality unit tests'."""
    assert quality(state) == expected, name


def test_owned_program_yield_is_empty_so_every_floor_cell_is_compared():
    """§8.6: with no data and no unowned program in the current yield, every non-block cell is
    compared, so 5 credits two cells beyond an owned-program block are missed."""
    state = grid_state((2, 1), blocks=[program(2, 2, C.DEBUG)], credits=[(2, 4, 5)],
                       owned=[C.DEBUG])
    assert quality(state) == (False, 5, 0)


def test_question_blocks_count_by_hidden_content():
    """§8.6: a question block contributes its hidden points (or program)."""
    hidden_data = grid_state((2, 1), blocks=[data(2, 2, 5, question=True)], credits=[(2, 4, 10)])
    assert quality(hidden_data) == (False, 10, 0)
    hidden_owned = grid_state((2, 1), blocks=[program(2, 2, C.WARP, question=True)],
                              owned=[C.WARP], energy=[(5, 5, 3)])
    assert quality(hidden_owned) == (False, 0, 3)  # empty yield: the whole board is compared


def test_only_positions_reaching_the_same_blocks_are_compared():
    """§8.6: a far position with equal data points (from another block) and more credits is
    not compared, because it does not reach the block in the player's cross."""
    state = grid_state((2, 1), blocks=[data(2, 2, 5), data(0, 4, 5)], credits=[(1, 5, 10)])
    assert quality(state) == (True, 0, 0)


def test_data_values_compared_as_multisets():
    """§8.6: a candidate that also reaches a second block has data [4, 5] != [5]: not better,
    even with more credits."""
    state = grid_state((2, 1), blocks=[data(2, 2, 5), data(3, 3, 4)], credits=[(2, 4, 10)])
    assert quality(state) == (True, 0, 0)


def test_missed_credits_and_energy_are_independent_maxima():
    """§8.6: the two maxima may come from different positions."""
    state = grid_state((0, 0), credits=[(3, 3, 4)], energy=[(5, 0, 6)])
    assert quality(state) == (False, 4, 6)


def test_siphoned_cells_and_resources_under_blocks_do_not_count():
    """§8.6: cells already siphoned are skipped; resources under blocks are not counted."""
    state = grid_state((0, 0), credits=[(3, 3, 5)], siphoned=[(3, 3)])
    assert quality(state) == (True, 0, 0)
    under_block = grid_state((0, 0), blocks=[data(3, 3, 2)], credits=[(3, 3, 5)])
    assert quality(under_block) == (True, 0, 0)


def test_current_resources_count_and_ties_are_not_better():
    """§8.6: the player's own cross counts; equal yields are not strictly better."""
    state = grid_state((0, 0), credits=[(0, 0, 3), (4, 4, 3)])
    assert quality(state) == (True, 0, 0)
    state = grid_state((0, 0), credits=[(0, 1, 3), (4, 4, 5)])
    assert quality(state) == (False, 2, 0)


def test_standing_on_a_block_gives_an_empty_yield():
    """errata O10: after WARP onto a block the current yield is forced empty, so a floor cell
    with resources counts as strictly better, though the real siphon collects the blocks."""
    state = grid_state((2, 2), blocks=[data(2, 2, 5), data(2, 3, 9)], credits=[(4, 4, 3)])
    assert quality(state) == (False, 3, 0)


# ---------------------------------------------------------------------------------------------
# potential-based shaping (decisions R7)


def _cycle_rewards(rewarder, distances):
    """Rewards along a walk whose BFS distances are ``distances`` (a closed cycle when the
    first and last are equal)."""
    totals, shaping = [], []
    for d_old, d_new in zip(distances[:-1], distances[1:]):
        breakdown, total = rewarder(inputs(old_distance=d_old, new_distance=d_new))
        totals.append(float(total))
        shaping.append(float(breakdown.distance_shaping))
    return np.array(totals), np.array(shaping)


def test_swift_shaping_is_farmable_by_stepping_back_and_forth():
    """R7: closer +0.04 net, away -0.01, so each round trip nets +0.03 and it grows without
    bound."""
    totals, _ = _cycle_rewards(SWIFT, [10, 9, 10])
    np.testing.assert_allclose(totals, [0.04, -0.01], atol=TOL)
    totals, _ = _cycle_rewards(SWIFT, [10, 9] * 20 + [10])
    assert totals.sum() == pytest.approx(20 * 0.03, abs=1e-4)


@pytest.mark.parametrize("cycle", [[10, 9, 10], [4, 3, 2, 3, 4], [7, 0, 7], [1, 2, 3, 2, 1]])
def test_potential_shaping_cycles_do_not_pay(cycle):
    """R7: with gamma = 1 any closed cycle's shaping telescopes to 0 and its total is the step
    penalties; with gamma = 0.99 the cycle's total stays negative."""
    totals, shaping = _cycle_rewards(POTENTIAL_1, cycle)
    assert shaping.sum() == pytest.approx(0.0, abs=TOL)
    assert totals.sum() == pytest.approx(-0.01 * (len(cycle) - 1), abs=TOL)
    totals, _ = _cycle_rewards(POTENTIAL_099, cycle)
    assert totals.sum() <= 0.0


def test_potential_shaping_values_and_bounded_discounted_return():
    """R7: F = gamma * Phi(s') - Phi(s), Phi = -0.05 d. Back and forth 10 <-> 9 with
    gamma 0.99 gives +0.0545 / -0.045; the discounted shaping return of repeating the cycle
    telescopes to (gamma^n - 1) * Phi(s0), bounded by 0.5 however long it is repeated."""
    _, shaping = _cycle_rewards(POTENTIAL_099, [10, 9, 10])
    np.testing.assert_allclose(shaping, [0.99 * -0.45 + 0.5, 0.99 * -0.5 + 0.45], atol=TOL)
    _, shaping = _cycle_rewards(POTENTIAL_099, [10, 9] * 50 + [10])
    discounted = np.sum(shaping * 0.99 ** np.arange(len(shaping)))
    assert discounted == pytest.approx((0.99 ** 100 - 1) * -0.5, abs=1e-4)
    assert discounted < 0.5


def test_potential_shaping_terminal_and_exit_steps():
    """R7: Phi(s') = 0 on a terminal step (death or victory); a non-final stage advance uses the
    new board's distance."""
    breakdown, _ = POTENTIAL_099(inputs(player_died=True, old_hp=1, hp=0, old_distance=4,
                                        new_distance=2))
    assert float(breakdown.distance_shaping) == pytest.approx(0.2, abs=TOL)
    breakdown, _ = POTENTIAL_099(inputs(stage_advanced=True, game_won=True, stage=8,
                                        old_distance=1, new_distance=0))
    assert float(breakdown.distance_shaping) == pytest.approx(0.05, abs=TOL)
    breakdown, _ = POTENTIAL_099(inputs(stage_advanced=True, stage=3, old_distance=1,
                                        new_distance=10))
    assert float(breakdown.distance_shaping) == pytest.approx(0.99 * -0.5 + 0.05, abs=TOL)


def test_potential_shaping_changes_only_the_distance_component():
    """R7: every other component is identical to the Swift calculator."""
    inp = inputs(stage_advanced=True, stage=4, old_distance=3, new_distance=8, old_hp=2, hp=3,
                 credits=7, old_credits=9, energy=2, score=4, total_kills=1,
                 data_siphon_collected=True)
    swift, _ = SWIFT(inp)
    potential, _ = POTENTIAL_099(inp)
    for name in REWARD_FIELDS:
        if name != "distance_shaping":
            assert float(getattr(swift, name)) == float(getattr(potential, name)), name
    assert float(swift.distance_shaping) == pytest.approx(0.15, abs=TOL)
    assert float(potential.distance_shaping) == pytest.approx(0.99 * -0.4 + 0.15, abs=TOL)


def test_unknown_shaping_is_rejected():
    with pytest.raises(ValueError):
        compute_reward(inputs(), shaping="linear")
