"""scripts/watch_agent.py end to end on a tiny checkpoint (issue 6): live output names every
action and ends with the summary table; the GIF holds one frame per step plus each episode's
final position; the HTML replay is one self-contained file; --record then --replay reproduces
every state and reward; missing, corrupt and incompatible checkpoints fail with a clear
message, a non-zero exit and no traceback; an output path (--gif, --html, --mp4, --record)
that cannot be written fails before any work."""

import html.parser
import json
import re

import imageio.v3 as iio
import numpy as np
import pytest

from viewer_helpers import WATCH, WATCH_EPISODES, WATCH_MAX_STEPS, run_script
from envs.hackmatrix.core.constants import DIR_NAMES
from envs.hackmatrix.viz.render_text import action_name
from envs.hackmatrix.viz import replay
from scripts import watch_agent


def step_lines(stdout):
    return re.findall(r"^step (\d+): action (.+)$", stdout, flags=re.MULTILINE)


def test_live_output_names_each_recorded_action_and_ends_with_the_summary(watch_run):
    """Every step prints "step t: action <name>" (move/shoot by info["shot"], programs
    upper-case), and the run ends with one summary row per episode."""
    record, stdout = watch_run["record"], watch_run["stdout"]
    actions = [a for episode in record["episodes"] for a in episode["actions"]]
    lines = step_lines(stdout)
    assert len(lines) == len(actions) >= WATCH_EPISODES
    for (_, name), action in zip(lines, actions):
        if action < 4:  # move or shoot, as info["shot"] said
            assert name in (f"move {DIR_NAMES[action]}", f"shoot {DIR_NAMES[action]}")
        else:
            assert name == action_name(action)
    summary = stdout[stdout.rindex("summary"):].splitlines()
    assert summary[1].split() == ["episode", "return", "length", "stage", "outcome", "siphons",
                                  "programs"]
    assert len(summary) == 2 + WATCH_EPISODES + 1  # title, header, one row each, totals
    for episode, row in zip(record["episodes"], summary[2:]):
        assert row.split()[0] == str(episode["episode"])
        assert row.split()[2] == str(len(episode["actions"]))
        assert len(episode["actions"]) <= WATCH_MAX_STEPS


def test_gif_has_one_frame_per_step_plus_final_positions(watch_run):
    """Frame t shows the position the t-th action was chosen in; each episode adds its final
    position (where the outcome is shown)."""
    frames = iio.imread(watch_run["gif"], index=None)
    steps = sum(len(episode["actions"]) for episode in watch_run["record"]["episodes"])
    assert frames.shape[0] == steps + WATCH_EPISODES


