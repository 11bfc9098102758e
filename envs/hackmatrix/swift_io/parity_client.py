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
import collections
import dataclasses
import functools
import itertools
import json
import os
import subprocess
import sys
import types
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..core.constants import (ACTION_SIPHON, BLOCK, CORNER_CELLS, DATA_SIPHON, EMPTY, ENEMY_MAX_HP,
                              ENEMY_NAMES, EXIT, GRID, IS_CORNER, N_CELLS, MAX_BLOCKS, MIN_BLOCKS, POLY,
                              PROGRAM_ACTION_OFFSET, PROGRAM_SPAWN_COST, REDUC, SIPHON_SCHEDULE_DELAY,
                              UNDO, VIRUS, WARP)
from ..core import bitboard, game, generation, rewards, spawn
from .. import observation
from ..env import HackMatrix
from .protocol import CommandError, HeadlessGame, compiled
from .raw_observation import (host_state, internal_state, numeric_observation, raw_observation,
                              step_info)
from ..viz.render_text import render_text
from .scenario import ScenarioError, set_state
from ..core.state import blank_state

from .swift_build import BINARY_ENV_VAR

# The protocol server runs as ``python -m envs.hackmatrix.swift_io.protocol`` from the root that
# holds the ``envs`` package (this file is envs/hackmatrix/swift_io/parity_client.py).
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


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
             seed: int = 0, progress=None):
    """Play ``trajectories`` random-valid-action games of at most ``steps`` steps on both engines
    in lockstep, comparing every reply; stops at the first difference.

    Both engines are reset at the start of each trajectory, so they must share the key stream:
    our server started with the reference's seed, nothing sent to either before. (The Swift
    build has its own randomness: ``OracleLockstep`` below is the lockstep run against it.)
    Actions are drawn uniformly from the valid actions with ``numpy`` seeded by ``seed``.
    Returns (Divergence or None, number of steps compared)."""
    rng = np.random.default_rng(seed)
    compared = 0

    def diverged(t, k, request, ref, cand, board):
        diffs = json_differences(ref, cand)
        return Divergence(t, k, request, diffs, board) if diffs else None

    for t in range(trajectories):
        board = "(no game yet)" if reference.state is None else render_text(reference.state,
                                                                           reveal=True)
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


# ==========================================================================================
# Oracle lockstep (issue 14): the Swift binary drives the game, a JAX mirror of its state follows
#
# Swift's randomness is its own (unseeded), so the two engines cannot share draws. Instead the
# mirror is an ``EnvState`` equal to Swift's whole game state (scheduler, history, disabled
# counters, siphoned floor ... everything, not only what setState can express). Every step is
# played on Swift and then on the mirror from the same state, and every reply is compared:
# observation (JSON and numeric), reward and breakdown, done, info, internal state, valid actions.
# Where the step draws randomness (game-rules §13), the mirror must reproduce Swift's outcome:
#
# * enemy order (the shuffle of each enemy step), WARP's pick and POLY's types: the mirror's own
#   engine must give exactly Swift's outcome with some key (the step's key, then random keys,
#   then fitted draws: see ``OracleLockstep._search``);
# * spawn cells and types of transmissions (scheduled, siphon, stage start) and the new stage's
#   board: Swift's outcome is adopted into the mirror after a support check (each transmission on
#   a spawn-empty cell, out of the line of fire when one was free; the board a possible output of
#   the generator: corners, block count, validator, payloads, resources). Adoption cannot show a
#   law of ours that allows more outcomes than Swift's, so each adopted draw is also paired with
#   the mirror's own draw in the same situation (``paired_draws``, tested by the soak script),
#   and scripts/swift_generation_stats.py compares the laws in controlled situations.
#
# Some of what Swift drew stays hidden until the game reveals it: a transmission's enemy type
# (shown at hatching, or under SHOW), the content of a question block (shown when siphoned), the
# list order of transmissions spawned by one call (shown when they hatch), and which member of a
# spawn call that mixed a scheduled and siphon transmissions is the scheduled one. The mirror
# holds a guess for each, the harness remembers that it is a guess (``Notes``, kept through UNDO
# by a shadow of Swift's history), and sets the true value as soon as Swift reveals it, before
# the step that depends on it is compared. The siphon-quality reward and REDUC's validity can
# depend on still-hidden question blocks: there the guess is fitted to Swift's value when some
# content gives it, and the step diverges when none does.


class OracleDivergence(Exception):
    """Swift's reply to a step cannot be reproduced by the mirror (or fails a support check).
    ``state`` and ``swift`` (the mirror before the step and Swift's reply) allow a replay."""

    def __init__(self, kind: str, action, differences: list, board: str, state=None,
                 swift=None):
        self.kind, self.action, self.differences, self.board = kind, action, differences, board
        self.state, self.swift = state, swift
        super().__init__(self.report())

    def report(self) -> str:
        lines = [f"divergence ({self.kind}) on action {self.action}",
                 "mirror before the step (hidden parts revealed):", self.board,
                 "differences (mirror != Swift):"]
        lines += [f"  {d}" for d in self.differences[:40]]
        if len(self.differences) > 40:
            lines.append(f"  ... {len(self.differences) - 40} more")
        return "\n".join(lines)


@dataclasses.dataclass
class TransmissionNote:
    """What the harness knows of one live transmission of the mirror (keyed by slot)."""

    kind_known: bool = True
    provenance_known: bool = True
    group: int = -1  # the Swift spawn call that made it, while its order in that call is unknown


@dataclasses.dataclass
class Notes:
    """Which parts of the mirror are guesses: transmissions by slot, and unrevealed question
    blocks by cell (the value is the number of REDUC uses since the block was generated)."""

    transmissions: dict = dataclasses.field(default_factory=dict)
    questions: dict = dataclasses.field(default_factory=dict)

    def copy(self) -> "Notes":
        return Notes({slot: dataclasses.replace(note) for slot, note in self.transmissions.items()},
                     dict(self.questions))


class SwiftStep(NamedTuple):
    observation: dict
    reward: float
    done: bool
    info: dict
    internal: dict
    valid: list


@dataclasses.dataclass
class _Candidate:
    state: object  # host (numpy) EnvState
    reward: float
    done: bool
    breakdown: dict
    flags: dict
    notes: Notes
    pushed: bool  # a normal enemy turn ran (a snapshot was pushed)
    popped: bool  # UNDO restored a snapshot
    mask: object = None
    events: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    problems: list = dataclasses.field(default_factory=list)  # failed support checks
    samples: list = dataclasses.field(default_factory=list)  # (kind, ours, Swift's) draws


def _host_tree(tree):
    """Writable numpy copy of a pytree."""
    return jax.tree.map(np.array, jax.device_get(tree))


_BIG_SEQ = np.iinfo(np.int32).max


