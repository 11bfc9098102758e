"""Driver of the parity harness against the Swift binary (issue 14): Swift drives the game, a
JAX mirror of its state follows (``OracleLockstep``; scripts/swift_soak.py, scripts/parity_diff.py
--binary).

Swift's randomness is its own (unseeded), so the two engines cannot share draws. Instead the
mirror is an ``EnvState`` equal to Swift's whole game state (scheduler, history, disabled
counters, siphoned floor ... everything, not only what setState can express). Every step is
played on Swift and then on the mirror from the same state, and every reply is compared
(``compare.mirror_step_differences``): observation (JSON and numeric), reward and breakdown,
done, info, internal state, valid actions. Where the step draws randomness (game-rules §13), the
mirror must reproduce Swift's outcome:

* enemy order (the shuffle of each enemy step), WARP's pick and POLY's types: the mirror's own
  engine must give exactly Swift's outcome with some key (the step's key, then random keys,
  then fitted draws: see ``OracleLockstep._search`` and ``draw_fitting``);
* spawn cells and types of transmissions (scheduled, siphon, stage start) and the new stage's
  board: Swift's outcome is adopted into the mirror after a support check (``adoption``: each
  transmission on a spawn-empty cell, out of the line of fire when one was free; the board a
  possible output of the generator: corners, block count, validator, payloads, resources).
  Adoption cannot show a law of ours that allows more outcomes than Swift's, so each adopted
  draw is also paired with the mirror's own draw in the same situation (``paired_draws``,
  tested by the soak script), and scripts/swift_generation_stats.py compares the laws in
  controlled situations.

Some of what Swift drew stays hidden until the game reveals it: a transmission's enemy type
(shown at hatching, or under SHOW), the content of a question block (shown when siphoned), the
list order of transmissions spawned by one call (shown when they hatch), and which member of a
spawn call that mixed a scheduled and siphon transmissions is the scheduled one. The mirror
holds a guess for each, the harness remembers that it is a guess (``Notes``, kept through UNDO
by a shadow of Swift's history), and sets the true value as soon as Swift reveals it, before
the step that depends on it is compared. The siphon-quality reward and REDUC's validity can
depend on still-hidden question blocks: there the guess is fitted to Swift's value when some
content gives it, and the step diverges when none does.
"""

import collections
import dataclasses
import functools
import itertools
import types
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import observation
from ..core import bitboard, game, generation, rewards, spawn
from ..core.constants import (ACTION_SIPHON, BLOCK, ENEMY_MAX_HP, ENEMY_NAMES, N_CELLS, POLY,
                              PROGRAM_ACTION_OFFSET, PROGRAM_SPAWN_COST, REDUC, UNDO, VIRUS, WARP)
from ..core.state import blank_state
from ..env import HackMatrix
from ..viz.render_text import render_text
from .adoption import (QUESTION_SPAWN_RANGE, Notes, TransmissionNote, board_features,
                       board_problems, cross_cells, drop_new_transmissions, grid_from_observation,
                       new_game_problems, reorder_within_groups, requested_spawns,
                       spawn_features, spawn_problems, write_head_snapshot)
from .compare import floats_close, mirror_differences, mirror_step_differences
from .divergence import OracleDivergence
from .draw_fitting import (DRAW_KEYS, KEY_MOVES, ORDER_BUDGET, Draws, SwiftOutcome,
                           move_enemies, moved, place_in_order, stack_states, swapped)
from .engines import Engine
from .protocol import compiled
from .scenario import set_state


class SwiftStep(NamedTuple):
    """Swift's reply to a step, with its internal state and valid actions asked right after."""

    observation: dict
    reward: float
    done: bool
    info: dict
    internal: dict
    valid: list


@dataclasses.dataclass
class _Candidate:
    """The mirror's outcome of one step under one key (and one variant of its guesses)."""

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
                                 jnp.where(old, t.row * 8 + t.col, -1),
                                 jnp.where(old, t.turns, -9)])
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


