"""Where a search departs from its network: at every state of a search row's games, the move
the search played beside the network's own greedy move there.

Re-simulates every game of one row of an ``evaluate.py --json --record-actions`` file on the
evaluation's own keys (each must end as, and when, the evaluation says) and runs the
checkpoint's network along the same games, with the memory it would have held in them (its
core stepped on each observation of the game played, zeros at the game's start), as the
search's prior did. Prints how many states the two differ on, per stage, by kind of move
(the direction moves, the siphon, each program), in the games won and lost, and by how sure
the network was of its own move (the share of the states, and of the departures, where it gave
its greedy move less than 0.5 ... 0.999: where a teacher that labels only unsure states would
find the corrections).

    python scripts/search_departures.py searched.json --row search-16-ppo-value-raw-g0 \\
        --checkpoint runs/stagecount-default-long-s0

The checkpoint must be the network the row's search used (the same update as the row's
evaluation record names, the same agent options): another network's departures say nothing
about this search (SPEC §4.5).
"""

import argparse
import json
import sys

from purejaxrl.backend import choose_platforms
from purejaxrl.cli.parsing import ArgumentParser

choose_platforms()  # before anything imports JAX

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from envs.hackmatrix.core.constants import ACTION_SIPHON, N_STAGES  # noqa: E402
from envs.hackmatrix.viz.render_text import action_name  # noqa: E402
from purejaxrl.evaluation import network_logits  # noqa: E402
from purejaxrl.networks import greedy_masked, masked_log_probs  # noqa: E402
from purejaxrl.output_paths import add_overwrite_argument, write_text  # noqa: E402
from purejaxrl.policy import (RECORDED_FIELDS, PolicyError, env_options_of,  # noqa: E402
                              load_policy)
from purejaxrl.recorded_games import (RecordedGamesError, replay_inputs,  # noqa: E402
                                      resimulate_row)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("evaluation", help="an evaluate.py --json file made with --record-actions")
    parser.add_argument("--row", required=True, help="the search row whose games to read")
    parser.add_argument("--checkpoint", required=True,
                        help="the network the row's search used (a run directory or a file)")
    parser.add_argument("--json", metavar="PATH", help="also write the counts")
    add_overwrite_argument(parser)
    return parser


def action_kind(action: int) -> str:
    """The kind of a HackMatrix action: 'direction', or ``action_name``'s name of any other
    ('siphon', a program's upper-case name, the acquire macro)."""
    return "direction" if action < ACTION_SIPHON else action_name(action)


def network_moves(env, env_params, network, params, recorded: dict) -> dict:
    """Per game (board order) and step: the stage the move was played in (i32[G, T]), the
    move played (-1 after the game's end), the network's greedy move there and the probability
    its policy gives that move (``confidence``, over the legal actions); and per game the won
    and died flags of its last step. All boards re-simulated together."""
    reset_keys, env_keys, actions = replay_inputs(recorded)
    logits_of, initial_memory = network_logits(network, params)
    raw = env.env

    def one(reset_key, step_keys, moves):
        obs, state = raw.reset(reset_key, env_params)

        def step(carry, inputs):
            obs, state, memory, end = carry
            step_key, action = inputs
            playing = action >= 0
            logits, next_memory = logits_of(obs, memory)
            mask = env.action_mask(obs)
            greedy = greedy_masked(logits, mask)
            confidence = jnp.exp(masked_log_probs(logits, mask)[greedy])
            next_obs, next_state, _, _, info = raw.step_env(step_key, state,
                                                            jnp.maximum(action, 0), env_params)
            keep = lambda new, old: jax.tree.map(  # noqa: E731
                lambda a, b: jnp.where(playing, a, b), new, old)
            carry = keep((next_obs, next_state, next_memory, (info["won"], info["died"])),
                         (obs, state, memory, end))
            return carry, (state.stage, greedy, confidence)

        start = (obs, state, initial_memory, (jnp.bool_(False), jnp.bool_(False)))
        (_, _, _, (won, died)), (stages, greedy, confidence) = jax.lax.scan(
            step, start, (step_keys, moves))
        return dict(stage=stages, greedy=greedy, confidence=confidence, won=won, died=died)

    found = jax.device_get(jax.jit(jax.vmap(one))(reset_keys, env_keys, jnp.asarray(actions)))
    return dict(found, played=actions)


# The network's probability of its own greedy move below which a state counts as unsure: a
# teacher that labelled only the unsure states would see the departures among them.
CONFIDENCE_THRESHOLDS = (0.5, 0.7, 0.9, 0.95, 0.99, 0.999)