@functools.cache
def _mirror_functions(env, search_batch: int):
    """The jitted pieces of the mirror, compiled once per env and batch size."""
    params = env.default_params

    def signature(key, state, action, first_new_seq):
        """One (key, state) outcome, for the searches: the enemy list in list order and the player
        (what Swift reports), plus last-known cells and the surviving older transmissions."""
        _, new, _, _, _ = env.step_env(key, state, action, params)
        e, p, t = new.enemies, new.player, new.transmissions
        order = jnp.argsort(jnp.where(e.active, e.seq, _BIG_SEQ))
        reported = jnp.stack([e.active, e.kind, e.row, e.col, e.hp, e.disabled, e.stunned,
                              e.from_scheduled, e.from_siphon], axis=-1).astype(jnp.int32)[order]
        old = t.active & (t.seq < first_new_seq)
        extra = jnp.concatenate([e.last_row[order], e.last_col[order],
                                 jnp.where(old, t.row * 8 + t.col, -1), jnp.where(old, t.turns, -9)])
        player = jnp.stack([p.row, p.col, p.hp, p.credits, p.energy, p.data_siphons, p.score,
                            p.attack]).astype(jnp.int32)
        return reported, player, extra.astype(jnp.int32)

    def draws(key):
        """What a step key makes the engine draw per enemy slot (game.step_keys,
        enemies.run_enemy_turn, programs.apply_program): the shuffle keys of enemy steps 0 and 1
        (ascending = processing order) and the program bits (POLY per slot, WARP the last)."""
        k_program, _, k_enemy = game.step_keys(key)
        k_steps, _ = jax.random.split(k_enemy)
        n_slots = env.max_enemies
        return (jax.random.uniform(jax.random.fold_in(k_steps, 0), (n_slots,)),
                jax.random.uniform(jax.random.fold_in(k_steps, 1), (n_slots,)),
                jax.random.bits(k_program, (n_slots + 1,), jnp.uint32))

    def siphon_quality(state, points, program):
        return rewards.siphon_quality(state.replace(grid=state.grid.replace(points=points,
                                                                            program=program)))

    def spawn_masks(state):
        return spawn.spawn_empty_mask(state), spawn.line_of_fire_mask(state)

    _, step, mask = compiled(env)  # the protocol server's own step and mask
    return types.SimpleNamespace(
        step=step,
        signatures=jax.jit(jax.vmap(signature, in_axes=(0, 0, None, None))),
        draws=jax.jit(jax.vmap(draws)),
        search_batch=search_batch,
        mask=mask,
        numeric=jax.jit(observation.build_observation),
        siphon_quality=jax.jit(jax.vmap(siphon_quality, in_axes=(None, 0, 0))),
        spawn_masks=jax.jit(spawn_masks),
        layout_valid=jax.jit(lambda blocks, exit_cell: generation.is_valid_layout(
            bitboard.from_bool(blocks), exit_cell)),
    )


_SIPHON_QUALITY_BATCH = 64  # siphon-quality variants evaluated per call (one compiled shape)
_QUESTION_SPAWN_RANGE = (1, 9)  # a question block's spawn count before REDUC (points or cost)
_UNLIKELY = 1e-6  # a Swift outcome rarer than this under the rules fails its support check


