#!/usr/bin/env python
"""Watch a trained agent play HackMatrix: live terminal replay, GIF / MP4 / HTML replays, and
exactly replayable episode records.

    python scripts/watch_agent.py checkpoints/<run-name> --episodes 3 --fps 4
    python scripts/watch_agent.py ckpt.pkl --step                 # Enter advances one step
    python scripts/watch_agent.py ckpt.pkl --gif run.gif --html run.html --record run.json
    python scripts/watch_agent.py --replay run.json [ckpt.pkl]    # re-simulate and verify

The network is rebuilt from the checkpoint's saved config (no shape guessing) and plays in the
JAX environment with the saved environment options (reward shaping, UNDO-exploit fix, episode
step limit, gamma). Each step shows the board, the named action, the policy's top actions and
value, the reward with its non-zero components, and the player's numbers; the run ends with a
summary table per episode.

Episode e of a run with --seed s resets from fold_in(PRNGKey(s), e) and steps with per-step
keys derived from it, so (seed, episode, actions) determine an episode: --record writes them
(with each step's reward and a digest of each state) and --replay re-simulates the actions and
fails unless every state and reward is reproduced. No display is needed (works over SSH).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from purejaxrl.backend import choose_platforms, describe_backend  # noqa: E402

choose_platforms()  # before anything imports JAX

from purejaxrl.config import DEFAULT_COMPILE_CACHE_DIR  # noqa: E402

RECORD_FORMAT = "hackmatrix-episode-record"
RECORD_VERSION = 1
# Rewards of a replay are recomputed by a differently compiled program (no policy network in
# it), whose float fusion may differ in the last bits; states are compared exactly.
REWARD_TOLERANCE = 1e-5


class WatchError(Exception):
    """A user-facing failure: printed as ``error: <message>``, exit with ``code``."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", nargs="?",
                        help="checkpoint file, or run directory (its latest checkpoint)")
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--greedy", dest="greedy", action="store_true", default=True,
                      help="argmax over the legal actions (default)")
    mode.add_argument("--sample", dest="greedy", action="store_false",
                      help="sample from the policy")
    parser.add_argument("--max-steps", type=int, default=500,
                        help="stop an episode after this many steps (default 500)")
    parser.add_argument("--fps", type=float, default=4.0,
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
    parser.add_argument("--replay", metavar="PATH",
                        help="re-simulate a --record file and verify it (checkpoint optional)")
    parser.add_argument("--compile-cache-dir", default=DEFAULT_COMPILE_CACHE_DIR)
    parser.add_argument("--no-compile-cache", action="store_true")
    return parser


def check_arguments(args) -> None:
    """Cheap checks before any JAX import or compile."""
    if args.checkpoint is None and args.replay is None:
        raise WatchError("a checkpoint (file or run directory) is required unless --replay", 2)
    for name in ("episodes", "max_steps", "top_k"):
        if getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            raise WatchError(f"{flag} must be >= 1, got {getattr(args, name)}", 2)
    if args.fps <= 0:
        raise WatchError(f"--fps must be > 0, got {args.fps}", 2)
    if args.mp4 and importlib.util.find_spec("imageio_ffmpeg") is None:
        raise WatchError("--mp4 needs the Python package imageio-ffmpeg, which is not "
                         "installed (pip install imageio-ffmpeg); --gif and --html work "
                         "without it", 2)
    if args.replay and not os.path.isfile(args.replay):
        raise WatchError(f"record file not found: {args.replay}")


def current_env_version():
    import envs.hackmatrix as package
    return getattr(package, "ENV_VERSION", None)


def enable_compile_cache(cache_dir) -> None:
    import jax
    if cache_dir:
        os.makedirs(cache_dir, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


# --------------------------------------------------------------------------- checkpoint

def env_options_of(config) -> dict:
    return {"reward_shaping": config.reward_shaping,
            "close_undo_exploit": config.close_undo_exploit,
            "max_episode_steps": config.max_episode_steps, "gamma": config.gamma}


def config_for_options(options: dict):
    from purejaxrl.config import TrainConfig
    return TrainConfig(env="hackmatrix", **options)


def load_policy(path: str):
    """(config, params, checkpoint) of a HackMatrix checkpoint, or WatchError saying why not."""
    import jax
    from purejaxrl import ppo
    from purejaxrl.checkpoint import CheckpointError, load_checkpoint
    from purejaxrl.config import ConfigError, TrainConfig

    try:
        checkpoint = load_checkpoint(path)
    except CheckpointError as error:
        raise WatchError(str(error)) from None
    where = checkpoint["path"]
    try:
        config = TrainConfig.from_dict(checkpoint["config"])
    except (ConfigError, TypeError, ValueError) as error:
        raise WatchError(f"{where} was written by an incompatible trainer version: "
                         f"{error}") from None
    if config.env != "hackmatrix":
        raise WatchError(f"{where} was trained on the {config.env!r} environment; watch_agent "
                         "shows HackMatrix agents only", 2)
    saved_version, current_version = checkpoint.get("env_version"), current_env_version()
    if None not in (saved_version, current_version) and saved_version != current_version:
        raise WatchError(f"{where} was trained on environment version {saved_version!r}, this "
                         f"code is version {current_version!r}: incompatible environment")
    params = getattr(checkpoint["runner_state"], "params", None)
    if params is None:
        raise WatchError(f"{where} holds no network parameters")
    env, env_params, network, _, _ = ppo.build(config)
    obs, _ = jax.eval_shape(env.reset, jax.random.PRNGKey(0), env_params)
    expected = jax.eval_shape(network.init, jax.random.PRNGKey(0), obs)
    shapes = lambda tree: (jax.tree.structure(tree),  # noqa: E731
                           [tuple(x.shape) for x in jax.tree.leaves(tree)])
    if shapes(expected) != shapes(params):
        raise WatchError(f"{where}: the saved network does not fit this environment's "
                         "observation/action sizes (checkpoint from an incompatible "
                         "environment version)")
    return config, params, checkpoint


# --------------------------------------------------------------------------- simulation

def state_digest(state) -> str:
    """A short hash of every array of a (host) state: equal digests = equal states."""
    import jax
    import numpy as np
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(jax.device_get(state)):
        array = np.ascontiguousarray(leaf)
        digest.update(str((array.dtype, array.shape)).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def jitted_env_step(env):
    """``step(key, state, action, env_params)`` of ``env`` without auto-reset, jitted; also
    reports truncation and the action masks before and after. ``env_params`` is an argument
    (not baked in), so this program is the same for watch_agent, its replays and play.py
    whatever their episode limits, and the persistent compile cache serves all of them."""
    import jax
    from envs.hackmatrix.mask import action_mask

    def env_step(key, state, action, env_params):
        _, next_state, reward, terminated, info = env.step_env(key, state, action, env_params)
        truncated = ~terminated & env.is_truncated(next_state, env_params)
        return dict(action=action, state=next_state, reward=reward, terminated=terminated,
                    truncated=truncated, breakdown=info["reward_breakdown"], shot=info["shot"],
                    won=info["won"], died=info["died"], invalid=info["invalid_action"],
                    stage=info["stage"], stage_complete=info["stage_complete"],
                    mask=action_mask(state), next_mask=action_mask(next_state))
    return jax.jit(env_step)


@functools.lru_cache(maxsize=None)
def jitted_reset(env):
    """``reset(key, env_params) -> state`` of ``env``, jitted; shared like ``jitted_env_step``."""
    import jax
    return jax.jit(lambda key, env_params: env.reset(key, env_params)[1])


class Simulator:
    """Reset, and one step: (with a network) the policy's probabilities, value and action, or a
    forced action, then the environment step without auto-reset. The policy and the env step
    are separate jitted programs, so replays and play.py reuse the env step's compilation."""

    def __init__(self, config, network=None, params=None, greedy=True):
        import jax
        import jax.numpy as jnp
        from envs.hackmatrix.observation import build_observation
        from purejaxrl import ppo
        from purejaxrl.networks import greedy_masked, masked_log_probs, sample_masked

        self.env, self.env_params = ppo.make_env(config)
        self.params, self.greedy = params, greedy
        env = self.env

        def policy(params, key, state, greedy):
            obs = build_observation(state)
            logits, value = network.apply(params, obs)
            action = jnp.where(greedy, greedy_masked(logits, obs.action_mask),
                               sample_masked(key, logits, obs.action_mask))
            return dict(action=action.astype(jnp.int32), value=value,
                        probs=jnp.exp(masked_log_probs(logits, obs.action_mask)))

        self._reset = jitted_reset(env)
        self._policy = jax.jit(policy) if network is not None else None
        self._env_step = jitted_env_step(env)

    def reset(self, key):
        return self._reset(key, self.env_params)

    def step(self, key, state, forced_action=None):
        import jax
        import jax.numpy as jnp
        act_key, env_key = jax.random.split(key)
        decision = {}
        if self._policy is not None:
            decision = jax.device_get(self._policy(self.params, act_key, state,
                                                   jnp.bool_(self.greedy)))
        action = forced_action if forced_action is not None else decision["action"]
        out = self._env_step(env_key, state, jnp.int32(action), self.env_params)
        return {**jax.device_get(out), "probs": decision.get("probs"),
                "value": decision.get("value")}


def episode_keys(seed: int, episode: int):
    import jax
    return jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), episode))


