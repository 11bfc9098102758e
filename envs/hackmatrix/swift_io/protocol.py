"""The Swift headless JSON protocol (programs-rewards-observation §10, decisions R8), backed by
the JAX environment.

* ``HeadlessGame``: one game as Swift's ``HeadlessGame`` runs it: reset, setState, step (no
  auto-reset: after ``done`` it keeps simulating until the client resets), valid actions and
  the internal state, with JSON-shaped results (``raw_observation``). The in-process parity
  engine uses it directly.
* ``Server``: the command layer: one request line in, one reply object out, with Swift's error
  replies, and an ``{"error": ...}`` line wherever Swift aborts the process (R8).
* ``main``: the stdin/stdout loop (``python -m envs.hackmatrix.swift_io.protocol`` or
  ``scripts/headless_cli.py``). stdout carries only replies; everything else goes to stderr.

Randomness (decisions R2): ``--seed`` fixes the key stream. Reset number k of the session uses
``fold_in(fold_in(seed_key, 0), k)`` and step number k ``fold_in(fold_in(seed_key, 1), k)``
(both counted over the whole session), so a session replayed with the same seed and the same
requests gives the same replies.
"""

import argparse
import functools
import json
import logging
import os
import sys

import jax
import jax.numpy as jnp

from envs.command_line import ArgumentParser
from envs.compile_cache import (DEFAULT_COMPILE_CACHE_DIR, INTERACTIVE_MIN_COMPILE_SECS,
                                CompileCacheError, enable_compile_cache)
from ..env import HackMatrix
from ..core.constants import N_ACTIONS
from ..core.mask import action_mask
from .raw_observation import (NO_GAME_INTERNAL_STATE, host_state, internal_state,
                              json_float, raw_observation, step_info)
from .scenario import ScenarioError, set_state

RESET_STREAM, STEP_STREAM = 0, 1
CACHE_ENV_VAR = "HACKMATRIX_JAX_CACHE"
# GameCommandProtocol.swift › getObservationSpace: fixed placeholders, not the real layout
# (programs-rewards-observation §10.3, §12.1 #22).
OBSERVATION_SPACE_PLACEHOLDER = {"gridSize": 6, "playerFeatures": 9, "cellFeatures": 20}
_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1

log = logging.getLogger("hackmatrix.protocol")


class CommandError(Exception):
    """A request the game cannot carry out; the server answers ``{"error": str(exc)}``."""


def enable_server_compile_cache(cache_dir: str | None = None) -> str | None:
    """The persistent compilation cache of the server and the parity scripts, keeping every
    program (a restarted server skips XLA compilation). ``cache_dir`` None reads
    ``$HACKMATRIX_JAX_CACHE`` and falls back to ``~/.cache/hackmatrix-jax``; an empty string
    disables the cache. Returns the directory used."""
    if cache_dir is None:
        cache_dir = os.environ.get(CACHE_ENV_VAR, DEFAULT_COMPILE_CACHE_DIR)
    return enable_compile_cache(cache_dir, INTERACTIVE_MIN_COMPILE_SECS)


def _strongly_typed(tree):
    """The same values without JAX weak types. Generation and the step leave some int32 leaves
    weakly typed while ``set_state`` builds strong ones; one signature means one compiled step."""
    return jax.tree.map(lambda x: x.astype(x.dtype), tree)


def stream_key(seed_key, stream: int, count: int):
    """Key number ``count`` of a request stream (RESET_STREAM or STEP_STREAM) of a session."""
    return jax.random.fold_in(jax.random.fold_in(seed_key, stream), count)


@functools.cache
def compiled(env):
    """The three jitted single-game functions of ``env`` (compiled on first use, once per
    process): reset(key), step(key, state, action) without auto-reset, returning (state, mask,
    reward, terminated, reward breakdown, flags), and the action mask. The parity harness's
    mirror (oracle.py) steps with the same compiled function."""
    params = env.default_params

    @jax.jit
    def reset(key):
        obs, state = env.reset_env(key, params)
        return _strongly_typed(state), obs.action_mask

    @jax.jit
    def step(key, state, action):
        obs, state, reward, terminated, info = env.step_env(key, state, action, params)
        flags = {name: info[name] for name in ("invalid_action", "stage_complete", "died", "won")}
        return (_strongly_typed(state), obs.action_mask, reward, terminated,
                info["reward_breakdown"], flags)

    return reset, step, jax.jit(action_mask)