class OracleLockstep:
    """Swift's game, step by step, with a JAX mirror that must reproduce every reply.

    ``reset()`` / ``set_state(scenario)`` start a game on Swift and build the mirror from it;
    ``step(action)`` plays one action on both and raises ``OracleDivergence`` when the mirror
    cannot reproduce Swift's reply (see the section comment above). ``stats`` counts what each
    step needed: random draws by kind, key searches, adoptions, hidden values revealed."""

    def __init__(self, swift: ProtocolEngine, *, env=None, seed: int = 0,
                 search_batch: int = 256, search_rounds: int = 2):
        self.swift = swift
        self.env = env if env is not None else HackMatrix()
        self.fn = _mirror_functions(self.env, search_batch)
        self.search_rounds = search_rounds
        self._key = jax.random.PRNGKey(seed)
        self._count = 0
        self._groups = itertools.count()
        self.state = None  # host EnvState equal to Swift's game
        self.notes = Notes()
        self.shadow = []  # Notes of every snapshot on Swift's (unbounded) UNDO stack
        self.stats = collections.Counter()
        # Adopted draws, paired with the mirror's own draw in the same situation (see
        # ``draw_features``): {kind: ([our feature vectors], [Swift's feature vectors])}.
        self.paired_draws = collections.defaultdict(lambda: ([], []))

    # --- starting a game ------------------------------------------------------------------

    def reset(self) -> dict:
        """Swift ``reset``; the mirror is built from the new game's observation."""
        obs = self.swift.reset()
        env = self.env
        state = _host_tree(blank_state(env.max_enemies, env.max_transmissions, env.history_size))
        player = state.player.replace(**{
            field: np.int32(obs[key]) for field, key in (
                ("row", "playerRow"), ("col", "playerCol"), ("hp", "playerHP"),
                ("credits", "credits"), ("energy", "energy"), ("data_siphons", "dataSiphons"),
                ("score", "score"), ("attack", "baseAttack"))})
        notes = Notes()
        state, problems = self._adopt_board(state.replace(player=player), obs, notes)
        problems += _new_game_problems(obs)
        self._start(state, notes, obs, "reset", problems)
        self.stats["resets"] += 1
        return obs

    def set_state(self, scenario: dict) -> dict:
        """Swift ``setState``; the mirror is ``scenario.set_state`` of the same scenario."""
        obs = self.swift.set_state(scenario)
        env = self.env
        state = _host_tree(set_state(scenario, max_enemies=env.max_enemies,
                                     max_transmissions=env.max_transmissions,
                                     history_size=env.history_size))
        notes = Notes({int(slot): TransmissionNote()
                       for slot in np.flatnonzero(state.transmissions.active)})
        self._start(state, notes, obs, "setState", [])
        self.stats["scenarios"] += 1
        return obs

    def _start(self, state, notes, obs, request, problems):
        self.state, self.notes, self.shadow = state, notes, []
        mask = np.asarray(self.fn.mask(state))
        swift = SwiftStep(obs, 0.0, False, {}, self.swift.internal_state(),
                          self.swift.valid_actions())
        self._fit_reduc_validity(state, notes, swift.valid, mask)
        candidate = _Candidate(state, 0.0, False, {}, {}, notes, False, False,
                               np.asarray(self.fn.mask(state)))
        differences = self._observation_differences(candidate, swift) + problems
        if differences:
            raise OracleDivergence("support" if problems else request, request, differences,
                                   self._board())

    # --- one step -----------------------------------------------------------------------------

    def step(self, action: int) -> SwiftStep:
        """Play ``action`` on Swift and on the mirror; returns Swift's reply."""
        reply = self.swift.step(action)
        swift = SwiftStep(reply.observation, reply.reward, reply.done, reply.info,
                          self.swift.internal_state(), self.swift.valid_actions())
        self.follow(action, swift)
        return swift

    def follow(self, action: int, swift: SwiftStep) -> None:
        """Make the mirror take ``action`` and reproduce Swift's reply ``swift`` to it (the
        second half of ``step``; also replays a recorded divergence)."""
        pre, notes = jax.tree.map(np.array, self.state), self.notes.copy()
        events = collections.Counter()
        self._reveal_siphoned_questions(pre, notes, action, swift, events)
        self._fit_siphon_quality(pre, notes, action, swift, events)
        key = jax.random.fold_in(self._key, self._count)
        self._count += 1

        variants = [(pre, notes)] + self._provenance_variants(pre, notes, action)
        first = None
        for variant_pre, variant_notes in variants:
            candidate = self._candidate(variant_pre, variant_notes, action, key, swift)
            first = first or candidate
            if not self._differences(candidate, swift):
                break
        else:
            candidate = None
            if self._draws_order(first, action, pre):
                for variant_pre, variant_notes in variants:
                    candidate = self._search(variant_pre, variant_notes, action, swift, key)
                    if candidate is not None:
                        events["key_searches"] += 1
                        break
        if candidate is None:
            differences = self._differences(first, swift)
            kind = "departure R3" if self._ring_exhausted(first, differences, swift) else "step"
            raise OracleDivergence(kind, action, differences, self._board(), self.state, swift)
        if candidate.problems:
            raise OracleDivergence("support", action, candidate.problems, self._board(),
                                   self.state, swift)
        self._accept(candidate, action, pre, events)

    def _ring_exhausted(self, candidate, differences, swift: SwiftStep) -> bool:
        """The one documented departure (decisions R3): our UNDO history keeps the newest H
        snapshots, Swift all of them; after more than H UNDOs in a row Swift can still UNDO."""
        depth = len(self.shadow) - candidate.popped + candidate.pushed
        ours = [int(i) for i in np.flatnonzero(candidate.mask)]
        undo = PROGRAM_ACTION_OFFSET + UNDO
        return (len(differences) == 1 and differences[0].startswith("validActions")
                and int(candidate.state.history.size) == 0 < depth
                and undo not in ours and sorted(ours + [undo]) == swift.valid)

    def _accept(self, candidate, action, pre, events):
        if candidate.popped:
            self.shadow.pop()
        if candidate.pushed:
            self.shadow.append(candidate.notes.copy())
        self.state, self.notes = candidate.state, candidate.notes
        self.stats.update(events)
        self.stats.update(candidate.events)
        self.stats["steps"] += 1
        for kind, ours, theirs in candidate.samples:
            for name, vector in ours.items():
                self.paired_draws[f"{kind}: {name}"][0].append(vector)
                self.paired_draws[f"{kind}: {name}"][1].append(theirs[name])
        for name in self._draw_kinds(candidate, action, pre):
            self.stats[f"draws_{name}"] += 1

    # --- what a step draws (game-rules §13) -----------------------------------------------

    def _draw_kinds(self, candidate, action, pre) -> list:
        """The random draws of this step, by kind (game-rules §13.2-§13.4)."""
        kinds = []
        success = not bool(candidate.flags.get("invalid_action", False))
        if candidate.pushed and int(np.sum(candidate.state.enemies.active)) >= 2:
            kinds.append("enemy_order")
        if candidate.events.get("adopted_spawns"):
            kinds.append("spawn")
        if candidate.events.get("adopted_boards"):
            kinds.append("stage_generation")
        targets = int(np.sum(pre.enemies.active)) + int(np.sum(pre.transmissions.active))
        if success and action == PROGRAM_ACTION_OFFSET + WARP and targets >= 2:
            kinds.append("warp_pick")
        if success and action == PROGRAM_ACTION_OFFSET + POLY and np.any(pre.enemies.active):
            kinds.append("poly_types")
        return kinds or ["none"]

    def _draws_order(self, candidate, action, pre) -> bool:
        """The step draws something a key search must reproduce: the enemy order, WARP's pick
        or POLY's types (spawns and boards are adopted instead)."""
        kinds = self._draw_kinds(candidate, action, pre)
        return bool({"enemy_order", "warp_pick", "poly_types"} & set(kinds))

    # --- the mirror's candidate for one key ----------------------------------------------

    def _run(self, pre, action, key):
        state, mask, reward, terminated, breakdown, flags = self.fn.step(key, pre, np.int32(action))
        state, mask, reward, terminated, breakdown, flags = _host_tree(
            (state, mask, reward, terminated, breakdown, flags))
        return state, mask, float(reward), bool(terminated), breakdown, {
            name: bool(value) for name, value in flags.items()}

    def _candidate(self, pre, notes, action, key, swift: SwiftStep) -> _Candidate:
        notes = notes.copy()
        state, mask, reward, done, breakdown, flags = self._run(pre, action, key)
        pushed, popped = _history_moves(pre, state)
        events = collections.Counter()
        if pushed and self._resolve_hatching(pre, notes, state, swift.internal, events):
            state, mask, reward, done, breakdown, flags = self._run(pre, action, key)
        problems = []
        first_new_seq = int(pre.next_seq)
        if popped:  # UNDO: the restored snapshot's notes; provenance flags come back false
            notes = self.shadow[-1].copy() if self.shadow else Notes()
            for note in notes.transmissions.values():
                note.provenance_known = True
        else:
            t = state.transmissions
            notes.transmissions = {
                slot: note for slot, note in notes.transmissions.items()
                if t.active[slot] and t.seq[slot] == pre.transmissions.seq[slot]}
            g = state.grid
            notes.questions = {cell: reductions for cell, reductions in notes.questions.items()
                               if g.question[cell] and g.content[cell] == BLOCK}
            if action == PROGRAM_ACTION_OFFSET + REDUC and not flags["invalid_action"]:
                notes.questions = {cell: r + 1 for cell, r in notes.questions.items()}
        samples = []
        if flags["stage_complete"] and not flags["won"]:
            ours = board_features(state, first_new_seq)
            state = _drop_new_transmissions(state, first_new_seq)
            notes.transmissions = {slot: note for slot, note in notes.transmissions.items()
                                   if state.transmissions.active[slot]}
            state, problems = self._adopt_board(state, swift.observation, notes)
            samples.append(("board", ours, board_features(state, first_new_seq)))
            events["adopted_boards"] += 1
        elif pushed:
            requested = _requested_spawns(pre, state, action)
            if sum(requested):
                ours = spawn_features(state, first_new_seq)
                state, problems = self._adopt_spawns(state, pre, notes, swift.observation,
                                                     requested, first_new_seq)
                samples.append(("spawn", ours, spawn_features(state, first_new_seq)))
                events["adopted_spawns"] += 1
        self._reveal_shown_kinds(state, notes, swift.observation, events)
        if pushed:  # the snapshot just pushed is the end-of-turn state, adoptions included
            state = _write_head_snapshot(state)
        mask = np.asarray(self.fn.mask(state))
        if self._fit_reduc_validity(state, notes, swift.valid, mask):
            events["reduc_validity_fitted"] += 1
            mask = np.asarray(self.fn.mask(state))
            if pushed:
                state = _write_head_snapshot(state)
        return _Candidate(state, reward, done, breakdown, flags, notes, pushed, popped, mask,
                          events, problems, samples)

    def _search(self, pre, notes, action, swift: SwiftStep, key):
        """A candidate that reproduces Swift's reply to a step that draws the enemy order, WARP's
        pick or POLY's types, or None. First ``search_rounds`` batches of random keys; then the
        draws are fitted: the engine's draws are per enemy slot, and slots carry no meaning (list
        order is ``seq``), so placing the enemies in chosen slots under a chosen key realises any
        wanted processing order or POLY type, and a key scan any WARP pick."""
        target = _SwiftOutcome(swift)
        tried = set()
        batch = self.fn.search_batch
        states = _stack([pre] * batch)
        for round_ in range(self.search_rounds):
            keys = jax.random.split(jax.random.fold_in(key, round_ + 1), batch)
            candidate = self._try_batch(pre, notes, action, swift, target, keys, states, tried)
            if candidate is not None:
                self.stats["search_rounds"] += round_ + 1
                return candidate
        keys = jax.random.split(jax.random.fold_in(key, 2 ** 31 - 1), _DRAW_KEYS)
        shuffle0, shuffle1, bits = _host_tree(self.fn.draws(keys))
        draws = _Draws(np.asarray(keys), shuffle0, shuffle1, bits, np.argsort(shuffle0, axis=1))
        if action == PROGRAM_ACTION_OFFSET + POLY:
            return self._fit_poly(pre, notes, action, swift, target, draws)
        if action == PROGRAM_ACTION_OFFSET + WARP:
            return self._fit_warp(pre, notes, action, swift, draws)
        return self._fit_enemy_order(pre, notes, action, swift, target, draws)

    def _try_batch(self, pre, notes, action, swift, target, keys, states, tried):
        """Replay in full the (key, state) pairs whose enemy list and player equal Swift's."""
        reported, players, extra = _host_tree(self.fn.signatures(
            keys, states, np.int32(action), np.int32(pre.next_seq)))
        for index in np.flatnonzero(target.matches(reported, players)):
            signature = reported[index].tobytes() + extra[index].tobytes()
            if signature in tried:
                continue
            tried.add(signature)
            state = jax.tree.map(lambda x, index=index: x[index], states)
            candidate = self._candidate(state, notes, action, keys[index], swift)
            if not self._differences(candidate, swift):
                return candidate
        return None

    def _fit_enemy_order(self, pre, notes, action, swift, target, draws):
        """A processing order of enemy steps 0 and 1 (§7.4) that gives Swift's outcome. A
        placement is (step-0 order, draw key): the enemies go to the slots that key shuffles
        first, in that order, and the viruses' step-1 order (only viruses act in step 1) follows
        from the key. Hill-climbing on the whole outcome first, then a rebuild of the step-0
        order one enemy at a time with the step-1 order sampled through the key; each gives up
        after a budget of evaluated batches."""
        e = pre.enemies
        post = self._run(pre, action, draws.keys[0])[0].enemies
        survivors = sorted((int(s) for s in np.flatnonzero(e.active & post.active)),
                           key=lambda s: e.seq[s])
        acting = [s for s in survivors if e.disabled[s] <= 0 and not e.stunned[s]]
        for fit in (self._climb_enemy_order, self._rebuild_enemy_order):
            found = fit(pre, action, target, draws, survivors, acting)
            if found is None:
                continue
            first, k = found
            candidate = self._candidate(_place_in_order(pre, first, k, draws), notes, action,
                                        draws.keys[k], swift)
            if not self._differences(candidate, swift):
                self.stats["order_fits"] += 1
                return candidate
        return None

    def _outcomes(self, pre, action, placements, draws):
        """Reported enemy lists (list order), int[len(placements), E, 9], of (step-0 order, draw
        key index) placements."""
        reports = []
        batch = self.fn.search_batch
        for start in range(0, len(placements), batch):
            chunk = placements[start:start + batch]
            chunk = chunk + [chunk[0]] * (batch - len(chunk))
            reported, _, _ = _host_tree(self.fn.signatures(
                np.stack([draws.keys[k] for _, k in chunk]),
                _stack([_place_in_order(pre, first, k, draws) for first, k in chunk]),
                np.int32(action), np.int32(pre.next_seq)))
            reports += list(reported[:min(batch, len(placements) - start)])
        return reports

    def _climb_enemy_order(self, pre, action, target, draws, survivors, acting):
        """Hill-climbing over placements on the number of enemy-list entries equal to Swift's;
        moves: swap two enemies or move one elsewhere in the step-0 order, or another draw key
        (another step-1 order); random restarts. Returns a placement or None."""
        rng = np.random.default_rng(len(acting))
        budget, batch = _ORDER_BUDGET, self.fn.search_batch
        n, keys = len(acting), len(draws.keys)

        def neighbours(first, k):
            moves = [(_swapped(first, i, j), k) for i in range(n) for j in range(i + 1, n)]
            moves += [(_moved(first, i, j), k) for i in range(n) for j in range(n) if abs(i - j) > 1]
            return moves + [(first, int(other)) for other in rng.integers(0, keys, _KEY_MOVES)]

        while budget > 0:
            placement = ([int(x) for x in rng.permutation(acting)], int(rng.integers(0, keys)))
            best = -1
            while budget > 0:
                options = [placement] + neighbours(*placement)
                budget -= -(-len(options) // batch)
                reports = self._outcomes(pre, action, options, draws)
                scores = [target.entries_equal(r) for r in reports]
                top = int(np.argmax(scores))
                if scores[top] == len(target.enemies):
                    return options[top]
                if scores[top] <= best:
                    break
                best, placement = scores[top], options[top]
        return None

    def _rebuild_enemy_order(self, pre, action, target, draws, survivors, acting):
        """Rebuild the step-0 order one enemy at a time: an enemy's move depends only on the
        enemies processed before it (the others still stand where they stood), so the order is
        extended by an enemy whose resulting entry equals Swift's (depth-first, backtracking).
        Viruses move again in step 1, so they are not checked there; once the step-0 order is
        complete, draw keys (each its own step-1 order) are tried for the whole outcome.
        Returns a placement or None."""
        e = pre.enemies
        rank = {slot: i for i, slot in enumerate(survivors)}
        budget, batch = [_ORDER_BUDGET], self.fn.search_batch

        def checked(report, c):
            return np.array_equal(report[rank[c]], target.enemies[rank[c]])

        def search(prefix, remaining):
            if budget[0] <= 0:
                return None
            if not remaining:
                for start in range(0, len(draws.keys), batch):
                    options = [(prefix, k) for k in range(start, min(start + batch,
                                                                      len(draws.keys)))]
                    budget[0] -= 1
                    for option, report in zip(options, self._outcomes(pre, action, options, draws)):
                        if target.entries_equal(report) == len(target.enemies):
                            return option
                    if budget[0] <= 0:
                        return None
                return None
            options = [(prefix + [c] + [r for r in remaining if r != c], 0) for c in remaining]
            options += [(prefix + [r for r in remaining if r != c] + [c], 0) for c in remaining]
            budget[0] -= -(-len(options) // batch)
            reports = self._outcomes(pre, action, options, draws)
            n = len(remaining)
            # Unchecked viruses last; before them, enemies that are right if they go now but not
            # if they go last (something that follows would spoil them) go first.
            good = [c for i, c in enumerate(remaining) if e.kind[c] == VIRUS
                    or checked(reports[i], c)]
            good.sort(key=lambda c: (e.kind[c] == VIRUS,
                                     checked(reports[n + remaining.index(c)], c)))
            for c in good:
                found = search(prefix + [c], [r for r in remaining if r != c])
                if found is not None:
                    return found
            return None

        return search([], acting)

    def _fit_poly(self, pre, notes, action, swift, target, draws):
        """POLY (§4.5): Swift's new type of every enemy (read from its list; an enemy POLY killed
        needs a type whose maximum HP its damage reaches), realised slot by slot."""
        e = pre.enemies
        order = [int(s) for s in np.flatnonzero(e.active)]
        order.sort(key=lambda s: e.seq[s])
        survivors = list(swift.internal["enemies"])
        wanted = {}
        for slot in order:
            kind, damage = int(e.kind[slot]), int(ENEMY_MAX_HP[e.kind[slot]] - e.hp[slot])
            head = survivors[0] if survivors else None
            if head is not None and (head["row"], head["col"]) == (e.row[slot], e.col[slot]):
                new = ENEMY_NAMES.index(head["type"])
                if new != kind and head["hp"] == ENEMY_MAX_HP[new] - damage:
                    wanted[slot] = new
                    survivors.pop(0)
                    continue
            dying = [k for k in range(len(ENEMY_NAMES)) if k != kind and ENEMY_MAX_HP[k] <= damage]
            if not dying:
                return None
            wanted[slot] = dying[0]
        # programs._polymorph: draw d in 0..2 per slot, new type = d + (d >= old type).
        need = {slot: new - int(new > e.kind[slot]) for slot, new in wanted.items()}
        slot_draws = draws.bits[:, :-1] % 3
        for k in range(len(draws.keys)):
            free = {d: list(np.flatnonzero(slot_draws[k] == d)) for d in range(3)}
            if all(len(free[d]) >= sum(v == d for v in need.values()) for d in range(3)):
                placement = {slot: int(free[d].pop(0)) for slot, d in need.items()}
                candidate = self._candidate(_move_enemies(pre, placement), notes, action,
                                            draws.keys[k], swift)
                if not self._differences(candidate, swift):
                    self.stats["poly_fits"] += 1
                    return candidate
                return None
        return None

    def _fit_warp(self, pre, notes, action, swift, draws):
        """WARP (§4.4): the pick is an index over [enemies, then transmissions] in list order;
        any entry on Swift's landing cell of the kind Swift removed."""
        e, t = pre.enemies, pre.transmissions
        cell = (swift.observation["playerRow"], swift.observation["playerCol"])
        enemies = sorted(np.flatnonzero(e.active), key=lambda s: e.seq[s])
        transmissions = sorted(np.flatnonzero(t.active), key=lambda s: t.seq[s])
        picked_enemy = len(swift.internal["enemies"]) < len(enemies)
        if picked_enemy:
            indices = [i for i, s in enumerate(enemies) if (e.row[s], e.col[s]) == cell]
        else:
            indices = [len(enemies) + i for i, s in enumerate(transmissions)
                       if (t.row[s], t.col[s]) == cell]
        total = len(enemies) + len(transmissions)
        picks = draws.bits[:, -1] % np.uint32(max(total, 1))
        for k in np.flatnonzero(np.isin(picks, indices))[:4]:
            candidate = self._candidate(pre, notes, action, draws.keys[k], swift)
            if not self._differences(candidate, swift):
                self.stats["warp_fits"] += 1
                return candidate
        return None

    # --- hidden values revealed by Swift ------------------------------------------------------

    def _reveal_siphoned_questions(self, pre, notes, action, swift: SwiftStep, events):
        """A siphon reveals the question blocks of its cross (§6 step 3): their content comes from
        Swift's observation after the step, their spawn count from it and the REDUC uses."""
        if action != ACTION_SIPHON or pre.player.data_siphons <= 0:
            return
        for cell in _cross_cells(int(pre.player.row), int(pre.player.col)):
            if cell not in notes.questions or pre.grid.siphoned[cell]:
                continue
            block = swift.observation["cells"][cell // 6][cell % 6].get("block")
            if block is None or block["blockType"] == "question":
                continue  # not revealed as Swift should: the comparison reports it
            if block["blockType"] == "program":
                program = block["programActionIndex"] - PROGRAM_ACTION_OFFSET
                pre.grid.program[cell], pre.grid.points[cell] = program, 0
                original = int(PROGRAM_SPAWN_COST[program])
            else:
                pre.grid.program[cell], pre.grid.points[cell] = -1, block["points"]
                original = block["points"]
            pre.grid.spawn[cell] = max(0, original - notes.questions.pop(cell))
            events["questions_revealed"] += 1

    def _fit_siphon_quality(self, pre, notes, action, swift: SwiftStep, events):
        """The siphon-quality reward (§8.6) reads hidden question blocks. Each still hidden one
        can only matter as "an owned program" (it adds nothing to a yield) or "anything else";
        the guess is set to the first combination (the current one first) that gives Swift's
        value."""
        if action != ACTION_SIPHON or pre.player.data_siphons <= 0:
            return
        hidden = [cell for cell in notes.questions if not pre.grid.siphoned[cell]]
        if not hidden:
            return
        owned = np.flatnonzero(pre.program_rank >= 0)
        current = [(int(pre.grid.points[c]), int(pre.grid.program[c])) for c in hidden]
        options = [(1, -1)] + ([(0, int(owned[0]))] if len(owned) else [])
        combos = [tuple(current)] + list(itertools.product(options, repeat=len(hidden)))
        values = []
        for start in range(0, len(combos), _SIPHON_QUALITY_BATCH):
            chunk = combos[start:start + _SIPHON_QUALITY_BATCH]
            points = np.repeat(pre.grid.points[None], _SIPHON_QUALITY_BATCH, axis=0)
            program = np.repeat(pre.grid.program[None], _SIPHON_QUALITY_BATCH, axis=0)
            for row, combo in enumerate(chunk):
                for cell, (p, q) in zip(hidden, combo):
                    points[row, cell], program[row, cell] = p, q
            optimal, credits, energy = _host_tree(self.fn.siphon_quality(pre, points, program))
            values += [0.0 if optimal[row] else float(
                np.float32(-0.5) * (np.float32(credits[row]) * np.float32(0.05)
                                    + np.float32(energy[row]) * np.float32(0.05)))
                for row in range(len(chunk))]
        if len({round(v, 6) for v in values}) > 1:
            events["siphon_quality_hidden"] += 1
        target = swift.info["reward_breakdown"]["siphonQuality"]
        for combo, value in zip(combos, values):
            if floats_close(value, target):
                for cell, (p, q) in zip(hidden, combo):
                    pre.grid.points[cell], pre.grid.program[cell] = p, q
                return

    def _fit_reduc_validity(self, state, notes, valid, mask) -> bool:
        """REDUC is valid while some unsiphoned block has a spawn count above 0 (§2): a hidden
        question block's count lies in max(0, 1..9 - REDUC uses). Fit the guesses to Swift's
        answer when the other value is possible; True if something changed."""
        action = PROGRAM_ACTION_OFFSET + REDUC
        swift_valid = action in valid
        hidden = [cell for cell in notes.questions if not state.grid.siphoned[cell]]
        if bool(mask[action]) == swift_valid or not hidden:
            return False
        low, high = _QUESTION_SPAWN_RANGE
        for cell in hidden:
            state.grid.spawn[cell] = max(0, (high if swift_valid else low) - notes.questions[cell])
        return True

    def _resolve_hatching(self, pre, notes, state, internal, events) -> bool:
        """Transmissions hatch at the enemy turn (§7.3) and Swift's internal state then shows
        their enemies, appended in transmission list order: set each hatching transmission's
        type, provenance and (within its spawn call) list order. True if ``pre`` changed."""
        e = state.enemies
        hatched = np.flatnonzero(e.active & (e.seq >= pre.next_seq))
        swift_enemies = internal["enemies"]
        if not len(hatched) or len(swift_enemies) < len(hatched):
            return False
        t = pre.transmissions
        slot_at = {(int(t.row[s]), int(t.col[s])): int(s) for s in np.flatnonzero(t.active)}
        changed, order = False, []
        for entry in swift_enemies[-len(hatched):]:
            slot = slot_at.get((entry["row"], entry["col"]))
            if slot is None:
                return changed
            note = notes.transmissions.setdefault(slot, TransmissionNote())
            kind = ENEMY_NAMES.index(entry["type"])
            if not note.kind_known:
                changed |= bool(t.kind[slot] != kind)
                t.kind[slot], note.kind_known = kind, True
                events["kinds_revealed_hatching"] += 1
            if not note.provenance_known:
                scheduled, siphon = entry["isFromScheduledTask"], entry["spawnedFromSiphon"]
                changed |= bool(t.from_scheduled[slot] != scheduled or t.from_siphon[slot] != siphon)
                t.from_scheduled[slot], t.from_siphon[slot] = scheduled, siphon
                note.provenance_known = True
                events["provenance_revealed"] += 1
            order.append(slot)
        if [int(s) for s in sorted(order, key=lambda s: t.seq[s])] != order:
            if _reorder_within_groups(t, notes, order):
                changed = True
                events["spawn_order_revealed"] += 1
        return changed

    def _reveal_shown_kinds(self, state, notes, obs, events):
        """Under SHOW the observation names each transmission's type (§9.1)."""
        t = state.transmissions
        for slot, note in notes.transmissions.items():
            if note.kind_known or not t.active[slot]:
                continue
            shown = obs["cells"][int(t.row[slot])][int(t.col[slot])].get("transmission", {})
            if "enemyType" in shown:
                t.kind[slot], note.kind_known = ENEMY_NAMES.index(shown["enemyType"]), True
                events["kinds_revealed_show"] += 1

    def _provenance_variants(self, pre, notes, action) -> list:
        """For spawn calls that mixed a scheduled and siphon transmissions (§7.2 steps 5-6) the
        scheduled member is unknown until it hatches; a kill reward reveals it too. Variants of
        ``pre`` with each member (or none) as the scheduled one."""
        groups = collections.defaultdict(list)
        for slot, note in notes.transmissions.items():
            if not note.provenance_known and pre.transmissions.active[slot]:
                groups[note.group].append(slot)
        variants = []
        for members in groups.values():
            for scheduled in members + [None]:
                variant = jax.tree.map(np.array, pre)
                t = variant.transmissions
                for slot in members:
                    t.from_scheduled[slot] = slot == scheduled
                    t.from_siphon[slot] = slot != scheduled
                variants.append((variant, notes))
        return variants

    # --- adopting Swift's draws -----------------------------------------------------------

    def _adopt_board(self, state, obs, notes):
        """A new stage's board (game-rules §3.3) from Swift's observation: grid, exit and the
        stage-start transmissions. Returns (state, failed support checks)."""
        grid, exit_cell, questions = _grid_from_observation(obs, state.grid)
        notes.questions = {cell: 0 for cell in questions}
        state = state.replace(grid=grid, exit_row=np.int32(exit_cell // 6),
                              exit_col=np.int32(exit_cell % 6))
        before = jax.tree.map(np.array, state)
        state, added = self._append_transmissions(state, notes, obs, [(False, False)] * N_CELLS)
        return state, (_board_problems(self.fn, before, obs, exit_cell)
                       + _spawn_problems(self.fn, before, added, int(state.stage)))

    def _adopt_spawns(self, state, pre, notes, obs, requested, first_new_seq):
        """Scheduled and siphon transmissions of this enemy turn (§7.2 steps 5-6): Swift's cells
        replace the mirror's; flags as requested (scheduled first)."""
        n_scheduled, n_siphon = requested
        state = _drop_new_transmissions(state, first_new_seq)
        notes.transmissions = {slot: note for slot, note in notes.transmissions.items()
                               if state.transmissions.active[slot]}
        before = jax.tree.map(np.array, state)
        mixed = n_scheduled > 0 and n_siphon > 0
        flags = [(i < n_scheduled, i >= n_scheduled) for i in range(n_scheduled + n_siphon)]
        state, added = self._append_transmissions(state, notes, obs, flags, mixed=mixed)
        problems = _spawn_problems(self.fn, before, added, n_scheduled + n_siphon)
        return state, problems

    def _append_transmissions(self, state, notes, obs, flags, mixed=False):
        """Append Swift's new transmissions (cells of ``obs`` holding one that the mirror does not
        have) in row-major order, as the mirror's list appends them. Their order among themselves,
        and their types unless SHOW names them, are guesses until revealed."""
        t = state.transmissions
        taken = {(int(t.row[s]), int(t.col[s])) for s in np.flatnonzero(t.active)}
        cells = [(r, c) for r in range(6) for c in range(6)
                 if "transmission" in obs["cells"][r][c] and (r, c) not in taken]
        group = next(self._groups) if len(cells) > 1 else -1
        next_seq = int(state.next_seq)
        for i, (r, c) in enumerate(cells):
            free = np.flatnonzero(~t.active)
            if not len(free):
                break  # over capacity: the comparison reports the missing transmission
            slot = int(free[0])
            shown = obs["cells"][r][c]["transmission"]
            scheduled, siphon = flags[i] if i < len(flags) else (False, False)
            t.active[slot], t.seq[slot], t.row[slot], t.col[slot] = True, next_seq, r, c
            t.turns[slot] = shown["turnsUntilSpawn"]
            t.kind[slot] = ENEMY_NAMES.index(shown["enemyType"]) if "enemyType" in shown else 0
            t.from_scheduled[slot], t.from_siphon[slot] = scheduled, siphon
            notes.transmissions[slot] = TransmissionNote(
                kind_known="enemyType" in shown, provenance_known=not mixed, group=group)
            next_seq += 1
        state = state.replace(next_seq=np.int32(next_seq))
        return state, cells

    # --- comparing ------------------------------------------------------------------------

    def _differences(self, candidate: _Candidate, swift: SwiftStep) -> list:
        diffs = self._observation_differences(candidate, swift)
        if not floats_close(candidate.reward, swift.reward):
            diffs.append(f"reward: {candidate.reward!r} != {swift.reward!r}")
        if candidate.done != swift.done:
            diffs.append(f"done: {candidate.done} != {swift.done}")
        info = step_info(candidate.breakdown, candidate.flags["invalid_action"],
                         candidate.flags["stage_complete"], candidate.flags["died"])
        diffs += [f"info.{d}" for d in json_differences(info, swift.info)]
        return diffs

    def _observation_differences(self, candidate: _Candidate, swift: SwiftStep) -> list:
        """Raw observation, numeric observation (§9.2), internal state and valid actions."""
        host = host_state(candidate.state)
        diffs = [f"observation.{d}" for d in json_differences(raw_observation(host),
                                                               swift.observation)]
        diffs += [f"internal.{d}" for d in json_differences(internal_state(host), swift.internal)]
        valid = [int(i) for i in np.flatnonzero(candidate.mask)]
        if valid != swift.valid:
            diffs.append(f"validActions: {valid} != {swift.valid}")
        if not diffs:  # the numeric encoding of equal JSON must be equal too
            ours = _host_tree(self.fn.numeric(candidate.state))
            theirs = numeric_observation(swift.observation)
            for part in ("player", "programs", "grid"):
                if not np.allclose(getattr(ours, part), theirs[part], atol=1e-6):
                    where = np.argwhere(~np.isclose(getattr(ours, part), theirs[part], atol=1e-6))
                    diffs.append(f"numeric {part} differs at {where[:5].tolist()}")
        return diffs

    def _board(self) -> str:
        return "(no game)" if self.state is None else render_text(self.state, reveal=True)


def _cross_cells(row: int, col: int) -> list:
    """The siphon cross (centre, U, D, L, R) on the board (game-rules §6)."""
    cells = [(row, col), (row + 1, col), (row - 1, col), (row, col - 1), (row, col + 1)]
    return [r * 6 + c for r, c in cells if 0 <= r < 6 and 0 <= c < 6]


def _history_moves(pre, state) -> tuple:
    """(pushed, popped): the step pushed a snapshot (a normal enemy turn) or UNDO popped one."""
    h0, h1 = pre.history, state.history
    capacity = h0.snapshots.turn.shape[0]
    pushed = int(h1.head) == (int(h0.head) + 1) % capacity and (
        int(h1.size) == min(int(h0.size) + 1, capacity))
    popped = int(h1.size) == int(h0.size) - 1 and int(h1.head) == (int(h0.head) - 1) % capacity
    return pushed and not popped, popped


_DRAW_KEYS = 8192  # keys whose per-slot draws the fitting searches choose from
_ORDER_BUDGET = 400  # batches of candidate placements one order fit may evaluate
_KEY_MOVES = 16  # other draw keys (other step-1 orders) among a hill-climbing step's moves


class _Draws(NamedTuple):
    keys: np.ndarray  # [K, 2]
    shuffle0: np.ndarray  # [K, E]: ascending = processing order of enemy step 0
    shuffle1: np.ndarray  # [K, E]: the same for step 1 (viruses only act there)
    bits: np.ndarray  # [K, E + 1]: program bits (POLY per slot, WARP the last)
    rank0: np.ndarray  # [K, E]: slots in step-0 processing order


class _SwiftOutcome:
    """Swift's enemy list and player after a step, to score candidate outcomes against."""

    def __init__(self, swift: SwiftStep):
        self.enemies = np.array(
            [[1, ENEMY_NAMES.index(e["type"]), e["row"], e["col"], e["hp"], e["disabledTurns"],
              e["isStunned"], e["isFromScheduledTask"], e["spawnedFromSiphon"]]
             for e in swift.internal["enemies"]], np.int32).reshape(-1, 9)
        obs = swift.observation
        self.player = np.array([obs["playerRow"], obs["playerCol"], obs["playerHP"],
                                obs["credits"], obs["energy"], obs["dataSiphons"], obs["score"],
                                obs["baseAttack"]], np.int32)
        self.perfect = len(self.enemies) + 1

    def score(self, reported, players):
        """Per candidate: enemy-list entries equal to Swift's, +1 if the player is equal, and
        -1 per extra enemy."""
        n = len(self.enemies)
        equal = np.all(reported[:, :n] == self.enemies, axis=2).sum(axis=1)
        extra = reported[:, n:, 0].sum(axis=1)
        return equal - extra + np.all(players == self.player, axis=1)

    def matches(self, reported, players):
        return self.score(reported, players) == self.perfect

    def entries_equal(self, reported) -> int:
        """Entries of one candidate's enemy list equal to Swift's."""
        n = len(self.enemies)
        return int(np.sum(np.all(reported[:n] == self.enemies, axis=1)))


def _stack(states):
    return jax.tree.map(lambda *xs: np.stack(xs), *states)


def _swapped(order, i, j):
    order = list(order)
    order[i], order[j] = order[j], order[i]
    return order


def _moved(order, i, j):
    order = list(order)
    order.insert(j, order.pop(i))
    return order


def _move_enemies(state, placement):
    """``state`` with each enemy of ``placement`` (slot -> new slot) moved to its new slot and
    the other slots filling the rest: the same game, as slots carry no meaning."""
    n_slots = state.enemies.active.shape[0]
    source = np.full(n_slots, -1)
    for old, new in placement.items():
        source[new] = old
    rest = [s for s in range(n_slots) if s not in placement]
    source[source < 0] = rest
    return state.replace(enemies=jax.tree.map(lambda x: x[source], state.enemies))


def _place_in_order(state, first, k: int, draws: _Draws):
    """``state`` with the enemies of ``first`` moved to the slots that draw key ``k`` shuffles
    first in enemy step 0, in that order: under that key the engine processes them in that
    order in step 0 (and the viruses among them in step 1 in the order of their slots' step-1
    shuffle keys)."""
    return _move_enemies(state, dict(zip(first, (int(x) for x in draws.rank0[k, :len(first)]))))


def _write_head_snapshot(state):
    """The newest snapshot := the current transmissions and grid (the harness edited them after
    the push; the push itself was the end-of-turn state)."""
    history = state.history
    head = int(history.head)

    def put(ring, value):
        ring = np.array(ring)
        ring[head] = value
        return ring

    snapshots = history.snapshots.replace(
        transmissions=jax.tree.map(put, history.snapshots.transmissions, state.transmissions),
        grid=jax.tree.map(put, history.snapshots.grid, state.grid))
    return state.replace(history=history.replace(snapshots=snapshots))


def _drop_new_transmissions(state, first_new_seq: int):
    """Remove the transmissions the mirror's own draws created this step (seq >= first_new_seq)."""
    t = state.transmissions
    new = t.active & (t.seq >= first_new_seq)
    return state.replace(transmissions=t.replace(active=t.active & ~new))


def _requested_spawns(pre, state, action) -> tuple:
    """(scheduled, siphon) transmissions the enemy turn asked for (§7.2 steps 5-6, §9): the
    scheduled task fired iff it moved nextScheduledTaskTurn; the siphon ones are the pending
    count before the turn (the step's own siphon included)."""
    siphoned = action == ACTION_SIPHON and pre.player.data_siphons > 0
    next_before = int(pre.next_sched_turn) + (SIPHON_SCHEDULE_DELAY if siphoned else 0)
    scheduled = int(int(state.next_sched_turn) != next_before)
    pending = int(pre.pending_siphon)
    if siphoned:
        g = pre.grid
        pending += sum(int(g.spawn[c]) for c in _cross_cells(int(pre.player.row), int(pre.player.col))
                       if g.content[c] == BLOCK and not g.siphoned[c])
    return scheduled, pending


def _reorder_within_groups(t, notes, order) -> bool:
    """Give the slots of ``order`` (Swift's list order) the same seqs, permuted, provided that
    only members of one spawn call change places; False otherwise (the comparison reports it)."""
    group = lambda slot: notes.transmissions.get(slot, TransmissionNote()).group  # noqa: E731
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            if (group(a) < 0 or group(a) != group(b)) and t.seq[a] > t.seq[b]:
                return False
    seqs = sorted(int(t.seq[s]) for s in order)
    for slot, seq in zip(order, seqs):
        t.seq[slot] = seq
    return True


def _grid_from_observation(obs, template):
    """(Grid, exit cell, question cells) of a freshly generated board in Swift's observation.
    A question block's content is a guess (data, 1 point, spawn count 9) until revealed."""
    arrays = {name: np.zeros(N_CELLS, np.int32) for name in ("content", "points", "spawn", "credits",
                                                        "energy")}
    program = np.full(N_CELLS, -1, np.int32)
    question, siphoned, centre = (np.zeros(N_CELLS, bool) for _ in range(3))
    exit_cell, questions = -1, []
    for r in range(6):
        for c in range(6):
            cell, view = r * 6 + c, obs["cells"][r][c]
            arrays["content"][cell] = (EXIT if view["isExit"] else
                                       DATA_SIPHON if view["isDataSiphon"] else EMPTY)
            if view["isExit"] and exit_cell < 0:
                exit_cell = cell
            block = view.get("block")
            if block is not None:
                arrays["content"][cell] = BLOCK
                siphoned[cell] = block["isSiphoned"]
                if block["blockType"] == "question":
                    question[cell] = True
                    arrays["points"][cell] = 1
                    arrays["spawn"][cell] = _QUESTION_SPAWN_RANGE[1]
                    questions.append(cell)
                elif block["blockType"] == "program":
                    program[cell] = block["programActionIndex"] - PROGRAM_ACTION_OFFSET
                    arrays["spawn"][cell] = block["transmissionSpawnCount"]
                else:
                    arrays["points"][cell] = block["points"]
                    arrays["spawn"][cell] = block["transmissionSpawnCount"]
            arrays["credits"][cell] = view.get("credits", 0)
            arrays["energy"][cell] = view.get("energy", 0)
            centre[cell] = view["siphonCenter"]
    grid = template.replace(program=program, question=question, siphoned=siphoned,
                            siphon_center=centre, **arrays)
    return grid, exit_cell, questions


def spawn_features(state, first_new_seq: int) -> dict:
    """Features of the transmissions a turn spawned (seq >= ``first_new_seq``), to compare the
    mirror's own spawns with Swift's in the same situations: how many share the player's row or
    column (the line-of-fire rule, §3.6) and their distances to the player."""
    t, p = state.transmissions, state.player
    new = np.flatnonzero(t.active & (t.seq >= first_new_seq))
    in_line = sum(int(t.row[s] == p.row or t.col[s] == p.col) for s in new)
    distance = np.zeros(2 * (GRID - 1), np.int64)
    for s in new:
        distance[abs(int(t.row[s]) - int(p.row)) + abs(int(t.col[s]) - int(p.col)) - 1] += 1
    return {"in the player's row or column": np.array([in_line, len(new) - in_line]),
            "distance to the player": distance}


def board_features(state, first_new_seq: int) -> dict:
    """Features of a stage's new board (§3.3-§3.6), as ``spawn_features`` for spawns: block
    count and cells, block kinds, exit corner and the stage-start transmissions."""
    g = state.grid
    blocks = g.content == BLOCK
    count = np.zeros(MAX_BLOCKS + 1, np.int64)
    count[int(np.sum(blocks))] += 1
    exit_corner = np.array([int(g.content[c] == EXIT) for c in CORNER_CELLS])
    kinds = np.array([np.sum(blocks & ~g.question & (g.program < 0)),
                      np.sum(blocks & ~g.question & (g.program >= 0)), np.sum(blocks & g.question)])
    features = {"block count": count, "block cells": blocks.astype(np.int64),
                "block kinds": kinds, "exit corner": exit_corner}
    features.update({f"stage-start transmissions {name}": value
                     for name, value in spawn_features(state, first_new_seq).items()})
    return features


def _new_game_problems(obs) -> list:
    """§3.1: the player on a corner with exactly one starting bonus (§1.5)."""
    problems = []
    if (obs["playerRow"], obs["playerCol"]) not in ((0, 0), (0, 5), (5, 0), (5, 5)):
        problems.append(f"new game: player at ({obs['playerRow']},{obs['playerCol']}), not a corner")
    bonus = [(obs["credits"], obs["energy"], obs["dataSiphons"]) == b
             for b in ((10, 0, 0), (0, 11, 0), (0, 0, 1))]
    if sum(bonus) != 1:
        problems.append(f"new game: starting bonus credits/energy/siphons "
                        f"{obs['credits']}/{obs['energy']}/{obs['dataSiphons']}")
    return problems


def _board_problems(fn, state, obs, exit_cell) -> list:
    """Is Swift's new board a possible output of stage generation (game-rules §3.3-§3.5)?"""
    g = state.grid
    problems = []
    player = int(state.player.row) * 6 + int(state.player.col)
    corners = [int(c) for c in CORNER_CELLS]
    others = [c for c in corners if c not in (player, exit_cell)]
    if exit_cell not in corners or exit_cell == player or int(np.sum(g.content == EXIT)) != 1:
        problems.append(f"board: exit at cell {exit_cell} (player at {player})")
    if [int(g.content[c]) for c in others] != [DATA_SIPHON] * 2 or g.content[player] != EMPTY:
        problems.append(f"board: corners {[int(g.content[c]) for c in corners]}")
    blocks = g.content == BLOCK
    count = int(np.sum(blocks))
    e, t = state.enemies, state.transmissions
    occupied = np.zeros(N_CELLS, bool)
    occupied[(e.row * 6 + e.col)[e.active]] = True
    occupied[(t.row * 6 + t.col)[t.active]] = True
    if count and not MIN_BLOCKS <= count <= MAX_BLOCKS:
        problems.append(f"board: {count} blocks")
    if np.any(blocks & (IS_CORNER | occupied)):
        problems.append("board: a block on a corner or under an enemy or transmission")
    if count and not bool(fn.layout_valid(blocks, np.int32(exit_cell))):
        problems.append("board: the block layout fails GridValidator")
    visible = blocks & ~g.question
    data, program = visible & (g.program < 0), visible & (g.program >= 0)
    if np.any(data & ((g.points < 1) | (g.points > 9) | (g.spawn != g.points))):
        problems.append("board: a data block's points or spawn count")
    if np.any(program & (g.spawn != PROGRAM_SPAWN_COST[np.maximum(g.program, 0)])):
        problems.append("board: a program block's spawn count")
    if len(set(g.program[program].tolist())) != int(np.sum(program)):
        problems.append("board: a program twice")
    floor = (g.content == EMPTY) | (g.content == DATA_SIPHON)
    amount = g.credits + g.energy
    if np.any(floor & ((amount < 1) | (amount > 3) | ((g.credits > 0) & (g.energy > 0)))) or \
            np.any(~floor & ~blocks & (amount > 0)):
        problems.append("board: resources")
    if np.any(g.siphoned) or np.any(g.siphon_center):
        problems.append("board: siphon marks on a new board")
    return problems


def _spawn_problems(fn, before, cells, requested) -> list:
    """Are Swift's new transmissions a possible output of spawnRandomTransmissions (§3.6)? Each
    on a spawn-empty cell; in the line of fire only if pass 1 (100 tries for an empty cell out of
    it) plausibly failed; fewer than asked only if both passes plausibly failed."""
    spawn_empty, line_of_fire = (np.asarray(m) for m in fn.spawn_masks(before))
    problems = []
    chosen = [r * 6 + c for r, c in cells]
    if any(not spawn_empty[c] for c in chosen):
        problems.append(f"spawn: a transmission on a cell that is not spawn-empty: {cells}")
    out_of_line = int(np.sum(spawn_empty & ~line_of_fire)) - len(chosen)
    in_line = sum(bool(line_of_fire[c]) for c in chosen)
    if in_line and (1 - max(out_of_line, 0) / N_CELLS) ** (100 * in_line) < _UNLIKELY:
        problems.append(f"spawn: {in_line} in the line of fire with {out_of_line} cells out of it")
    missing = requested - len(chosen)
    free = int(np.sum(spawn_empty)) - len(chosen)
    if missing < 0 or (missing and (1 - max(free, 0) / N_CELLS) ** (100 * missing) < _UNLIKELY):
        problems.append(f"spawn: {len(chosen)} transmissions for {requested} asked, {free} cells free")
    return problems
