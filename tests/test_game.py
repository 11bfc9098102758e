"""Scenario tests of the core rules through the environment step (game-rules §4-§10,
programs-rewards-observation §8.11). Every scenario is built with set_state (Swift's setState
schema) and checks the outcome the spec gives; expected values are derived by hand."""

import numpy as np
import pytest

from envs.hackmatrix.core.constants import DAEMON, BLOCK, EMPTY, EXIT
from tests.game_harness import (active_enemies, active_transmissions, breakdown, nonzero_components,
                                scenario, step)

UP, DOWN, LEFT, RIGHT, SIPHON = 0, 1, 2, 3, 4


def player_at(state):
    return int(state.player.row), int(state.player.col)


def test_move_closer_on_open_board_pays_step_penalty_plus_shaping():
    """§8.11: moving one cell closer on an open board pays -0.01 + 0.05."""
    _, s, reward, terminated, info = step(scenario(), UP)
    assert player_at(s) == (1, 0)
    assert reward == pytest.approx(0.04, abs=1e-5)
    assert not terminated
    assert int(s.turn) == 1  # a move ends the turn (§4)


def test_move_away_pays_only_the_step_penalty():
    """§8.11 / §8.5: moving away is not penalised beyond -0.01."""
    _, s, reward, _, _ = step(scenario(player={"row": 1, "col": 0}), DOWN)
    assert player_at(s) == (0, 0)
    assert reward == pytest.approx(-0.01, abs=1e-5)


def test_move_into_edge_is_invalid_and_changes_nothing():
    """§5.3 / R4: an illegal move fails: reward 0, terminated, invalid_action, no change."""
    start = scenario(player={"row": 0, "col": 0, "credits": 3})
    _, s, reward, terminated, info = step(start, DOWN)
    assert bool(terminated) and bool(info["invalid_action"])
    assert float(reward) == 0.0
    assert all(v == 0.0 for v in breakdown(info).values())  # §8.9: no step penalty
    assert player_at(s) == (0, 0) and int(s.turn) == 0


def test_adjacent_block_stops_the_line_and_the_move_fails():
    """§14 item 3: an adjacent block ends the line at once; the action fails even with an
    enemy beyond it."""
    start = scenario(player={"row": 0, "col": 1},
                     blocks=[{"row": 0, "col": 2, "type": "data", "points": 3}],
                     enemies=[{"type": "daemon", "row": 0, "col": 4, "hp": 3}])
    _, s, reward, terminated, info = step(start, RIGHT)
    assert bool(info["invalid_action"]) and bool(terminated)
    assert active_enemies(s)[0]["hp"] == 3


def test_block_in_line_protects_enemy_and_player_moves():
    """§5.1: a block stops the scan; with no target the player steps instead."""
    start = scenario(blocks=[{"row": 0, "col": 2, "type": "data", "points": 3}],
                     enemies=[{"type": "daemon", "row": 0, "col": 4, "hp": 3, "stunned": False}])
    _, s, _, _, info = step(start, RIGHT)
    assert player_at(s) == (0, 1)
    assert not bool(info["shot"])


def test_shot_has_unlimited_range_and_stuns_a_survivor():
    """§5.1/§5.2: a daemon 4 cells away is shot (hp 3 -> 2), stunned, so it does not act in
    this enemy turn; the stun is cleared at the end of that turn (§7.2 step 7)."""
    start = scenario(enemies=[{"type": "daemon", "row": 0, "col": 4, "hp": 3}])
    _, s, reward, _, info = step(start, RIGHT)
    assert player_at(s) == (0, 0)
    (enemy,) = active_enemies(s)
    assert (enemy["row"], enemy["col"], enemy["hp"], enemy["stunned"]) == (0, 4, 2, False)
    assert bool(info["shot"])
    assert reward == pytest.approx(-0.01, abs=1e-5)


