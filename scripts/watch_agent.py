#!/usr/bin/env python
"""Watch a trained agent play HackMatrix: live terminal replay, GIF / MP4 / HTML replays, and
exactly replayable episode records. Agents of other envs (gymnax's, the toy corridor) play too,
with the observation as text (an image one as letters, a channel per letter), a GIF of image
observations (MinAtar: a colour per channel) and the same summary of return and length.

    python scripts/watch_agent.py checkpoints/<run-name> --episodes 3 --fps 4
    python scripts/watch_agent.py ckpt.msgpack --step             # Enter advances one step
    python scripts/watch_agent.py ckpt.msgpack --gif run.gif --html run.html --record run.json
    python scripts/watch_agent.py --replay run.json [ckpt.msgpack]   # re-simulate and verify
    python scripts/watch_agent.py RUN --episodes 2048 --only won --gif won.gif --html won.html
    python scripts/watch_agent.py --evaluation eval.json --row search-64-ppo-value --only won \
        --gif won.gif --html won.html --record won.json   # an evaluated game (--record-actions)

The network is rebuilt from the checkpoint's saved config (no shape guessing) and plays in the
JAX environment with the saved environment options (reward shaping, UNDO-exploit fix, episode
step limit, gamma). Each step shows the board, the named action, the policy's top actions and
value, the reward with its non-zero components, and the player's numbers; the run ends with a
summary table per episode.

Episode e of a run with --seed s resets from fold_in(PRNGKey(s), e) and steps with per-step
keys derived from it, so (seed, episode, actions) determine an episode: --record writes them
(with each step's reward and a digest of each state) and --replay re-simulates the actions and
fails unless every state and reward is reproduced. ``--only OUTCOME`` first plays the
--episodes batched without frames (the same keys) and then shows the first ``--shown`` of them
that ended so: the way to find and watch a won game. ``--evaluation JSON --row ROW`` watches
games an ``evaluate.py --json --record-actions`` run played (any row's): each is
re-simulated from its actions on the evaluation's own keys and must end as, and when, the
evaluation says; ``--record`` keeps them as a record whose ``keys`` name that scheme, so
``--replay`` reproduces them without the evaluation. No display is needed (works over SSH).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

from purejaxrl.backend import choose_platforms, describe_backend
from purejaxrl.cli.parsing import ArgumentParser, finite_float

choose_platforms()  # before anything imports JAX

import jax
import jax.numpy as jnp
import numpy as np

from envs.compile_cache import (INTERACTIVE_MIN_COMPILE_SECS, CompileCacheError,
                                compile_cache_problem, enable_compile_cache)
from envs.generic_view import observation_image, observation_text
from envs.hackmatrix.viz.render_html import replay_html
from envs.hackmatrix.viz.render_text import format_frame
from envs.hackmatrix.viz.replay import (SCREEN_OUTCOMES, ReplayError, Simulator, load_record,
                                        record_text, run_episode, screen_episodes,
                                        verify_replay)
from purejaxrl import ppo
from purejaxrl.config import DEFAULT_COMPILE_CACHE_DIR
from purejaxrl.recorded_games import (BOARDS, LOOPS, RecordedGamesError, game_keys,
                                      load_row_games)
from purejaxrl.output_paths import (OutputPathError, add_overwrite_argument, check_distinct_files,
                                    check_output_file, write_text)
from purejaxrl.networks import (greedy_masked, is_recurrent, make_network, masked_log_probs,
                                sample_masked, step_recurrent)
from purejaxrl.policy import PolicyError, config_for_options, env_options_of
from purejaxrl.policy import load_policy as load


class WatchError(Exception):
    """A user-facing failure: printed as ``error: <message>``, exit with ``code``."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", nargs="?",
                        help="checkpoint file, or run directory (its latest checkpoint)")
    parser.add_argument("--checkpoint", dest="checkpoint_flag", metavar="PATH",
                        help="the same as the positional CHECKPOINT")
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--greedy", dest="greedy", action="store_true", default=True,
                      help="argmax over the legal actions (default)")
    mode.add_argument("--sample", dest="greedy", action="store_false",
                      help="sample from the policy")
    parser.add_argument("--max-episode-steps", type=int, default=None,
                        help="the env's time limit: an episode is truncated after this many "
                             "steps (default: the checkpoint's, as in training)")
    parser.add_argument("--fps", type=finite_float, default=4.0,
                        help="live replay speed in a terminal; also the GIF/MP4/HTML speed")
    parser.add_argument("--step", action="store_true", help="wait for Enter after every step")
    parser.add_argument("--quiet", action="store_true", help="no per-step output, summary only")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    parser.add_argument("--legend", action="store_true", help="print the symbol legend")
    parser.add_argument("--reveal", action="store_true",
                        help="show what the agent cannot see (hidden cryptogs, question blocks)")
    parser.add_argument("--top-k", type=int, default=5, help="policy actions shown per step")
    parser.add_argument("--gif", metavar="PATH", help="write an animated GIF, one frame per step")
    parser.add_argument("--mp4", metavar="PATH", help="write an MP4 (needs imageio-ffmpeg)")
    parser.add_argument("--html", metavar="PATH", help="write a self-contained HTML replay")
    parser.add_argument("--record", metavar="PATH",
                        help="write the episodes as (seed, actions) JSON")
    add_overwrite_argument(parser)
    parser.add_argument("--replay", metavar="PATH",
                        help="re-simulate a --record file and verify it (checkpoint optional)")
    parser.add_argument("--evaluation", metavar="JSON",
                        help="watch games of an evaluate.py --json file played with "
                             "--record-actions (any row's): re-simulated on the "
                             "evaluation's own keys and checked against how it says they ended "
                             "(checkpoint optional: its policy is shown beside the moves)")
    parser.add_argument("--row", help="with --evaluation: the row whose games to watch")
    parser.add_argument("--only", choices=tuple(ONLY_OUTCOMES),
                        help="play the --episodes batched first (fast, no frames), then show "
                             "only the first --shown of them that ended so (won: a win)")
    parser.add_argument("--shown", type=int, default=None,
                        help="with --only: how many of the matching episodes to show "
                             "(default 1)")
    parser.add_argument("--compile-cache-dir", default=DEFAULT_COMPILE_CACHE_DIR)
    parser.add_argument("--no-compile-cache", action="store_true")
    return parser


