"""Golden reward table (programs-rewards-observation §8, §11; errata E1, E2; decisions R4, R7).

Every expected value is derived by hand from the spec formulas, never copied from an engine.
Two kinds of case:

* ``InputCase``: reward inputs (``rewards.RewardInputs`` fields over ``NEUTRAL_INPUTS``) fed to
  ``rewards.compute_reward`` directly;
* ``StepCase``: a setState scenario and one action, played through the engines (in process and
  over the protocol), checked against Swift's 14 reported keys, the total and ``done``.

``expected`` lists the non-zero components by our field names (``step_penalty`` included);
every other component must be 0. ``total`` is the hand-computed sum.
"""

from typing import NamedTuple

# Player (0,0), HP 3, exit (5,5), stage 1, nothing changed, no event: only the step penalty.
NEUTRAL_INPUTS = dict(
    old_score=0, old_hp=3, old_credits=0, old_energy=0, old_distance=0, new_distance=0,
    success=True, stage_advanced=False, game_won=False, player_died=False, total_kills=0,
    data_siphon_collected=False, siphon_used=False, siphon_optimal=True, missed_credits=0,
    missed_energy=0, reset_wasteful=False, died_to_siphon_enemy=False, score=0, hp=3, credits=0,
    energy=0, stage=1)

STEP = {"step_penalty": -0.01}
STAGE_TABLE = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 100.0]  # §8.2 #1
DEATH_TABLE = {1: -0.0, 2: -0.5, 3: -1.5, 4: -3.5, 5: -7.5, 6: -15.5, 7: -31.5, 8: -63.5}  # §8.3


class InputCase(NamedTuple):
    name: str
    section: str
    inputs: dict
    expected: dict
    total: float


class StepCase(NamedTuple):
    name: str
    section: str
    scenario: dict
    action: int
    expected: dict
    total: float
    done: bool


def _inputs(**changes) -> dict:
    return {**NEUTRAL_INPUTS, **changes}