def test_killing_shot_pays_kill_reward_but_not_for_scheduled_enemies():
    """§8.11: a kill with no damage taken totals 0.29; scheduled-task enemies count 0 (§1.1)."""
    for scheduled, expected in ((False, 0.29), (True, -0.01)):
        start = scenario(player={"row": 0, "col": 0, "attackDamage": 2},
                         enemies=[{"type": "virus", "row": 3, "col": 0, "hp": 2,
                                   "isFromScheduledTask": scheduled}])
        _, s, reward, _, _ = step(start, UP)
        assert active_enemies(s) == []
        assert reward == pytest.approx(expected, abs=1e-5)


def test_transmission_is_hit_before_an_enemy_on_the_same_cell():
    """§5.1 step 2 / §14 item 2: the shot destroys the transmission, the enemy is untouched
    and then walks toward the player (pass A, first move left)."""
    start = scenario(enemies=[{"type": "daemon", "row": 0, "col": 3, "hp": 3}],
                     transmissions=[{"row": 0, "col": 3, "turnsRemaining": 3,
                                     "enemyType": "virus"}])
    _, s, reward, _, _ = step(start, RIGHT)
    assert active_transmissions(s) == []
    (enemy,) = active_enemies(s)
    assert (enemy["row"], enemy["col"], enemy["hp"]) == (0, 2, 3)
    assert reward == pytest.approx(-0.01 + 0.3, abs=1e-5)


def test_enemy_standing_on_a_block_is_shot():
    """§5.1: the occupant check comes before the block check."""
    start = scenario(blocks=[{"row": 2, "col": 0, "type": "data", "points": 2}],
                     enemies=[{"type": "glitch", "row": 2, "col": 0, "hp": 2}])
    _, s, _, _, info = step(start, UP)
    assert bool(info["shot"])
    assert active_enemies(s)[0]["hp"] == 1


def test_walking_never_collects_resources_but_collects_floor_siphons():
    """§5.3 / §12: resources stay on the floor; a floor data siphon is picked up (+1.0)."""
    start = scenario(resources=[{"row": 1, "col": 0, "credits": 3}])
    _, s, _, _, _ = step(start, UP)
    assert int(s.player.credits) == 0 and int(s.grid.credits[6]) == 3
    start = scenario(resources=[{"row": 1, "col": 0, "dataSiphon": True, "credits": 2}])
    _, s, reward, _, info = step(start, UP)
    assert int(s.player.data_siphons) == 1
    assert int(s.grid.content[6]) == EMPTY
    assert reward == pytest.approx(-0.01 + 1.0 + 0.05, abs=1e-5)


def test_siphon_takes_the_whole_cross_and_owes_transmissions_at_turn_end():
    """§6: centre and four neighbours; data block points to score; floor resources to the
    player; owed transmissions spawn at the end of the enemy turn with the siphon flag;
    scheduler interval -1 and next due +5. Reward -0.01 + 4*0.5 + (3+3)*0.05 = 2.29."""
    start = scenario(
        player={"row": 2, "col": 2, "dataSiphons": 1},
        blocks=[{"row": 3, "col": 2, "type": "data", "points": 4}],
        resources=[{"row": 2, "col": 1, "credits": 2}, {"row": 1, "col": 2, "energy": 3},
                   {"row": 2, "col": 2, "credits": 1}])
    _, s, reward, _, info = step(start, SIPHON)
    assert (int(s.player.score), int(s.player.credits), int(s.player.energy)) == (4, 3, 3)
    assert int(s.player.data_siphons) == 0
    cross = [2 * 6 + 2, 3 * 6 + 2, 1 * 6 + 2, 2 * 6 + 1, 2 * 6 + 3]
    assert all(bool(s.grid.siphoned[c]) for c in cross)
    assert int(np.sum(np.asarray(s.grid.siphoned))) == 5
    assert bool(s.grid.siphon_center[14]) and int(s.grid.spawn[20]) == 0
    spawned = active_transmissions(s)
    assert len(spawned) == 4 and all(t["from_siphon"] and t["turns"] == 1 for t in spawned)
    assert int(s.pending_siphon) == 0
    assert (int(s.sched_interval), int(s.next_sched_turn)) == (11, 17)
    assert reward == pytest.approx(2.29, abs=1e-5)


