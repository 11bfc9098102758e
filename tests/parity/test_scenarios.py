"""Scenario parity (game-rules §5-§10, programs-rewards-observation §4-§7, §9.1, §10): setState,
a few actions, and the JSON replies checked against values derived by hand from the spec. Each
test runs on both backends; random draws are checked as sets of allowed outcomes."""

import pytest

WAIT, SIPHON = 10, 4


def at(row, col, **player):
    return {"row": row, "col": col, **player}


def cell(obs, row, col):
    return obs["cells"][row][col]


def play(engine, scenario, *actions):
    """setState, then the actions in order; returns the last StepResult (or the observation)."""
    result = engine.set_state(scenario)
    for action in actions:
        result = engine.step(action)
    return result


def enemies(engine):
    return [(e["type"], e["row"], e["col"], e["hp"]) for e in engine.internal_state()["enemies"]]


def transmissions(obs):
    return {(c["row"], c["col"]): c["transmission"] for line in obs["cells"] for c in line
            if "transmission" in c}


# --- set_state and the raw observation ----------------------------------------------------------

def test_set_state_fixed_side_effects(engine):
    """§10.5: exit always (5,5) (a block there is overwritten), hp outside 0..3 becomes 3, the
    scheduler at 12/12 whatever turn says, no UNDO history (UNDO masked), ownedPrograms kept in
    order; §9.1 top-level keys."""
    obs = engine.set_state({"player": at(1, 2, hp=7, credits=4, energy=3, attackDamage=2,
                                         score=9, dataSiphons=2),
                            "stage": 9, "turn": 30, "ownedPrograms": [20, 14, 5],
                            "blocks": [{"row": 5, "col": 5, "type": "data", "points": 4}]})
    assert (obs["playerRow"], obs["playerCol"], obs["playerHP"]) == (1, 2, 3)
    assert (obs["credits"], obs["energy"], obs["baseAttack"], obs["score"]) == (4, 3, 2, 9)
    assert (obs["stage"], obs["turn"], obs["dataSiphons"]) == (9, 30, 2)
    assert obs["ownedPrograms"] == [20, 14, 5]
    assert obs["showActivated"] is False and obs["scheduledTasksDisabled"] is False
    assert obs["cryptogHints"] == []
    exit_cell = cell(obs, 5, 5)
    assert exit_cell["isExit"] is True and "block" not in exit_cell
    assert sum(c["isExit"] for line in obs["cells"] for c in line) == 1
    assert [c["row"] for c in obs["cells"][0]] == [0] * 6  # row 0 (the bottom) first
    internal = engine.internal_state()
    assert (internal["scheduledTaskInterval"], internal["nextScheduledTaskTurn"],
            internal["pendingSiphonTransmissions"], internal["turnCount"]) == (12, 12, 0, 30)
    assert 14 not in engine.valid_actions()  # UNDO: empty history


