"""Opening a checkpoint never runs code from it (issue 27).

Rules checked, with hostile files (pickles whose unpickling runs ``os.system``, ``eval``,
``exec`` or ``subprocess.call``, in protocols 0 and 5; checkpoint files whose arrays declare an
object, void or structured dtype over pickled bytes, or hide an ``.npy`` object array or a
msgpack extension type) put where a checkpoint is expected, as a file and in a run directory:
on every load path (``load_checkpoint``, scripts/evaluate.py --checkpoint and
``hackmatrix-evaluate``, scripts/watch_agent.py with and without --replay,
train_purejaxrl.py --resume with and without --weights-only, the multi-process loader, the
converter without its flag) nothing runs (the payload's marker file never appears), the
command exits non-zero, and it says why in one ``error:`` line, never a traceback. The payloads
are live: unpickled, each one does create its marker (so the tests above can fail).
"""

import builtins
import io
import json
import os
import pickle
import subprocess
import sys

import jax
import msgpack
import numpy as np
import pytest

from envs.hackmatrix import ENV_VERSION
from envs.hackmatrix.viz.replay import RECORD_FORMAT, RECORD_VERSION
from purejaxrl import distributed
from purejaxrl.checkpoint import (CONVERTER, TRUST_FLAG, CheckpointError, checkpoint_record,
                                  encode_checkpoint, load_checkpoint, runner_state_template)
from purejaxrl.cli import evaluate as evaluate_cli
from purejaxrl.cli.train import main as train_main
from scripts import checkpoint_info, convert_checkpoint, watch_agent
from tests.trainer.toy_run import CONFIG

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(REPO_ROOT, "scripts")