class HeadlessGame:
    """Swift ``HeadlessGame`` over the JAX environment; results are JSON-shaped.

    ``env`` is a ``HackMatrix`` (default: the parity configuration, Swift shaping, UNDO exploit
    open). Methods raise ``CommandError`` where Swift would abort and ``ScenarioError`` for a
    ``setState`` scenario the game cannot represent (decisions R10); either leaves the game as
    it was.
    """

    def __init__(self, seed: int = 0, env=None):
        self.env = env if env is not None else HackMatrix()
        self._seed_key = jax.random.PRNGKey(seed)
        self._resets = 0
        self._steps = 0
        self.state = None  # the EnvState on the device, None before any reset/setState
        self._host = None  # its host copy, for the JSON views
        self._mask = None  # bool[28] host copy of the valid actions

    @property
    def has_game(self) -> bool:
        return self.state is not None

    def _adopt(self, state, mask):
        self.state = state
        self._host = host_state(state)
        self._mask = [bool(v) for v in mask]

    def observation(self) -> dict:
        if not self.has_game:
            raise CommandError("No game: send reset or setState first")
        return raw_observation(self._host)

    def reset(self) -> dict:
        """A new random game (§10.3 ``reset``); returns the raw observation."""
        reset, _, _ = compiled(self.env)
        state, mask = reset(stream_key(self._seed_key, RESET_STREAM, self._resets))
        self._resets += 1
        self._adopt(state, mask)
        return self.observation()

    def set_state(self, scenario) -> dict:
        """§10.5 ``setState`` through ``scenario.set_state``; a ``ScenarioError`` keeps the
        previous game (R10). Returns the raw observation."""
        env = self.env
        state = set_state(scenario, max_enemies=env.max_enemies,
                          max_transmissions=env.max_transmissions,
                          history_size=env.history_size)
        _, _, mask = compiled(env)
        self._adopt(state, mask(state))
        return self.observation()

    def step(self, action) -> tuple:
        """``HeadlessGame.step``: (observation, reward, done, info). done is true for a failed
        action, equals gameWon when the stage advanced, and is true whenever the player is dead
        (§10.3); the game goes on after done until the client resets."""
        if not self.has_game:  # Swift aborts here (fatalError); R8 answers an error instead
            raise CommandError("No game: send reset or setState before step")
        if isinstance(action, bool) or not isinstance(action, int):
            raise CommandError(f"actionIndex must be an integer, got {action!r}")
        if not 0 <= action < N_ACTIONS:  # Swift aborts (GameAction.fromIndex is nil)
            raise CommandError(f"actionIndex {action} is outside 0..{N_ACTIONS - 1}")
        _, step, _ = compiled(self.env)
        state, mask, reward, terminated, breakdown, flags = step(
            stream_key(self._seed_key, STEP_STREAM, self._steps), self.state, jnp.int32(action))
        info = step_info(breakdown, bool(flags["invalid_action"]), bool(flags["stage_complete"]),
                         bool(flags["died"]))
        self._steps += 1
        self._adopt(state, mask)
        # env.step_env's terminated is exactly Swift's headless done: failed | won | dead.
        return self.observation(), json_float(reward), bool(terminated), info

    def valid_actions(self) -> list:
        """``getValidActions``: ascending action indices; [] with no game."""
        if not self.has_game:
            return []
        return [index for index, valid in enumerate(self._mask) if valid]

    def internal_state(self) -> dict:
        if not self.has_game:
            return {**NO_GAME_INTERNAL_STATE, "enemies": []}
        return internal_state(self._host)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")  # Swift's JSON decoder rejects NaN and Infinity