def test_observation_visibility_rules(engine):
    """§9.1: the first live enemy per cell only (hp <= 0 invisible, errata O5); a hidden cryptog
    leaves its cell empty and emits its last-known position as a hint (O9); resources under an
    unsiphoned block hidden, under a siphoned block shown; block fields per type; a
    transmission's type only under SHOW."""
    obs = engine.set_state({
        "player": at(0, 0),
        "enemies": [{"type": "glitch", "row": 2, "col": 2, "hp": 0},
                    {"type": "daemon", "row": 2, "col": 2, "hp": 5, "stunned": True,
                     "spawnedFromSiphon": True},
                    {"type": "virus", "row": 2, "col": 2, "hp": 2},
                    {"type": "cryptog", "row": 3, "col": 4, "hp": 2},
                    {"type": "virus", "row": 3, "col": 4, "hp": 1},
                    {"type": "cryptog", "row": 0, "col": 4, "hp": 2}],
        "transmissions": [{"row": 4, "col": 1, "turnsRemaining": 3, "enemyType": "glitch"},
                          {"row": 4, "col": 1, "turnsRemaining": 1, "enemyType": "virus"}],
        "blocks": [{"row": 1, "col": 3, "type": "data", "points": 7},
                   {"row": 1, "col": 4, "type": "program", "programType": "ATK_PLUS",
                    "spawnCount": 5, "siphoned": True},
                   {"row": 4, "col": 4, "type": "program", "programType": "nonsense"}],
        "resources": [{"row": 1, "col": 3, "credits": 2}, {"row": 1, "col": 4, "energy": 3},
                      {"row": 2, "col": 0, "credits": 1},
                      {"row": 0, "col": 1, "dataSiphon": True}]})
    assert cell(obs, 2, 2)["enemy"] == {"type": "daemon", "hp": 5, "isStunned": True,
                                        "spawnedFromSiphon": True}
    assert "enemy" not in cell(obs, 3, 4)  # hidden cryptog first: the virus is not shown
    assert cell(obs, 0, 4)["enemy"]["type"] == "cryptog"  # shares the player's row
    assert obs["cryptogHints"] == [{"row": 3, "col": 4}]
    assert cell(obs, 1, 3)["block"] == {"blockType": "data", "isSiphoned": False, "points": 7,
                                        "transmissionSpawnCount": 7}
    assert "credits" not in cell(obs, 1, 3)
    assert cell(obs, 1, 4)["block"] == {
        "blockType": "program", "isSiphoned": True, "points": 0, "programType": "atk+",
        "programActionIndex": 26, "transmissionSpawnCount": 5}
    assert cell(obs, 1, 4)["energy"] == 3
    assert "block" not in cell(obs, 4, 4)  # unparseable programType makes no block
    assert cell(obs, 2, 0)["credits"] == 1 and cell(obs, 0, 1)["isDataSiphon"] is True
    assert cell(obs, 4, 1)["transmission"] == {"turnsUntilSpawn": 3}
    assert [e[0] for e in enemies(engine)] == ["glitch", "daemon", "virus", "cryptog", "virus",
                                               "cryptog"]


# --- movement and shots (game-rules §5, programs §7) ---------------------------------------------

def test_move_and_blocked_move(engine):
    """§5.3: a legal move ends the turn; a move into a block fails: nothing changes, done,
    invalid_action (§7, R4); the mask lists only legal directions."""
    scenario = {"player": at(0, 0), "blocks": [{"row": 0, "col": 1, "type": "data"}]}
    engine.set_state(scenario)
    assert engine.valid_actions() == [0]
    result = engine.step(0)
    assert (result.observation["playerRow"], result.observation["turn"]) == (1, 1)
    assert result.done is False
    result = play(engine, scenario, 3)
    assert result.done is True and result.info["invalid_action"] is True
    assert (result.observation["playerCol"], result.observation["turn"]) == (0, 0)


def test_shot_range_stun_and_blocks(engine):
    """§5.1/§5.2: unlimited range; the hit survivor is stunned and skips its turn (stun cleared
    at the end of the turn); a transmission beats an enemy on the same cell; an enemy on a
    block is hit; a block with nothing before it stops the scan and the player moves."""
    result = play(engine, {"player": at(0, 0),
                           "enemies": [{"type": "daemon", "row": 0, "col": 5, "hp": 3}]}, 3)
    assert enemies(engine) == [("daemon", 0, 5, 2)]  # stunned: did not move
    assert result.observation["playerCol"] == 0
    assert cell(result.observation, 0, 5)["enemy"]["isStunned"] is False
    result = play(engine, {"player": at(0, 0),
                           "enemies": [{"type": "daemon", "row": 0, "col": 3, "hp": 3}],
                           "transmissions": [{"row": 0, "col": 3, "turnsRemaining": 5,
                                              "enemyType": "virus"}]}, 3)
    assert transmissions(result.observation) == {}
    assert enemies(engine)[0][3] == 3
    play(engine, {"player": at(0, 0), "blocks": [{"row": 0, "col": 2, "type": "data"}],
                  "enemies": [{"type": "glitch", "row": 0, "col": 2, "hp": 2}]}, 3)
    assert enemies(engine) == [("glitch", 0, 2, 1)]
    result = play(engine, {"player": at(0, 0), "blocks": [{"row": 0, "col": 2, "type": "data"}],
                           "enemies": [{"type": "daemon", "row": 0, "col": 4, "hp": 3}]}, 3)
    assert result.observation["playerCol"] == 1 and enemies(engine)[0][3] == 3


