"""Engines for the Swift-parity harness: one interface, two backends (decisions R8).

* ``InProcessEngine``: the JAX environment in this process, through ``protocol.HeadlessGame``
  (no subprocess, no JSON transport), so its observations and infos have exactly the JSON
  shape of a protocol reply.
* ``ProtocolEngine``: any executable speaking the headless protocol on stdin/stdout: this
  project's server by default, the Swift build when ``$HACKMATRIX_BINARY`` names it (it is
  started with ``--headless-cli``).

Every engine method returns JSON-shaped values; a request the engine refuses raises
``EngineError`` with the engine's message.
"""

import abc
import json
import os
import subprocess
import sys
from typing import NamedTuple

BINARY_ENV_VAR = "HACKMATRIX_BINARY"
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class EngineError(RuntimeError):
    """The engine answered a request with ``{"error": ...}`` (or refused it in process)."""


class StepResult(NamedTuple):
    observation: dict
    reward: float
    done: bool
    info: dict


class Engine(abc.ABC):
    """The parity interface. reset() and set_state(scenario) return the raw observation (§9.1);
    step(action) a ``StepResult`` (§10.3); valid_actions() the ascending valid indices (§7);
    internal_state() the ``getInternalState`` object."""

    name = "engine"

    @abc.abstractmethod
    def reset(self) -> dict: ...

    @abc.abstractmethod
    def set_state(self, scenario: dict) -> dict: ...

    @abc.abstractmethod
    def step(self, action: int) -> StepResult: ...

    @abc.abstractmethod
    def valid_actions(self) -> list: ...

    @abc.abstractmethod
    def internal_state(self) -> dict: ...

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class InProcessEngine(Engine):
    """The JAX environment in this process. ``seed`` is the key stream of
    ``protocol.HeadlessGame``: with the same seed and requests it matches our own server."""

    name = "in-process"

    def __init__(self, seed: int = 0, env=None):
        from .protocol import HeadlessGame

        self.game = HeadlessGame(seed=seed, env=env)

    def _call(self, method, *args):
        from .protocol import CommandError
        from .scenario import ScenarioError

        try:
            return method(*args)
        except ScenarioError as exc:
            raise EngineError(f"Invalid state: {exc}") from exc
        except CommandError as exc:
            raise EngineError(str(exc)) from exc

    def reset(self) -> dict:
        return self._call(self.game.reset)

    def set_state(self, scenario: dict) -> dict:
        return self._call(self.game.set_state, scenario)

    def step(self, action: int) -> StepResult:
        return StepResult(*self._call(self.game.step, action))

    def valid_actions(self) -> list:
        return self.game.valid_actions()

    def internal_state(self) -> dict:
        return self.game.internal_state()

    @property
    def state(self):
        """The current ``EnvState`` (for rendering a divergence)."""
        return self.game.state


def own_server_command(seed: int = 0) -> list:
    """The command line of this project's server."""
    return [sys.executable, "-m", "envs.hackmatrix.protocol", "--seed", str(seed)]