def check_arguments(args) -> None:
    """Cheap checks before anything compiles."""
    if args.checkpoint_flag is not None:
        if args.checkpoint is not None and args.checkpoint != args.checkpoint_flag:
            raise WatchError("a checkpoint given twice (positional and --checkpoint), "
                             "differently", 2)
        args.checkpoint = args.checkpoint_flag
    if args.checkpoint is None and args.replay is None and args.evaluation is None:
        raise WatchError("a checkpoint (file or run directory) is required unless --replay or "
                         "--evaluation", 2)
    if args.replay and args.evaluation:
        raise WatchError("--replay and --evaluation: one source of games at a time", 2)
    if (args.evaluation is None) != (args.row is None):
        raise WatchError("--evaluation JSON and --row ROW go together", 2)
    if (args.replay or args.evaluation) and args.max_episode_steps is not None:
        raise WatchError("--max-episode-steps: a replay re-simulates with its record's env "
                         "options", 2)
    if args.only and args.replay:
        raise WatchError("--only picks episodes to play; a --replay re-simulates its record's", 2)
    if args.shown is not None and not args.only:
        raise WatchError("--shown counts the episodes --only picks: give --only OUTCOME", 2)
    for name in ("episodes", "max_episode_steps", "top_k", "shown"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            raise WatchError(f"{flag} must be >= 1, got {getattr(args, name)}", 2)
    if args.fps <= 0:
        raise WatchError(f"--fps must be > 0, got {args.fps}", 2)
    cache_problem = None if args.no_compile_cache else compile_cache_problem(
        args.compile_cache_dir)
    if cache_problem:
        raise WatchError(f"--compile-cache-dir {args.compile_cache_dir}: {cache_problem}", 2)
    if args.mp4 and importlib.util.find_spec("imageio_ffmpeg") is None:
        raise WatchError("--mp4 needs the Python package imageio-ffmpeg, which is not "
                         "installed (pip install imageio-ffmpeg); --gif and --html work "
                         "without it", 2)
    if args.replay and not os.path.isfile(args.replay):
        raise WatchError(f"record file not found: {args.replay}")
    if args.evaluation and not os.path.isfile(args.evaluation):
        raise WatchError(f"evaluation file not found: {args.evaluation}")
    try:
        check_distinct_files([("--replay", args.replay), ("--evaluation", args.evaluation),
                              *((f"--{flag}", getattr(args, flag))
                                for flag in ("gif", "mp4", "html", "record"))])
        for flag in ("gif", "mp4", "html", "record"):
            if getattr(args, flag):
                check_output_file(getattr(args, flag), f"--{flag}", args.overwrite)
    except OutputPathError as error:
        raise WatchError(str(error), 2) from None


# --------------------------------------------------------------------------- checkpoint

# What only HackMatrix's viewers draw: watching another env's agent with them is refused.
HACKMATRIX_ONLY = ("html", "mp4", "record", "replay", "evaluation", "reveal", "legend", "only")

# How an evaluation says a game ended (``evaluation.END_CAUSES``) -> ``replay.run_episode``'s
# outcome for the same game ("max steps": the evaluation's step cap came first).
EVALUATION_ENDS = {"won": "won", "died": "died", "truncated": "truncated",
                   "invalid": "invalid action", "unfinished": "max steps"}
# --only's choices (the same names) -> the outcome names of replay.run_episode (and
# SCREEN_OUTCOMES): every way a game can end.
ONLY_OUTCOMES = {end: outcome for end, outcome in EVALUATION_ENDS.items() if end != "unfinished"}


def evaluation_games(args) -> dict:
    """The games of --row of the --evaluation file as a record to re-simulate: its env options,
    seed and keys (``{"scheme": "evaluation", "boards": N}``) and, per game, the board, its
    actions, length and outcome as the evaluation says. With --only, the first --shown games
    that ended so; else the first --episodes boards."""
    try:
        row = load_row_games(args.evaluation, args.row, ended=args.only, count=args.shown,
                             first=args.episodes)
    except RecordedGamesError as error:
        raise WatchError(str(error), error.code) from None
    if row["env"] != "hackmatrix":
        raise WatchError(f"row {args.row!r} is of env {row['env']!r}: only HackMatrix games "
                         "are drawn", 2)
    if args.only:
        print(f"{args.only}: board(s) {', '.join(map(str, row['matching']))} of "
              f"{row['boards']}")
    return {"env_options": row["env_options"], "seed": row["seed"],
            "keys": {"scheme": "evaluation", "boards": row["boards"], "loop": row["loop"]},
            "policy": args.row,
            "episodes": [{"episode": game["board"], "actions": game["actions"],
                          "length": game["length"], "outcome": EVALUATION_ENDS[game["end"]]}
                         for game in row["games"]]}


def episode_keys_of(record: dict | None, seed: int, episode: int, steps: int):
    """The keys episode ``episode`` (``steps`` long) was played with: an evaluation's board
    (its keys scheme, and the loop that played it: a record that does not say is a search
    row's), else watch_agent's own (None: ``run_episode``'s default)."""
    keys = (record or {}).get("keys", {})
    if keys.get("scheme") == "evaluation":
        loop = keys.get("loop", BOARDS)
        if loop not in LOOPS:
            raise ReplayError(f"unknown evaluation loop {loop!r} in the record")
        reset_keys, act_keys, env_keys = game_keys(loop, seed, keys["boards"], [episode],
                                                   steps)
        return reset_keys[0], lambda t: (act_keys[0, t], env_keys[0, t])
    if keys.get("scheme", "watch") != "watch":
        raise ReplayError(f"unknown keys scheme {keys['scheme']!r} in the record")
    return None


def check_evaluation_games(record: dict, results: list) -> None:
    """Raise ReplayError where a re-simulated game did not end as, or when, its evaluation
    says it did."""
    for wanted, result in zip(record["episodes"], results):
        got = result["record"]
        if (got["outcome"], len(got["actions"])) != (wanted["outcome"], wanted["length"]):
            raise ReplayError(f"board {wanted['episode']} re-simulated ended {got['outcome']!r} "
                              f"after {len(got['actions'])} steps; the evaluation says "
                              f"{wanted['outcome']!r} after {wanted['length']}")


def load_policy(path: str):
    """The checkpoint's ``purejaxrl.policy.Policy`` (config, params, env, network), or
    WatchError saying why not (the package's checks: readable, a compatible trainer and env
    version, parameters that fit)."""
    try:
        return load(path)
    except PolicyError as error:
        raise WatchError(str(error), error.code) from None


def check_agent_options(checkpoint_config, record_config) -> None:
    """Refuse (exit 2) games played under other agent env options than the checkpoint's
    (``TrainConfig.agent_env_options``: the acquire macro, an action of the network; the
    exit-distance view, an input of it): its network does not fit them, or its macro action
    would mean another plan there."""
    ours, theirs = checkpoint_config.agent_env_options(), record_config.agent_env_options()
    differ = [name for name in ours if ours[name] != theirs.get(name)]
    if differ:
        def said(values):
            return ", ".join(f"{name}={values.get(name)!r}" for name in differ)
        raise WatchError(f"the games were played with {said(theirs)}, the checkpoint's agent "
                         f"with {said(ours)}: its network cannot play them (watch them "
                         "without the checkpoint)", 2)


# --------------------------------------------------------------------------- simulation

def network_decision(env, network):
    """The network's policy over observations, in the form ``replay.Simulator`` runs: greedy
    (argmax over legal actions) or sampled, with the probabilities and value it shows. A
    recurrent network's also takes the core's hidden state (``initial_memory`` at an episode's
    start) and returns the next one as ``"memory"``."""
    def decision(key, obs, greedy, logits, value):
        mask = env.action_mask(obs)
        action = jnp.where(greedy, greedy_masked(logits, mask), sample_masked(key, logits, mask))
        return dict(action=action.astype(jnp.int32), value=value,
                    probs=jnp.exp(masked_log_probs(logits, mask)))

    if is_recurrent(network):
        def decide_with_memory(params, key, obs, greedy, hidden):
            one = jax.tree.map(lambda x: x[None], obs)  # the core steps a batch of envs
            hidden, logits, value = step_recurrent(network, params, hidden[None], one,
                                                   jnp.zeros(1, bool))
            return dict(decision(key, obs, greedy, logits[0], value[0]), memory=hidden[0])
        return decide_with_memory

    def decide(params, key, obs, greedy):
        logits, value = network.apply(params, obs)
        return decision(key, obs, greedy, logits, value)
    return decide


def screen(args, env, env_params, decision, params, memory, seed) -> dict:
    """--only: play --episodes batched; {episode: (outcome, length)} of the first --shown that
    ended as asked (empty, with the reason printed, if none did)."""
    wanted = ONLY_OUTCOMES[args.only]
    started = time.perf_counter()
    found = screen_episodes(env, env_params, decision, params, seed=seed,
                            episodes=args.episodes,
                            max_steps=int(env_params.max_steps_in_episode),
                            greedy=args.greedy, initial_memory=memory)
    names = np.asarray(SCREEN_OUTCOMES)[found["outcome"]]
    counts = ", ".join(f"{name} {int(np.sum(names == name))}" for name in SCREEN_OUTCOMES
                       if np.any(names == name))
    matching = np.flatnonzero(names == wanted)
    print(f"screened {args.episodes} episode(s) of seed {seed} batched "
          f"({time.perf_counter() - started:.1f}s): {counts}; mean stage "
          f"{found['stage'].mean():.2f}")
    if matching.size == 0:
        print(f"no episode of the {args.episodes} ended {wanted!r}: nothing to show "
              "(try more --episodes or another --seed)", file=sys.stderr)
        return {}
    shown = matching[:args.shown or 1]
    print(f"{wanted}: episode(s) {', '.join(str(e) for e in matching)}; showing "
          f"{', '.join(str(e) for e in shown)}")
    return {int(e): (wanted, int(found["length"][e])) for e in shown}


def check_screened(screened: dict, results: list) -> None:
    """Warn where an episode played one at a time did not end as the batched screen said (the
    network's floats on a batch and on one observation may differ in the last bits)."""
    for result in results:
        summary = result["summary"]
        outcome, length = screened[summary["episode"]]
        if (summary["outcome"], summary["length"]) != (outcome, length):
            print(f"warning: episode {summary['episode']} played one at a time ended "
                  f"{summary['outcome']!r} after {summary['length']} steps, where the batched "
                  f"screen ended {outcome!r} after {length} (a near-tie of the network's "
                  "floats went the other way)", file=sys.stderr)


def initial_memory(network):
    """What ``network_decision``'s policy remembers at an episode's start: a recurrent core's
    zero hidden state, or None (no memory)."""
    return network.initial_hidden(1)[0] if is_recurrent(network) else None


# --------------------------------------------------------------------------- output

class LiveView:
    """Prints frames as they come: at --fps in a terminal (redrawn in place), every frame in
    sequence when piped, or one per Enter with --step."""

    def __init__(self, args):
        self.quiet, self.step, self.legend = args.quiet, args.step, args.legend
        self.interactive = sys.stdout.isatty()
        self.color = args.color == "always" or (args.color == "auto" and self.interactive
                                                 and not os.environ.get("NO_COLOR"))
        self.delay = 1.0 / args.fps
        self.first = True

    def __call__(self, frame: dict) -> None:
        if self.quiet:
            return
        text = format_frame(frame, color=self.color, legend=self.legend and self.first)
        if self.interactive and not self.step:
            sys.stdout.write("\x1b[H\x1b[2J")
        sys.stdout.write(f"--- episode {frame['episode']} step {frame['step']} ---\n{text}\n")
        sys.stdout.flush()
        self.first = False
        if self.step and frame.get("outcome") is None:
            sys.stdout.write("[Enter: next step, q + Enter: run to the end] ")
            sys.stdout.flush()
            line = sys.stdin.readline()
            if not line or line.strip().lower() == "q":
                self.step = False
        elif self.interactive:
            time.sleep(self.delay)


SUMMARY_COLUMNS = ("episode", "return", "length", "stage", "outcome", "siphons", "programs")


def format_summary(rows: list) -> str:
    table = [list(SUMMARY_COLUMNS)] + [[str(row[c]) for c in SUMMARY_COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(SUMMARY_COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
    if rows:
        mean = sum(row["return"] for row in rows) / len(rows)
        won = sum(row["outcome"] == "won" for row in rows)
        lines.append(f"{len(rows)} episodes: mean return {mean:.4f}, won {won}, mean length "
                     f"{sum(row['length'] for row in rows) / len(rows):.1f}")
    return "\n".join(lines)


def write_video(path: str, frames: list, fps: float, kind: str) -> None:
    # Image output only: imageio (with imageio-ffmpeg for MP4) and PIL load when asked for.
    import imageio.v2 as imageio
    import imageio.v3 as iio
    from envs.hackmatrix.viz.render_image import render_array

    images = [render_array(frame) for frame in frames]
    if kind == "gif":
        iio.imwrite(path, images, extension=".gif", duration=int(round(1000 / fps)), loop=0)
    else:
        with imageio.get_writer(path, format="FFMPEG", mode="I", fps=fps,
                                macro_block_size=16) as writer:
            for image in images:
                writer.append_data(image)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_arguments(args)
        return run(args)
    except WatchError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.code
    except ReplayError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except CompileCacheError as error:  # checked above; changed since
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def run(args) -> int:
    started = time.perf_counter()
    print(describe_backend(), file=sys.stderr)
    enable_compile_cache(None if args.no_compile_cache else args.compile_cache_dir,
                         INTERACTIVE_MIN_COMPILE_SECS)
    record_in = (load_record(args.replay) if args.replay
                 else evaluation_games(args) if args.evaluation else None)
    policy = network = params = None
    if args.checkpoint:
        policy = load_policy(args.checkpoint)
        config, params, checkpoint = policy.config, policy.params, policy.checkpoint
        print(f"checkpoint {checkpoint['path']} (update {checkpoint['update']}, "
              f"{checkpoint['env_steps']:,} env steps)")
        if config.env != "hackmatrix":
            return run_other_env(args, policy, started)
    if record_in is not None:
        options, seed = record_in["env_options"], record_in["seed"]
        config = config_for_options(options)
        if policy is not None:
            check_agent_options(policy.config, config)
        episodes = [(entry["episode"], entry["actions"]) for entry in record_in["episodes"]]
    else:
        if args.max_episode_steps is not None:
            config = config.replace(max_episode_steps=args.max_episode_steps)
        options, seed = env_options_of(config), args.seed
        episodes = [(episode, None) for episode in range(args.episodes)]
    env, env_params = ppo.make_env(config)
    if policy is not None:
        # The checkpoint's own architecture: a record's config holds only env options.
        network = make_network(policy.config, env)
    decision = None if network is None else network_decision(env, network)
    screened = None
    if args.only and not args.evaluation:  # an evaluation's games are picked by its ends
        screened = screen(args, env.env, env_params, decision, params, initial_memory(network),
                          seed)
        if not screened:
            return 1
        episodes = [(episode, None) for episode in screened]
    simulator = Simulator(env.env, env_params, decision, params, greedy=args.greedy,
                          initial_memory=None if network is None else initial_memory(network))
    live = LiveView(args)
    mode = ("replay of " + (args.replay or f"{args.evaluation}, row {args.row}") if record_in
            else ("greedy" if args.greedy else "sampled"))
    print(f"{len(episodes)} episode(s), seed {seed}, {mode}; env options {options}")

    results = []
    for episode, forced in episodes:
        result = run_episode(simulator, seed=seed, episode=episode,
                             max_steps=int(env_params.max_steps_in_episode),
                             forced_actions=forced, reveal=args.reveal, top_k=args.top_k,
                             on_frame=live,
                             keys=episode_keys_of(record_in, seed, episode, len(forced or ())))
        results.append(result)
    if screened:
        check_screened(screened, results)
    if args.evaluation:
        check_evaluation_games(record_in, results)
        print(f"the evaluation's games re-simulated as it says they ended: {len(results)} "
              "game(s)")
    elif record_in is not None:
        for recorded, replayed in zip(record_in["episodes"], results):
            verify_replay(recorded, replayed)
        steps = sum(len(r["record"]["actions"]) for r in results)
        print(f"replay reproduced the record exactly: {len(results)} episode(s), {steps} steps, "
              "every state and reward")

    frames = [frame for result in results for frame in result["frames"]]
    summary = [result["summary"] for result in results]
    if args.record:
        write_text(args.record, record_text(
            env_options=options, seed=seed, keys=record_in and record_in["keys"],
            policy=record_in.get("policy") if record_in else (
                "greedy" if args.greedy else "sampled"),
            episodes=[r["record"] for r in results]))
        print(f"wrote record {args.record}")
    if args.gif:
        write_video(args.gif, frames, args.fps, "gif")
        print(f"wrote GIF {args.gif} ({len(frames)} frames)")
    if args.mp4:
        write_video(args.mp4, frames, args.fps, "mp4")
        print(f"wrote MP4 {args.mp4} ({len(frames)} frames)")
    if args.html:
        title = f"HackMatrix replay: {args.checkpoint or args.replay} (seed {seed})"
        write_text(args.html, replay_html(frames, title=title, summary=summary, fps=args.fps))
        print(f"wrote HTML {args.html} ({len(frames)} frames)")
    print(f"summary ({time.perf_counter() - started:.1f}s)")
    print(format_summary(summary))
    return 0


def run_other_env(args, policy, started: float) -> int:
    """Watch an agent of an env without HackMatrix's viewers: each step the observation as
    text, the action with its probability, the value and the reward; a GIF of image
    observations; the summary of return, length and how each episode ended. Episode e of
    --seed s resets from fold_in(PRNGKey(s), e), as HackMatrix's episodes do."""
    asked = [f"--{name}" for name in HACKMATRIX_ONLY if getattr(args, name)]
    if asked:
        raise WatchError(f"{', '.join(asked)}: HackMatrix only; {policy.config.env} agents "
                         "show as text (and --gif for image observations)", 2)
    env, env_params = policy.built[:2]
    if args.max_episode_steps is not None:
        env_params = env_params.replace(max_steps_in_episode=args.max_episode_steps)
    if args.gif and not env.image_observation:
        raise WatchError(f"--gif needs image observations; {policy.config.env}'s are not "
                         "(its agents show as text)", 2)
    decide = jax.jit(network_decision(env, policy.network))
    reset = jax.jit(env.reset)
    step = jax.jit(env.step)
    rows, frames = [], []
    print(f"{args.episodes} episode(s) of {policy.config.env}, seed {args.seed}, "
          f"{'greedy' if args.greedy else 'sampled'}")
    for episode in range(args.episodes):
        key = jax.random.fold_in(jax.random.PRNGKey(args.seed), episode)
        reset_key, key = jax.random.split(key)
        obs, state = reset(reset_key, env_params)
        total, outcome = 0.0, "unfinished"
        memory = initial_memory(policy.network)
        for t in range(int(env_params.max_steps_in_episode)):
            act_key, step_key = jax.random.split(jax.random.fold_in(key, t))
            decision = jax.device_get(decide(policy.params, act_key, obs, args.greedy,
                                             *(() if memory is None else (memory,))))
            memory = decision.pop("memory", None)
            action = int(decision["action"])
            obs_host = np.asarray(jax.device_get(obs))
            if args.gif:
                frames.append(observation_image(obs_host))
            obs, state, reward, terminated, truncated, _ = step(step_key, state, action,
                                                                env_params)
            total += float(reward)
            if not args.quiet:
                print(f"--- episode {episode} step {t} ---\n{observation_text(obs_host)}\n"
                      f"action {action} (p={float(decision['probs'][action]):.2f}), value "
                      f"{float(decision['value']):.3f}, reward {float(reward):.3f}")
            if bool(terminated) or bool(truncated):
                outcome = "terminated" if bool(terminated) else "truncated"
                break
        rows.append({"episode": episode, "return": round(total, 4), "length": t + 1,
                     "outcome": outcome})
    if args.gif:
        import imageio.v3 as iio
        iio.imwrite(args.gif, frames, extension=".gif", duration=int(round(1000 / args.fps)),
                    loop=0)
        print(f"wrote GIF {args.gif} ({len(frames)} frames)")
    print(f"summary ({time.perf_counter() - started:.1f}s)")
    columns = ("episode", "return", "length", "outcome")
    print("  ".join(columns))
    for row in rows:
        print("  ".join(str(row[c]) for c in columns))
    print(f"{len(rows)} episodes: mean return {sum(r['return'] for r in rows) / len(rows):.4f}, "
          f"mean length {sum(r['length'] for r in rows) / len(rows):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