def test_transmission_on_a_block_is_shot_although_masked(engine):
    """errata E6 / decisions R4: a transmission on an adjacent block makes the mask say invalid,
    yet the step succeeds (Swift ends the episode on failure, not on the mask)."""
    engine.set_state({"player": at(0, 0), "blocks": [{"row": 1, "col": 0, "type": "data"}],
                      "transmissions": [{"row": 1, "col": 0, "turnsRemaining": 3,
                                         "enemyType": "virus"}]})
    assert 0 not in engine.valid_actions()
    result = engine.step(0)
    assert result.done is False and "invalid_action" not in result.info
    assert result.info["reward_breakdown"]["kills"] == pytest.approx(0.3)


# --- siphon (game-rules §6) ---------------------------------------------------------------------

def test_siphon_takes_the_whole_cross(engine):
    """§6: centre, U, D, L, R: data points to score, programs acquired in that order, floor
    resources collected, cells marked siphoned, centre marked; interval -1 and next task +5."""
    result = play(engine, {
        "player": at(2, 2, dataSiphons=1), "ownedPrograms": [6],
        "blocks": [{"row": 3, "col": 2, "type": "program", "programType": "crash", "spawnCount": 0},
                   {"row": 1, "col": 2, "type": "program", "programType": "push", "spawnCount": 0},
                   {"row": 2, "col": 1, "type": "data", "points": 3, "spawnCount": 0}],
        "resources": [{"row": 2, "col": 2, "credits": 1}, {"row": 2, "col": 3, "energy": 2},
                      {"row": 3, "col": 3, "credits": 9}]}, SIPHON)
    obs = result.observation
    assert obs["ownedPrograms"] == [6, 7, 5]
    assert (obs["score"], obs["credits"], obs["energy"], obs["dataSiphons"]) == (3, 1, 2, 0)
    assert cell(obs, 3, 2)["block"]["isSiphoned"] is True
    assert cell(obs, 2, 2)["siphonCenter"] is True and cell(obs, 3, 3)["credits"] == 9
    internal = engine.internal_state()
    assert (internal["scheduledTaskInterval"], internal["nextScheduledTaskTurn"]) == (11, 17)


def test_siphon_spawns_out_of_the_line_of_fire(engine):
    """§3.6/§7.2 step 6: the owed transmissions appear at the end of that enemy turn, with
    countdown 1, on spawn-empty cells out of the player's line of fire (plenty exist)."""
    scenario = {"player": at(2, 2, dataSiphons=1),
                "blocks": [{"row": 3, "col": 2, "type": "data", "points": 3}]}
    line_of_fire = {(2, 0), (2, 1), (2, 3), (2, 4), (2, 5), (1, 2), (0, 2)}
    for _ in range(4):
        result = play(engine, scenario, SIPHON)
        spawned = transmissions(result.observation)
        assert len(spawned) == 3
        assert all(t == {"turnsUntilSpawn": 1} for t in spawned.values())
        assert not set(spawned) & (line_of_fire | {(2, 2), (3, 2)})
        assert engine.internal_state()["pendingSiphonTransmissions"] == 0


# --- enemies, turns and scheduled tasks (game-rules §7, §9) --------------------------------------

def test_virus_moves_twice_and_adjacent_enemy_attacks(engine):
    """§7.4/§7.5: a virus takes two BFS steps; an adjacent daemon attacks instead of moving."""
    result = play(engine, {"player": at(0, 0, energy=2), "ownedPrograms": [WAIT],
                           "enemies": [{"type": "virus", "row": 0, "col": 4, "hp": 2},
                                       {"type": "daemon", "row": 1, "col": 0, "hp": 3}]}, WAIT)
    assert enemies(engine) == [("virus", 0, 2, 2), ("daemon", 1, 0, 3)]
    assert result.observation["playerHP"] == 2 and result.observation["turn"] == 1