class Server:
    """The command layer of ``HeadlessGameCLI`` (§10.2-§10.4): ``handle(line)`` returns the
    reply object of one request line."""

    def __init__(self, game: HeadlessGame):
        self.game = game

    def handle(self, line: str) -> dict:
        try:
            request = json.loads(line, parse_constant=_reject_constant)
        except ValueError:
            return {"error": "Invalid command"}
        # Decoding Command: action is a required string, actionIndex an optional integer and
        # state an optional object; any mismatch is "Invalid command" (§10.2).
        if not isinstance(request, dict) or not isinstance(request.get("action"), str):
            return {"error": "Invalid command"}
        index = request.get("actionIndex")
        if index is not None and not (_is_int(index) and _INT64_MIN <= index <= _INT64_MAX):
            return {"error": "Invalid command"}
        state = request.get("state")
        if state is not None and not isinstance(state, dict):
            return {"error": "Invalid command"}
        try:
            return self._execute(request["action"], index, state)
        except CommandError as exc:
            return {"error": str(exc)}
        except Exception as exc:  # a bug must not kill the session: report it, keep serving
            log.exception("request failed: %s", line.rstrip("\n"))
            return {"error": f"Internal error: {type(exc).__name__}: {exc}"}

    def _execute(self, action: str, index, state) -> dict:
        game = self.game
        if action == "reset":
            return {"observation": game.reset()}
        if action == "step":
            if index is None:
                return {"error": "Missing actionIndex"}
            observation, reward, done, info = game.step(index)
            return {"observation": observation, "reward": reward, "done": done, "info": info}
        if action == "getValidActions":
            return {"validActions": game.valid_actions()}
        if action == "getActionSpace":
            return {"actionSpaceSize": N_ACTIONS}
        if action == "getObservationSpace":
            return dict(OBSERVATION_SPACE_PLACEHOLDER)
        if action == "setState":
            if state is None:
                return {"error": "Missing state data for setState command"}
            try:
                return {"observation": game.set_state(state)}
            except ScenarioError as exc:  # decisions R10: name the field, keep the old game
                return {"error": f"Invalid state: {exc}"}
        if action == "getInternalState":
            return game.internal_state()
        return {"error": f"Unknown command: {action}"}


def encode_reply(reply: dict) -> str:
    """One compact JSON line (Swift's JSONSerialization output has no spaces)."""
    return json.dumps(reply, separators=(",", ":"), allow_nan=False)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="headless_cli", description="HackMatrix headless JSON protocol (Swift-compatible) "
        "on stdin/stdout, backed by the JAX environment.")
    parser.add_argument("--seed", type=int, default=0, help="seed of the JAX key stream")
    parser.add_argument("--compile-cache-dir", default=None, metavar="DIR",
                        help=f"persistent XLA cache (default ${CACHE_ENV_VAR} or "
                             f"{DEFAULT_COMPILE_CACHE_DIR}; '' disables it)")
    # Swift's flags, accepted so the server drops in for the Swift binary (decisions R8).
    parser.add_argument("--headless-cli", action="store_true", help="ignored (Swift flag)")
    parser.add_argument("--debug", action="store_true", help="debug logging on stderr")
    parser.add_argument("--info", action="store_true", help="info logging on stderr")
    return parser


def main(argv=None) -> int:
    # Replies get a private copy of the real stdout; fd 1 and sys.stdout then point at stderr,
    # so nothing else (a print, a JAX or C-library warning) can corrupt the reply stream.
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    args, unknown = build_parser().parse_known_args(argv)
    level = logging.DEBUG if args.debug else logging.INFO if args.info else logging.WARNING
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if unknown:
        log.info("ignoring arguments %s", unknown)
    if "JAX_PLATFORMS" not in os.environ:  # one game per step: the CPU is fastest
        jax.config.update("jax_platforms", "cpu")
    try:
        cache = enable_server_compile_cache(args.compile_cache_dir)
    except CompileCacheError as error:
        print(f"error: {error}", file=sys.stderr)
        replies.close()
        return 2
    log.info("compilation cache: %s", cache)
    server = Server(HeadlessGame(seed=args.seed))
    for raw in sys.stdin.buffer:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            line = ""  # not JSON text: answered "Invalid command" like any undecodable line
        log.debug("request %s", line.rstrip("\n"))
        reply = server.handle(line)
        replies.write(encode_reply(reply) + "\n")
        replies.flush()
    replies.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
