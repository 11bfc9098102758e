#!/usr/bin/env python
"""Why a trained HackMatrix agent does not acquire a program (SPEC §4.4): three measurements of
one checkpoint, greedy play on the same boards.

1. critic: at every state of greedy play where the program is not owned, the critic's value
   of the state as it is and of the same state owning the program (same memory, observation
   rebuilt), by stage: what the critic thinks owning it is worth.
2. lookahead: at the states where a siphon would acquire it (a visible, unsiphoned block of
   the program in the siphon cross, a siphon in hand, not owned), one step ahead in the
   critic's units (training reward times the run's reward scale, plus gamma times the value
   after the step) for the siphon and for the policy's own greedy move, and the policy's
   probability of siphoning there: what the gradient sees.
3. play: the same boards played greedy, and greedy with one override (siphon wherever a siphon
   would acquire the program): what acquiring it is worth in stages and honest wins (R9 loop
   closed). The override is a diagnostic, not an agent.

Boards are the game's own (``--planted-share 0``), or with the program-block curriculum's
planted blocks (``--planted-share P``, §1.5).

    python scripts/acquisition_probe.py --checkpoint checkpoints/startreset-s0 --program reset
"""

from __future__ import annotations

import argparse
import json
import sys

from purejaxrl.backend import choose_platforms

choose_platforms()  # before anything imports JAX

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from envs.hackmatrix.core.constants import (ACTION_SIPHON, BLOCK, GRID, N_CELLS,  # noqa: E402
                                            N_STAGES, PROGRAM_NAMES)
from envs.hackmatrix.env import HackMatrix  # noqa: E402
from envs.hackmatrix.observation import build_observation  # noqa: E402
from purejaxrl import ppo  # noqa: E402
from purejaxrl.cli.parsing import ArgumentParser, finite_float  # noqa: E402
from purejaxrl.learning_benchmark import EVALUATION_KEY  # noqa: E402
from purejaxrl.output_paths import (OutputPathError, add_overwrite_argument,  # noqa: E402
                                     check_output_file, write_text)  # noqa: E402
from purejaxrl.networks import (apply_step, greedy_masked, is_recurrent,  # noqa: E402
                                masked_log_probs)
from purejaxrl.policy import PolicyError, load_policy  # noqa: E402



def build_parser() -> ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a run directory or checkpoint file")
    parser.add_argument("--program", default="reset", choices=PROGRAM_NAMES,
                        help="the program to probe (default reset)")
    parser.add_argument("--episodes", type=int, default=512, help="boards (default 512)")
    parser.add_argument("--seed", type=int, default=EVALUATION_KEY,
                        help=f"board seed (default {EVALUATION_KEY}: the learning benchmark's "
                             "and evaluate.py's boards for that seed)")
    parser.add_argument("--planted-share", type=finite_float, default=0.0, metavar="P",
                        help="plant a block of the program nearest the player on this share "
                             "of stage boards (the curriculum's boards; default 0: the game's)")
    parser.add_argument("--max-steps", type=int, default=1000, help="steps per game (1000)")
    parser.add_argument("--json", help="also write the figures here")
    add_overwrite_argument(parser)
    return parser


