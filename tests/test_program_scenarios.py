"""Programs and UNDO end to end through the environment step (programs-rewards-observation
§3-§5, §8.11; errata O1, O3; decisions R9). Expected values are derived by hand."""

import pytest

from envs.hackmatrix.core.constants import EXIT
from envs.hackmatrix.env import HackMatrix
from tests.game_harness import active_enemies, active_transmissions, scenario, step

UP, DOWN, LEFT, RIGHT, SIPHON = 0, 1, 2, 3, 4
WARP, WAIT, UNDO, STEP, SIPH_PLUS, EXCH, SHOW, RESET = 8, 10, 14, 15, 16, 17, 18, 19


def test_reset_at_two_hp_pays_program_waste():
    """§8.11: RESET at 2 HP: -0.01 - 0.20 (energy) + 1.0 - 0.3 = 0.49; no enemy turn."""
    start = scenario(player={"row": 0, "col": 0, "hp": 2, "energy": 4}, ownedPrograms=[RESET])
    _, s, reward, _, info = step(start, RESET)
    assert int(s.player.hp) == 3 and int(s.turn) == 0
    assert reward == pytest.approx(0.49, abs=1e-5)
    assert float(info["reward_breakdown"]["program_waste"]) == pytest.approx(-0.3)


def test_siph_plus_and_exch_rewards():
    """§8.11: SIPH+ -0.26 (and no data-siphon reward: §4.12); EXCH -0.01."""
    _, s, reward, _, info = step(scenario(player={"row": 0, "col": 0, "credits": 5},
                                          ownedPrograms=[SIPH_PLUS]), SIPH_PLUS)
    assert int(s.player.data_siphons) == 1 and reward == pytest.approx(-0.26, abs=1e-5)
    assert float(info["reward_breakdown"]["data_siphon"]) == 0.0
    _, s, reward, _, _ = step(scenario(player={"row": 0, "col": 0, "credits": 4},
                                       ownedPrograms=[EXCH]), EXCH)
    assert (int(s.player.credits), int(s.player.energy)) == (0, 4)
    assert reward == pytest.approx(-0.01, abs=1e-5)


def test_only_wait_ends_the_turn():
    """§3 step 7: WAIT runs the enemy turn, other programs do not."""
    _, s, _, _, _ = step(scenario(player={"row": 0, "col": 0, "energy": 1},
                                  ownedPrograms=[WAIT]), WAIT)
    assert int(s.turn) == 1
    _, s, _, _, _ = step(scenario(player={"row": 0, "col": 0, "credits": 2},
                                  ownedPrograms=[SHOW]), SHOW)
    assert int(s.turn) == 0 and bool(s.show)


def test_warp_onto_the_exit_completes_the_stage():
    """§4.4 / §3 step 6: WARP to an enemy standing on the exit removes it and completes the
    stage: -0.01 + 1 (stage) + 0.3 (kill) + 10 * 0.05 (old distance) - 0.2 (spent) = 1.59."""
    start = scenario(player={"row": 0, "col": 0, "credits": 2, "energy": 2}, ownedPrograms=[WARP],
                     enemies=[{"type": "daemon", "row": 5, "col": 5, "hp": 3}])
    _, s, reward, terminated, info = step(start, WARP)
    assert bool(info["stage_complete"]) and int(s.stage) == 2 and not bool(terminated)
    assert reward == pytest.approx(1.59, abs=1e-5)


def test_step_then_siphon_leaves_the_owed_transmissions_pending():
    """§14 item 6 / errata O3: a STEP-skipped siphon keeps its transmissions pending until the
    next normal enemy turn, which spawns them at its end."""
    start = scenario(player={"row": 2, "col": 2, "energy": 3, "dataSiphons": 1},
                     ownedPrograms=[STEP],
                     blocks=[{"row": 3, "col": 2, "type": "data", "points": 2}])
    _, s, _, _, _ = step(start, STEP)
    assert bool(s.step_active)
    _, s, _, _, _ = step(s, SIPHON)
    assert int(s.pending_siphon) == 2 and active_transmissions(s) == [] and int(s.turn) == 0
    _, s, _, _, _ = step(s, DOWN)
    assert int(s.pending_siphon) == 0 and int(s.turn) == 1
    spawned = active_transmissions(s)
    assert len(spawned) == 2 and all(t["from_siphon"] for t in spawned)


def test_first_undo_reverts_only_the_free_programs_of_this_turn():
    """§5.5 item 1: the top snapshot is the end of the last enemy turn; UNDO's own cost is
    overwritten by the restored credits."""
    start = scenario(player={"row": 0, "col": 0, "credits": 5}, ownedPrograms=[UNDO, SHOW])
    _, s, _, _, _ = step(start, UP)  # a normal turn: snapshot at (1, 0) with 5 credits
    _, s, _, _, _ = step(s, SHOW)
    assert bool(s.show) and int(s.player.credits) == 3
    obs, s, _, _, info = step(s, UNDO)
    assert not bool(info["invalid_action"])
    assert not bool(s.show) and int(s.player.credits) == 5
    assert (int(s.player.row), int(s.player.col)) == (1, 0)
    assert int(s.history.size) == 0 and not bool(obs.action_mask[UNDO])