def test_siphon_acquires_programs_and_reveals_question_blocks():
    """§6: a program block in the cross is acquired; its spawn cost is owed."""
    start = scenario(player={"row": 2, "col": 2, "dataSiphons": 1},
                     blocks=[{"row": 2, "col": 3, "type": "program", "programType": "wait",
                              "spawnCount": 1}])
    _, s, _, _, _ = step(start, SIPHON)
    assert bool(s.owned[5])  # WAIT
    assert len(active_transmissions(s)) == 1


def test_virus_moves_then_attacks_in_its_second_step():
    """§7.4: a virus two cells away moves adjacent in step 0 and attacks in step 1; the
    first move is D before L (U, D, L, R order, §7.5)."""
    start = scenario(player={"row": 0, "col": 0, "dataSiphons": 1},
                     enemies=[{"type": "virus", "row": 1, "col": 1, "hp": 2}])
    _, s, reward, _, info = step(start, SIPHON)
    (enemy,) = active_enemies(s)
    assert (enemy["row"], enemy["col"]) == (0, 1)
    assert int(s.player.hp) == 2
    assert reward == pytest.approx(-1.01, abs=1e-5)


def test_daemon_moves_adjacent_but_cannot_attack_in_the_same_turn():
    start = scenario(player={"row": 0, "col": 0, "dataSiphons": 1},
                     enemies=[{"type": "daemon", "row": 1, "col": 1, "hp": 3}])
    _, s, _, _, _ = step(start, SIPHON)
    (enemy,) = active_enemies(s)
    assert (enemy["row"], enemy["col"]) == (0, 1)
    assert int(s.player.hp) == 3


def test_spawned_enemy_is_inert_for_its_spawn_turn():
    """§7.3 / §14 item 4: a transmission next to the player hatches disabled, attacks next turn."""
    start = scenario(player={"row": 0, "col": 0, "dataSiphons": 2},
                     transmissions=[{"row": 1, "col": 0, "turnsRemaining": 1,
                                     "enemyType": "daemon"}])
    _, s, _, _, _ = step(start, SIPHON)
    (enemy,) = active_enemies(s)
    assert (enemy["kind"], enemy["row"], enemy["col"], enemy["disabled"]) == (DAEMON, 1, 0, 0)
    assert int(s.player.hp) == 3 and active_transmissions(s) == []
    _, s, _, _, _ = step(s, SIPHON)
    assert int(s.player.hp) == 2


def test_pass_c_retreat_when_the_shortest_path_starts_occupied():
    """§7.5 / §14 item 8: pass A finds no path around the transmission, pass B's first cell is
    occupied, so the greedy pass takes the only free neighbour, away from the player."""
    walls = [{"row": 1, "col": c, "type": "data", "points": 1} for c in range(5)]
    start = scenario(player={"row": 0, "col": 0, "dataSiphons": 1}, blocks=walls,
                     transmissions=[{"row": 0, "col": 1, "turnsRemaining": 3,
                                     "enemyType": "virus"}],
                     enemies=[{"type": "daemon", "row": 0, "col": 2, "hp": 3}])
    _, s, _, _, _ = step(start, SIPHON)
    (enemy,) = active_enemies(s)
    assert (enemy["row"], enemy["col"]) == (0, 3)
    assert active_transmissions(s)[0]["turns"] == 2