def acquirable(state, program: int) -> jax.Array:
    """A siphon here would acquire ``program``: a visible, unsiphoned block of it in the siphon
    cross (game-rules: centre and the 4 orthogonal cells) and the program not owned (the
    caller checks that a siphon is legal)."""
    cells = jnp.arange(N_CELLS)
    cross = (jnp.abs(cells // GRID - state.player.row)
             + jnp.abs(cells % GRID - state.player.col)) <= 1
    grid = state.grid
    block = (grid.content == BLOCK) & ~grid.siphoned & ~grid.question & (grid.program == program)
    return jnp.any(cross & block) & ~state.owned[program]


def owning(state, program: int):
    """``state`` with ``program`` owned (last in acquisition order)."""
    rank = state.program_rank
    return state.replace(program_rank=rank.at[program].set(
        jnp.where(rank[program] < 0, jnp.max(rank) + 1, rank[program])))


def probe(policy, program: int, episodes: int, seed: int, planted_share: float,
          max_steps: int) -> dict:
    trainer_env, config, network, params = policy.env, policy.config, policy.network, \
        policy.params
    base = trainer_env.env
    env = HackMatrix(reward_shaping=base.reward_shaping, close_undo_exploit=True,
                     undo_pays_once=base.undo_pays_once,
                     program_block_pool=(PROGRAM_NAMES[program],) if planted_share else (),
                     program_block_share=planted_share)
    env_params = policy.built[1].replace(max_steps_in_episode=max_steps)
    scale = float(ppo.critic_units(config, policy.checkpoint["runner_state"].return_stats))
    n = episodes
    step = jax.vmap(env.step_env, (0, 0, 0, None))
    never_started = jnp.zeros(n, jnp.bool_)

    def worth(outcome, hidden_after):
        """One step's worth in the critic's units: its training reward, scaled, plus gamma
        times the critic's value after it (0 after a terminal step)."""
        obs, _, reward, done, info = outcome
        earned = trainer_env.training_reward(config.training_reward, reward,
                                             info["reward_breakdown"]) * scale
        _, _, value = apply_step(network, params, hidden_after, obs, never_started)
        return earned + config.gamma * jnp.where(done, 0.0, value)

    def make_turn(force: bool):
        @jax.jit
        def turn(carry, key):
            obs, state, hidden, alive, start, won, stage, acquired = carry
            hidden_after, logits, value = apply_step(network, params, hidden, obs, start)
            greedy = greedy_masked(logits, obs.action_mask)
            can = jax.vmap(acquirable, (0, None))(state, program) \
                & obs.action_mask[:, ACTION_SIPHON]
            action = jnp.where(can, ACTION_SIPHON, greedy) if force else greedy
            keys = jax.random.split(key, n)
            outcome = step(keys, state, action, env_params)
            next_obs, after, _, done, info = outcome
            record = None
            if not force:
                owned_obs = jax.vmap(lambda s: build_observation(owning(s, program)))(state)
                _, _, value_owned = apply_step(network, params, hidden, owned_obs, start)
                q_move = worth(outcome, hidden_after)
                q_siphon = worth(step(keys, state, jnp.full(n, ACTION_SIPHON), env_params),
                                 hidden_after)
                siphon_p = jnp.exp(masked_log_probs(logits, obs.action_mask)[:, ACTION_SIPHON])
                record = dict(live=alive, owned=state.owned[:, program], stage=state.stage,
                              value=value, value_owned=value_owned, can=can & alive,
                              q_move=q_move, q_siphon=q_siphon, siphon_p=siphon_p)
            done = done | (after.time >= max_steps)
            won = won | (alive & info["won"])
            stage = jnp.where(alive, after.stage, stage)
            acquired = acquired | (alive & after.owned[:, program])
            return (next_obs, after, hidden_after, alive & ~done, never_started, won, stage,
                    acquired), record
        return turn

    def play(force: bool):
        # The boards of evaluation.play_episodes for this key (its reset half); the step
        # randomness (spawns) is the probe's own.
        reset_key, step_key = jax.random.split(jax.random.PRNGKey(seed))
        obs, state = jax.vmap(env.reset_env, (0, None))(jax.random.split(reset_key, n),
                                                        env_params)
        hidden = network.initial_hidden(n) if is_recurrent(network) else None
        carry = (obs, state, hidden, ~never_started, ~never_started, never_started,
                 state.stage, never_started)
        turn, records = make_turn(force), []
        for t in range(max_steps):
            carry, record = turn(carry, jax.random.fold_in(step_key, t))
            if record is not None:
                records.append(jax.device_get(record))
            if not bool(carry[3].any()):
                break
        _, _, _, alive, _, won, stage, acquired = jax.device_get(carry)
        return dict(stage_mean=float(stage.mean()), win_rate=float(won.mean()),
                    acquired=float(acquired.mean()), unfinished=int(alive.sum()),
                    reached=[float(np.mean(stage >= k)) for k in range(2, N_STAGES + 1)]), \
            records

    greedy, records = play(False)
    forced, _ = play(True)
    table = {name: np.stack([r[name] for r in records]) for name in records[0]}
    critic, acquiring = [], []
    for stage in range(1, N_STAGES + 1):
        here = table["live"] & ~table["owned"] & (table["stage"] == stage)
        if here.any():
            gain = (table["value_owned"] - table["value"])[here]
            critic.append(dict(stage=stage, states=int(here.sum()),
                               value=float(table["value"][here].mean()),
                               value_owned_gain=float(gain.mean())))
        can = table["can"] & (table["stage"] == stage)
        if can.any():
            acquiring.append(dict(
                stage=stage, states=int(can.sum()), value=float(table["value"][can].mean()),
                q_move=float(table["q_move"][can].mean()),
                q_siphon=float(table["q_siphon"][can].mean()),
                siphon_probability=float(table["siphon_p"][can].mean())))
    return dict(program=PROGRAM_NAMES[program], episodes=episodes, seed=seed,
                planted_share=planted_share, reward_scale=scale, gamma=config.gamma,
                training_reward=config.training_reward, critic=critic, acquiring=acquiring,
                greedy=greedy, greedy_acquiring=forced)


def report(result: dict) -> str:
    name = result["program"].upper()
    lines = [f"critic units: training reward {result['training_reward']!r} x "
             f"{result['reward_scale']:.4f}, gamma {result['gamma']}",
             f"1. critic: value of owning {name} (states of greedy play not owning it)",
             f"{'stage':>5} {'states':>7} {'V':>8} {'V(own)-V':>9}"]
    lines += [f"{r['stage']:>5} {r['states']:>7} {r['value']:>8.3f} {r['value_owned_gain']:>+9.3f}"
              for r in result["critic"]]
    lines += [f"2. lookahead where a siphon would acquire {name}",
              f"{'stage':>5} {'states':>7} {'V':>8} {'Q(move)':>8} {'Q(siphon)':>9} "
              f"{'diff':>7} {'P(siphon)':>9}"]
    lines += [f"{r['stage']:>5} {r['states']:>7} {r['value']:>8.3f} {r['q_move']:>8.3f} "
              f"{r['q_siphon']:>9.3f} {r['q_siphon'] - r['q_move']:>+7.3f} "
              f"{r['siphon_probability']:>9.4f}" for r in result["acquiring"]]
    lines += [f"3. play ({result['episodes']} boards, seed {result['seed']}, planted share "
              f"{result['planted_share']})",
              f"{'policy':<16} {'stage':>6} {'win':>6} {'acquired':>9}  reach 2..8 (%)"]
    for label, row in (("greedy", result["greedy"]),
                       ("greedy+acquire", result["greedy_acquiring"])):
        reach = " / ".join(f"{100 * share:.1f}" for share in row["reached"])
        lines.append(f"{label:<16} {row['stage_mean']:>6.2f} {100 * row['win_rate']:>5.1f}% "
                     f"{100 * row['acquired']:>8.1f}%  {reach}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.max_steps < 1:
        parser.error("--episodes and --max-steps must be positive")
    if not 0.0 <= args.planted_share <= 1.0:
        parser.error(f"--planted-share must be in [0, 1], got {args.planted_share}")
    try:
        if args.json:
            check_output_file(args.json, "--json", args.overwrite)
        policy = load_policy(args.checkpoint)
    except (OutputPathError, PolicyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not isinstance(policy.env.env, HackMatrix):
        print(f"error: {args.checkpoint} was trained on {policy.config.env!r}; the probe reads "
              "HackMatrix's programs", file=sys.stderr)
        return 2
    result = probe(policy, PROGRAM_NAMES.index(args.program), args.episodes, args.seed,
                   args.planted_share, args.max_steps)
    result["checkpoint"] = args.checkpoint
    print(report(result))
    if args.json:
        write_text(args.json, json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
