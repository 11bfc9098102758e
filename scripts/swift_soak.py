#!/usr/bin/env python
"""Lockstep differential soak against the real Swift game (issue 14).

    python scripts/swift_soak.py --binary $HACKMATRIX_BINARY --steps 100000 --json soak.json

Swift plays; a JAX mirror of its whole state follows every step and must reproduce every reply
(observation, numeric observation, valid actions, reward and breakdown, done, info, internal
state). Random draws are matched (enemy order, WARP, POLY: some key must give Swift's outcome) or
adopted after a support check (spawn cells and types, new boards): see
``envs.hackmatrix.swift_io.oracle.OracleLockstep``.

Trajectories alternate between starts and two policies:
* starts: Swift's own ``reset`` (a real new game), and ``setState`` scenarios built from boards
  of our generator at a random stage with random resources, owned programs and enemies, so that
  every program and later stages come up often; ``--starts crowd`` adds (or only plays, alone)
  scenarios with 12-24 enemies, where enemies contend for cells on most turns;
* policies: uniformly random valid actions, and the scripted heuristic of
  ``purejaxrl/evaluation.py`` (walks to the exit, shoots in line) mixed with random programs
  (30 % when one is valid) and random actions (10 %), so that later stages, programs and UNDO
  (cross-stage UNDO included) are reached.

A divergence ends its trajectory; it is printed with the mirror's board and the differences and
recorded in the report; the run goes on until --max-divergences. A documented departure (UNDO
deeper than the history ring, decisions R3) ends its trajectory and is counted. At the end, the
adopted draws are compared with the mirror's own draws in the same situations (paired tests).
Exit status 1 on a divergence or a paired test below p = 0.001.
"""

import argparse
import collections
import json
import os
import pickle
import re
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before JAX is imported

import jax
import numpy as np

from envs.hackmatrix.core import generation

from envs.hackmatrix import observation
from envs.hackmatrix.baselines import heuristic_policy
from envs.hackmatrix.core.constants import (ENEMY_MAX_HP, ENEMY_NAMES, GLITCH, GRID, N_PROGRAMS,
                                            PROGRAM_ACTION_OFFSET, PROGRAM_NAMES, UNDO)
from envs.hackmatrix.swift_io.divergence import MAX_REPORTED_DIFFERENCES, OracleDivergence
from envs.hackmatrix.swift_io.engines import ProtocolEngine
from envs.hackmatrix.swift_io.oracle import OracleLockstep
from envs.hackmatrix.swift_io.protocol import enable_server_compile_cache
from envs.hackmatrix.swift_io.swift_build import add_binary_option, binary_label, check_binary
from envs.hackmatrix.swift_io.scenario import SCENARIO_EXIT, state_to_scenario
from envs.hackmatrix.swift_io.parity_statistics import LEVEL, paired_permutation_chi_square
from purejaxrl.cli.parsing import ArgumentParser
from purejaxrl.output_paths import (OVERWRITE_FLAG, OutputPathError, add_overwrite_argument,
                                    prepare_directory, refuse_output_file, write_text)

# Each divergence's dump in --dump-dir (the report names it by path).
DUMP_NAME = "divergence-{number}.pkl"
DUMP_PATTERN = re.compile(r"divergence-\d+\.pkl")
POLICIES = ("random", "heuristic")
STARTS = ("reset", "scenario", "crowd")
DEFAULT_STARTS = ("reset", "scenario")
CROWD = (12, 25)  # enemies of a "crowd" scenario: many enemies contending for cells
PROGRAM_SHARE, RANDOM_SHARE = 0.3, 0.1  # the heuristic policy's mixture
BOARD_BATCH = 256
PERMUTATIONS = 2000
# Documented departures from Swift (SPEC.md §1.6) the oracle recognises: UNDO deeper than the
# history ring (decisions R3).
DEPARTURES = ("departure R3",)