def test_transmission_hatches_disabled(engine):
    """§7.3: a countdown of 1 hatches at the next tick into a full-HP enemy that is disabled for
    that turn; a countdown of 3 drops to 2."""
    result = play(engine, {"player": at(0, 0, energy=2), "ownedPrograms": [WAIT],
                           "transmissions": [{"row": 3, "col": 3, "turnsRemaining": 1,
                                              "enemyType": "daemon"},
                                             {"row": 5, "col": 0, "turnsRemaining": 3,
                                              "enemyType": "virus"}]}, WAIT)
    assert enemies(engine) == [("daemon", 3, 3, 3)]
    assert transmissions(result.observation) == {(5, 0): {"turnsUntilSpawn": 2}}
    engine.step(WAIT)
    assert enemies(engine)[0][1:3] in {(2, 3), (3, 2)}  # it moves on the next turn


def test_contested_cell_goes_to_either_enemy(engine):
    """§7.4 step 1 (shuffled order) and §7.5 passes A-C: two daemons whose only shortest path
    goes through (0,2). Whoever moves first takes it; the other falls back to the greedy step
    (ties to U before R). Both orders occur."""
    scenario = {"player": at(0, 0, energy=30), "ownedPrograms": [WAIT],
                "blocks": [{"row": 1, "col": 0, "type": "data"},
                           {"row": 1, "col": 1, "type": "data"}],
                "enemies": [{"type": "daemon", "row": 0, "col": 3, "hp": 3},
                            {"type": "daemon", "row": 1, "col": 2, "hp": 3}]}
    allowed = {((0, 2), (2, 2)), ((1, 3), (0, 2))}
    seen = set()
    for _ in range(16):
        play(engine, scenario, WAIT)
        outcome = tuple((e[1], e[2]) for e in enemies(engine))
        assert outcome in allowed
        seen.add(outcome)
    assert seen == allowed


def test_scheduled_task_and_calm(engine):
    """§9: at turnCount >= nextScheduledTaskTurn one scheduled transmission spawns and the next
    is due interval turns later; CALM suppresses it without advancing the schedule."""
    scenario = {"player": at(0, 0, energy=2), "ownedPrograms": [WAIT], "turn": 11}
    result = play(engine, scenario, WAIT)
    assert len(transmissions(result.observation)) == 1
    assert engine.internal_state()["nextScheduledTaskTurn"] == 24
    result = play(engine, {**scenario, "scheduledTasksDisabled": True}, WAIT)
    assert transmissions(result.observation) == {}
    assert engine.internal_state()["nextScheduledTaskTurn"] == 12


def test_stage_completion_and_play_after_done(engine):
    """§10.1: the exit completes the stage (new board, stage 2, turn 0, interval 11); §10.3: a
    dead player can keep stepping and is charged the death penalty again (no auto-reset)."""
    result = play(engine, {"player": at(4, 5, hp=2)}, 0)
    assert result.info.get("stage_complete") is True and result.done is False
    obs = result.observation
    assert (obs["stage"], obs["turn"], obs["playerHP"]) == (2, 0, 3)
    internal = engine.internal_state()
    assert (internal["scheduledTaskInterval"], internal["nextScheduledTaskTurn"]) == (11, 11)
    result = play(engine, {"player": at(2, 3, hp=1, dataSiphons=2), "stage": 2,
                           "enemies": [{"type": "glitch", "row": 3, "col": 3, "hp": 2}]}, SIPHON)
    assert result.done is True and result.info["death"] is True
    result = engine.step(SIPHON)  # still dead, still simulated
    assert result.done is True and result.info["death"] is True
    assert result.observation["turn"] == 2
    assert result.info["reward_breakdown"]["death"] == pytest.approx(-0.5)


# --- programs (programs-rewards-observation §4) --------------------------------------------------

def test_push_and_pull(engine):
    """§4.1/§4.2: PUSH moves away along the sign vector (largest distance), PULL towards (the
    diagonal neighbour goes to the player's row); a cell already taken by a moved enemy is
    refused; free actions (no enemy turn)."""
    scenario = {"player": at(2, 2, energy=4), "ownedPrograms": [5, 6],
                "enemies": [{"type": "virus", "row": 2, "col": 4, "hp": 2},
                            {"type": "daemon", "row": 3, "col": 3, "hp": 3}]}
    result = play(engine, scenario, 5)
    assert enemies(engine) == [("virus", 2, 5, 2), ("daemon", 4, 4, 3)]
    assert result.observation["turn"] == 0 and result.observation["energy"] == 2
    # The virus takes (2,3) first, so the daemon's planned (2,3) is refused and it stays.
    play(engine, scenario, 6)
    assert enemies(engine) == [("virus", 2, 3, 2), ("daemon", 3, 3, 3)]
    # List order reversed: the daemon reaches the player's row first and the virus stays.
    play(engine, {**scenario, "enemies": scenario["enemies"][::-1]}, 6)
    assert enemies(engine) == [("daemon", 2, 3, 3), ("virus", 2, 4, 2)]