class _Collector(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attributes, self.frames_json = [], [], None
        self._in_frames = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes += [value or "" for _, value in attrs]
        self._in_frames = tag == "script" and ("id", "frames") in attrs

    def handle_data(self, data):
        if self._in_frames:
            self.frames_json = (self.frames_json or "") + data

    def handle_endtag(self, tag):
        self._in_frames = False


def test_html_is_self_contained(watch_run):
    """No network: no http(s) URL anywhere, no src/href attribute, scripts and styles inline;
    the embedded frames are valid JSON, one per displayed step."""
    with open(watch_run["html"], encoding="utf-8") as handle:
        text = handle.read()
    assert text.startswith("<!DOCTYPE html>")
    assert not re.search(r"https?://", text)
    collector = _Collector()
    collector.feed(text)
    assert {"html", "head", "style", "body", "script"} <= set(collector.tags)
    assert "link" not in collector.tags and "img" not in collector.tags
    frames = json.loads(collector.frames_json)
    steps = sum(len(episode["actions"]) for episode in watch_run["record"]["episodes"])
    assert len(frames) == steps + WATCH_EPISODES
    assert {frame["episode"] for frame in frames} == set(range(WATCH_EPISODES))


def test_record_then_replay_reproduces_exactly(watch_run, viewer_cache):
    """The replay re-simulates the recorded actions without the network (the checkpoint is
    not needed) and checks every state digest and reward."""
    result = run_script(WATCH, "--replay", watch_run["record_file"], "--quiet",
                        "--compile-cache-dir", viewer_cache)
    assert result.returncode == 0, result.stderr[-3000:]
    steps = sum(len(e["actions"]) for e in watch_run["record"]["episodes"])
    assert (f"replay reproduced the record exactly: {WATCH_EPISODES} episode(s), {steps} steps"
            in result.stdout)


def test_replay_shows_the_policy_of_a_checkpoint_of_another_architecture(
        watch_run, tiny_feedforward_checkpoint, capsys):
    """A replay beside a checkpoint runs the checkpoint's own network (its core, widths and
    head, from its saved config), not TrainConfig's default one: a run trained without a
    recurrent core and with a head of its own replays a record of the same game."""
    code = watch_agent.main(["--replay", watch_run["record_file"], tiny_feedforward_checkpoint,
                             "--quiet", "--no-compile-cache"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"replay reproduced the record exactly: {WATCH_EPISODES} episode(s)" in out


def test_replay_beside_a_checkpoint_of_other_agent_options_is_refused(
        watch_run, tiny_feedforward_checkpoint, tmp_path, capsys):
    """The agent's own env options (the acquire macro: one more action; the exit-distance
    view: one more input channel) are part of its network: a record played under others
    cannot be shown beside it. One line, exit 2, before any work."""
    record = dict(watch_run["record"])
    record["env_options"] = dict(record["env_options"], acquire_macro=True)
    path = tmp_path / "macro.json"
    path.write_text(json.dumps(record))
    code, err = run_main(capsys, "--replay", str(path), tiny_feedforward_checkpoint, "--quiet")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert "acquire_macro" in errors[0]


def _recorded_result(entry):
    return {"record": dict(entry)}


def test_verify_replay_names_the_first_divergent_step(watch_run):
    """A replay whose state digest or reward differs from the record is refused."""
    recorded = watch_run["record"]["episodes"][0]
    replay.verify_replay(recorded, _recorded_result(recorded))
    changed = dict(recorded, state_digests=["0" * 16] + recorded["state_digests"][1:])
    with pytest.raises(replay.ReplayError, match="diverged at step 0"):
        replay.verify_replay(recorded, _recorded_result(changed))
    rewards = list(recorded["rewards"])
    rewards[-1] += 1.0
    with pytest.raises(replay.ReplayError, match="reward"):
        replay.verify_replay(recorded, _recorded_result(dict(recorded, rewards=rewards)))


def run_main(capsys, *args):
    code = watch_agent.main([*args, "--no-compile-cache"])
    captured = capsys.readouterr()
    return code, captured.err


def test_missing_checkpoint_is_a_clear_error(tmp_path, capsys):
    """Exit 1 with one error line, for a missing file and for a run directory without any."""
    code, err = run_main(capsys, str(tmp_path / "nope.msgpack"))
    assert code == 1 and "error: checkpoint not found" in err and "Traceback" not in err
    code, err = run_main(capsys, str(tmp_path))  # a directory without checkpoints
    assert code == 1 and "no checkpoint_<update>.msgpack files" in err


def test_corrupt_checkpoint_is_a_clear_error(tmp_path, capsys):
    """A file that does not decode: exit 1, the message says it cannot be read."""
    path = tmp_path / "checkpoint_1.msgpack"
    path.write_bytes(b"\xc1 this is not a checkpoint")
    code, err = run_main(capsys, str(path))
    assert code == 1 and "cannot read checkpoint" in err and "Traceback" not in err


def test_checkpoint_of_an_incompatible_environment_is_refused(tiny_checkpoint, tmp_path, capsys):
    """A network whose input size no longer matches the observation (another env version)."""
    from purejaxrl.checkpoint import checkpoint_record, encode_checkpoint, load_checkpoint
    payload = load_checkpoint(tiny_checkpoint)
    params = payload["runner_state"].params
    first = params["params"]["MLPTorso_0"]["Dense_0"]
    first["kernel"] = np.zeros((first["kernel"].shape[0] + 7, first["kernel"].shape[1]), np.float32)
    fields = ("config", "update", "env_steps", "run_name", "wandb_run_id", "elapsed_seconds")
    record = checkpoint_record(**{name: payload[name] for name in fields})
    path = tmp_path / "checkpoint_9.msgpack"
    path.write_bytes(encode_checkpoint(payload["runner_state"], record))
    code, err = run_main(capsys, str(path))
    assert code == 1 and "incompatible" in err and "Traceback" not in err


def test_a_replay_file_that_is_not_text_is_a_clear_error(tmp_path, capsys):
    """A --replay file that is not UTF-8 text (a checkpoint given by mistake) is an unreadable
    record like a file that is not JSON: exit 1, an ``error:`` line saying it cannot be read,
    no traceback."""
    path = tmp_path / "checkpoint_1.msgpack"
    path.write_bytes(b"\x85\xa6config\xff\xfe not text")
    code, err = run_main(capsys, "--replay", str(path))
    assert code == 1 and "Traceback" not in err
    assert err.splitlines()[-1].startswith(f"error: cannot read record {path}: ")


def test_a_non_finite_fps_is_refused_before_any_work(tmp_path, capsys):
    """--fps nan passes ``fps <= 0`` and inf makes no speed: both are one line while the
    arguments are parsed (exit 2), not a failure once every episode was played."""
    for value in ("nan", "inf"):
        with pytest.raises(SystemExit) as stop:
            watch_agent.main([str(tmp_path / "nope.msgpack"), "--fps", value,
                              "--gif", str(tmp_path / "x.gif")])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1
        assert err.startswith("error: argument --fps: must be a finite number")


def test_a_compile_cache_dir_that_is_a_file_is_refused_before_any_work(tmp_path, capsys):
    """--compile-cache-dir naming a file, or a path under one: exit 2, one line naming the
    flag, before the checkpoint is even looked at (it does not exist here)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for cache in (blocker, blocker / "below"):
        code = watch_agent.main([str(tmp_path / "nope.msgpack"), "--compile-cache-dir",
                                 str(cache)])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"error: --compile-cache-dir {cache}: {blocker} is not a "
                              "directory")


def test_mp4_without_imageio_ffmpeg_names_the_package(monkeypatch, capsys, tmp_path):
    """--mp4 is refused before any work when imageio-ffmpeg is absent (exit 2)."""
    monkeypatch.setattr(watch_agent.importlib.util, "find_spec", lambda name: None)
    code, err = run_main(capsys, str(tmp_path), "--mp4", str(tmp_path / "a.mp4"))
    assert code == 2 and "imageio-ffmpeg" in err


@pytest.mark.parametrize("flag", ["--gif", "--html", "--mp4", "--record"])
def test_output_path_that_cannot_be_written_fails_before_any_work(flag, tmp_path, capsys,
                                                                  monkeypatch):
    """Exit 2, one error line naming the flag, before the checkpoint is even looked at (the
    checkpoint here does not exist): not a traceback after the episodes were played."""
    monkeypatch.setattr(watch_agent.importlib.util, "find_spec", lambda name: object())
    target = tmp_path / "missing-directory" / "out"
    code, err = run_main(capsys, str(tmp_path / "nope.msgpack"), flag, str(target))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {flag} {target}: directory ") and "does not exist" in err


def test_checkpoint_flag_names_the_same_checkpoint_as_the_positional(tmp_path, capsys):
    """--checkpoint PATH is the positional CHECKPOINT (the scripts' one vocabulary); given both,
    they must agree (exit 2 otherwise); --max-episode-steps is the env's time limit, so a
    replay (played with its record's env options) refuses it. All before any work."""
    code, err = run_main(capsys, "--checkpoint", str(tmp_path / "nope.msgpack"))
    assert code == 1 and "error: checkpoint not found" in err
    code, err = run_main(capsys, str(tmp_path / "a"), "--checkpoint", str(tmp_path / "b"))
    assert code == 2 and "given twice" in err and err.count("\n") == 1
    code, err = run_main(capsys, "--replay", str(tmp_path / "r.json"), "--max-episode-steps", "5")
    assert code == 2 and "--max-episode-steps" in err and err.count("\n") == 1
    code, err = run_main(capsys, str(tmp_path), "--max-episode-steps", "0")
    assert code == 2 and "--max-episode-steps must be >= 1, got 0" in err


def test_only_shows_the_episodes_the_batched_screen_found_ending_so(tiny_checkpoint,
                                                                    viewer_cache, tmp_path):
    """--only died plays the --episodes batched first (run_episode's keys, Simulator's policy)
    and then shows, one at a time, exactly the episodes the screen saw die: each shown episode
    dies after the length the screen measured (a screen with other keys, or another policy
    form, plays other games and is warned about), and the others are not shown. Sampled play,
    so the act keys must match too."""
    record_file = tmp_path / "died.json"
    result = run_script(WATCH, tiny_checkpoint, "--episodes", "12", "--seed", "0", "--sample",
                        "--max-episode-steps", "40", "--only", "died", "--shown", "12",
                        "--quiet", "--record", str(record_file),
                        "--compile-cache-dir", viewer_cache)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "warning" not in result.stderr, result.stderr
    listed = re.search(r"^died: episode\(s\) ([\d, ]+); showing ([\d, ]+)$", result.stdout,
                       flags=re.MULTILINE)
    assert listed, result.stdout
    died = [int(e) for e in listed.group(1).split(", ")]
    assert listed.group(2) == listed.group(1)  # --shown 12 shows every match
    assert 0 < len(died) < 12, "the seed's 12 episodes should mix deaths and time-outs"
    with open(record_file, encoding="utf-8") as handle:
        shown = json.load(handle)["episodes"]
    assert [entry["episode"] for entry in shown] == died
    assert all(entry["outcome"] == "died" for entry in shown)


def test_only_is_refused_where_it_cannot_apply(tmp_path, capsys):
    """--shown without --only, and --only with --replay (which plays its record's episodes),
    exit 2 with one line before any work."""
    code, err = run_main(capsys, str(tmp_path), "--shown", "2")
    assert code == 2 and "--shown" in err and err.count("\n") == 1
    code, err = run_main(capsys, "--replay", str(tmp_path / "r.json"), "--only", "won")
    assert code == 2 and "--only" in err and err.count("\n") == 1
    code, err = run_main(capsys, str(tmp_path), "--only", "won", "--shown", "0")
    assert code == 2 and "--shown must be >= 1, got 0" in err


# The rows of ``evaluation_file``: a search row's loop and every other row's.
RECORDED_ROWS = {"search-1": "boards", "random": "episodes"}


@pytest.fixture(scope="module")
def evaluation_file(tmp_path_factory, recorded_random_games, recorded_random_episodes):
    """An evaluate.py --json file with two rows whose games kept their actions, as
    ``evaluate.py --record-actions`` writes them: random play on 4 HackMatrix boards through
    ``play_boards`` (the search rows' player, 2 lanes; a row that does not name its loop, as
    before network rows were recorded) and through ``play_episodes`` (every other row's)."""
    from purejaxrl.policy import env_options_of
    rows = {}
    for name, recorded in (("search-1", recorded_random_games),
                           ("random", recorded_random_episodes)):
        rows[name] = {"games": recorded["games"],
                      "env_options": env_options_of(recorded["config"]),
                      "evaluation": {"env": "hackmatrix", "seed": recorded["seed"],
                                     "episodes": recorded["boards"]}}
    rows["random"]["loop"] = "episodes"
    path = tmp_path_factory.mktemp("evaluation") / "eval.json"
    path.write_text(json.dumps(rows))
    return path, rows


@pytest.mark.parametrize("name", list(RECORDED_ROWS))
def test_an_evaluations_games_are_watched_and_recorded_on_its_own_keys(evaluation_file, name,
                                                                        tmp_path, capsys):
    """--evaluation JSON --row ROW re-simulates the row's recorded games on the keys its loop
    played them with and checks each ends as, and when, the evaluation says; --only picks by
    that end; the record it writes replays exactly (its keys scheme is the evaluation's, with
    the loop); a game whose actions were altered is refused (exit 1, one line)."""
    path, rows = evaluation_file
    row = rows[name]
    ends = row["games"]["end"]
    assert "died" in ends
    record = tmp_path / "died.json"
    code = watch_agent.main(["--evaluation", str(path), "--row", name, "--only", "died",
                             "--quiet", "--record", str(record), "--no-compile-cache"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "re-simulated as it says they ended: 1 game(s)" in out
    written = json.loads(record.read_text())
    first_died = ends.index("died")
    assert written["keys"] == {"scheme": "evaluation", "boards": len(ends),
                               "loop": RECORDED_ROWS[name]}
    assert [e["episode"] for e in written["episodes"]] == [first_died]
    assert written["episodes"][0]["actions"] == row["games"]["actions"][first_died]
    assert watch_agent.main(["--replay", str(record), "--quiet", "--no-compile-cache"]) == 0
    assert "replay reproduced the record exactly" in capsys.readouterr().out
    # The same game cut short: it no longer ends where the evaluation says.
    altered = json.loads(path.read_text())
    altered[name]["games"]["actions"][first_died] = (
        altered[name]["games"]["actions"][first_died][:-1])
    bad = tmp_path / "altered.json"
    bad.write_text(json.dumps(altered))
    code, err = run_main(capsys, "--evaluation", str(bad), "--row", name, "--only", "died",
                         "--quiet")
    error = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and len(error) == 1
    assert error[0].startswith(f"error: board {first_died} re-simulated ended 'max steps' after ")
    length = row["games"]["length"][first_died]
    assert error[0].endswith(f"the evaluation says 'died' after {length}")


def test_an_evaluation_without_actions_or_row_is_refused(evaluation_file, tmp_path, capsys):
    """A row that kept no actions, a missing row, and --row without --evaluation: one line,
    exit 2, before any work."""
    path, rows = evaluation_file
    row = rows["search-1"]
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"search-1": dict(row, games={"end": row["games"]["end"]})}))
    code, err = run_main(capsys, "--evaluation", str(plain), "--row", "search-1")
    assert code == 2 and "kept no actions: evaluate it with --record-actions" in err
    code, err = run_main(capsys, "--evaluation", str(path), "--row", "greedy")
    assert code == 2 and "has no row 'greedy' (rows: search-1, random)" in err
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"search-1": dict(row, loop="frames")}))
    code, err = run_main(capsys, "--evaluation", str(unknown), "--row", "search-1")
    assert code == 2 and "played by an unknown loop 'frames' (known: boards, episodes)" in err
    code, err = run_main(capsys, "--row", "search-1", "--replay", str(path))
    assert code == 2 and "--evaluation JSON and --row ROW go together" in err


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_malformed_rows_and_one_file_for_two_roles_are_refused(evaluation_file, tmp_path,
                                                                capsys):
    """Before any work, one line, exit 2: a row that is no evaluation row or whose games'
    lists disagree (until stop 81 a traceback), and one file named for two roles (an output
    that is also the input or another output: --overwrite replaces an earlier result, never
    the evaluation being read) in watch_agent, world_levels and program_timeline."""
    from scripts import program_timeline, world_levels
    path, rows = evaluation_file
    row = rows["search-1"]
    malformed = tmp_path / "malformed.json"
    for bad in (1, dict(row, games=5),
                dict(row, games=dict(row["games"], end=row["games"]["end"][:-1]))):
        malformed.write_text(json.dumps({"search-1": bad}))
        code, err = run_main(capsys, "--evaluation", str(malformed), "--row", "search-1")
        assert code == 2 and len(error_lines(err)) == 1, err
        assert "Traceback" not in err and ("not an evaluation row" in err
                                           or "is malformed" in err), err
    code, err = run_main(capsys, "--evaluation", str(path), "--row", "search-1",
                         "--gif", str(tmp_path / "a.gif"), "--html", str(tmp_path / "a.gif"))
    assert code == 2 and "--html" in err and "one file cannot be both" in err
    code, err = run_main(capsys, "--evaluation", str(path), "--row", "search-1",
                         "--record", str(path), "--overwrite")
    assert code == 2 and "one file cannot be both" in err
    before = open(path).read()
    for script in (world_levels, program_timeline):
        assert script.main([str(path), "--row", "search-1", "--json", str(path),
                            "--overwrite"]) == 2
        err = capsys.readouterr().err
        assert "one file cannot be both" in err and len(error_lines(err)) == 1
    assert open(path).read() == before


def test_only_picks_an_evaluations_games_by_how_it_says_they_ended(tmp_path):
    """--only OUTCOME takes the first --shown games of the row that ended so (the board
    numbers are the evaluation's); without --only, the first --episodes boards."""
    import argparse
    games = {"end": ["died", "won", "truncated", "won", "won"], "length": [3, 9, 8, 7, 6],
             "actions": [[0] * n for n in (3, 9, 8, 7, 6)]}
    path = tmp_path / "eval.json"
    path.write_text(json.dumps({"row": {"games": games, "env_options": {},
                                        "evaluation": {"env": "hackmatrix", "seed": 5}}}))

    def picked(**flags):
        args = argparse.Namespace(**{"evaluation": str(path), "row": "row", "only": None,
                                     "shown": None, "episodes": 1, **flags})
        record = watch_agent.evaluation_games(args)
        assert record["keys"] == {"scheme": "evaluation", "boards": 5, "loop": "boards"}
        assert record["seed"] == 5
        return [(e["episode"], e["outcome"], e["length"]) for e in record["episodes"]]

    assert picked(only="won") == [(1, "won", 9)]
    assert picked(only="won", shown=2) == [(1, "won", 9), (3, "won", 7)]
    assert picked(only="truncated") == [(2, "truncated", 8)]
    assert picked(episodes=2) == [(0, "died", 3), (1, "won", 9)]
    with pytest.raises(watch_agent.WatchError, match="no game of row 'row' ended 'invalid'"):
        picked(only="invalid")


@pytest.mark.parametrize("name", list(RECORDED_ROWS))
def test_program_timeline_reads_every_game_of_an_evaluation(evaluation_file, name, tmp_path,
                                                            capsys):
    """scripts/program_timeline.py re-simulates all of a row's games at once on the keys its
    loop played them with: each game is counted once by the stage it first owned the program
    and by how it ended (random play owns none), and a game that no longer ends as the
    evaluation says is refused (exit 1, one error line)."""
    from scripts import program_timeline
    path, rows = evaluation_file
    row = rows[name]
    out = tmp_path / "timeline.json"
    assert program_timeline.main([str(path), "--row", name, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("4 games; RESET first owned on stage")
    games = json.loads(out.read_text())["games"]
    assert [g["board"] for g in games] == [0, 1, 2, 3]
    assert [g["end"] for g in games] == row["games"]["end"]
    assert [g["stage"] for g in games] == row["games"]["stage"]
    assert all(g["owned"] == "never" for g in games)
    died = row["games"]["end"].index("died")
    altered = json.loads(path.read_text())
    altered[name]["games"]["actions"][died] = altered[name]["games"]["actions"][died][:-1]
    bad = tmp_path / "altered.json"
    bad.write_text(json.dumps(altered))
    assert program_timeline.main([str(bad), "--row", name]) == 1
    err = capsys.readouterr().err
    assert f"error: board {died} re-simulated ended alive; the evaluation says 'died'" in err


@pytest.mark.slow  # extended suite (pytest -m slow): two compiles of the replay with world draws
def test_world_levels_draws_worlds_at_every_state_of_every_game(evaluation_file, tmp_path,
                                                                 capsys):
    """scripts/world_levels.py re-simulates a search row's games on their own keys and draws
    --worlds fair worlds at every state a move was played from: each game's counts over the
    levels add up to worlds x its length; a game that no longer ends as the evaluation says is
    refused (exit 1, one error line)."""
    from scripts import world_levels
    path, rows = evaluation_file
    out = tmp_path / "levels.json"
    assert world_levels.main([str(path), "--row", "search-1", "--worlds", "3",
                              "--json", str(out)]) == 0
    text = capsys.readouterr().out
    lengths = rows["search-1"]["games"]["length"]
    assert text.startswith(f"4 games, {sum(lengths)} states, 3 worlds each")
    games = json.loads(out.read_text())["games"]
    assert [sum(game["levels"]) for game in games] == [3 * length for length in lengths]
    died = rows["search-1"]["games"]["end"].index("died")
    altered = json.loads(path.read_text())
    altered["search-1"]["games"]["actions"][died] = altered["search-1"]["games"]["actions"][
        died][:-1]
    bad = tmp_path / "altered.json"
    bad.write_text(json.dumps(altered))
    assert world_levels.main([str(bad), "--row", "search-1", "--worlds", "3"]) == 1
    assert "re-simulated ended alive" in capsys.readouterr().err


def test_program_timeline_table_crosses_first_ownership_with_the_end():
    from scripts.program_timeline import format_table
    rows = [{"board": 0, "end": "won", "stage": 8, "seen": 1, "owned": 1},
            {"board": 1, "end": "died", "stage": 5, "seen": 2, "owned": "never", "offered": 9,
             "planned": 4},
            {"board": 2, "end": "died", "stage": 4, "seen": "never", "owned": "never"},
            {"board": 3, "end": "died", "stage": 7, "seen": 1, "owned": 1}]
    lines = format_table(rows, "reset").splitlines()
    assert lines[1].split() == ["owned", "won", "died", "games"]
    assert lines[2].split() == ["never", "0", "2", "2"]
    assert lines[3].split() == ["1", "1", "1", "2"]
    assert "never owned: 1 games (ended on stages [4])" in lines[4]
    assert lines[5].startswith("seen on the board and never owned: 1 games, on offer 9 steps, "
                               "a plan action played on 4 of them")
    assert lines[5].endswith("board 1 (seen on stage 2, ended died on 5; 4 of 9)")