INPUT_CASES = [
    InputCase("no-op pays only the step penalty", "§8.2 #0, §11.2", _inputs(), STEP, -0.01),
    *[InputCase(f"completing stage {s} (stage field {s + 1}) pays table[{s - 1}]",
                "§8.2 #1, §11.2, errata E1", _inputs(stage_advanced=True, stage=s + 1),
                {**STEP, "stage_completion": STAGE_TABLE[s - 1]}, -0.01 + STAGE_TABLE[s - 1])
      for s in range(1, 9)],
    InputCase("stage field 10 pays no completion (k = 9 is outside 1..8)", "§8.2 #1, errata E1",
              _inputs(stage_advanced=True, stage=10), STEP, -0.01),
    InputCase("score 0 -> 10", "§8.2 #2, §11.2", _inputs(score=10), {**STEP, "score_gain": 5.0},
              4.99),
    InputCase("score 10 -> 6 is signed", "§8.2 #2", _inputs(old_score=10, score=6),
              {**STEP, "score_gain": -2.0}, -2.01),
    InputCase("two kills", "§8.2 #3, §11.2", _inputs(total_kills=2), {**STEP, "kills": 0.6}, 0.59),
    InputCase("data siphon collected", "§8.2 #4", _inputs(data_siphon_collected=True),
              {**STEP, "data_siphon": 1.0}, 0.99),
    InputCase("one BFS cell closer", "§8.5, §8.11", _inputs(old_distance=5, new_distance=4),
              {**STEP, "distance_shaping": 0.05}, 0.04),
    InputCase("moving away is not penalised", "§8.5, §8.11",
              _inputs(old_distance=4, new_distance=5), STEP, -0.01),
    InputCase("reachable -> unreachable pays the old distance", "§8.5",
              _inputs(old_distance=3, new_distance=0), {**STEP, "distance_shaping": 0.15}, 0.14),
    InputCase("death zeroes the distance delta", "§8.5",
              _inputs(old_distance=3, new_distance=0, player_died=True, old_hp=1, hp=0),
              {**STEP, "death_penalty": -0.0, "damage_penalty": -1.0}, -1.01),
    InputCase("exit reached pays the old distance, not old - new", "§8.5",
              _inputs(old_distance=6, new_distance=9, stage_advanced=True, stage=2),
              {**STEP, "stage_completion": 1.0, "distance_shaping": 0.3}, 1.29),
    InputCase("victory with score 10 on the final stage (stage stays 8)", "§8.2 #6, §8.4",
              _inputs(stage_advanced=True, game_won=True, stage=8, score=10, old_score=10),
              {**STEP, "stage_completion": 64.0, "victory": 1500.0}, 1563.99),
    InputCase("victory with score 0", "§8.2 #6, §11.2",
              _inputs(stage_advanced=True, game_won=True, stage=8),
              {**STEP, "stage_completion": 64.0, "victory": 500.0}, 563.99),
    *[InputCase(f"death from 1 HP at stage {s}", "§8.3, §11.2",
                _inputs(player_died=True, old_hp=1, hp=0, stage=s),
                {**STEP, "death_penalty": DEATH_TABLE[s], "damage_penalty": -1.0},
                -1.01 + DEATH_TABLE[s])
      for s in range(1, 9)],
    InputCase("+10 credits", "§8.2 #8, §11.2", _inputs(credits=10),
              {**STEP, "resource_gain": 0.5}, 0.49),
    InputCase("+8 energy", "§8.2 #8, §11.2", _inputs(energy=8), {**STEP, "resource_gain": 0.4},
              0.39),
    InputCase("+5 credits +3 energy", "§8.2 #8, §11.2", _inputs(credits=5, energy=3),
              {**STEP, "resource_gain": 0.4}, 0.39),
    InputCase("-5 credits -3 energy is signed", "§8.2 #8, §11.2",
              _inputs(old_credits=5, old_energy=3), {**STEP, "resource_gain": -0.4}, -0.41),
    InputCase("holding 20 C / 10 E on completing stage 3", "§8.2 #9, §11.2",
              _inputs(stage_advanced=True, stage=3, old_credits=20, old_energy=10, credits=20,
                      energy=10),
              {**STEP, "stage_completion": 2.0, "resource_holding": 0.3}, 2.29),
    InputCase("holding is paid only on completion", "§8.2 #9, §11.2",
              _inputs(old_credits=100, old_energy=50, credits=100, energy=50), STEP, -0.01),
    InputCase("HP 3 -> 1", "§8.2 #10, §11.2", _inputs(hp=1), {**STEP, "damage_penalty": -2.0},
              -2.01),
    InputCase("HP 1 -> 3", "§8.2 #11, §11.2", _inputs(old_hp=1),
              {**STEP, "hp_recovery": 2.0}, 1.99),
    InputCase("sub-optimal siphon, 10 credits missed", "§8.2 #12, §11.1",
              _inputs(siphon_used=True, siphon_optimal=False, missed_credits=10),
              {**STEP, "siphon_quality": -0.25}, -0.26),
    InputCase("sub-optimal siphon, 10 credits and 10 energy missed", "§8.2 #12, §11.1",
              _inputs(siphon_used=True, siphon_optimal=False, missed_credits=10,
                      missed_energy=10),
              {**STEP, "siphon_quality": -0.5}, -0.51),
    InputCase("sub-optimal siphon, 8 credits and 4 energy missed", "§8.2 #12, §11.2",
              _inputs(siphon_used=True, siphon_optimal=False, missed_credits=8, missed_energy=4),
              {**STEP, "siphon_quality": -0.3}, -0.31),
    InputCase("optimal siphon pays nothing", "§8.2 #12, §11.1",
              _inputs(siphon_used=True, siphon_optimal=True), STEP, -0.01),
    InputCase("'not optimal' without a siphon is ignored", "§8.2 #12, §11.1",
              _inputs(siphon_optimal=False, missed_credits=20, missed_energy=20), STEP, -0.01),
    InputCase("program waste alone", "§8.2 #13", _inputs(reset_wasteful=True),
              {**STEP, "program_waste": -0.3}, -0.31),
    InputCase("RESET at 2 HP: recovery and waste", "§8.2 #11/#13, §11.2",
              _inputs(reset_wasteful=True, old_hp=2),
              {**STEP, "hp_recovery": 1.0, "program_waste": -0.3}, 0.69),
    InputCase("death next to a siphon-spawned enemy at stage 1", "§8.7, §11.2",
              _inputs(player_died=True, died_to_siphon_enemy=True, old_hp=1, hp=0),
              {**STEP, "death_penalty": -0.0, "damage_penalty": -1.0,
               "siphon_death_penalty": -10.0}, -11.01),
    InputCase("death next to a siphon-spawned enemy at stage 4", "§8.7, §11.2",
              _inputs(player_died=True, died_to_siphon_enemy=True, old_hp=1, hp=0, stage=4),
              {**STEP, "death_penalty": -3.5, "damage_penalty": -1.0,
               "siphon_death_penalty": -10.0}, -14.51),
    InputCase("a failed action pays exactly nothing, not even the step penalty",
              "§8.9, decisions R4",
              _inputs(success=False, score=10, total_kills=3, stage_advanced=True, stage=2,
                      player_died=True, hp=0, credits=7),
              {}, 0.0),
]