def tally(found: dict, games: list) -> dict:
    """The counts the report prints: states and departures overall, per stage (1..8), among the
    states where the network gives its greedy move less than each of CONFIDENCE_THRESHOLDS, by
    the kind of the move played and of the network's, and in won and other games."""
    played, greedy, stage = (np.asarray(found[k]) for k in ("played", "greedy", "stage"))
    playing = played >= 0
    differ = playing & (played != greedy)
    per_stage = {str(s): {"states": int((playing & (stage == s)).sum()),
                          "departures": int((differ & (stage == s)).sum())}
                 for s in range(1, N_STAGES + 1)}
    by_kind: dict = {}
    for game, step in zip(*np.nonzero(differ)):
        pair = f"{action_kind(int(played[game, step]))} <- {action_kind(int(greedy[game, step]))}"
        by_kind[pair] = by_kind.get(pair, 0) + 1
    won = np.asarray([game["end"] == "won" for game in games])
    per_game = differ.sum(axis=1)
    confidence = np.asarray(found["confidence"])
    below = {}
    for threshold in CONFIDENCE_THRESHOLDS:
        unsure = playing & (confidence < threshold)
        below[str(threshold)] = {"states": int(unsure.sum()),
                                 "departures": int((differ & unsure).sum())}
    return {"games": len(games), "states": int(playing.sum()),
            "departures": int(differ.sum()), "per_stage": per_stage,
            "below_confidence": below,
            "played_instead_of_greedy": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
            "won_games": {"games": int(won.sum()), "departures": int(per_game[won].sum()),
                          "states": int(playing[won].sum())},
            "other_games": {"games": int((~won).sum()), "departures": int(per_game[~won].sum()),
                            "states": int(playing[~won].sum())},
            "departures_per_game": [int(n) for n in per_game]}


def check_same_network(policy, recorded_options: dict, evaluation_record: dict) -> None:
    """The checkpoint must be the row's network: its agent and game options, and the update
    its evaluation record names (where it names one)."""
    mine = {k: v for k, v in env_options_of(policy.config).items() if k not in RECORDED_FIELDS}
    theirs = {k: recorded_options.get(k) for k in mine}
    if mine != theirs:
        differ = sorted(k for k in mine if mine[k] != theirs[k])
        raise RecordedGamesError(f"the checkpoint's env options differ from the row's "
                                 f"({', '.join(differ)}): not the network its search used")
    update = evaluation_record.get("checkpoint_update")
    if update is not None and update != policy.checkpoint["update"]:
        raise RecordedGamesError(f"the row's search used the network of update {update}, the "
                                 f"checkpoint is of update {policy.checkpoint['update']}")


def format_report(counts: dict) -> str:
    share = lambda n, d: f"{n / d:.2%}" if d else "-"  # noqa: E731
    lines = [f"{counts['games']} games, {counts['states']} states: the search departs from the "
             f"network's greedy move at {counts['departures']} "
             f"({share(counts['departures'], counts['states'])})",
             "stage  states  departures  share"]
    for stage, row in counts["per_stage"].items():
        if row["states"]:
            lines.append(f"{stage:>5}  {row['states']:>6}  {row['departures']:>10}  "
                         f"{share(row['departures'], row['states']):>6}")
    for name in ("won_games", "other_games"):
        row = counts[name]
        lines.append(f"{name.replace('_', ' ')}: {row['games']} games, {row['departures']} "
                     f"departures in {row['states']} states "
                     f"({share(row['departures'], row['states'])})")
    lines.append("network's probability of its greedy move below: share of the states, of the "
                 "departures; departures among them")
    for threshold, row in counts["below_confidence"].items():
        lines.append(f"  {threshold:>6}: {share(row['states'], counts['states']):>7} "
                     f"{share(row['departures'], counts['departures']):>7}  "
                     f"{share(row['departures'], row['states']):>7}")
    lines.append("played <- the network's greedy move: departures")
    lines += [f"  {pair}: {n}" for pair, n in counts["played_instead_of_greedy"].items()]
    return "\n".join(lines)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    loaded = {}

    def resimulate(recorded, env, env_params):
        with open(args.evaluation, encoding="utf-8") as handle:
            record = json.load(handle)[args.row].get("evaluation", {})
        loaded["policy"] = policy = load_policy(args.checkpoint)
        check_same_network(policy, recorded["env_options"], record)
        return network_moves(env, env_params, policy.network, policy.params, recorded)

    outcome = resimulate_row(args, "hackmatrix", "the moves are HackMatrix's", resimulate,
                             errors=(PolicyError,))
    if isinstance(outcome, int):
        return outcome
    recorded, found = outcome
    policy = loaded["policy"]
    counts = tally(found, recorded["games"])
    print(format_report(counts))
    if args.json:
        write_text(args.json, json.dumps({"evaluation": args.evaluation, "row": args.row,
                                          "checkpoint": args.checkpoint,
                                          "checkpoint_update": policy.checkpoint["update"],
                                          **counts}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