def test_two_undos_go_back_a_full_turn_and_lose_provenance_flags():
    """§5.5 items 1 and 5: the second UNDO restores the previous turn; restored enemies lose
    their siphon flag."""
    start = scenario(player={"row": 0, "col": 0, "credits": 2}, ownedPrograms=[UNDO],
                     enemies=[{"type": "daemon", "row": 5, "col": 5, "hp": 3, "stunned": True,
                               "spawnedFromSiphon": True}])
    _, s, _, _, _ = step(start, UP)  # the stunned daemon stays; snapshot A at (1, 0)
    _, s, _, _, _ = step(s, UP)  # snapshot B at (2, 0)
    enemy_before = active_enemies(s)[0]
    _, s, _, _, _ = step(s, UNDO)
    assert (int(s.player.row), int(s.player.col)) == (2, 0)
    (enemy,) = active_enemies(s)
    assert not enemy["from_siphon"] and enemy_before["from_siphon"]
    _, s, _, _, _ = step(s, UNDO)
    assert (int(s.player.row), int(s.player.col)) == (1, 0)
    assert int(s.player.credits) == 2


def _exploit_start():
    return scenario(player={"row": 5, "col": 3, "credits": 1, "energy": 10},
                    ownedPrograms=[UNDO, WAIT])


def test_cross_stage_undo_restores_the_old_board_and_its_exit_completes_again():
    """§5.5 item 3 / errata O1: after a stage completion, UNDO restores the old board (old exit
    cell) with the new stage number; stepping onto the old exit completes another stage."""
    _, s, _, _, _ = step(_exploit_start(), RIGHT)  # snapshot next to the exit, stage-1 board
    _, s, _, _, info = step(s, RIGHT)  # onto the exit: stage 2, new board
    assert bool(info["stage_complete"]) and int(s.stage) == 2
    new_exit = (int(s.exit_row), int(s.exit_col))
    _, s, _, _, _ = step(s, UNDO)
    assert int(s.stage) == 2 and (int(s.player.row), int(s.player.col)) == (5, 4)
    assert int(s.grid.content[35]) == EXIT and (int(s.exit_row), int(s.exit_col)) == new_exit
    _, s, reward, _, info = step(s, RIGHT)
    assert bool(info["stage_complete"]) and bool(info["undo_exploit_completion"])
    assert int(s.stage) == 3
    assert float(info["reward_breakdown"]["stage_completion"]) == 2.0  # table[k-1], k = 2


def test_undo_exploit_loop_reaches_victory_and_the_option_closes_it():
    """Errata O1 / decisions R9: UNDO, WAIT (a fresh snapshot next to the old exit), step onto
    it, repeated, wins the game without playing the new boards. With close_undo_exploit the
    history is cleared at every stage start, so the first UNDO is no longer valid."""
    _, s, _, _, _ = step(_exploit_start(), RIGHT)
    _, s, _, _, _ = step(s, RIGHT)
    exploit_completions = 0
    for _ in range(7):
        _, s, _, _, info = step(s, UNDO)
        assert not bool(info["invalid_action"])
        _, s, _, _, _ = step(s, WAIT)
        _, s, _, terminated, info = step(s, RIGHT)
        exploit_completions += int(info["undo_exploit_completion"])
        if bool(info["won"]):
            break
    assert bool(info["won"]) and bool(terminated) and int(s.stage) == 8
    assert exploit_completions == 7

    closed = HackMatrix(close_undo_exploit=True)
    _, s, _, _, _ = step(_exploit_start(), RIGHT, env=closed)
    obs, s, _, _, _ = step(s, RIGHT, env=closed)
    assert int(s.history.size) == 0 and not bool(obs.action_mask[UNDO])
    _, _, _, terminated, info = step(s, UNDO, env=closed)
    assert bool(info["invalid_action"]) and bool(terminated)


def test_undo_can_lower_hp_and_the_reward_reads_it_as_damage():
    """Errata E2: RESET then UNDO takes HP from 3 back to 1: damage penalty -2."""
    start = scenario(player={"row": 0, "col": 0, "hp": 1, "credits": 1, "energy": 4},
                     ownedPrograms=[UNDO, RESET])
    _, s, _, _, _ = step(start, UP)  # snapshot with HP 1
    _, s, _, _, _ = step(s, RESET)
    assert int(s.player.hp) == 3
    _, s, reward, _, info = step(s, UNDO)
    assert int(s.player.hp) == 1
    assert float(info["reward_breakdown"]["damage_penalty"]) == -2.0