def test_crash(engine):
    """§4.3: the 8 neighbours lose blocks, enemies and transmissions; kills count ≤ 1 per cell
    per kind."""
    result = play(engine, {
        "player": at(2, 2, credits=3, energy=2), "ownedPrograms": [7],
        "blocks": [{"row": 3, "col": 3, "type": "data"}],
        "enemies": [{"type": "virus", "row": 2, "col": 3, "hp": 2},
                    {"type": "daemon", "row": 2, "col": 3, "hp": 3},
                    {"type": "glitch", "row": 4, "col": 4, "hp": 2}],
        "transmissions": [{"row": 1, "col": 2, "turnsRemaining": 2, "enemyType": "virus"}]}, 7)
    assert "block" not in cell(result.observation, 3, 3)
    assert enemies(engine) == [("glitch", 4, 4, 2)]
    assert transmissions(result.observation) == {}
    assert result.info["reward_breakdown"]["kills"] == pytest.approx(0.6)


def test_warp_target_is_uniform_over_entities(engine):
    """§4.4: WARP picks one enemy or transmission uniformly, lands there and removes that kind on
    the cell; both targets occur."""
    scenario = {"player": at(0, 0, credits=2, energy=2), "ownedPrograms": [8],
                "enemies": [{"type": "virus", "row": 3, "col": 3, "hp": 2}],
                "transmissions": [{"row": 4, "col": 1, "turnsRemaining": 2, "enemyType": "daemon"}]}
    seen = set()
    for _ in range(12):
        obs = play(engine, scenario, 8).observation
        landed = (obs["playerRow"], obs["playerCol"])
        assert landed in {(3, 3), (4, 1)}
        if landed == (3, 3):
            assert enemies(engine) == [] and len(transmissions(obs)) == 1
        else:
            assert len(enemies(engine)) == 1 and transmissions(obs) == {}
        seen.add(landed)
    assert seen == {(3, 3), (4, 1)}


def test_poly_changes_type_and_carries_damage(engine):
    """§4.5: the new type is one of the three others; damage carries over (a daemon at hp 2 has
    damage 1, so a 2-HP type ends at hp 1)."""
    scenario = {"player": at(0, 0, credits=1, energy=1), "ownedPrograms": [9],
                "enemies": [{"type": "daemon", "row": 4, "col": 4, "hp": 2}]}
    seen = set()
    for _ in range(12):
        play(engine, scenario, 9)
        (kind, _, _, hp), = enemies(engine)
        assert kind in {"virus", "glitch", "cryptog"} and hp == 1
        seen.add(kind)
    assert len(seen) >= 2


