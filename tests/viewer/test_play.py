"""scripts/play.py driven by scripted input (issue 6): from a setState scenario on stage 8 with
the player at (4,4), a refused move into a block, "w" then "d" reach the exit (5,5), which wins
the game (game-rules: the exit of stage 8 ends the game in victory); a take back and an unknown
key are handled; the reward breakdown is shown after every action."""

import json

import pytest

from viewer_helpers import PLAY, run_script
from scripts import play as play_script

SCENARIO = {"player": {"row": 4, "col": 4, "hp": 3, "credits": 2, "energy": 3}, "stage": 8,
            "ownedPrograms": [5, 14], "blocks": [{"row": 3, "col": 4, "type": "data", "points": 2}]}


@pytest.fixture(scope="module")
def played(tmp_path_factory, viewer_cache):
    path = tmp_path_factory.mktemp("play") / "scenario.json"
    path.write_text(json.dumps(SCENARIO))
    result = run_script(PLAY, "--scenario", str(path), "--compile-cache-dir", viewer_cache,
                        stdin="s\nw z w\n? 7\nd\nw\n")
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_two_moves_reach_the_exit_and_win(played):
    out = played.stdout
    assert out.rstrip().splitlines()[-1] == "stage 8, score 0, 2 actions, won"
    assert "episode over: won" in out


def test_blocked_move_is_refused_and_take_back_restores(played):
    out = played.stdout
    # (3,4) holds a block with no enemy on it: down is masked (§7), nothing is played.
    assert "move/shoot down is not valid now" in out
    assert "took back the last action" in out
    assert "unknown key '7'" in out


def test_reward_breakdown_after_each_action(played):
    rewards = [line for line in played.stdout.splitlines() if line.startswith("reward ")]
    assert len(rewards) == 3  # w, w again after the take back, d
    assert "stage_completion" in rewards[-1] and "victory" in rewards[-1]
    assert "programs: [1] PUSH 0c/2e" in played.stdout and "[2] UNDO 1c/0e" in played.stdout


def test_time_to_first_frame_is_reported(played):
    assert "first frame after" in played.stderr


def test_new_game_from_a_seed(viewer_cache):
    """--seed starts a generated stage 1 (game-rules §3): the board shows the player and the
    exit, and quitting at once ends cleanly."""
    result = run_script(PLAY, "--seed", "3", "--compile-cache-dir", viewer_cache, stdin="q\n")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("stage 1  turn 0")
    assert "@" in result.stdout and "X" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("stage 1, score 0, 0 actions")


def test_a_scenario_that_is_not_text_is_a_clear_error(tmp_path):
    """A --scenario file that is not UTF-8 text (a checkpoint given by mistake) is an unreadable
    scenario like one that is not JSON: a ``PlayError`` (one ``error:`` line), not a
    UnicodeDecodeError traceback."""
    path = tmp_path / "checkpoint_1.msgpack"
    path.write_bytes(b"\x85\xa6config\xff\xfe not text")
    with pytest.raises(play_script.PlayError, match=f"cannot read scenario {path}: "):
        play_script.load_scenario(str(path))


def test_a_compile_cache_dir_that_is_a_file_is_refused_before_any_work(tmp_path, capsys):
    """--compile-cache-dir naming a file: exit 2, one ``error:`` line naming the flag, before
    anything is built or compiled (not a FileExistsError traceback)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code = play_script.main(["--compile-cache-dir", str(blocker)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: --compile-cache-dir {blocker}: {blocker} is not a directory")
