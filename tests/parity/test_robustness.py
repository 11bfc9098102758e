"""The server answers bad input with an error line and keeps serving
(programs-rewards-observation §10.2-§10.4, decisions R8, R10); EOF ends it with status 0."""

import json
import os
import subprocess

import pytest

from envs.hackmatrix.swift_io.engines import EngineError, ProtocolEngine, own_server_command
from envs.hackmatrix.swift_io.swift_build import BINARY_ENV_VAR

SWIFT = bool(os.environ.get(BINARY_ENV_VAR))

BASE = {"player": {"row": 2, "col": 2, "energy": 9}, "ownedPrograms": [10],
        "enemies": [{"type": "virus", "row": 4, "col": 2, "hp": 2}]}

# (request line, Swift's reply) for input Swift itself answers with an error line (§10.4).
SWIFT_ERRORS = [
    ("not json", "Invalid command"),
    ("", "Invalid command"),
    ("[1, 2]", "Invalid command"),
    ('{"actionIndex": 0}', "Invalid command"),  # missing action
    ('{"action": 5}', "Invalid command"),
    ('{"action": "step", "actionIndex": "0"}', "Invalid command"),  # non-integer index
    ('{"action": "step", "actionIndex": 1.5}', "Invalid command"),
    ('{"action": "step", "actionIndex": true}', "Invalid command"),
    ('{"action": "reset", "state": 3}', "Invalid command"),  # malformed state, any command
    ('{"action": "step"}', "Missing actionIndex"),
    ('{"action": "step", "actionIndex": null}', "Missing actionIndex"),
    ('{"action": "setState"}', "Missing state data for setState command"),
    ('{"action": "fly"}', "Unknown command: fly"),
    ('{"action": "RESET"}', "Unknown command: RESET"),
]


@pytest.fixture(scope="module")
def fresh_server():
    """A second, short-lived server that never gets a game (it compiles nothing), started with
    Swift's flags and verbose logging, which must all go to stderr."""
    command = None if SWIFT else own_server_command(0) + ["--headless-cli", "--debug", "--info"]
    engine = ProtocolEngine(command, stderr=subprocess.DEVNULL)
    yield engine
    engine.close()


def test_placeholders_and_empty_answers_before_any_game(fresh_server):
    """§10.3: getActionSpace 28, the fixed getObservationSpace placeholder, [] valid actions and
    a zeroed internal state while no game exists."""
    assert fresh_server.request({"action": "getActionSpace"}) == {"actionSpaceSize": 28}
    assert fresh_server.request({"action": "getObservationSpace"}) == {
        "gridSize": 6, "playerFeatures": 9, "cellFeatures": 20}
    assert fresh_server.valid_actions() == []
    assert fresh_server.internal_state() == {
        "scheduledTaskInterval": 0, "nextScheduledTaskTurn": 0, "pendingSiphonTransmissions": 0,
        "turnCount": 0, "enemies": []}


@pytest.mark.skipif(SWIFT, reason="Swift aborts on a step before any game (§10.4)")
def test_step_before_any_game_is_an_error_line(fresh_server):
    """R8: where Swift aborts (step with no game) the server answers an error and goes on."""
    reply = fresh_server.send_line('{"action": "step", "actionIndex": 0}')
    assert set(reply) == {"error"} and "reset" in reply["error"]
    assert fresh_server.valid_actions() == []


def test_bytes_that_are_not_utf8_are_an_invalid_command(fresh_server):
    """§10.2: a line that is not JSON text is "Invalid command"; the server answers the next."""
    fresh_server.process.stdin.flush()
    fresh_server.process.stdin.buffer.write(b"\xff\xfe{\n")
    fresh_server.process.stdin.buffer.flush()
    assert json.loads(fresh_server.process.stdout.readline()) == {"error": "Invalid command"}
    assert fresh_server.request({"action": "getActionSpace"}) == {"actionSpaceSize": 28}