def test_glitch_walks_through_blocks_and_daemon_retreats_greedily():
    """§7.5: a glitch paths through and stops on a block; a daemon with no path takes the
    greedy neighbour (tie U before R)."""
    walls = [{"row": 1, "col": 0, "type": "data", "points": 1},
             {"row": 1, "col": 1, "type": "data", "points": 1},
             {"row": 0, "col": 1, "type": "data", "points": 1}]
    for kind, expected in (("glitch", (1, 0)), ("daemon", (3, 0))):
        start = scenario(player={"row": 0, "col": 0, "dataSiphons": 1}, blocks=walls,
                         enemies=[{"type": kind, "row": 2, "col": 0, "hp": 2}])
        _, s, _, _, _ = step(start, SIPHON)
        (enemy,) = active_enemies(s)
        assert (enemy["row"], enemy["col"]) == expected, kind


def test_cryptog_last_known_position_updates_only_when_it_moves_into_line():
    """§7.6 / O8: the cryptog moving into the player's row is seen there."""
    start = scenario(player={"row": 0, "col": 0, "dataSiphons": 2},
                     enemies=[{"type": "cryptog", "row": 1, "col": 2, "hp": 2}])
    _, s, _, _, _ = step(start, SIPHON)
    (enemy,) = active_enemies(s)
    assert (enemy["row"], enemy["col"]) == (0, 2) and enemy["last"] == (0, 2)
    start = scenario(player={"row": 0, "col": 0, "dataSiphons": 1},
                     enemies=[{"type": "cryptog", "row": 3, "col": 3, "hp": 2}])
    _, s, _, _, _ = step(start, SIPHON)
    (enemy,) = active_enemies(s)
    assert (enemy["row"], enemy["col"]) == (2, 3) and enemy["last"] == (3, 3)


def test_scheduled_task_fires_when_due_and_calm_suppresses_it():
    """§9: at turn 12 one scheduled transmission spawns and the next is due 12 later; under
    CALM nothing spawns and the schedule does not advance."""
    _, s, _, _, _ = step(scenario(turn=11), UP)
    assert int(s.turn) == 12
    (t,) = active_transmissions(s)
    assert t["from_scheduled"] and not t["from_siphon"] and t["turns"] == 1
    assert int(s.next_sched_turn) == 24
    _, s, _, _, _ = step(scenario(turn=11, scheduledTasksDisabled=True), UP)
    assert active_transmissions(s) == [] and int(s.next_sched_turn) == 12


def test_siphon_delays_the_schedule():
    """§6 step 5 / §9: a siphon at turn 11 pushes the due turn from 12 to 17, so turn 12
    spawns nothing; the interval drops to 11."""
    _, s, _, _, _ = step(scenario(player={"row": 0, "col": 0, "dataSiphons": 1}, turn=11), SIPHON)
    assert int(s.turn) == 12 and active_transmissions(s) == []
    assert (int(s.sched_interval), int(s.next_sched_turn)) == (11, 17)


def test_step_flag_skips_the_whole_enemy_turn():
    """§7.1: no turn count, no tick, no movement or attack, pending siphon spawns stay
    pending, no snapshot; the flag is consumed."""
    start = scenario(player={"row": 2, "col": 2, "dataSiphons": 1},
                     blocks=[{"row": 3, "col": 2, "type": "data", "points": 3}],
                     enemies=[{"type": "daemon", "row": 2, "col": 1, "hp": 3}],
                     transmissions=[{"row": 5, "col": 0, "turnsRemaining": 1,
                                     "enemyType": "virus"}])
    start = start.replace(step_active=np.bool_(True))
    _, s, _, _, _ = step(start, SIPHON)
    assert not bool(s.step_active)
    assert int(s.turn) == 0 and int(s.player.hp) == 3
    assert int(s.pending_siphon) == 3
    assert active_transmissions(s)[0]["turns"] == 1
    assert int(s.history.size) == 0