class ScenarioSource:
    """setState scenarios from our generator's boards whose exit is (5,5) (the only exit setState
    can express), dressed with a random stage, player, owned programs and enemies."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.key = jax.random.PRNGKey(seed)
        self.boards = []
        self.new_games = jax.jit(jax.vmap(generation.new_game))

    def _board(self):
        while not self.boards:
            self.key, key = jax.random.split(self.key)
            batch = jax.device_get(self.new_games(jax.random.split(key, BOARD_BATCH)))
            for i in np.flatnonzero((batch.exit_row == SCENARIO_EXIT[0])
                                    & (batch.exit_col == SCENARIO_EXIT[1])):
                self.boards.append(jax.tree.map(lambda x, i=i: x[i], batch))
        return self.boards.pop()

    def __call__(self, crowd: bool = False) -> dict:
        rng = self.rng
        scenario = state_to_scenario(self._board())
        for block in scenario["blocks"]:
            block.pop("question", None)
        player = scenario["player"]
        player.update(hp=int(rng.integers(1, 4)), credits=int(rng.integers(0, 41)),
                      energy=int(rng.integers(0, 41)), dataSiphons=int(rng.integers(0, 4)),
                      attackDamage=int(rng.choice([1, 1, 1, 2, 3])), score=int(rng.integers(0, 20)))
        owned = [int(p) for p in rng.permutation(N_PROGRAMS) if rng.random() < 0.4]
        scenario.update(stage=int(rng.integers(1, 9)), turn=int(rng.integers(0, 12)),
                        showActivated=bool(rng.random() < 0.1),
                        scheduledTasksDisabled=bool(rng.random() < 0.1),
                        ownedPrograms=[PROGRAM_ACTION_OFFSET + p for p in owned])
        for transmission in scenario["transmissions"]:
            transmission["turnsRemaining"] = int(rng.integers(1, 4))
        blocks = {(b["row"], b["col"]) for b in scenario["blocks"] if b["type"] != "none"}
        taken = blocks | {(t["row"], t["col"]) for t in scenario["transmissions"]} | {
            (player["row"], player["col"]), SCENARIO_EXIT}
        free = [(r, c) for r in range(GRID) for c in range(GRID) if (r, c) not in taken]
        enemies = []
        enemy_count = int(rng.integers(*CROWD)) if crowd else int(rng.integers(0, 6))
        for index in rng.permutation(len(free))[:enemy_count]:
            kind = int(rng.integers(0, len(ENEMY_NAMES)))
            row, col = free[index]
            enemies.append({"type": ENEMY_NAMES[kind], "row": row, "col": col,
                            "hp": int(rng.integers(1, ENEMY_MAX_HP[kind] + 1)),
                            "stunned": bool(rng.random() < 0.1),
                            "spawnedFromSiphon": bool(rng.random() < 0.2)})
        if blocks and rng.random() < 0.3:  # a glitch on a block (DEBUG, pathfinding over blocks)
            row, col = sorted(blocks)[int(rng.integers(0, len(blocks)))]
            enemies.append({"type": ENEMY_NAMES[GLITCH], "row": row, "col": col, "hp": 2})
        scenario["enemies"] = enemies
        return scenario


class Policies:
    def __init__(self, env, seed: int):
        self.rng = np.random.default_rng(seed + 1)
        self.heuristic = jax.jit(lambda state: heuristic_policy(
            None, observation.build_observation(state), state))

    def __call__(self, policy: str, valid: list, state) -> int:
        rng = self.rng
        if policy == "random":
            return int(rng.choice(valid))
        programs = [a for a in valid if a >= PROGRAM_ACTION_OFFSET]
        if programs and rng.random() < PROGRAM_SHARE:
            return int(rng.choice(programs))
        if rng.random() < RANDOM_SHARE:
            return int(rng.choice(valid))
        action = int(self.heuristic(state))
        return action if action in valid else int(rng.choice(valid))


def soak(oracle: OracleLockstep, *, steps: int, max_steps: int, seed: int,
         max_divergences: int, log_every: int = 0, dump_dir: str | None = None,
         starts=DEFAULT_STARTS) -> dict:
    scenarios = ScenarioSource(seed)
    policies = Policies(oracle.env, seed)
    totals = collections.Counter()
    per_policy = {p: collections.Counter() for p in POLICIES}
    max_stage = collections.Counter()
    program_uses = collections.Counter()
    divergences = []
    departures = collections.Counter()
    started = time.time()
    trajectory = 0
    while totals["steps"] < steps and len(divergences) < max_divergences:
        start = starts[trajectory % len(starts)]
        policy = POLICIES[(trajectory // len(starts)) % 2]
        counts = per_policy[policy]
        counts["trajectories"] += 1
        counts[f"starts_{start}"] += 1
        step_in_trajectory = None  # set once the first step is played
        try:
            obs = (oracle.reset() if start == "reset"
                   else oracle.set_state(scenarios(crowd=start == "crowd")))
            valid = oracle.swift.valid_actions()
            reached = obs["stage"]
            for step_in_trajectory in range(max_steps):
                action = policies(policy, valid, oracle.state)
                reply = oracle.step(action)
                valid = reply.valid
                totals["steps"] += 1
                counts["steps"] += 1
                if action >= PROGRAM_ACTION_OFFSET:
                    program_uses[PROGRAM_NAMES[action - PROGRAM_ACTION_OFFSET]] += 1
                    if (action == PROGRAM_ACTION_OFFSET + UNDO
                            and bool(oracle.state.board_from_undo)):
                        counts["cross_stage_undo"] += 1
                info = reply.info
                counts["stage_completions"] += bool(info.get("stage_complete"))
                counts["deaths"] += bool(info.get("death"))
                counts["victories"] += bool(reply.done and info.get("stage_complete"))
                reached = max(reached, reply.observation["stage"])
                if log_every and totals["steps"] % log_every == 0:
                    rate = totals["steps"] / (time.time() - started)
                    print(f"{totals['steps']} steps, {trajectory + 1} trajectories, "
                          f"{rate:.0f} steps/s, {len(divergences)} divergences", flush=True)
                if reply.done or totals["steps"] >= steps:
                    break
            max_stage[reached] += 1
        except OracleDivergence as divergence:
            if divergence.kind in DEPARTURES:  # documented: ends the trajectory, not a failure
                departures[divergence.kind] += 1
                trajectory += 1
                continue
            at = "its start" if step_in_trajectory is None else f"step {step_in_trajectory}"
            print(f"trajectory {trajectory} ({start}, {policy}), {at}: {divergence.report()}",
                  flush=True)
            record = {"trajectory": trajectory, "start": start, "policy": policy,
                      "kind": divergence.kind, "action": divergence.action,
                      "differences": divergence.differences[:MAX_REPORTED_DIFFERENCES],
                      "board": divergence.board}
            if dump_dir:  # the mirror before the step and Swift's reply, to replay it
                record["dump"] = os.path.join(dump_dir,
                                              DUMP_NAME.format(number=len(divergences)))
                with open(record["dump"], "wb") as f:
                    pickle.dump({"state": divergence.state,
                                 "swift": (divergence.swift._asdict()
                                           if divergence.swift is not None else None),
                                 "action": divergence.action, "notes": oracle.notes,
                                 "shadow": oracle.shadow}, f)
            divergences.append(record)
        trajectory += 1
    elapsed = time.time() - started
    return {
        "paired_draws": paired_draw_tests(oracle, seed),
        "steps": totals["steps"], "trajectories": trajectory, "seconds": round(elapsed, 1),
        "per_policy": {p: dict(c) for p, c in per_policy.items()},
        "max_stage_reached": {str(k): v for k, v in sorted(max_stage.items())},
        "program_uses": dict(program_uses.most_common()),
        "oracle": dict(sorted(oracle.stats.items())),
        "departures": dict(departures),
        "divergences": divergences,
    }


def paired_draw_tests(oracle: OracleLockstep, seed: int) -> list:
    """Adopted draws (spawns, new boards) against the mirror's own draws in the same situations
    (``OracleLockstep.paired_draws``): a law of ours that differs from Swift's shows here even
    where Swift's outcome is one ours allows."""
    rng = np.random.default_rng(seed)
    rows = []
    for name, (ours, theirs) in sorted(oracle.paired_draws.items()):
        statistic, components, p = paired_permutation_chi_square(
            np.array(theirs), np.array(ours), PERMUTATIONS, rng)
        rows.append({"feature": name, "pairs": len(ours), "components": components, "p": p,
                     "swift_mean": np.round(np.mean(theirs, axis=0), 4).tolist(),
                     "jax_mean": np.round(np.mean(ours, axis=0), 4).tolist()})
    return rows