def test_damage_programs(engine):
    """§4.7-§4.9, §4.17, §4.19, §4.23: DEBUG (enemies on blocks), ROW, COL, HACK (siphoned
    cells) deal attackDamage; D_BOM removes the nearest daemon and splashes 1; ANTI-V 1 to
    viruses; survivors are stunned (visible: free actions run no enemy turn)."""
    base = {"player": at(2, 2, credits=20, energy=20, attackDamage=2),
            "ownedPrograms": [11, 12, 13, 21, 23, 27]}
    result = play(engine, {**base, "blocks": [{"row": 4, "col": 4, "type": "data"}],
                           "enemies": [{"type": "daemon", "row": 4, "col": 4, "hp": 3},
                                       {"type": "virus", "row": 4, "col": 3, "hp": 2}]}, 11)
    assert enemies(engine) == [("daemon", 4, 4, 1), ("virus", 4, 3, 2)]
    assert cell(result.observation, 4, 4)["enemy"]["isStunned"] is True
    play(engine, {**base, "enemies": [{"type": "daemon", "row": 2, "col": 5, "hp": 3},
                                      {"type": "virus", "row": 0, "col": 2, "hp": 2}]}, 12)
    assert enemies(engine) == [("daemon", 2, 5, 1), ("virus", 0, 2, 2)]
    result = play(engine, {**base, "enemies": [{"type": "daemon", "row": 2, "col": 5, "hp": 3},
                                               {"type": "virus", "row": 0, "col": 2, "hp": 2}]}, 13)
    assert enemies(engine) == [("daemon", 2, 5, 3)]
    assert result.info["reward_breakdown"]["kills"] == pytest.approx(0.3)
    play(engine, {**base, "blocks": [{"row": 4, "col": 0, "type": "none", "siphoned": True}],
                  "enemies": [{"type": "glitch", "row": 4, "col": 0, "hp": 3}]}, 27)
    assert enemies(engine) == [("glitch", 4, 0, 1)]
    result = play(engine, {**base, "enemies": [
        {"type": "daemon", "row": 4, "col": 4, "hp": 3},
        {"type": "daemon", "row": 3, "col": 3, "hp": 3},
        {"type": "virus", "row": 4, "col": 3, "hp": 2},
        {"type": "glitch", "row": 0, "col": 0, "hp": 1}]}, 21)
    assert enemies(engine) == [("daemon", 4, 4, 2), ("virus", 4, 3, 1), ("glitch", 0, 0, 1)]
    result = play(engine, {**base, "enemies": [{"type": "virus", "row": 5, "col": 0, "hp": 1},
                                               {"type": "virus", "row": 5, "col": 1, "hp": 2}]}, 23)
    assert enemies(engine) == [("virus", 5, 1, 1)]


def test_status_programs(engine):
    """§4.11 STEP skips the next enemy turn entirely; §4.14 SHOW reveals cryptogs and
    transmission types; §4.16 CALM sets the flag; §4.18 DELAY adds 3; §4.21 REDUC lowers
    unsiphoned spawn counts; §4.22 ATK+ twice per stage, no cap."""
    base = {"player": at(2, 2, credits=30, energy=30),
            "ownedPrograms": [WAIT, 15, 18, 20, 22, 25, 26],
            "enemies": [{"type": "cryptog", "row": 4, "col": 4, "hp": 2}],
            "transmissions": [{"row": 0, "col": 5, "turnsRemaining": 2, "enemyType": "glitch"}],
            "blocks": [{"row": 3, "col": 0, "type": "data", "points": 4},
                       {"row": 0, "col": 0, "type": "data", "points": 4, "siphoned": True}]}
    engine.set_state(base)
    engine.step(15)
    result = engine.step(WAIT)
    assert result.observation["turn"] == 0 and enemies(engine) == [("cryptog", 4, 4, 2)]
    obs = engine.set_state(base)
    assert "enemy" not in cell(obs, 4, 4) and obs["cryptogHints"] == [{"row": 4, "col": 4}]
    obs = engine.step(18).observation
    assert obs["showActivated"] is True and cell(obs, 4, 4)["enemy"]["type"] == "cryptog"
    assert cell(obs, 0, 5)["transmission"] == {"turnsUntilSpawn": 2, "enemyType": "glitch"}
    assert 18 not in engine.valid_actions()
    assert engine.step(20).observation["scheduledTasksDisabled"] is True
    assert cell(engine.step(22).observation, 0, 5)["transmission"]["turnsUntilSpawn"] == 5
    obs = engine.step(25).observation
    assert cell(obs, 3, 0)["block"]["transmissionSpawnCount"] == 3
    assert cell(obs, 0, 0)["block"]["transmissionSpawnCount"] == 4
    engine.step(26)
    obs = engine.step(26).observation
    assert obs["baseAttack"] == 3 and 26 not in engine.valid_actions()


def test_undo_reverts_free_actions_and_refunds(engine):
    """§5: UNDO is masked until the first enemy turn; it restores the snapshot taken at the end
    of the last enemy turn (credits overwritten, so its cost is refunded)."""
    engine.set_state({"player": at(2, 2, credits=6, energy=1), "ownedPrograms": [WAIT, 14, 16]})
    assert 14 not in engine.valid_actions()
    engine.step(WAIT)
    obs = engine.step(16).observation
    assert (obs["credits"], obs["dataSiphons"]) == (1, 1)
    result = engine.step(14)
    obs = result.observation
    assert (obs["credits"], obs["dataSiphons"], obs["energy"], obs["turn"]) == (6, 0, 0, 1)
    assert result.info["reward_breakdown"]["resourceGain"] == pytest.approx(0.25)