def outcome_of(out) -> str:
    if bool(out["invalid"]):
        return "invalid action"
    if bool(out["won"]):
        return "won"
    if bool(out["died"]):
        return "died"
    return "truncated"


def run_episode(simulator: Simulator, *, seed: int, episode: int, max_steps: int,
                forced_actions=None, reveal=False, top_k=5, on_frame=None) -> dict:
    """Play (or, with ``forced_actions``, re-simulate) one episode. Returns its record (actions,
    rewards, state digests), its frames (one per step plus the final position) and summary."""
    import jax
    from envs.hackmatrix.constants import ACTION_SIPHON, PROGRAM_ACTION_OFFSET
    from envs.hackmatrix.render import action_name, frame_view

    reset_key, run_key = episode_keys(seed, episode)
    state = simulator.reset(reset_key)
    record = {"episode": episode, "actions": [], "rewards": [], "state_digests": []}
    frames, total, outcome, stage = [], 0.0, None, 1
    siphons, programs = 0, {}
    limit = len(forced_actions) if forced_actions is not None else max_steps
    for t in range(limit):
        forced = None if forced_actions is None else forced_actions[t]
        out = simulator.step(jax.random.fold_in(run_key, t), state, forced)
        action = int(out["action"])
        frame = frame_view(state, reveal=reveal, step=t, action=action, shot=bool(out["shot"]),
                           probs=out.get("probs"), value=out.get("value"),
                           reward=out["reward"], breakdown=out["breakdown"],
                           action_mask=out["mask"], top_k=top_k)
        frame["episode"] = episode
        frames.append(frame)
        if on_frame is not None:
            on_frame(frame)
        state = out["state"]
        record["actions"].append(action)
        record["rewards"].append(float(out["reward"]))
        record["state_digests"].append(state_digest(state))
        total += float(out["reward"])
        stage = int(out["stage"])
        siphons += action == ACTION_SIPHON
        if action >= PROGRAM_ACTION_OFFSET:
            name = action_name(action)
            programs[name] = programs.get(name, 0) + 1
        if bool(out["terminated"]) or bool(out["truncated"]):
            outcome = outcome_of(out)
            break
    else:
        outcome = "max steps"  # a replay runs out of actions where the recording hit the cap
    final = frame_view(state, reveal=reveal, step=len(record["actions"]), outcome=outcome)
    final["episode"] = episode
    frames.append(final)
    if on_frame is not None:
        on_frame(final)
    record["outcome"] = outcome
    summary = {"episode": episode, "return": round(total, 4), "length": len(record["actions"]),
               "stage": stage, "outcome": outcome, "siphons": siphons,
               "programs": ", ".join(f"{name} x{count}" for name, count in programs.items()) or "-"}
    return {"record": record, "frames": frames, "summary": summary}


