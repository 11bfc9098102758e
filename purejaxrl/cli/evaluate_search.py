"""The search rows of ``scripts/evaluate.py`` (SPEC §4.5): options, the rows, and their tables.

Kept out of ``evaluate.py`` so that the usual rows' command stays as it was; this is where the
game-free search (``purejaxrl/search.py``) meets the env's search hooks (the ``search_hooks``
hook of ``envs/contract.py``: HackMatrix's ``envs/hackmatrix/search_hooks.py``)."""

from __future__ import annotations

import argparse
import sys
import time

from purejaxrl.cli.parsing import finite_float
from purejaxrl.config import SEARCH_WHERE


def bonus_pair(text: str) -> tuple:
    """``NAME=B`` for argparse -> (NAME, B) with B a float."""
    name, sep, bonus = text.partition("=")
    try:
        if not (sep and name.strip()):
            raise argparse.ArgumentTypeError("no name")
        return name.strip(), finite_float(bonus)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected NAME=VALUE with a finite number (such as reset=0.5), got {text!r}"
        ) from None


# The game's leaf values (the env's search hooks), and the checkpoint's critic.
LEAVES = ("exit", "rollout", "zero", "value")
VALUE_LEAF = "value"


# Worlds a fair row searches per move unless --search-worlds says otherwise.
DEFAULT_WORLDS = 4