def _countdowns(obs, cells) -> list:
    """Swift's turnsUntilSpawn of the transmissions on ``cells`` of its observation."""
    return [obs["cells"][r][c]["transmission"]["turnsUntilSpawn"] for r, c in cells]


class OracleLockstep:
    """Swift's game, step by step, with a JAX mirror that must reproduce every reply.

    ``reset()`` / ``set_state(scenario)`` start a game on Swift and build the mirror from it;
    ``step(action)`` plays one action on both and raises ``OracleDivergence`` when the mirror
    cannot reproduce Swift's reply (see the module docstring). ``stats`` counts what each
    step needed: random draws by kind, key searches, adoptions, hidden values revealed."""

    def __init__(self, swift: Engine, *, env=None, seed: int = 0,
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
        problems += new_game_problems(obs)
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
            state = drop_new_transmissions(state, first_new_seq)
            notes.transmissions = {slot: note for slot, note in notes.transmissions.items()
                                   if state.transmissions.active[slot]}
            state, problems = self._adopt_board(state, swift.observation, notes)
            samples.append(("board", ours, board_features(state, first_new_seq)))
            events["adopted_boards"] += 1
        elif pushed:
            requested = requested_spawns(pre, state, action)
            if sum(requested):
                ours = spawn_features(state, first_new_seq)
                state, problems = self._adopt_spawns(state, pre, notes, swift.observation,
                                                     requested, first_new_seq)
                samples.append(("spawn", ours, spawn_features(state, first_new_seq)))
                events["adopted_spawns"] += 1
        self._reveal_shown_kinds(state, notes, swift.observation, events)
        if pushed:  # the snapshot just pushed is the end-of-turn state, adoptions included
            state = write_head_snapshot(state)
        mask = np.asarray(self.fn.mask(state))
        if self._fit_reduc_validity(state, notes, swift.valid, mask):
            events["reduc_validity_fitted"] += 1
            mask = np.asarray(self.fn.mask(state))
            if pushed:
                state = write_head_snapshot(state)
        return _Candidate(state, reward, done, breakdown, flags, notes, pushed, popped, mask,
                          events, problems, samples)

    def _search(self, pre, notes, action, swift: SwiftStep, key):
        """A candidate that reproduces Swift's reply to a step that draws the enemy order, WARP's
        pick or POLY's types, or None. First ``search_rounds`` batches of random keys; then the
        draws are fitted: the engine's draws are per enemy slot, and slots carry no meaning (list
        order is ``seq``), so placing the enemies in chosen slots under a chosen key realises any
        wanted processing order or POLY type, and a key scan any WARP pick."""
        target = SwiftOutcome(swift)
        tried = set()
        batch = self.fn.search_batch
        states = stack_states([pre] * batch)
        for round_ in range(self.search_rounds):
            keys = jax.random.split(jax.random.fold_in(key, round_ + 1), batch)
            candidate = self._try_batch(pre, notes, action, swift, target, keys, states, tried)
            if candidate is not None:
                self.stats["search_rounds"] += round_ + 1
                return candidate
        keys = jax.random.split(jax.random.fold_in(key, 2 ** 31 - 1), DRAW_KEYS)
        shuffle0, shuffle1, bits = _host_tree(self.fn.draws(keys))
        draws = Draws(np.asarray(keys), shuffle0, shuffle1, bits, np.argsort(shuffle0, axis=1))
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
            candidate = self._candidate(place_in_order(pre, first, k, draws), notes, action,
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
                stack_states([place_in_order(pre, first, k, draws) for first, k in chunk]),
                np.int32(action), np.int32(pre.next_seq)))
            reports += list(reported[:min(batch, len(placements) - start)])
        return reports

    def _climb_enemy_order(self, pre, action, target, draws, survivors, acting):
        """Hill-climbing over placements on the number of enemy-list entries equal to Swift's;
        moves: swap two enemies or move one elsewhere in the step-0 order, or another draw key
        (another step-1 order); random restarts. Returns a placement or None."""
        rng = np.random.default_rng(len(acting))
        budget, batch = ORDER_BUDGET, self.fn.search_batch
        n, keys = len(acting), len(draws.keys)

        def neighbours(first, k):
            moves = [(swapped(first, i, j), k) for i in range(n) for j in range(i + 1, n)]
            moves += [(moved(first, i, j), k) for i in range(n) for j in range(n) if abs(i - j) > 1]
            return moves + [(first, int(other)) for other in rng.integers(0, keys, KEY_MOVES)]

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
        budget, batch = [ORDER_BUDGET], self.fn.search_batch

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
                candidate = self._candidate(move_enemies(pre, placement), notes, action,
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
        for cell in cross_cells(int(pre.player.row), int(pre.player.col)):
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
        low, high = QUESTION_SPAWN_RANGE
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
                changed |= bool(t.from_scheduled[slot] != scheduled
                                or t.from_siphon[slot] != siphon)
                t.from_scheduled[slot], t.from_siphon[slot] = scheduled, siphon
                note.provenance_known = True
                events["provenance_revealed"] += 1
            order.append(slot)
        if [int(s) for s in sorted(order, key=lambda s: t.seq[s])] != order:
            if reorder_within_groups(t, notes, order):
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
        grid, exit_cell, questions = grid_from_observation(obs, state.grid)
        notes.questions = {cell: 0 for cell in questions}
        state = state.replace(grid=grid, exit_row=np.int32(exit_cell // 6),
                              exit_col=np.int32(exit_cell % 6))
        before = jax.tree.map(np.array, state)
        state, added = self._append_transmissions(state, notes, obs, [(False, False)] * N_CELLS)
        return state, (board_problems(self.fn, before, obs, exit_cell)
                       + spawn_problems(self.fn, before, added, int(state.stage),
                                        _countdowns(obs, added)))

    def _adopt_spawns(self, state, pre, notes, obs, requested, first_new_seq):
        """Scheduled and siphon transmissions of this enemy turn (§7.2 steps 5-6): Swift's cells
        replace the mirror's; flags as requested (scheduled first)."""
        n_scheduled, n_siphon = requested
        state = drop_new_transmissions(state, first_new_seq)
        notes.transmissions = {slot: note for slot, note in notes.transmissions.items()
                               if state.transmissions.active[slot]}
        before = jax.tree.map(np.array, state)
        mixed = n_scheduled > 0 and n_siphon > 0
        flags = [(i < n_scheduled, i >= n_scheduled) for i in range(n_scheduled + n_siphon)]
        state, added = self._append_transmissions(state, notes, obs, flags, mixed=mixed)
        problems = spawn_problems(self.fn, before, added, n_scheduled + n_siphon,
                                  _countdowns(obs, added))
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

    def _numeric(self, state):
        return _host_tree(self.fn.numeric(state))

    def _differences(self, candidate: _Candidate, swift: SwiftStep) -> list:
        return mirror_step_differences(candidate, swift, self._numeric)

    def _observation_differences(self, candidate: _Candidate, swift: SwiftStep) -> list:
        return mirror_differences(candidate.state, candidate.mask, swift, self._numeric)

    def _board(self) -> str:
        return "(no game)" if self.state is None else render_text(self.state, reveal=True)


def _history_moves(pre, state) -> tuple:
    """(pushed, popped): the step pushed a snapshot (a normal enemy turn) or UNDO popped one."""
    h0, h1 = pre.history, state.history
    capacity = h0.snapshots.turn.shape[0]
    pushed = int(h1.head) == (int(h0.head) + 1) % capacity and (
        int(h1.size) == min(int(h0.size) + 1, capacity))
    popped = int(h1.size) == int(h0.size) - 1 and int(h1.head) == (int(h0.head) - 1) % capacity
    return pushed and not popped, popped

