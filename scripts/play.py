#!/usr/bin/env python
"""Play HackMatrix yourself in the terminal, against the same jitted step the agents use.

    python scripts/play.py --seed 3
    python scripts/play.py --scenario position.json       # a setState JSON (§10.5) start
    printf 'd\\nw\\n' | python scripts/play.py --scenario position.json   # scripted

Keys: arrows or w a s d move / shoot (up is row + 1), x siphon, 1-9 and 0 then the letters
listed on screen run your owned programs (each shown with its credit/energy cost and whether it
is valid now), z takes back your last action (host-side, not a game move; the UNDO program is a
game move like any other), v toggles revealing what the agent cannot see, h help, q quit.
Actions the game would refuse (the action mask) are not played. After every action the board,
the action's name and the reward with its non-zero components are shown.

When stdin is not a terminal, commands are read as whitespace-separated words, so tests and
scripts can drive it: the keys above, or up/down/left/right, siphon, a program name (push,
d_bom, ...), back, reveal, quit. The XLA compilation is cached on disk (--compile-cache-dir,
default ~/.cache/hackmatrix-jax), so the second start is fast; the time to the first frame is
printed on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

_STARTED = time.perf_counter()

from purejaxrl.backend import choose_platforms, describe_backend
from purejaxrl.cli.parsing import ArgumentParser

choose_platforms()  # before anything imports JAX

import jax
import jax.numpy as jnp

from envs.compile_cache import (INTERACTIVE_MIN_COMPILE_SECS, CompileCacheError,
                                compile_cache_problem, enable_compile_cache)
from envs.hackmatrix import SHAPING_MODES
from envs.hackmatrix.core.constants import ACTION_SIPHON, PROGRAM_ACTION_OFFSET, PROGRAM_NAMES
from envs.hackmatrix.core.mask import action_mask
from envs.hackmatrix.swift_io.scenario import ScenarioError, set_state
from envs.hackmatrix.viz.render_text import LEGEND, action_name, format_frame, frame_view
from envs.hackmatrix.viz.replay import jitted_env_step, jitted_reset
from purejaxrl import ppo
from purejaxrl.config import DEFAULT_COMPILE_CACHE_DIR, TrainConfig

DIRECTION_WORDS = {"w": 0, "up": 0, "s": 1, "down": 1, "a": 2, "left": 2, "d": 3, "right": 3}
ARROW_KEYS = {"\x1b[A": 0, "\x1b[B": 1, "\x1b[D": 2, "\x1b[C": 3}
# Keys of owned programs, in acquisition order (letters that no other command uses).
PROGRAM_KEYS = "1234567890bcefgijklmnoprtuy"
COMMAND_WORDS = {"x": "siphon", "siphon": "siphon", "z": "back", "back": "back",
                 "v": "reveal", "reveal": "reveal", "h": "help", "?": "help", "help": "help",
                 "q": "quit", "quit": "quit"}


class PlayError(Exception):
    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0,
                        help="new game from this seed (with --scenario: the seed of the step keys)")
    parser.add_argument("--scenario", metavar="JSON", help="start from a setState scenario file")
    parser.add_argument("--reward-shaping", choices=SHAPING_MODES, default="swift")
    parser.add_argument("--close-undo-exploit", action="store_true")
    parser.add_argument("--undo-pays-once", action="store_true",
                        help="a reward that UNDO took back is not paid again (a training option)")
    parser.add_argument("--max-episode-steps", type=int, default=None)
    parser.add_argument("--reveal", action="store_true", help="start with hidden things shown")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    parser.add_argument("--compile-cache-dir", default=DEFAULT_COMPILE_CACHE_DIR)
    parser.add_argument("--no-compile-cache", action="store_true")
    return parser


def load_scenario(path: str):
    try:
        with open(path, encoding="utf-8") as handle:
            scenario = json.load(handle)
    except (OSError, ValueError) as error:  # ValueError: not JSON, or not UTF-8 text
        raise PlayError(f"cannot read scenario {path}: {error}") from None
    try:
        return set_state(scenario)
    except ScenarioError as error:
        raise PlayError(f"bad scenario {path}: {error}") from None


class Game:
    """The game in progress: the current state, the states before each action (for take
    back), and the jitted step (``env.step_env``: no auto-reset, so a finished game stays on
    its last position)."""

    def __init__(self, args):
        config = TrainConfig(env="hackmatrix", max_episode_steps=args.max_episode_steps,
                             env_options=dict(reward_shaping=args.reward_shaping,
                                              close_undo_exploit=args.close_undo_exploit,
                                              undo_pays_once=args.undo_pays_once))
        trainer_env, self.env_params = ppo.make_env(config)
        env = trainer_env.env  # the game itself: play steps it without auto-reset
        self._step = jitted_env_step(env)  # the program watch_agent steps with
        self._mask = jax.jit(action_mask)
        reset_key, self.key = jax.random.split(jax.random.PRNGKey(args.seed))
        if args.scenario:
            self.state = load_scenario(args.scenario)
        else:
            self.state = jitted_reset(env)(reset_key, self.env_params)
        self.mask = jax.device_get(self._mask(self.state))
        self.history = []  # (state, mask, over) before each action
        self.over = None  # "won" / "died" / "truncated" once the game has ended

    def play(self, action: int) -> dict:
        out = jax.device_get(self._step(jax.random.fold_in(self.key, len(self.history)),
                                        self.state, jnp.int32(action), self.env_params))
        self.history.append((self.state, self.mask, self.over))
        self.state, self.mask = out["state"], out["next_mask"]
        if bool(out["terminated"]) or bool(out["truncated"]):
            self.over = ("won" if bool(out["won"]) else "died" if bool(out["died"])
                         else "truncated")
        return out

    def take_back(self) -> bool:
        if not self.history:
            return False
        self.state, self.mask, self.over = self.history.pop()
        return True


def program_keys(frame: dict) -> dict:
    """Key -> program action for the owned programs, in acquisition order."""
    return {PROGRAM_KEYS[i]: program["action"]
            for i, program in enumerate(frame["programs"][:len(PROGRAM_KEYS)])}


def program_line(frame: dict) -> str:
    keys = {action: key for key, action in program_keys(frame).items()}
    entries = [f"[{keys.get(p['action'], '-')}] {p['name']} {p['credits']}c/{p['energy']}e "
               f"{'ok' if p['valid'] else 'not now'}" for p in frame["programs"]]
    return "programs: " + ("  ".join(entries) if entries else "none owned")


def parse_command(word: str, frame: dict):
    """('action', index) / ('back'|'reveal'|'help'|'quit', None) / ('unknown', word)."""
    if word in ARROW_KEYS:
        return "action", ARROW_KEYS[word]
    lowered = word.lower()
    if lowered in DIRECTION_WORDS:
        return "action", DIRECTION_WORDS[lowered]
    command = COMMAND_WORDS.get(lowered)
    if command == "siphon":
        return "action", ACTION_SIPHON
    if command is not None:
        return command, None
    keys = program_keys(frame)
    if lowered in keys:
        return "action", keys[lowered]
    if lowered in PROGRAM_NAMES:
        return "action", PROGRAM_ACTION_OFFSET + PROGRAM_NAMES.index(lowered)
    return "unknown", word


def read_terminal_keys():
    """Single key presses (arrows as one escape sequence) from a terminal in cbreak mode."""
    # POSIX-only modules, needed only at a terminal: piped input plays without them.
    import termios
    import tty
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        while True:
            key = os.read(fd, 1).decode(errors="ignore")
            if key == "\x1b":
                key += os.read(fd, 2).decode(errors="ignore")
            if key in ("", "\x04"):
                return
            if key.strip() or key in ARROW_KEYS:
                yield key
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def read_script_words():
    for line in sys.stdin:
        yield from line.split()


HELP = ("keys: arrows/wasd move or shoot, x siphon, program keys as listed, z take back, "
        "v reveal, h help, q quit")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.max_episode_steps is not None and args.max_episode_steps < 1:
        print(f"error: --max-episode-steps must be >= 1, got {args.max_episode_steps}",
              file=sys.stderr)
        return 2
    cache_problem = None if args.no_compile_cache else compile_cache_problem(
        args.compile_cache_dir)
    if cache_problem:
        print(f"error: --compile-cache-dir {args.compile_cache_dir}: {cache_problem}",
              file=sys.stderr)
        return 2
    try:
        return play(args)
    except PlayError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.code
    except CompileCacheError as error:  # checked above; changed since
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def play(args) -> int:
    cache = None if args.no_compile_cache else args.compile_cache_dir
    enable_compile_cache(cache, INTERACTIVE_MIN_COMPILE_SECS)
    game = Game(args)
    # Compile the step now (on a throwaway copy) so the first key press answers at once.
    jax.block_until_ready(game._step(game.key, game.state, jax.numpy.int32(0), game.env_params))
    interactive = sys.stdin.isatty()
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty()
                                       and not os.environ.get("NO_COLOR"))
    reveal = args.reveal

    def show(out=None, action=None, note=None):
        frame = frame_view(game.state, reveal=reveal, step=len(game.history),
                           action_mask=game.mask, outcome=game.over,
                           **({} if out is None else dict(action=action, shot=bool(out["shot"]),
                                                          reward=out["reward"],
                                                          breakdown=out["breakdown"])))
        text = format_frame(frame, color=color)
        sys.stdout.write(("\x1b[H\x1b[2J" if interactive else "") + text + "\n"
                         + program_line(frame) + "\n" + (note + "\n" if note else ""))
        if game.over:
            sys.stdout.write(f"game over ({game.over}): z takes back, q quits\n")
        sys.stdout.flush()
        return frame

    frame = show(note=HELP)
    print(describe_backend(), file=sys.stderr)
    print(f"first frame after {time.perf_counter() - _STARTED:.2f}s "
          f"(compile cache: {cache or 'off'})", file=sys.stderr)
    words = read_terminal_keys() if interactive else read_script_words()
    for word in words:
        if not interactive:
            print(f"> {word}")
        command, value = parse_command(word, frame)
        if command == "quit":
            break
        if command == "help":
            frame = show(note=HELP + "\n" + LEGEND)
        elif command == "reveal":
            reveal = not reveal
            frame = show(note=f"reveal {'on' if reveal else 'off'}")
        elif command == "back":
            frame = show(note="took back the last action" if game.take_back()
                         else "nothing to take back")
        elif command == "unknown":
            frame = show(note=f"unknown key {value!r}; {HELP}")
        elif game.over:
            frame = show(note="the game is over")
        elif not bool(game.mask[value]):
            frame = show(note=f"{action_name(value)} is not valid now")
        else:
            out = game.play(value)
            frame = show(out, value)
    print(f"stage {frame['header']['stage']}, score {frame['header']['score']}, "
          f"{len(game.history)} actions" + (f", {game.over}" if game.over else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