def test_exit_move_completes_the_stage_without_an_enemy_turn():
    """§8.11 / §10.1: completing stage 3 with HP 2, 10 C, 5 E pays 5.19; HP +1; the adjacent
    daemon does not attack; enemies carry over; the new stage resets turn and scheduler."""
    start = scenario(player={"row": 5, "col": 4, "hp": 2, "credits": 10, "energy": 5},
                     stage=3, turn=4,
                     enemies=[{"type": "daemon", "row": 4, "col": 5, "hp": 3}])
    _, s, reward, terminated, info = step(start, RIGHT)
    assert reward == pytest.approx(5.19, abs=1e-5)
    assert bool(info["stage_complete"]) and not bool(terminated)
    assert int(s.stage) == 4 and int(s.player.hp) == 3 and int(s.turn) == 0
    assert (int(s.sched_interval), int(s.next_sched_turn)) == (9, 9)
    assert player_at(s) == (5, 5)
    assert (int(s.exit_row), int(s.exit_col)) != (5, 5)
    assert int(s.grid.content[int(s.exit_row) * 6 + int(s.exit_col)]) == EXIT
    enemies = active_enemies(s)
    assert len(enemies) == 1 and (enemies[0]["row"], enemies[0]["col"]) == (4, 5)
    assert len(active_transmissions(s)) == 4  # stage 4 spawns 4
    assert int(s.grid.content[4 * 6 + 5]) != BLOCK  # never a block under an enemy


def test_final_stage_pays_64_and_wins():
    """§8.4 / §8.11: winning from next to the exit with score 20: -0.01 + 64 + 0.05 + 500 +
    2000 = 2564.04; the stage stays 8."""
    start = scenario(player={"row": 5, "col": 4, "score": 20}, stage=8)
    _, s, reward, terminated, info = step(start, RIGHT)
    assert reward == pytest.approx(2564.04, abs=1e-3)
    assert bool(terminated) and bool(info["won"]) and int(s.stage) == 8
    assert breakdown(info)["stage_completion"] == 64.0


@pytest.mark.parametrize("stage,expected", [(1, -1.01), (2, -1.51), (4, -4.51), (8, -64.51)])
def test_death_penalty_table(stage, expected):
    """§8.3 / §11.2: dying from 1 HP at stage s pays -0.01 - 1 + deathPenalty(s)."""
    start = scenario(player={"row": 0, "col": 0, "hp": 1, "dataSiphons": 1}, stage=stage,
                     enemies=[{"type": "daemon", "row": 1, "col": 0, "hp": 3}])
    _, s, reward, terminated, info = step(start, SIPHON)
    assert int(s.player.hp) == 0 and bool(info["died"]) and bool(terminated)
    assert reward == pytest.approx(expected, abs=1e-4)


def test_siphon_death_penalty():
    """§8.7 / §8.11: dying on stage 3 with an adjacent siphon-spawned enemy: -12.51."""
    start = scenario(player={"row": 0, "col": 0, "hp": 1, "dataSiphons": 1}, stage=3,
                     enemies=[{"type": "daemon", "row": 1, "col": 0, "hp": 3,
                               "spawnedFromSiphon": True}])
    _, _, reward, _, info = step(start, SIPHON)
    assert reward == pytest.approx(-12.51, abs=1e-4)
    assert breakdown(info)["siphon_death_penalty"] == -10.0


def test_unreachable_exit_counts_as_distance_zero():
    """§8.5: with the exit walled off, moving 'closer' earns no shaping."""
    walls = [{"row": 4, "col": 5, "type": "data", "points": 1},
             {"row": 5, "col": 4, "type": "data", "points": 1}]
    _, _, reward, _, info = step(scenario(player={"row": 3, "col": 3}, blocks=walls), UP)
    assert reward == pytest.approx(-0.01, abs=1e-5)
    assert "distance_shaping" not in nonzero_components(info)


def test_entering_a_block_with_an_enemy_on_it_shoots_it():
    """§7 remark: an adjacent block with an enemy on it makes the direction valid (a shot)."""
    start = scenario(blocks=[{"row": 1, "col": 0, "type": "data", "points": 1}],
                     enemies=[{"type": "glitch", "row": 1, "col": 0, "hp": 2}])
    obs, s, _, _, info = step(start, UP)
    assert not bool(info["invalid_action"]) and bool(info["shot"])