def test_eof_ends_the_server_with_status_zero():
    """§10.1: at end of input the loop ends and the process exits (status 0)."""
    engine = ProtocolEngine(seed=0)
    assert engine.request({"action": "getActionSpace"}) == {"actionSpaceSize": 28}
    assert engine.close() == 0


@pytest.mark.parametrize("line,error", SWIFT_ERRORS)
def test_swift_error_replies_and_server_keeps_running(protocol_engine, line, error):
    """§10.2/§10.4: undecodable lines, missing fields and unknown commands give Swift's error
    line; the game in progress is untouched and the next request is answered."""
    before = protocol_engine.set_state(BASE)
    assert protocol_engine.send_line(line) == {"error": error}
    assert protocol_engine.request({"action": "getActionSpace"}) == {"actionSpaceSize": 28}
    assert protocol_engine.valid_actions() == [0, 1, 2, 3, 10]
    assert protocol_engine.step(10).observation["turn"] == before["turn"] + 1


@pytest.mark.skipif(SWIFT, reason="Swift aborts on an index outside 0..27 (§7, §10.4)")
@pytest.mark.parametrize("index", [-1, 28, 31, 2 ** 40])
def test_out_of_range_action_index_is_an_error_line(protocol_engine, index):
    """R8: an index outside 0..27 answers an error naming the range; the game goes on."""
    protocol_engine.set_state(BASE)
    reply = protocol_engine.send_line(json.dumps({"action": "step", "actionIndex": index}))
    assert set(reply) == {"error"} and "0..27" in reply["error"]
    assert protocol_engine.internal_state()["turnCount"] == 0
    assert protocol_engine.step(10).done is False


BAD_SCENARIOS = [
    ({"player": {"row": 6, "col": 0}}, "player"),
    ({"player": {"row": 0, "col": -1}}, "player"),
    ({"player": {"col": 0}}, "player.row"),
    ({}, "player"),
    ({"player": {"row": 0, "col": 0, "credits": -1}}, "player.credits"),
    ({"player": {"row": 0, "col": 0, "hp": "full"}}, "player.hp"),
    ({"player": {"row": 0, "col": 0}, "stage": 0}, "stage"),
    ({"player": {"row": 0, "col": 0}, "stage": 10}, "stage"),
    ({"player": {"row": 0, "col": 0}, "turn": -3}, "turn"),
    ({"player": {"row": 0, "col": 0}, "enemies": [{"type": "virus", "row": 7, "col": 0, "hp": 1}]},
     "enemies[0]"),
    ({"player": {"row": 0, "col": 0}, "enemies": [{"type": "virus", "row": 1, "col": 0}]},
     "enemies[0].hp"),
    ({"player": {"row": 0, "col": 0}, "transmissions": [
        {"row": 1, "col": 9, "turnsRemaining": 1, "enemyType": "virus"}]}, "transmissions[0]"),
    ({"player": {"row": 0, "col": 0}, "blocks": [
        {"row": 1, "col": 1, "type": "data", "points": -2}]}, "blocks[0].points"),
    ({"player": {"row": 0, "col": 0}, "resources": [{"row": 1, "col": 1, "energy": -1}]},
     "resources[0].energy"),
    ({"player": {"row": 0, "col": 0}, "ownedPrograms": "push"}, "ownedPrograms"),
]


@pytest.mark.skipif(SWIFT, reason="decisions R10 is this project's server only")
@pytest.mark.parametrize("scenario,field", BAD_SCENARIOS)
def test_bad_set_state_names_the_field_and_keeps_the_game(engine, scenario, field):
    """R10: a setState value the game cannot represent answers an error naming the field and
    keeps the previous game (same observation, same valid actions)."""
    before = engine.set_state(BASE)
    with pytest.raises(EngineError) as error:
        engine.set_state(scenario)
    assert field in str(error.value)
    assert engine.valid_actions() == [0, 1, 2, 3, 10]
    after = engine.step(10).observation
    assert (after["playerRow"], after["playerCol"], after["turn"]) == (2, 2, before["turn"] + 1)
