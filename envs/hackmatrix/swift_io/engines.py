"""Transport of the Swift-parity harness: the engines it talks to, behind one interface
(decisions R8).

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

from .protocol import CommandError, HeadlessGame
from .scenario import ScenarioError
from .swift_build import BINARY_ENV_VAR

# The protocol server runs as ``python -m envs.hackmatrix.swift_io.protocol`` from the root that
# holds the ``envs`` package (this file is envs/hackmatrix/swift_io/engines.py).
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

# How long ``ProtocolEngine.close`` waits for the engine to exit once its stdin is closed, before
# killing it. Every reply has been read by then and both our server and Swift's CLI leave their
# loop at end of input, so the wait is only the process's exit; the margin covers a machine
# loaded by training (SPEC §3.1: replies from a fresh server take seconds there). A longer wait
# cannot change a result, only how long a stuck process is given before it is killed.
EXIT_TIMEOUT_S = 30.0


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
        self.game = HeadlessGame(seed=seed, env=env)

    def _call(self, method, *args):
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
    return [sys.executable, "-m", "envs.hackmatrix.swift_io.protocol", "--seed", str(seed)]


class ProtocolEngine(Engine):
    """A subprocess speaking the protocol. ``command`` defaults to ``$HACKMATRIX_BINARY
    --headless-cli`` when that variable is set, else to this project's server with ``seed``.
    The process's stderr goes to ours (or to ``stderr`` if given); ``close`` gives it
    ``exit_timeout_s`` to exit."""

    def __init__(self, command: list | None = None, *, seed: int = 0, env: dict | None = None,
                 stderr=None, exit_timeout_s: float = EXIT_TIMEOUT_S):
        self.exit_timeout_s = exit_timeout_s
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

    def close(self, timeout: float | None = None) -> int | None:
        """Close stdin (the protocol's end) and wait up to ``timeout`` seconds (default the
        engine's ``exit_timeout_s``) before killing it; returns the exit status."""
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                return self.process.wait(timeout=self.exit_timeout_s if timeout is None
                                         else timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode
