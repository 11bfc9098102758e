"""``scripts/trim_checkpoint.py``: bad input is one line and exit 2 before any work, and
nothing is overwritten (the trimming itself: tests/trainer/test_training.py)."""

from tests.script_harness import exit_and_stderr, load_script

trim = load_script("trim_checkpoint")


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    for args, message in (([str(tmp_path / "none"), str(tmp_path / "out")], "error:"),
                          ([str(tmp_path), str(taken)], "nothing is overwritten"),
                          ([str(tmp_path), str(tmp_path / "no" / "out")], "does not exist"),
                          ([str(tmp_path), str(tmp_path / "out"), "--envs", "x"],
                           "invalid int value"),
                          # before the checkpoint is loaded (until stop 81 a traceback after)
                          ([str(tmp_path / "none"), "/proc/out"], "cannot write in /proc")):
        code, err = exit_and_stderr(trim.main, args, capsys)
        assert code == 2, err
        assert message in err and len(err.strip().splitlines()) == 1
    assert (taken / "keep.txt").read_text() == "mine"