def main(argv=None) -> int:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_binary_option(parser)
    parser.add_argument("--steps", type=int, default=100_000, help="total steps to play")
    parser.add_argument("--starts", nargs="+", choices=STARTS, default=list(DEFAULT_STARTS),
                        help="how trajectories start, in turn: Swift's reset, a setState "
                             f"scenario, or a crowd scenario ({CROWD[0]}-{CROWD[1] - 1} enemies)")
    parser.add_argument("--max-episode-steps", type=int, default=300,
                        help="maximum steps per trajectory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-divergences", type=int, default=20,
                        help="stop after this many divergences")
    parser.add_argument("--json", metavar="PATH", default=None, help="write the JSON report here")
    add_overwrite_argument(parser)
    parser.add_argument("--log-every", type=int, default=5000)
    parser.add_argument("--dump-dir", default=None,
                        help="write each divergence's mirror state and Swift reply here "
                             "(pickle, divergence-<n>.pkl; a directory that holds files is "
                             f"refused unless {OVERWRITE_FLAG})")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.max_episode_steps < 1 or args.max_divergences < 1:
        # --max-episode-steps 0 would start trajectories without end and never reach --steps
        parser.error("--steps, --max-episode-steps and --max-divergences must be positive")
    check_binary(parser, args.binary)
    if refuse_output_file(args.json, "--json", args.overwrite):
        return 2
    if args.dump_dir:
        # The report names the dumps by path: a second run must not replace the first's.
        what = f"--dump-dir {args.dump_dir}"
        if os.path.isdir(args.dump_dir) and os.listdir(args.dump_dir) and not args.overwrite:
            print(f"error: {what}: holds files already; pass {OVERWRITE_FLAG} to replace them, "
                  "or choose a new directory", file=sys.stderr)
            return 2
        try:
            prepare_directory(args.dump_dir, "--dump-dir")
        except OutputPathError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        # --overwrite replaces the earlier run's dumps: none of them may outlive it beside
        # this run's, which would number fewer (other files are not ours to remove).
        for name in os.listdir(args.dump_dir):
            if DUMP_PATTERN.fullmatch(name):
                os.remove(os.path.join(args.dump_dir, name))
    enable_server_compile_cache()
    with ProtocolEngine([args.binary, "--headless-cli"]) as swift:
        report = soak(OracleLockstep(swift, seed=args.seed), steps=args.steps,
                      max_steps=args.max_episode_steps, seed=args.seed,
                      max_divergences=args.max_divergences, log_every=args.log_every,
                      dump_dir=args.dump_dir, starts=tuple(args.starts))
    report["binary"] = binary_label(args.binary)
    summary = {k: v for k, v in report.items() if k not in ("divergences", "paired_draws")}
    print(json.dumps(summary, indent=1))
    low = []
    for row in report["paired_draws"]:
        p = "" if row["p"] is None else f"p = {row['p']:.4f}"
        print(f"paired draws, {row['feature']:<52} {row['pairs']:>6} pairs {p}")
        if row["p"] is not None and row["p"] < LEVEL:
            low.append(row["feature"])
    print(f"{len(report['divergences'])} divergences in {report['steps']} steps over "
          f"{report['trajectories']} trajectories; {len(low)} paired draw laws below p = {LEVEL}")
    if args.json:
        write_text(args.json, json.dumps(report, indent=1))
    return 1 if report["divergences"] or low else 0


if __name__ == "__main__":
    sys.exit(main())