# Scenarios for the engines. Without "turn" the scheduler is at 0/12, so no scheduled spawn
# fires; blocks get spawnCount 0 so no siphon transmissions are owed.


def _at(row, col, **player) -> dict:
    return {"row": row, "col": col, **player}


def _death_case(stage, player, enemy_cell, from_siphon, hp=1):
    """The player siphons an empty cross (a pure turn-ender worth nothing: no resources
    anywhere, so it is optimal) and the adjacent virus attacks once (§7.4)."""
    scenario = {"player": _at(*player, hp=hp, dataSiphons=1), "stage": stage,
                "enemies": [{"type": "virus", "row": enemy_cell[0], "col": enemy_cell[1],
                             "hp": 2, "spawnedFromSiphon": from_siphon}]}
    return scenario, 4


STEP_CASES = [
    StepCase("move one cell closer on an open board", "§8.11",
             {"player": _at(0, 0)}, 0, {**STEP, "distance_shaping": 0.05}, 0.04, False),
    StepCase("move away", "§8.11", {"player": _at(1, 0)}, 1, STEP, -0.01, False),
    StepCase("a failed move (off the board) pays 0 and ends the episode", "§7, §8.9, R4",
             {"player": _at(0, 0, score=3, credits=2)}, 1, {}, 0.0, True),
    StepCase("a failed program (unaffordable) pays 0 and ends the episode", "§3 step 3, §8.9",
             {"player": _at(2, 2, energy=0), "ownedPrograms": [10]}, 10, {}, 0.0, True),
    StepCase("shot kills a 1-HP virus, no damage taken", "§8.11, §5.2",
             {"player": _at(0, 0), "enemies": [{"type": "virus", "row": 2, "col": 0, "hp": 1}]},
             0, {**STEP, "kills": 0.3}, 0.29, False),
    StepCase("shooting a transmission counts as a kill", "§1.1, §8.2 #3",
             {"player": _at(0, 0),
              "transmissions": [{"row": 0, "col": 3, "turnsRemaining": 4, "enemyType": "glitch"}]},
             3, {**STEP, "kills": 0.3}, 0.29, False),
    StepCase("killing a scheduled-task enemy pays no kill", "§1.1, §8.1",
             {"player": _at(0, 0), "enemies": [{"type": "daemon", "row": 0, "col": 4, "hp": 1,
                                                "isFromScheduledTask": True}]},
             3, STEP, -0.01, False),
    StepCase("walking onto a data siphon", "§8.2 #4, game-rules §5.3",
             {"player": _at(0, 0), "resources": [{"row": 1, "col": 0, "dataSiphon": True}]},
             0, {**STEP, "data_siphon": 1.0, "distance_shaping": 0.05}, 1.04, False),
    StepCase("siphoning a 4-point data block", "§8.2 #2, game-rules §6",
             {"player": _at(0, 0, dataSiphons=1),
              "blocks": [{"row": 1, "col": 0, "type": "data", "points": 4, "spawnCount": 0}]},
             4, {**STEP, "score_gain": 2.0}, 1.99, False),
    StepCase("siphoning 3 credits and 2 energy from the cross", "§8.2 #8, game-rules §6",
             {"player": _at(0, 0, dataSiphons=1),
              "resources": [{"row": 1, "col": 0, "credits": 3}, {"row": 0, "col": 1, "energy": 2}]},
             4, {**STEP, "resource_gain": 0.25}, 0.24, False),
    StepCase("sub-optimal siphon: 10 credits missed", "§8.6, §11.2",
             {"player": _at(2, 1, dataSiphons=1),
              "blocks": [{"row": 2, "col": 2, "type": "data", "points": 5, "spawnCount": 0}],
              "resources": [{"row": 2, "col": 4, "credits": 10}]},
             4, {**STEP, "score_gain": 2.5, "siphon_quality": -0.25}, 2.24, False),
    StepCase("sub-optimal siphon: 8 credits and 4 energy missed", "§8.6, §11.2",
             {"player": _at(2, 1, dataSiphons=1),
              "blocks": [{"row": 2, "col": 2, "type": "data", "points": 5, "spawnCount": 0}],
              "resources": [{"row": 2, "col": 4, "credits": 8}, {"row": 3, "col": 3, "energy": 4}]},
             4, {**STEP, "score_gain": 2.5, "siphon_quality": -0.3}, 2.19, False),
    StepCase("SIPH+ is a signed resource loss", "§8.11, §4.12",
             {"player": _at(2, 2, credits=5), "ownedPrograms": [16]}, 16,
             {**STEP, "resource_gain": -0.25}, -0.26, False),
    StepCase("EXCH nets zero resource gain", "§8.11, §4.13",
             {"player": _at(2, 2, credits=4), "ownedPrograms": [17]}, 17, STEP, -0.01, False),
    StepCase("SCORE at stage 1: +7 score for 5 energy", "§4.20, §8.2 #2/#8",
             {"player": _at(2, 2, energy=5), "ownedPrograms": [24]}, 24,
             {**STEP, "score_gain": 3.5, "resource_gain": -0.25}, 3.24, False),
    StepCase("RESET at 2 HP", "§8.11, §4.15",
             {"player": _at(2, 2, hp=2, energy=4), "ownedPrograms": [19]}, 19,
             {**STEP, "resource_gain": -0.2, "hp_recovery": 1.0, "program_waste": -0.3}, 0.49,
             False),
    StepCase("RESET at 1 HP is not wasteful", "§4.15, §11.2",
             {"player": _at(2, 2, hp=1, energy=4), "ownedPrograms": [19]}, 19,
             {**STEP, "resource_gain": -0.2, "hp_recovery": 2.0}, 1.79, False),
    StepCase("completing stage 1 from next to the exit", "§8.4, §8.5",
             {"player": _at(4, 5)}, 0, {**STEP, "stage_completion": 1.0, "distance_shaping": 0.05},
             1.04, False),
    StepCase("step onto the exit completing stage 3; HP 2, 10 C, 5 E", "§8.11, §8.8",
             {"player": _at(4, 5, hp=2, credits=10, energy=5), "stage": 3}, 0,
             {**STEP, "stage_completion": 4.0, "distance_shaping": 0.05, "resource_holding": 0.15,
              "hp_recovery": 1.0}, 5.19, False),
    StepCase("win from next to the exit; score 20: the final stage pays 64", "§8.11, §8.4",
             {"player": _at(5, 4, score=20), "stage": 8}, 3,
             {**STEP, "stage_completion": 64.0, "distance_shaping": 0.05, "victory": 2500.0},
             2564.04, True),
    StepCase("setState stage 9 then the exit pays 100 and wins", "errata E1",
             {"player": _at(4, 5), "stage": 9}, 0,
             {**STEP, "stage_completion": 100.0, "distance_shaping": 0.05, "victory": 500.0},
             600.04, True),
    StepCase("WARP onto the exit: kill, completion and the old distance", "§4.4, §8.5",
             {"player": _at(0, 0, credits=2, energy=2), "ownedPrograms": [8],
              "enemies": [{"type": "virus", "row": 5, "col": 5, "hp": 2}]}, 8,
             {**STEP, "stage_completion": 1.0, "kills": 0.3, "distance_shaping": 0.5,
              "resource_gain": -0.2}, 1.59, False),
    StepCase("hit by an adjacent virus, HP 3 -> 2", "§8.2 #10, §7.4",
             *_death_case(1, (2, 3), (3, 3), True, hp=3), {**STEP, "damage_penalty": -1.0},
             -1.01, False),
    *[StepCase(f"death from 1 HP at stage {s}", "§8.3, §11.2",
               *_death_case(s, (2, 3), (3, 3), False),
               {**STEP, "death_penalty": DEATH_TABLE[s], "damage_penalty": -1.0},
               -1.01 + DEATH_TABLE[s], True)
      for s in (1, 2, 4, 8)],
    StepCase("death at stage 1 next to a siphon-spawned enemy", "§8.7, §11.2",
             *_death_case(1, (2, 3), (3, 3), True),
             {**STEP, "death_penalty": -0.0, "damage_penalty": -1.0,
              "siphon_death_penalty": -10.0}, -11.01, True),
    StepCase("death at stage 3 next to a siphon-spawned enemy", "§8.11",
             *_death_case(3, (2, 3), (3, 3), True),
             {**STEP, "death_penalty": -1.5, "damage_penalty": -1.0,
              "siphon_death_penalty": -10.0}, -12.51, True),
    StepCase("death at stage 4, player (2,2), siphon-spawned enemy (2,3)", "§8.7, §11.2",
             *_death_case(4, (2, 2), (2, 3), True),
             {**STEP, "death_penalty": -3.5, "damage_penalty": -1.0,
              "siphon_death_penalty": -10.0}, -14.51, True),
]
