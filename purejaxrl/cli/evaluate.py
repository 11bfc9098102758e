"""Compare policies on the same seeds: a trained checkpoint (greedy and sampled), a uniformly
random legal policy, and the scripted heuristic where the environment has one; for any env of
envs.registry (HackMatrix, the toy corridor, a gymnax id).

    python scripts/evaluate.py --checkpoint checkpoints/<run-name> --episodes 256
    python scripts/evaluate.py --env hackmatrix --policies random
    python scripts/evaluate.py --env CartPole-v1 --episodes 64          # return and length
    python scripts/evaluate.py --policies none --search-simulations 16 64 --episodes 64
    python scripts/evaluate.py --checkpoint RUN --rollout-search 8 --search-leaf value
    python scripts/evaluate.py --checkpoint RUN --start-programs 1 --start-programs-pool reset \
        --start-programs-share 1

Each policy plays one episode on each of --episodes envs reset from the same keys, so the rows
of the table face identical starting boards.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys

from purejaxrl.backend import choose_platforms, describe_backend
from purejaxrl.cli.parsing import (ArgumentParser, add_env_option_flags, env_options_from_args,
                                   option_value_text)

choose_platforms()  # before anything imports JAX

from purejaxrl.cli import evaluate_search  # noqa: E402 (imports JAX)
from purejaxrl.config import TrainConfig  # noqa: E402
from purejaxrl.output_paths import (OutputPathError, add_overwrite_argument,  # noqa: E402
                                     check_output_file, write_text)  # noqa: E402
from purejaxrl.provenance import process_commit  # noqa: E402
from purejaxrl.recorded_games import EPISODES  # noqa: E402

POLICY_CHOICES = ("checkpoint-greedy", "checkpoint-sampled", "random", "heuristic")
NO_POLICIES = "none"  # --policies none: only the search rows
# The trainer's own summary columns (``summarize_episodes``): the env's metrics' columns
# (``Metric.column``) come between these and ``TRAILING_COLUMNS``.
LEADING_COLUMNS = ("stage_mean", "return_mean", "length_mean", "truncation_rate")
TRAILING_COLUMNS = ("unfinished",)
# Config fields an evaluation may change besides the env options of roles "game" and
# "training" (``add_env_option_flags``).
ENV_OVERRIDES = ("env", "max_episode_steps")
# The env options an evaluation may set: the rules (role "game"), and as a diagnostic the
# training games' curricula (role "training"); an agent's own options are its checkpoint's.
EVALUATION_ROLES = ("game", "training")


def baseline_config(config: TrainConfig) -> TrainConfig:
    """``config`` as the baselines (random, heuristic) play it: without the agent's own env
    options (``TrainConfig.agent_env_options``), so they play the game's own actions on the
    same boards."""
    agent = config.agent_env_options()
    return config.replace(env_options={name: value for name, value in config.env_options
                                       if name not in agent})


def config_without_network(env_id: str) -> TrainConfig:
    """What an evaluation without a checkpoint plays: the env's defaults (a gymnax env's
    training reward is "env"), but not the env options the trainer starts from (HackMatrix's
    macro and start curriculum): the baselines and a uniform-prior search play the game's own
    actions from its own start."""
    from purejaxrl import ppo
    return ppo.config_for_env(env_id).replace(env_options=())


def training_options_set(config: TrainConfig) -> dict:
    """The env options of role "training" that ``config`` sets (a diagnostic start or board,
    not the game's own)."""
    declared = config.declared_env_options()
    return {name: value for name, value in config.env_options
            if name in declared and declared[name].role == "training"}


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", help="checkpoint file, or run directory (latest)")
    parser.add_argument("--policies", help=f"comma-separated subset of {', '.join(POLICY_CHOICES)}"
                        f" (default: all that apply; {NO_POLICIES}: only the search rows)")
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--env", help="an id of envs.registry (hackmatrix, toy, a gymnax id "
                        "such as CartPole-v1); default: the checkpoint's, else hackmatrix")
    add_env_option_flags(parser, EVALUATION_ROLES)
    parser.add_argument("--max-episode-steps", type=int,
                        help="the env's time limit: episodes are truncated after this many "
                             "steps (default: the checkpoint's, else the env's own)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--record-actions", action="store_true",
                        help="keep every game's actions in the --json output (each row's "
                        "games), so that any game of any row can be re-simulated and "
                        "watched: scripts/watch_agent.py --evaluation JSON --row ROW")
    add_overwrite_argument(parser)
    evaluate_search.add_arguments(parser)
    return parser


def table_columns(env) -> dict:
    """Summary key -> header of evaluation's text table, in order: the trainer's own columns
    around those the env's metrics ask for (``Metric.column``)."""
    metric_columns = {metric.summary: metric.column for metric in getattr(env, "metrics", ())
                      if metric.summary is not None and metric.column is not None}
    return ({key: key for key in LEADING_COLUMNS} | metric_columns
            | {key: key for key in TRAILING_COLUMNS})


def format_table(results: dict, columns: dict) -> str:
    """One line per row; a column shows where every row's summary has its key (a gymnax env
    has no stage)."""
    columns = {key: header for key, header in columns.items()
               if all(key in summary for summary in results.values())}
    width = max(len(name) for name in results) + 2
    lines = ["policy".ljust(width) + "".join(header.rjust(16) for header in columns.values())]
    for name, summary in results.items():
        cells = []
        for key in columns:
            value = summary[key]
            cells.append((f"{value:.4f}" if isinstance(value, float) else str(value)).rjust(16))
        lines.append(name.ljust(width) + "".join(cells))
    return "\n".join(lines)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.episodes < 1:
        print(f"error: --episodes must be >= 1, got {args.episodes}", file=sys.stderr)
        return 2
    if args.max_episode_steps is not None and args.max_episode_steps < 1:
        print(f"error: --max-episode-steps must be >= 1, got {args.max_episode_steps}",
              file=sys.stderr)
        return 2
    requested = args.policies.split(",") if args.policies else None
    requested = [] if requested == [NO_POLICIES] else requested
    unknown = [p for p in requested or [] if p not in POLICY_CHOICES]
    if unknown:
        print(f"error: unknown policies {unknown}; choose from {POLICY_CHOICES}", file=sys.stderr)
        return 2
    if requested and any(p.startswith("checkpoint") for p in requested) and not args.checkpoint:
        print("error: checkpoint policies need --checkpoint", file=sys.stderr)
        return 2
    if args.record_actions and not args.json:
        print("error: --record-actions keeps the games' actions in the --json output: it "
              "needs --json", file=sys.stderr)
        return 2
    try:
        if args.json:
            check_output_file(args.json, "--json", args.overwrite)
    except OutputPathError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    search_error = evaluate_search.arguments_error(args)
    if requested == [] and not evaluate_search.wants_search(args):
        search_error = (f"--policies {NO_POLICIES} leaves nothing to evaluate without "
                        "--search-simulations or --rollout-search")
    if search_error:
        print(f"error: {search_error}", file=sys.stderr)
        return 2

    # The code this process loaded: a commit made while a long evaluation plays is not its code.
    process_commit()
    import jax
    from purejaxrl import ppo
    print(describe_backend(), file=sys.stderr)
    from purejaxrl.config import ConfigError
    from purejaxrl.evaluation import (format_stage_report, game_outcomes,
                                      make_policy_comparison, network_policy, random_policy,
                                      stage_report, summarize_episodes)
    from purejaxrl.policy import PolicyError, load_policy
    from purejaxrl.search import stage_reached_shares

    config, params = TrainConfig(), None
    if args.checkpoint:
        try:
            loaded = load_policy(args.checkpoint)
        except PolicyError as error:
            print(f"error: {error}", file=sys.stderr)
            return error.code
        config, params, checkpoint = loaded.config, loaded.params, loaded.checkpoint
        print(f"checkpoint {checkpoint['path']} (update {checkpoint['update']}, "
              f"{checkpoint['env_steps']:,} env steps)")
    overrides = {name: getattr(args, name) for name in ENV_OVERRIDES
                 if getattr(args, name) is not None}
    if params is not None and overrides.get("env", config.env) != config.env:
        print("error: --env differs from the checkpoint's environment", file=sys.stderr)
        return 2
    try:
        if params is None:
            config = config_without_network(overrides.get("env", config.env))
        config = config.replace(**overrides).with_env_options(**env_options_from_args(args))
        env, env_params, network, _, _ = ppo.build(config)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if evaluate_search.wants_search(args) and env.search_hooks is None:
        print(f"error: search rows need an env with search hooks (hackmatrix); {config.env} "
              "has none", file=sys.stderr)
        return 2
    search_error = evaluate_search.wants_search(args) and evaluate_search.env_error(
        args, env, (TrainConfig.from_dict(checkpoint["config"]).env_option_values()
                    if params is not None else {}))
    if search_error:
        print(f"error: {search_error}", file=sys.stderr)
        return 2

    # The baselines play the game's own actions: the agent's env options (HackMatrix's acquire
    # macro) are part of the network, as in the learning benchmark's judged env.
    baseline_env, baseline_params = env, env_params
    game_config = baseline_config(config)
    if game_config != config:
        baseline_env, baseline_params = ppo.make_env(game_config)
    policies = {}
    if params is not None:
        policies["checkpoint-greedy"] = network_policy(env, network, params, greedy=True)
        policies["checkpoint-sampled"] = network_policy(env, network, params, greedy=False)
    policies["random"] = random_policy(baseline_env)
    if baseline_env.heuristic_policy() is not None:
        policies["heuristic"] = baseline_env.heuristic_policy()
    if requested is not None:
        missing = [p for p in requested if p not in policies]
        if missing:
            print(f"error: not available for env {config.env!r}: {missing}", file=sys.stderr)
            return 2
        policies = {name: policies[name] for name in requested}

    # Every row plays from the same key, hence the same starting boards.
    key = jax.random.PRNGKey(args.seed)
    results = {}
    groups = [(env, env_params, [name for name in policies if name.startswith("checkpoint")]),
              (baseline_env, baseline_params,
               [name for name in policies if not name.startswith("checkpoint")])]
    if baseline_env is env:  # one compiled loop serves every row
        groups = [(env, env_params, list(policies))]
    for group_env, group_params, names in groups:
        if not names:
            continue
        play = make_policy_comparison(group_env, group_params, [policies[n] for n in names],
                                      args.episodes, int(group_params.max_steps_in_episode),
                                      args.record_actions)
        for index, name in enumerate(names):
            episodes = play(index, key)
            results[name] = summarize_episodes(episodes, group_env)
            results[name]["stages"] = stage_report(episodes, group_env.num_stages)
            results[name]["games"] = game_outcomes(episodes)
            results[name]["loop"] = EPISODES  # its games' keys (recorded_games.game_keys)
            if group_env.search_hooks is not None:  # beside the search rows' stage table
                results[name]["stage_reached"] = stage_reached_shares(episodes,
                                                                      group_env.num_stages)
    if evaluate_search.wants_search(args):
        critic = None
        if args.search_leaf == evaluate_search.VALUE_LEAF:
            stats = checkpoint["runner_state"].return_stats
            critic = dict(training_reward=config.training_reward, gamma=config.gamma,
                          reward_scale=float(ppo.critic_units(config, stats)),
                          search_reward=args.search_reward or config.training_reward)
        results.update(evaluate_search.search_rows(args, env, env_params, network, params, key,
                                                   int(env_params.max_steps_in_episode),
                                                   critic))
    print(f"{args.episodes} episodes per policy on {config.env} (seed {args.seed})")
    diagnostic = training_options_set(config)
    if diagnostic:
        values = {name: config.env_option(name) for name, option
                  in config.declared_env_options().items() if option.role == "training"}
        print("a diagnostic, not the game's own games: the training options "
              + ", ".join(f"{name}={option_value_text(value)}" for name, value in values.items()))
        for summary in results.values():
            summary["training_options"] = {name: list(value) if isinstance(value, tuple)
                                           else value for name, value in values.items()}
    print(format_table(results, table_columns(env)))
    if any("stage_reached" in summary for summary in results.values()):
        print(evaluate_search.format_stage_table(results))
    if evaluate_search.wants_search(args):
        print(evaluate_search.format_costs(results))
        final_state = evaluate_search.format_final_state(results)
        if final_state:
            print(final_state)
    for name, summary in results.items():
        if not summary.get("stages"):  # an env without stages
            summary.pop("stages", None)
            continue
        # Where each policy's games end (search rows too): the share reaching and clearing
        # every stage, how the games that end there end, and what the player held then.
        print(f"\n{name}: per stage")
        print(format_stage_report(summary["stages"]))
    if args.json:
        record = evaluation_record(args, config, checkpoint if params is not None else None,
                                   sys.argv[1:] if argv is None else argv)
        from purejaxrl.policy import env_options_of
        for name, summary in results.items():
            summary["evaluation"] = record
            # The rules and the player's own options this row played under (the baselines:
            # the game's own actions), and a diagnostic start if one was set: what a replay
            # of its games builds the env from.
            baseline = name in policies and not name.startswith("checkpoint")
            summary["env_options"] = {**env_options_of(game_config if baseline else config),
                                      **summary.get("training_options", {})}
        write_text(args.json, json.dumps(results, indent=2))
    return 0


def evaluation_record(args, config: TrainConfig, checkpoint, argv) -> dict:
    """What made a JSON's rows, in each row (``evaluation``): the env and seed (its boards),
    the episodes, the checkpoint and its update, the command, the commit the process launched
    from (``process_commit``) and the backend, so a figure can be made again and evaluations
    on the same boards are found (``scripts/pool_evaluations.py`` refuses to pool them)."""
    import jax
    return {"env": config.env, "seed": args.seed, "episodes": args.episodes,
            "checkpoint": checkpoint["path"] if checkpoint else None,
            "checkpoint_update": checkpoint["update"] if checkpoint else None,
            "checkpoint_env_steps": checkpoint["env_steps"] if checkpoint else None,
            "command": "python scripts/evaluate.py " + shlex.join(argv),
            "commit": process_commit(), "backend": jax.default_backend(),
            "date": datetime.datetime.now().isoformat(timespec="seconds")}