class Given(argparse.Action):
    """``store``, and the flag noted in ``given_search_flags``: a search flag that has a
    default is refused where no row it shapes is asked for, even given at that default
    (``UNUSED_WITHOUT``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given_search_flags = (*getattr(namespace, "given_search_flags", ()),
                                        self.dest)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(given_search_flags=())
    search = parser.add_argument_group(
        "search rows (SPEC §4.5): Gumbel MuZero with the game as its model, on the same boards")
    search.add_argument("--search-simulations", type=int, nargs="+", metavar="N",
                        help="add a row search-N for each budget N (simulations per world and "
                        "move)")
    search.add_argument("--search-worlds", type=int, default=DEFAULT_WORLDS, metavar="K",
                        action=Given,
                        help="worlds re-drawn from what the player sees, searched per move "
                        f"(fair rows; default {DEFAULT_WORLDS}; other counts tag the rows "
                        "...-wK)")
    search.add_argument("--search-information", choices=("fair", "perfect", "both"),
                        default="fair", action=Given,
                        help="fair (default): hidden fields re-drawn; perfect: the true "
                        "state, an upper bound (rows search-N-perfect-info)")
    search.add_argument("--search-prior", choices=("uniform", "checkpoint", "both"),
                        action=Given,
                        help="the tree search's prior logits: uniform, or the checkpoint's "
                        "policy (rows search-N-ppo); default: checkpoint with --checkpoint, "
                        "else uniform")
    search.add_argument("--search-prior-mix", type=finite_float, default=0.0, metavar="P",
                        action=Given,
                        help="tree rows: mix a share P of uniform (over the legal actions) "
                        "into the checkpoint's prior, so that actions the network almost "
                        "never plays can still be chosen (rows search-N-ppo-mixP; default 0)")
    search.add_argument("--search-prior-mix-over", choices=("actions", "groups"),
                        default="actions", help="the uniform of --search-prior-mix: over the "
                        "legal actions (default), or over the env's action groups, the "
                        "network's odds kept inside each group (rows search-N-ppo-gmixP; "
                        "envs with action groups)")
    search.add_argument("--search-prior-mix-where", choices=SEARCH_WHERE, default="always",
                        help="the nodes where --search-prior-mix applies: always (default), "
                        "or acquire: only where a siphon now would acquire a program not "
                        "owned, seen from the observation, so that every other move stays "
                        "the network's (rows ...-acquire; envs whose search hooks have "
                        "acquisition_in_reach)")
    search.add_argument("--search-leaf", choices=LEAVES, default="exit", action=Given,
                        help="leaf value: exit (gamma ** BFS distance to the exit, default), "
                        "rollout (the heuristic for 8 steps, then exit), zero; value: the "
                        "checkpoint's critic, the search then maximising the network's own "
                        "training return (its training reward and gamma; rows "
                        "search-N-...-value)")
    search.add_argument("--search-reward", metavar="NAME",
                        help="with --search-leaf value: the reward the search's steps earn, "
                        "one of the env's training rewards (HackMatrix: env, progress, "
                        "stages), in the critic's units; default the checkpoint's own (rows "
                        "...-value-rNAME where it differs). The leaf stays the critic's value "
                        "of the checkpoint's own return")
    search.add_argument("--search-program-bonus", type=bonus_pair, nargs="+",
                        metavar="NAME=B", help="add B to every leaf value where the program "
                        "NAME is owned, in the leaf's units (critic units with --search-leaf "
                        "value, stage points otherwise): a hand-set worth of owning it, so "
                        "that the search acquires it (rows search-N-...-bonus and "
                        "rollout-R-...-bonus: for the rollouts, where a rollout ends alive; "
                        "envs whose search hooks have program_bonus)")
    search.add_argument("--search-threat-cost", type=finite_float, metavar="C",
                        help="take C off every leaf value for each enemy alive and "
                        "transmission pending, in the leaf's units (critic units with "
                        "--search-leaf value): a hand-set price of the crowd that is kept "
                        "from one stage to the next (beyond the transmissions every stage "
                        "adds at its start; rows ...-threatC; envs whose search hooks have "
                        "threat_cost)")
    search.add_argument("--search-until-stage", type=int, metavar="K",
                        help="the search plays the stages before K; from stage K on the "
                        "checkpoint's greedy move (shown to the player: the observation has "
                        "the stage), on the same boards and keys, so up to stage K a game is "
                        "the search row's own (rows ...-untilK; needs --checkpoint and its "
                        "prior)")
    search.add_argument("--search-hold-plans", type=int, default=1, metavar="S",
                        help="once the search chooses one of the env's plan actions (HackMatrix: "
                        "the acquire macro), play it again on the next S - 1 steps while it "
                        "stays legal (rows ...-holdS; default 1: never held)")
    search.add_argument("--search-value-scale", type=finite_float, metavar="V",
                        help="weight of the completed Q-values (min-max normalised per node) "
                        "against the prior logits, in the tree's selection and its move "
                        "(mctx's value_scale; default the search's own, mctx's 0.1: the Q "
                        "term adds at most about 5 logits, so a confident prior is seldom "
                        "overruled; rows ...-vsV)")
    search.add_argument("--search-raw-values", action="store_true",
                        help="keep the tree's Q-values in the objective's own units (the "
                        "critic's with --search-leaf value) instead of min-max normalising "
                        "them per node, which stretches a difference of any size to the full "
                        "weight; --search-value-scale is then logits per unit (times mctx's "
                        "visit scale, about 50) (rows ...-raw)")
    search.add_argument("--search-gumbel-scale", type=finite_float, metavar="G",
                        help="scale of the Gumbel noise on the root's logits (default "
                        "the search's own, 1: "
                        "Gumbel MuZero's sampling without replacement; 0: the considered "
                        "actions and the move are the deterministic best; rows ...-gG)")
    search.add_argument("--search-boards-in-flight", type=int, default=64, metavar="W",
                        action=Given,
                        help="boards searched at once (memory and speed, not results; "
                        "default 64)")
    rollout = parser.add_argument_group(
        "rollout rows (SPEC §4.5): Monte-Carlo rollouts of the network from each candidate "
        "move, on the same boards; --search-information and --search-leaf apply")
    rollout.add_argument("--rollout-search", type=int, nargs="+", metavar="R",
                         help="add a row rollout-R-hH-kK for each R: R rollouts per "
                         "candidate move, each in its own world (re-drawn for fair rows)")
    rollout.add_argument("--rollout-horizon", type=int, default=8, metavar="H", action=Given,
                         help="steps the network plays after the candidate move before the "
                         "leaf value ends the rollout (default 8)")
    rollout.add_argument("--rollout-candidates", type=int, default=8, metavar="K",
                         action=Given,
                         help="the K legal moves the network ranks highest are rolled out "
                         "(default 8; the uniform prior ranks by action index)")
    rollout.add_argument("--rollout-min-gain-z", type=finite_float, default=0.0, metavar="Z",
                         action=Given,
                         help="leave the network's favourite only for a move whose mean gain "
                         "over it, paired on the same draws, is more than Z standard errors "
                         "(default 0: the best mean; rows ...-zZ; needs R >= 2)")
    rollout.add_argument("--rollout-hold", type=int, nargs="+", default=[1], metavar="S",
                         help="a candidate that is one of the env's plan actions (HackMatrix: "
                         "the acquire macro of an --acquire-macro checkpoint) is played again "
                         "at each step of its rollouts while it stays legal, up to S steps in "
                         "all, before the network plays on; a row per S and R (default 1: "
                         "never held; at most H + 1; rows ...-holdS)")
    rollout.add_argument("--rollout-policy", choices=("greedy", "sampled"), action=Given,
                         help="the network's move along a rollout: greedy (default with "
                         "--checkpoint) or sampled (without one: uniformly random playouts)")


def wants_search(args) -> bool:
    """Whether any search row (tree or rollouts) is asked for."""
    return bool(args.search_simulations or args.rollout_search)


# The search flags that shape only some rows, and why each is refused without them: a flag
# no row reads would otherwise be accepted and the command run as if it were not given.
NEEDS_SEARCH = "needs --search-simulations or --rollout-search"
UNUSED_WITHOUT = {
    "search_information": ("any", NEEDS_SEARCH),
    "search_leaf": ("any", NEEDS_SEARCH),
    "search_boards_in_flight": ("any", NEEDS_SEARCH),
    "search_worlds": ("tree", "is the tree search's worlds per move: it needs "
                      "--search-simulations (each rollout has its own world)"),
    "search_prior": ("tree", "is the tree search's prior: it needs --search-simulations "
                     "(rollouts play the checkpoint's network, or uniform playouts without "
                     "one)"),
    # The mix lifts what the network vetoes at Gumbel MuZero's root (``search.mix_uniform``);
    # a rollout search has no such veto, its candidates scored by their returns alone.
    "search_prior_mix": ("tree", "opens the tree search's prior: it needs "
                         "--search-simulations (rollouts score each candidate by its "
                         "returns alone)"),
    "rollout_horizon": ("rollout", "needs --rollout-search"),
    "rollout_candidates": ("rollout", "needs --rollout-search"),
    "rollout_min_gain_z": ("rollout", "needs --rollout-search"),
    "rollout_policy": ("rollout", "needs --rollout-search"),
}


def unused_flag_error(args) -> str | None:
    """The first search flag given (``Given``) where no row it shapes is asked for."""
    asked = {"any": wants_search(args), "tree": bool(args.search_simulations),
             "rollout": bool(args.rollout_search)}
    for dest in getattr(args, "given_search_flags", ()):
        rows, reason = UNUSED_WITHOUT[dest]
        if not asked[rows]:
            return f"--{dest.replace('_', '-')} {reason}"
    if "search_worlds" in getattr(args, "given_search_flags", ()) and (
            args.search_information == "perfect"):
        return ("--search-worlds re-draws what the player cannot see: --search-information "
                "perfect searches the true state, one world (use fair or both)")
    return None


def arguments_error(args) -> str | None:
    """The first bad search option, found before any work; None if all are fine."""
    unused = unused_flag_error(args)
    if unused:
        return unused
    for budget in args.search_simulations or []:
        if budget < 1:
            return f"--search-simulations must be >= 1, got {budget}"
    for rollouts in args.rollout_search or []:
        if rollouts < 1:
            return f"--rollout-search must be >= 1, got {rollouts}"
    if args.rollout_horizon < 0:
        return f"--rollout-horizon must be >= 0, got {args.rollout_horizon}"
    if args.rollout_candidates < 1:
        return f"--rollout-candidates must be >= 1, got {args.rollout_candidates}"
    if args.rollout_min_gain_z < 0:
        return f"--rollout-min-gain-z must be >= 0, got {args.rollout_min_gain_z}"
    for hold in args.rollout_hold:
        if not 1 <= hold <= args.rollout_horizon + 1:
            return (f"--rollout-hold must be in 1..--rollout-horizon + 1 = "
                    f"{args.rollout_horizon + 1}, got {hold}")
    if max(args.rollout_hold) > 1 and not args.rollout_search:
        return "--rollout-hold needs --rollout-search"
    if args.rollout_min_gain_z and min(args.rollout_search or [2]) < 2:
        return "--rollout-min-gain-z needs --rollout-search R >= 2 (a standard error)"
    if args.rollout_search and args.search_leaf == "rollout":
        return ("--search-leaf rollout does not apply to --rollout-search (its rollouts are "
                "the network's): use exit, zero or value")
    if args.rollout_policy == "greedy" and args.rollout_search and not args.checkpoint:
        return "--rollout-policy greedy needs --checkpoint (a uniform policy has no greedy move)"
    if args.search_worlds < 1:
        return f"--search-worlds must be >= 1, got {args.search_worlds}"
    if args.search_value_scale is not None and args.search_value_scale <= 0:
        return f"--search-value-scale must be > 0, got {args.search_value_scale:g}"
    if args.search_gumbel_scale is not None and args.search_gumbel_scale < 0:
        return f"--search-gumbel-scale must be >= 0, got {args.search_gumbel_scale:g}"
    if not args.search_simulations and (args.search_value_scale is not None
                                        or args.search_gumbel_scale is not None):
        return ("--search-value-scale and --search-gumbel-scale shape the tree search: they "
                "need --search-simulations")
    if args.search_raw_values and not args.search_simulations:
        return "--search-raw-values shapes the tree search: it needs --search-simulations"
    if args.search_boards_in_flight < 1:
        return f"--search-boards-in-flight must be >= 1, got {args.search_boards_in_flight}"
    if args.search_hold_plans < 1:
        return f"--search-hold-plans must be >= 1, got {args.search_hold_plans}"
    if args.search_hold_plans > 1 and not args.search_simulations:
        return ("--search-hold-plans holds the tree search's plan moves: it needs "
                "--search-simulations")
    if args.search_prior in ("checkpoint", "both") and not args.checkpoint:
        return "--search-prior checkpoint needs --checkpoint"
    if args.search_leaf == VALUE_LEAF and not args.checkpoint:
        return "--search-leaf value needs --checkpoint (its critic is the leaf value)"
    if not 0.0 <= args.search_prior_mix <= 1.0:
        return f"--search-prior-mix must be in [0, 1], got {args.search_prior_mix}"
    if args.search_prior_mix and (args.search_prior == "uniform" or not args.checkpoint):
        return "--search-prior-mix mixes uniform into the checkpoint's prior: it needs one"
    if args.search_prior_mix_over != "actions" and not args.search_prior_mix:
        return "--search-prior-mix-over groups needs --search-prior-mix"
    if args.search_prior_mix_where != "always" and not args.search_prior_mix:
        return "--search-prior-mix-where acquire needs --search-prior-mix"
    if args.search_reward is not None and args.search_leaf != VALUE_LEAF:
        return "--search-reward needs --search-leaf value (the reward is in the critic's units)"
    if args.search_until_stage is not None:
        if not wants_search(args):
            return "--search-until-stage needs --search-simulations or --rollout-search"
        if not args.checkpoint or args.search_prior in ("uniform", "both"):
            return ("--search-until-stage hands the game to the checkpoint's greedy move: it "
                    "needs --checkpoint and the checkpoint's prior")
        if args.search_until_stage < 2:
            return f"--search-until-stage must be >= 2, got {args.search_until_stage}"
    if args.search_threat_cost is not None:
        if not wants_search(args):
            return "--search-threat-cost needs --search-simulations or --rollout-search"
        if args.search_threat_cost <= 0:
            return f"--search-threat-cost must be > 0, got {args.search_threat_cost:g}"
    if args.search_program_bonus and not wants_search(args):
        return "--search-program-bonus needs --search-simulations or --rollout-search"
    names = [name for name, _ in args.search_program_bonus or []]
    if len(set(names)) != len(names):
        return f"--search-program-bonus names a program twice: {', '.join(names)}"
    return None


def env_error(args, env, trained_options: dict | None = None) -> str | None:
    """The first search option ``env`` cannot serve (checked once the env is built, before
    any play), ``trained_options`` the env options the checkpoint was trained under; None if
    all are fine."""
    if args.search_leaf == VALUE_LEAF and hasattr(env.search_hooks, "critic_leaf_problem"):
        problem = env.search_hooks.critic_leaf_problem(trained_options or {})
        if problem:
            return f"--search-leaf value: {problem}"
    if args.search_prior_mix_over == "groups" and env.action_groups is None:
        return "--search-prior-mix-over groups needs an env with action groups"
    if args.search_prior_mix_where == "acquire" and not hasattr(env.search_hooks,
                                                                 "acquisition_in_reach"):
        return ("--search-prior-mix-where acquire needs an env whose search hooks have "
                "acquisition_in_reach")
    for flag, hold in (("--rollout-hold", max(args.rollout_hold)),
                       ("--search-hold-plans", args.search_hold_plans)):
        # Without a plan action nothing is ever held: a -holdS row would be the unheld one.
        if hold > 1 and not (hasattr(env.search_hooks, "plan_actions")
                             and env.search_hooks.plan_actions(env.env).any()):
            return (f"{flag} needs an env with plan actions (HackMatrix: a checkpoint "
                    "trained with --acquire-macro)")
    if args.search_reward is not None and args.search_reward not in env.training_reward_names:
        return (f"--search-reward {args.search_reward!r} is not a training reward of the env "
                f"(one of {', '.join(env.training_reward_names)})")
    if args.search_until_stage is not None and (
            env.num_stages is None or args.search_until_stage > env.num_stages
            or not hasattr(env.search_hooks, "stage_of")):
        return (f"--search-until-stage must be a stage of the env (2..{env.num_stages}) whose "
                "search hooks have stage_of")
    if args.search_threat_cost is not None and not hasattr(env.search_hooks, "threat_cost"):
        return "--search-threat-cost needs an env whose search hooks have threat_cost"
    if not args.search_program_bonus:
        return None
    if not hasattr(env.search_hooks, "program_bonus"):
        return "--search-program-bonus needs an env whose search hooks have program_bonus"
    try:
        env.search_hooks.program_bonus(dict(args.search_program_bonus))
    except ValueError as error:
        return f"--search-program-bonus: {error}"
    return None


def row_name(simulations: int, prior: str, fair: bool, leaf: str = "exit",
             bonus: bool = False, mix: float = 0.0, mix_over: str = "actions",
             mix_where: str = "always", value_scale: float | None = None,
             gumbel_scale: float | None = None, worlds: int = DEFAULT_WORLDS,
             rescale_values: bool = True) -> str:
    """The row's name; ``value_scale`` and ``gumbel_scale`` tag it where given (None: the
    search's defaults), raw Q-values (``rescale_values`` False) likewise, and a fair row's
    ``worlds`` where it is not ``DEFAULT_WORLDS``."""
    mix_tag = ("gmix" if mix_over == "groups" else "mix") + f"{mix:g}" + (
        "" if mix_where == "always" else f"-{mix_where}")
    return (f"search-{simulations}" + ("-ppo" if prior == "checkpoint" else "")
            + (f"-{mix_tag}" if prior == "checkpoint" and mix else "")
            + ("" if fair else "-perfect-info")
            + ("" if not fair or worlds == DEFAULT_WORLDS else f"-w{worlds}")
            + ("" if leaf == "exit" else f"-{leaf}")
            + ("-bonus" if bonus else "")
            + ("" if rescale_values else "-raw")
            + ("" if value_scale is None else f"-vs{value_scale:g}")
            + ("" if gumbel_scale is None else f"-g{gumbel_scale:g}"))


def search_rows(args, env, env_params, network, params, key, max_steps: int,
                critic: dict | None = None) -> dict:
    """{row name: summary} for every budget x information x prior asked for (tree search)
    and every rollout count x information (rollout search), played on the boards of ``key``
    (those of the other rows), each with its cost per move. ``critic`` (``--search-leaf
    value``): the checkpoint's ``training_reward``, ``reward_scale`` and ``gamma``, the return
    its critic estimates."""
    from purejaxrl.networks import is_recurrent
    from purejaxrl.search import (SearchSettings, critic_objective, make_search_policy,
                                  network_node, network_prior, sum_value_terms,
                                  uniform_prior, with_value_bonus)
    search_hooks = env.search_hooks  # the env's model, worlds, leaf values, action counters
    value_leaf = args.search_leaf == VALUE_LEAF
    # The game's hooks (model, worlds, allowed actions); the value leaf replaces its objective.
    game_leaf = "zero" if value_leaf else args.search_leaf
    gamma = critic["gamma"] if value_leaf else search_hooks.DEFAULT_GAMMA
    objective = (critic_objective(env, network, params, critic["search_reward"],
                                  critic["reward_scale"]) if value_leaf else {})
    reward_tag = (f"-r{critic['search_reward']}" if value_leaf and critic["search_reward"]
                  != critic["training_reward"] else "")
    group_matrix = (env.action_group_matrix() if args.search_prior_mix_over == "groups"
                    else None)
    mix_where = (search_hooks.acquisition_in_reach if args.search_prior_mix_where == "acquire"
                 else None)
    bonuses = dict(args.search_program_bonus or [])
    threat = args.search_threat_cost
    # The hand-set leaf terms, summed: the programs' worth, the crowd's price.
    bonus = sum_value_terms(
        ([search_hooks.program_bonus(bonuses)] if bonuses else [])
        + ([search_hooks.threat_cost(threat)] if threat is not None else []))
    threat_tag = f"-threat{threat:g}" if threat is not None else ""
    # The tree's Q weight and root noise where asked for, else SearchSettings' own; a row is
    # tagged only where they differ from those.
    scales = {name: value for name, value in (("value_scale", args.search_value_scale),
                                              ("gumbel_scale", args.search_gumbel_scale))
              if value is not None and value != getattr(SearchSettings, name)}
    if args.search_raw_values:
        scales["rescale_values"] = False
    recurrent = params is not None and is_recurrent(network)

    prior_choice = args.search_prior or ("checkpoint" if params is not None else "uniform")
    priors = ("uniform", "checkpoint") if prior_choice == "both" else (prior_choice,)
    informations = ("fair", "perfect") if args.search_information == "both" else (
        args.search_information,)
    rows = {}

    def add_row(name: str, policy, cost: dict) -> None:
        # Every row, tree or rollouts, takes the same reward and threat tags and hand-over.
        name, policy = until_stage(args, env, network, params, name + reward_tag + threat_tag,
                                   policy)
        if cost.get("hold_plans", 1) > 1:
            from purejaxrl.search import hold_plans
            name = f"{name}-hold{cost['hold_plans']}"
            policy = hold_plans(policy, search_hooks.plan_actions(env.env), cost["hold_plans"],
                                env.action_mask)
        rows[name] = play_row(args, env, env_params, policy, key, max_steps, name,
                              dict(cost, until_stage=args.search_until_stage,
                                   reward=critic and critic["search_reward"],
                                   threat_cost=threat))

    for simulations in args.search_simulations or []:
        for information in informations:
            for prior in priors:
                fair = information == "fair"
                worlds = args.search_worlds if fair else 1
                settings = SearchSettings(num_simulations=simulations, num_worlds=worlds,
                                          gamma=gamma, **scales)
                hooks = {**search_hooks.make_hooks(env.env, fair=fair, leaf=game_leaf,
                                                   gamma=gamma), **objective}
                if recurrent and (prior == "checkpoint" or value_leaf):
                    # The network's hidden state travels down every path of the tree.
                    hooks["node_fn"] = network_node(
                        network, params, use_prior=prior == "checkpoint",
                        uniform_share=args.search_prior_mix, group_matrix=group_matrix,
                        mix_where=mix_where,
                        leaf_value=None if value_leaf else hooks["leaf_value"],
                        value_bonus=bonus)
                    hooks["initial_memory"] = network.initial_hidden(1)[0]
                    del hooks["leaf_value"]
                else:
                    if bonus is not None:
                        hooks["leaf_value"] = with_value_bonus(hooks["leaf_value"], bonus)
                    hooks["prior_fn"] = (uniform_prior if prior == "uniform"
                                         else network_prior(network, params,
                                                            args.search_prior_mix,
                                                            group_matrix, mix_where))
                name = row_name(simulations, prior, fair, args.search_leaf, bool(bonuses),
                                args.search_prior_mix, args.search_prior_mix_over,
                                args.search_prior_mix_where, **scales, worlds=worlds)
                cost = dict(
                    simulations=simulations, worlds=worlds, information=information,
                    prior=prior, leaf=args.search_leaf, gamma=gamma,
                    prior_uniform_share=args.search_prior_mix if prior == "checkpoint" else 0.0,
                    prior_mix_over=args.search_prior_mix_over,
                    prior_mix_where=args.search_prior_mix_where,
                    value_scale=settings.value_scale, gumbel_scale=settings.gumbel_scale,
                    rescale_values=settings.rescale_values,
                    model_steps_per_move=search_hooks.model_steps_per_move(
                        game_leaf, simulations, worlds),
                    program_bonus=bonuses, hold_plans=args.search_hold_plans)
                add_row(name, make_search_policy(settings=settings, **hooks), cost)
    for rollouts in args.rollout_search or []:
        for hold in args.rollout_hold:
            for information in informations:
                name, policy, cost = rollout_row(args, env, network, params, rollouts,
                                                 information == "fair", game_leaf, gamma,
                                                 objective, recurrent, bonus, bonuses, hold)
                add_row(name, policy, cost)
    return rows


def until_stage(args, env, network, params, name: str, policy):
    """With ``--search-until-stage K``: (``name-untilK``, the policy that plays ``policy``
    before stage K and the checkpoint's greedy move from it on); else both as they are."""
    if args.search_until_stage is None:
        return name, policy
    from purejaxrl.evaluation import network_policy
    from purejaxrl.search import hand_over
    stage_of, stage = env.search_hooks.stage_of, args.search_until_stage
    return f"{name}-until{stage}", hand_over(
        policy, network_policy(env, network, params, greedy=True),
        lambda obs, env_state: stage_of(env_state) >= stage)


def rollout_row(args, env, network, params, rollouts: int, fair: bool, game_leaf: str,
                gamma: float, objective: dict, recurrent: bool, bonus=None, bonuses=None,
                hold: int = 1):
    """(row name, policy, cost) of the rollout search with ``rollouts`` rollouts per
    candidate: the checkpoint's network ranks the candidates, plays the rollouts and (with
    the value leaf) ends them; without a checkpoint, uniform random playouts. ``bonus`` (the
    summed leaf terms, ``search_hooks.program_bonus`` and ``threat_cost``): added to the value
    where a rollout ends alive. ``hold``: a plan candidate's steps before the network plays
    on (``RolloutSettings.hold_steps``)."""
    from purejaxrl.rollout_search import RolloutSettings, make_rollout_policy
    from purejaxrl.search import (feedforward_node, network_node, network_prior, uniform_prior,
                                  with_value_bonus)
    hooks = {**env.search_hooks.make_hooks(env.env, fair=fair, leaf=game_leaf, gamma=gamma),
             **objective}
    leaf_value = hooks.pop("leaf_value")
    value_leaf = args.search_leaf == VALUE_LEAF
    memory = ()
    if recurrent:
        node = network_node(network, params, leaf_value=None if value_leaf else leaf_value,
                            value_bonus=bonus)
        memory = network.initial_hidden(1)[0]
    else:
        if bonus is not None:
            leaf_value = with_value_bonus(leaf_value, bonus)
        node = feedforward_node(uniform_prior if params is None
                                else network_prior(network, params), leaf_value)
    policy_choice = args.rollout_policy or ("greedy" if params is not None else "sampled")
    settings = RolloutSettings(num_rollouts=rollouts, horizon=args.rollout_horizon,
                               num_candidates=args.rollout_candidates, gamma=gamma,
                               greedy=policy_choice == "greedy",
                               min_gain_z=args.rollout_min_gain_z,
                               hold_steps=hold)
    if hold > 1:
        hooks["plan_actions"] = env.search_hooks.plan_actions(env.env)
    name = (f"rollout-{rollouts}-h{args.rollout_horizon}-k{args.rollout_candidates}"
            + (f"-hold{hold}" if hold > 1 else "")
            + ("-ppo" if params is not None else "")
            + ("-sampled" if params is not None and policy_choice == "sampled" else "")
            + (f"-z{args.rollout_min_gain_z:g}" if args.rollout_min_gain_z else "")
            + ("" if fair else "-perfect-info")
            + ("" if args.search_leaf == "exit" else f"-{args.search_leaf}")
            + ("-bonus" if bonuses else ""))
    cost = dict(rollouts=rollouts, horizon=args.rollout_horizon,
                candidates=args.rollout_candidates, rollout_policy=policy_choice,
                min_gain_z=args.rollout_min_gain_z, hold_steps=hold,
                information="fair" if fair else "perfect",
                prior="checkpoint" if params is not None else "uniform",
                leaf=args.search_leaf, gamma=gamma,
                model_steps_per_move=settings.model_steps_per_move(env.num_actions),
                program_bonus=dict(bonuses or {}))
    policy = make_rollout_policy(settings=settings, node_fn=node, initial_memory=memory,
                                 **hooks)
    return name, policy, cost


class ProgressReport:
    """``play_boards``' ``on_progress``: one stderr line per tenth of the boards finished (a
    search row runs for minutes to hours without other output). Its calls are unordered, so
    only a count above the last one reported is printed."""

    def __init__(self, name: str, boards: int):
        self.name, self.boards = name, boards
        self.start = time.perf_counter()  # play_row restarts it once the row is compiled
        self.step = max(1, boards // 10)
        self.reported = 0

    def __call__(self, finished, won) -> None:
        finished, won = int(finished), int(won)
        if finished < min(self.reported + self.step, self.boards):
            return
        self.reported = finished
        print(f"{self.name}: {finished}/{self.boards} boards finished, {won} won "
              f"({time.perf_counter() - self.start:.0f} s)", file=sys.stderr, flush=True)


def play_row(args, env, env_params, policy, key, max_steps: int, name: str,
             cost: dict) -> dict:
    """One search row: ``policy`` plays the boards of ``key``, compiled and timed apart; its
    summary gets the stage shares, the stage report (``evaluation.stage_report``, as every
    other row), the final-state values and ``cost`` with the timings."""
    import jax
    from purejaxrl.evaluation import game_outcomes, stage_report, summarize_episodes
    from purejaxrl.recorded_games import BOARDS
    from purejaxrl.search import play_boards, stage_reached_shares
    search_hooks = env.search_hooks
    final_values = getattr(search_hooks, "FINAL_STATE_VALUES", {})
    final_labels = getattr(search_hooks, "FINAL_STATE_LABELS", {})
    report = ProgressReport(name, args.episodes)
    play = jax.jit(lambda k: play_boards(
        env, env_params, policy, k, args.episodes, max_steps, args.search_boards_in_flight,
        final_values, on_progress=report,
        record_actions=args.record_actions))
    start = time.perf_counter()
    compiled = play.lower(key).compile()
    compile_s = time.perf_counter() - start
    start = report.start = time.perf_counter()
    episodes = jax.block_until_ready(compiled(key))
    wall_s = time.perf_counter() - start
    summary = summarize_episodes(episodes, env)
    summary["stage_reached"] = stage_reached_shares(episodes, env.num_stages)
    summary["final_state"] = final_state_means(episodes, final_values, final_labels)
    summary["stages"] = stage_report(episodes, env.num_stages)
    summary["games"] = game_outcomes(episodes)
    summary["loop"] = BOARDS  # its games' keys (recorded_games.game_keys)
    moves = int(jax.device_get(episodes["length"]).sum())
    summary["search"] = dict(cost, moves=moves, wall_s=wall_s,
                             wall_s_per_move=wall_s / max(moves, 1), compile_s=compile_s,
                             boards_in_flight=args.search_boards_in_flight)
    print(f"{name}: stage {summary['stage_mean']:.3f}, win rate "
          f"{summary['win_rate']:.3f} ({compile_s:.0f} s compile, {wall_s:.0f} s)",
          file=sys.stderr, flush=True)
    return summary


def final_state_means(episodes: dict, final_values, labels: dict) -> dict:
    """{name: mean over the games} of the search hooks' ``FINAL_STATE_VALUES`` (the state each
    game's last action was chosen in); a vector value is keyed by its ``labels`` (for
    HackMatrix, each program's share of games that owned it at the end)."""
    import numpy as np
    means = {}
    for name in final_values:
        mean = np.asarray(episodes[name], np.float64).mean(axis=0)
        means[name] = (dict(zip(labels[name], map(float, mean))) if name in labels
                       else mean.tolist())
    return means


def format_final_state(results: dict) -> str:
    """One line per search row and labelled value: the labels with a non-zero mean."""
    lines = []
    for name, summary in results.items():
        for value_name, means in summary.get("final_state", {}).items():
            if isinstance(means, dict):
                shown = ", ".join(f"{label} {mean:.3f}" for label, mean in means.items()
                                  if mean > 0) or "none"
                lines.append(f"{name}: {value_name} at the end: {shown}")
    return "\n".join(lines)


def format_stage_table(results: dict) -> str:
    """The share of games that reached each stage, and won, one row per policy."""
    names = [name for name, summary in results.items() if "stage_reached" in summary]
    columns = list(results[names[0]]["stage_reached"])
    width = max(len(name) for name in names) + 2
    lines = ["share of games reaching stage k",
             "policy".ljust(width) + "".join(column.rjust(8) for column in columns)]
    for name in names:
        shares = results[name]["stage_reached"]
        lines.append(name.ljust(width) + "".join(f"{shares[c]:.3f}".rjust(8) for c in columns))
    return "\n".join(lines)


def format_costs(results: dict) -> str:
    """Per search row: its budget, model env steps and wall-clock per move, compile time."""
    rows = {name: summary["search"] for name, summary in results.items() if "search" in summary}
    width = max(len(name) for name in rows) + 2
    headers = ("budget", "model steps/move", "ms/move", "compile s", "run s")
    lines = ["search cost per move (model steps: env steps inside the search)",
             "policy".ljust(width) + "".join(h.rjust(28 if i == 0 else 17)
                                             for i, h in enumerate(headers))]
    for name, cost in rows.items():
        budget = (f"{cost['simulations']} sims x {cost['worlds']} worlds"
                  if "simulations" in cost else
                  f"{cost['candidates']} moves x {cost['rollouts']} x {cost['horizon'] + 1} steps")
        cells = (cost["model_steps_per_move"], f"{1000 * cost['wall_s_per_move']:.1f}",
                 f"{cost['compile_s']:.0f}", f"{cost['wall_s']:.0f}")
        lines.append(name.ljust(width) + budget.rjust(28)
                     + "".join(str(c).rjust(17) for c in cells))
    return "\n".join(lines)