class ProtocolEngine(Engine):
    """A subprocess speaking the protocol. ``command`` defaults to ``$HACKMATRIX_BINARY
    --headless-cli`` when that variable is set, else to this project's server with ``seed``.
    The process's stderr goes to ours (or to ``stderr`` if given)."""

    def __init__(self, command: list | None = None, *, seed: int = 0, env: dict | None = None,
                 stderr=None):
        if command is None:
            binary = os.environ.get(BINARY_ENV_VAR)
            command = [binary, "--headless-cli"] if binary else own_server_command(seed)
        self.command = list(command)
        self.name = "protocol:" + os.path.basename(self.command[0])
        self.process = subprocess.Popen(
            self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            cwd=_REPO_ROOT, env=env, text=True, encoding="utf-8", bufsize=1)

    def send_line(self, line: str) -> dict:
        """Send one raw request line and return the decoded reply (errors included)."""
        if self.process.poll() is not None:
            raise EngineError(f"{self.name} has exited with status {self.process.returncode}")
        self.process.stdin.write(line.rstrip("\n") + "\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        if not reply:
            raise EngineError(f"{self.name} sent no reply (exit status {self.process.poll()})")
        return json.loads(reply)

    def request(self, request: dict) -> dict:
        """Send a request object; an ``{"error": ...}`` reply raises ``EngineError``."""
        reply = self.send_line(json.dumps(request, separators=(",", ":")))
        if "error" in reply:
            raise EngineError(reply["error"])
        return reply

    def reset(self) -> dict:
        return self.request({"action": "reset"})["observation"]

    def set_state(self, scenario: dict) -> dict:
        return self.request({"action": "setState", "state": scenario})["observation"]

    def step(self, action: int) -> StepResult:
        reply = self.request({"action": "step", "actionIndex": action})
        return StepResult(reply["observation"], reply["reward"], reply["done"], reply["info"])

    def valid_actions(self) -> list:
        return self.request({"action": "getValidActions"})["validActions"]

    def internal_state(self) -> dict:
        return self.request({"action": "getInternalState"})

    def close(self, timeout: float = 30.0) -> int | None:
        """Close stdin (the protocol's end) and wait; returns the exit status."""
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                return self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


# ------------------------------------------------------------------------------------------
# Comparison helpers shared by the parity tests and scripts/parity_diff.py

FLOAT_ABS_TOL, FLOAT_REL_TOL = 1e-5, 1e-6


def floats_close(a: float, b: float) -> bool:
    """Reward values are compared as numbers (decisions R7): 1e-5 absolute or 1e-6 relative."""
    return abs(a - b) <= max(FLOAT_ABS_TOL, FLOAT_REL_TOL * max(abs(a), abs(b)))


def json_differences(a, b, path: str = "") -> list:
    """Paths where two JSON values differ; floats compared with ``floats_close``, ints and
    bools exactly (a bool never equals an int)."""
    if isinstance(a, dict) and isinstance(b, dict):
        diffs = []
        for key in sorted(set(a) | set(b)):
            where = f"{path}.{key}" if path else key
            if key not in a or key not in b:
                diffs.append(f"{where}: {a.get(key, '<absent>')!r} != {b.get(key, '<absent>')!r}")
            else:
                diffs += json_differences(a[key], b[key], where)
        return diffs
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)} ({a!r} != {b!r})"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in json_differences(x, y, f"{path}[{i}]")]
    if isinstance(a, bool) or isinstance(b, bool):
        return [] if a is b else [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, int) and isinstance(b, int):
            return [] if a == b else [f"{path}: {a!r} != {b!r}"]
        return [] if floats_close(float(a), float(b)) else [f"{path}: {a!r} != {b!r}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


# ------------------------------------------------------------------------------------------
# Lockstep differential run (the in-process env against a protocol engine)

class Divergence(NamedTuple):
    trajectory: int
    step: int  # steps taken in the trajectory before the diverging request
    request: str  # what was compared: "reset", "step <action>", "validActions", ...
    differences: list
    board: str  # render_text(reveal=True) of the reference state before the request

    def report(self) -> str:
        lines = [f"first divergence: trajectory {self.trajectory}, after {self.step} steps, "
                 f"on {self.request}", "reference board before it (hidden parts revealed):",
                 self.board, "differences (reference != candidate):"]
        lines += [f"  {d}" for d in self.differences[:40]]
        if len(self.differences) > 40:
            lines.append(f"  ... {len(self.differences) - 40} more")
        return "\n".join(lines)


def lockstep(reference: InProcessEngine, candidate: Engine, *, trajectories: int, steps: int,
             seed: int = 0, sync: str = "reset", progress=None):
    """Play ``trajectories`` random-valid-action games of at most ``steps`` steps on both engines
    in lockstep, comparing every reply; stops at the first difference.

    ``sync="reset"`` resets both engines (meaningful when both share the key stream: our server
    started with the reference's seed and nothing sent to either before). ``sync="setstate"``
    resets only the reference and sends its board to both with setState (for an engine with its
    own randomness, e.g. the Swift build; a later random draw may then legitimately differ).
    Actions are drawn uniformly from the valid actions with ``numpy`` seeded by ``seed``.
    Returns (Divergence or None, number of steps compared)."""
    import numpy as np

    from .render import render_text
    from .scenario import state_to_scenario

    rng = np.random.default_rng(seed)
    compared = 0

    def diverged(t, k, request, ref, cand, board):
        diffs = json_differences(ref, cand)
        return Divergence(t, k, request, diffs, board) if diffs else None

    for t in range(trajectories):
        board = "(no game yet)" if reference.state is None else render_text(reference.state,
                                                                           reveal=True)
        if sync == "setstate":
            reference.reset()
            scenario = state_to_scenario(reference.state)
            divergence = diverged(t, 0, "setState", reference.set_state(scenario),
                                  candidate.set_state(scenario), board)
        else:
            divergence = diverged(t, 0, "reset", reference.reset(), candidate.reset(), board)
        if divergence:
            return divergence, compared
        for k in range(steps):
            board = render_text(reference.state, reveal=True)
            valid = reference.valid_actions()
            divergence = diverged(t, k, "getValidActions", valid, candidate.valid_actions(), board)
            if divergence:
                return divergence, compared
            if not valid:
                break
            action = int(rng.choice(valid))
            ref, cand = reference.step(action), candidate.step(action)
            divergence = diverged(t, k, f"step {action}", ref._asdict(), cand._asdict(), board)
            if divergence is None:
                divergence = diverged(t, k, f"getInternalState after step {action}",
                                      reference.internal_state(), candidate.internal_state(),
                                      board)
            if divergence:
                return divergence, compared
            compared += 1
            if progress is not None:
                progress(t, k)
            if ref.done:
                break
    return None, compared