def verify_replay(recorded: dict, replayed: dict) -> None:
    """Raise WatchError at the first step whose state or reward differs from the record."""
    episode = recorded["episode"]
    got = replayed["record"]
    if len(got["actions"]) != len(recorded["actions"]):
        raise WatchError(f"replay of episode {episode} ended after {len(got['actions'])} steps, "
                         f"the record has {len(recorded['actions'])}")
    for t, (want_digest, got_digest) in enumerate(zip(recorded["state_digests"],
                                                      got["state_digests"])):
        if want_digest != got_digest:
            raise WatchError(f"replay of episode {episode} diverged at step {t}: the state after "
                             f"action {recorded['actions'][t]} differs from the record")
        want_reward, got_reward = recorded["rewards"][t], got["rewards"][t]
        if abs(want_reward - got_reward) > REWARD_TOLERANCE * max(1.0, abs(want_reward)):
            raise WatchError(f"replay of episode {episode} diverged at step {t}: reward "
                             f"{got_reward!r} != recorded {want_reward!r}")
    if got["outcome"] != recorded.get("outcome", got["outcome"]):
        raise WatchError(f"replay of episode {episode} ended as {got['outcome']!r}, the record "
                         f"says {recorded['outcome']!r}")


def load_record(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        raise WatchError(f"cannot read record {path}: {error}") from None
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
        raise WatchError(f"{path} is not a watch_agent episode record")
    if record.get("format_version") != RECORD_VERSION:
        raise WatchError(f"{path} has record version {record.get('format_version')}, "
                         f"expected {RECORD_VERSION}")
    saved, current = record.get("env_version"), current_env_version()
    if saved is not None and current is not None and saved != current:
        raise WatchError(f"{path} was recorded on environment version {saved!r}, this code is "
                         f"version {current!r}: it cannot be replayed exactly")
    return record


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
        from envs.hackmatrix.render import format_frame
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
    import imageio.v2 as imageio
    import imageio.v3 as iio
    from envs.hackmatrix.render_image import render_array

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
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def run(args) -> int:
    started = time.perf_counter()
    print(describe_backend(), file=sys.stderr)
    enable_compile_cache(None if args.no_compile_cache else args.compile_cache_dir)
    record_in = load_record(args.replay) if args.replay else None
    network = params = None
    if args.checkpoint:
        config, params, checkpoint = load_policy(args.checkpoint)
        from purejaxrl.networks import make_network
        from envs.hackmatrix.constants import N_ACTIONS
        network = make_network(config, N_ACTIONS)
        print(f"checkpoint {checkpoint['path']} (update {checkpoint['update']}, "
              f"{checkpoint['env_steps']:,} env steps)")
    if record_in is not None:
        options, seed = record_in["env_options"], record_in["seed"]
        config = config_for_options(options)
        episodes = [(entry["episode"], entry["actions"]) for entry in record_in["episodes"]]
    else:
        options, seed = env_options_of(config), args.seed
        episodes = [(episode, None) for episode in range(args.episodes)]
    simulator = Simulator(config, network, params, greedy=args.greedy)
    live = LiveView(args)
    mode = "replay of " + args.replay if record_in else ("greedy" if args.greedy else "sampled")
    print(f"{len(episodes)} episode(s), seed {seed}, {mode}; env options {options}")

    results = []
    for episode, forced in episodes:
        result = run_episode(simulator, seed=seed, episode=episode, max_steps=args.max_steps,
                             forced_actions=forced, reveal=args.reveal, top_k=args.top_k,
                             on_frame=live)
        results.append(result)
    if record_in is not None:
        for recorded, replayed in zip(record_in["episodes"], results):
            verify_replay(recorded, replayed)
        steps = sum(len(r["record"]["actions"]) for r in results)
        print(f"replay reproduced the record exactly: {len(results)} episode(s), {steps} steps, "
              "every state and reward")

    frames = [frame for result in results for frame in result["frames"]]
    summary = [result["summary"] for result in results]
    if args.record:
        with open(args.record, "w", encoding="utf-8") as handle:
            json.dump({"format": RECORD_FORMAT, "format_version": RECORD_VERSION,
                       "env_version": current_env_version(), "env_options": options,
                       "seed": seed, "policy": None if args.replay else
                       ("greedy" if args.greedy else "sampled"),
                       "episodes": [r["record"] for r in results]}, handle, indent=1)
        print(f"wrote record {args.record}")
    if args.gif:
        write_video(args.gif, frames, args.fps, "gif")
        print(f"wrote GIF {args.gif} ({len(frames)} frames)")
    if args.mp4:
        write_video(args.mp4, frames, args.fps, "mp4")
        print(f"wrote MP4 {args.mp4} ({len(frames)} frames)")
    if args.html:
        from envs.hackmatrix.render_html import replay_html
        title = f"HackMatrix replay: {args.checkpoint or args.replay} (seed {seed})"
        with open(args.html, "w", encoding="utf-8") as handle:
            handle.write(replay_html(frames, title=title, summary=summary, fps=args.fps))
        print(f"wrote HTML {args.html} ({len(frames)} frames)")
    print(f"summary ({time.perf_counter() - started:.1f}s)")
    print(format_summary(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