class Reduce:
    """Unpickles as ``function(*args)``: the shape of every pickle exploit."""

    def __init__(self, function, args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def pickle_payloads(marker) -> dict:
    touch = f"open({str(marker)!r}, 'w').close()"
    return {
        "os.system": pickle.dumps(Reduce(os.system, (f"touch {marker}",))),
        "os.system, protocol 0": pickle.dumps(Reduce(os.system, (f"touch {marker}",)),
                                              protocol=0),
        "eval": pickle.dumps(Reduce(builtins.eval, (touch,))),
        "exec": pickle.dumps(Reduce(builtins.exec, (touch,))),
        "subprocess": pickle.dumps(Reduce(subprocess.call, (["touch", str(marker)],))),
    }


def checkpoint_bytes(arrays_edit=None) -> bytes:
    """A well-formed checkpoint of the toy config (zero arrays), its arrays edited."""
    template = runner_state_template(CONFIG)
    state = jax.tree.map(lambda leaf: np.zeros(leaf.shape, leaf.dtype), template)
    record = checkpoint_record(config=CONFIG.to_dict(), update=0, env_steps=0, run_name="x",
                               wandb_run_id=None, elapsed_seconds=0.0)
    top = msgpack.unpackb(encode_checkpoint(state, record), raw=False)
    if arrays_edit:
        arrays_edit(top["arrays"])
    return msgpack.packb(top, use_bin_type=True)


def array_payloads(marker) -> dict:
    """Checkpoint files whose first array carries a pickled payload in some disguise."""
    payload = pickle.dumps(Reduce(os.system, (f"touch {marker}",)))

    def with_dtype(name):
        def edit(arrays):
            key = next(iter(arrays))
            arrays[key] = [name, [1], payload]
        return edit

    def with_extension(arrays):
        # flax's msgpack format: extension type 1 = an ndarray (shape, dtype name, buffer).
        key = next(iter(arrays))
        arrays[key] = msgpack.ExtType(1, msgpack.packb([[1], "O", payload]))

    npy = io.BytesIO()
    np.save(npy, np.array([Reduce(os.system, (f"touch {marker}",))], dtype=object),
            allow_pickle=True)
    return {"object dtype": checkpoint_bytes(with_dtype("object")),
            "dtype O": checkpoint_bytes(with_dtype("O")),
            "void dtype": checkpoint_bytes(with_dtype("V8")),
            "structured dtype": checkpoint_bytes(with_dtype("[('a', 'O')]")),
            "msgpack extension": checkpoint_bytes(with_extension),
            ".npy object array": npy.getvalue()}


def all_payloads(marker) -> dict:
    return {**pickle_payloads(marker), **array_payloads(marker)}


PAYLOAD_NAMES = list(all_payloads("m"))
# Where the hostile bytes go: a file given as the checkpoint, or the newest checkpoint of a
# run directory (under the old name, refused unopened, and under the current one).
PLACEMENTS = {"file .pkl": "checkpoint_7.pkl", "file": "checkpoint_7.msgpack",
              "run dir": "run/checkpoint_7.msgpack", "run dir .pkl": "run/checkpoint_7.pkl"}


def place(tmp_path, payload_name, placement) -> tuple[str, str]:
    """(the path to give the command, the marker the payload would create)."""
    marker = tmp_path / "pwned"
    relative = PLACEMENTS[placement]
    target = tmp_path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(all_payloads(marker)[payload_name])
    given = target if not relative.startswith("run/") else target.parent
    return str(given), str(marker)


def record_file(tmp_path) -> str:
    """A minimal valid episode record, so that --replay reaches the checkpoint."""
    path = tmp_path / "record.json"
    path.write_text(json.dumps({"format": RECORD_FORMAT, "format_version": RECORD_VERSION,
                                "env_version": ENV_VERSION, "env_options": {}, "seed": 0,
                                "episodes": []}))
    return str(path)


def api(path, tmp_path):
    try:
        load_checkpoint(path, multi_seed=True)
    except CheckpointError as error:
        return 1, f"error: {error}\n"
    return 0, ""


def multi_process_loader(path, tmp_path):
    try:
        distributed.load_checkpoint_everywhere(path)
    except CheckpointError as error:
        return 1, f"error: {error}\n"
    return 0, ""


LOADERS = {
    "load_checkpoint": api,
    "load_checkpoint_everywhere": multi_process_loader,
    "evaluate --checkpoint": lambda path, tmp: evaluate_cli.main(
        ["--checkpoint", path, "--episodes", "1"]),
    "watch_agent": lambda path, tmp: watch_agent.main([path, "--no-compile-cache"]),
    "watch_agent --replay": lambda path, tmp: watch_agent.main(
        ["--replay", record_file(tmp), path, "--no-compile-cache"]),
    "train --resume": lambda path, tmp: train_main(["--resume", path, "--no-wandb"]),
    "train --resume --weights-only": lambda path, tmp: train_main(
        ["--resume", path, "--weights-only", "--no-wandb", "--checkpoint-dir",
         str(tmp / "new")]),
}


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_the_payloads_are_live(tmp_path):
    """Unpickled, every pickle payload (and the object array of the .npy file) creates its
    marker: what the load paths must never do."""
    marker = tmp_path / "pwned"
    for name, data in pickle_payloads(marker).items():
        pickle.loads(data)
        assert marker.exists(), name
        marker.unlink()
    npy = array_payloads(marker)[".npy object array"]
    np.load(io.BytesIO(npy), allow_pickle=True)
    assert marker.exists()


@pytest.mark.parametrize("loader", list(LOADERS))
@pytest.mark.parametrize("placement", list(PLACEMENTS))
@pytest.mark.parametrize("payload", PAYLOAD_NAMES)
def test_hostile_file_runs_nothing_and_is_one_error_line(payload, placement, loader, tmp_path,
                                                         capsys):
    path, marker = place(tmp_path, payload, placement)
    outcome = LOADERS[loader](path, tmp_path)
    code, stderr = outcome if isinstance(outcome, tuple) else (outcome,
                                                               capsys.readouterr().err)
    assert not os.path.exists(marker), "the payload ran"
    assert code == 1, stderr
    assert "Traceback" not in stderr
    (line,) = error_lines(stderr)
    assert os.path.basename(path) in line
    if placement.endswith(".pkl"):  # refused unopened, with the converter named
        assert f"{CONVERTER} {TRUST_FLAG}" in line


@pytest.mark.parametrize("placement", list(PLACEMENTS))
@pytest.mark.parametrize("payload", PAYLOAD_NAMES)
def test_checkpoint_info_reads_metadata_only_and_runs_nothing(payload, placement, tmp_path,
                                                              capsys):
    """scripts/checkpoint_info.py never builds the arrays: a hostile file runs nothing; a
    pickle (refused unopened, the converter named) or bytes that are no checkpoint are one
    error line, exit 2; a checkpoint whose arrays declare a hostile dtype is described from its
    metadata alone."""
    path, marker = place(tmp_path, payload, placement)
    code = checkpoint_info.main([path])
    captured = capsys.readouterr()
    assert not os.path.exists(marker), "the payload ran"
    assert "Traceback" not in captured.err
    if code == 0:
        assert "dtype" in payload and "update        " in captured.out
        return
    assert code == 2
    (line,) = error_lines(captured.err)
    if placement.endswith(".pkl"):
        assert f"{CONVERTER} {TRUST_FLAG}" in line


@pytest.mark.parametrize("script, args", [
    ("evaluate.py", ["--checkpoint"]),
    ("hackmatrix-evaluate", ["--checkpoint"]),
    ("watch_agent.py", []),
    ("train_purejaxrl.py", ["--no-wandb", "--resume"]),
])
def test_hostile_file_as_a_script(script, args, tmp_path):
    """The commands as a user runs them, in their own process."""
    command = os.path.join(os.path.dirname(sys.executable), script)
    if script.endswith(".py"):
        command = [sys.executable, os.path.join(SCRIPTS, script)]
    elif not os.path.exists(command):
        pytest.skip(f"{script} is not installed next to {sys.executable} (pip install -e .)")
    else:
        command = [command]
    path, marker = place(tmp_path, "os.system", "file")
    result = subprocess.run([*command, *args, path], capture_output=True, text=True,
                            timeout=300, cwd=REPO_ROOT,
                            env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert not os.path.exists(marker)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and len(error_lines(result.stderr)) == 1


@pytest.mark.parametrize("placement", ["file .pkl", "run dir .pkl"])
def test_converter_without_its_flag_opens_nothing(placement, tmp_path, capsys):
    path, marker = place(tmp_path, "os.system", placement)
    assert convert_checkpoint.main([path]) == 2
    assert not os.path.exists(marker)
    (line,) = error_lines(capsys.readouterr().err)
    assert TRUST_FLAG in line and "nothing was opened" in line


def test_a_multi_process_refusal_of_the_path_reaches_every_process(tmp_path, monkeypatch):
    """In a multi-process resume only process 0 sees the path, so every check of it is process
    0's and its failure goes through the broadcast that the other processes wait in: a
    multi-seed directory (one seed at a time in a multi-process run) is refused there, not
    raised on process 0 alone while the others wait for ever. Process 0's side, with the
    broadcast recorded."""
    (tmp_path / "seed-0").mkdir()
    broadcast = []

    def record(message, failed):
        broadcast.append(failed)
        return message, failed

    monkeypatch.setattr(distributed.jax, "process_count", lambda: 2)
    monkeypatch.setattr(distributed, "is_primary", lambda: True)
    monkeypatch.setattr(distributed, "_broadcast_from_primary", record)
    with pytest.raises(CheckpointError, match="multi-seed run: a multi-process run resumes"):
        distributed.load_checkpoint_everywhere(str(tmp_path))
    assert broadcast == [True]