def test_invalid_program_requests(engine):
    """§3 step 3: an unowned or inapplicable program fails (done, invalid_action, no change)."""
    engine.set_state({"player": at(2, 2, credits=9, energy=9), "ownedPrograms": [5]})
    assert engine.step(5).info["invalid_action"] is True  # PUSH needs an enemy
    assert engine.step(27).info["invalid_action"] is True  # not owned
    assert engine.internal_state()["turnCount"] == 0


def test_cross_stage_undo_recompletes_the_old_exit(engine):
    """§5.5 item 3, errata O1, decisions R1: after a completion, UNDO restores the old board and
    position but keeps the new stage; stepping onto the old exit completes again and pays the
    next stage's reward."""
    engine.set_state({"player": at(4, 5, credits=1, energy=1), "ownedPrograms": [WAIT, 14]})
    engine.step(WAIT)  # snapshot at (4,5), stage 1
    assert engine.step(0).observation["stage"] == 2
    obs = engine.step(14).observation
    assert (obs["stage"], obs["playerRow"], obs["playerCol"]) == (2, 4, 5)
    assert cell(obs, 5, 5)["isExit"] is True
    result = engine.step(0)
    assert result.info.get("stage_complete") is True and result.observation["stage"] == 3
    assert result.info["reward_breakdown"]["stage"] == pytest.approx(2.0)


def test_undo_can_lower_hp(engine):
    """errata E2: RESET then UNDO takes HP from 3 back to 1, read as 2 damage, while the RESET
    energy comes back: -0.01 - 2.0 + 4 * 0.05 = -1.81."""
    engine.set_state({"player": at(2, 2, hp=1, credits=1, energy=5),
                      "ownedPrograms": [WAIT, 14, 19]})
    engine.step(WAIT)  # snapshot: hp 1, energy 4
    assert engine.step(19).observation["playerHP"] == 3
    result = engine.step(14)
    assert result.observation["playerHP"] == 1 and result.observation["energy"] == 4
    assert result.info["reward_breakdown"]["damagePenalty"] == pytest.approx(-2.0)
    assert result.info["reward_breakdown"]["resourceGain"] == pytest.approx(0.2)
    assert result.reward == pytest.approx(-1.81, abs=1e-5)


def test_reset_builds_a_fresh_stage_one(engine):
    """game-rules §1.5, §3.1, §11.1: a new game is stage 1, turn 0, full HP, attack 1, the
    player in a corner with exactly one starting bonus (10 credits, 11 energy or 1 siphon), one
    exit, no UNDO history."""
    for _ in range(3):
        obs = engine.reset()
        assert (obs["stage"], obs["turn"], obs["playerHP"], obs["baseAttack"]) == (1, 0, 3, 1)
        assert (obs["playerRow"], obs["playerCol"]) in {(0, 0), (0, 5), (5, 0), (5, 5)}
        assert (obs["credits"], obs["energy"], obs["dataSiphons"]) in {(10, 0, 0), (0, 11, 0),
                                                                       (0, 0, 1)}
        assert sum(c["isExit"] for line in obs["cells"] for c in line) == 1
        assert 14 not in engine.valid_actions()


def test_victory_can_be_won_again_without_a_reset(engine):
    """§10.3, §8.8: after victory the stage stays 8 and the board stays; the game is not reset,
    so stepping off the exit and back on wins again (64 + 500 again)."""
    result = play(engine, {"player": at(4, 5), "stage": 8}, 0)
    assert result.done is True and result.observation["stage"] == 8
    assert (result.observation["playerRow"], result.observation["playerCol"]) == (5, 5)
    assert engine.step(1).done is False
    result = engine.step(0)
    assert result.done is True and result.info.get("stage_complete") is True
    assert result.info["reward_breakdown"]["stage"] == pytest.approx(64.0)
    assert result.info["reward_breakdown"]["victory"] == pytest.approx(500.0)
