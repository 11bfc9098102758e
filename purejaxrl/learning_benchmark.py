"""The learning benchmark: train K seeds of one configuration for a fixed budget, evaluate every
seed on the same held-out boards next to the random and scripted-heuristic policies, append the
rows to a ledger and draw the learning curve.

Held-out boards: every policy plays one episode from each of ``episodes`` resets drawn from
``EVALUATION_KEY``, a key no training run uses (training resets come from ``PRNGKey(seed)``
splits). Evaluation always runs on the environment's parity defaults (Swift's reward and time
limit), whatever reward options the run trained with, so every row of the ledger is judged on
the same game: by stage reached and wins, with the Swift return alongside. Every policy is judged
under each of the env's judgements (``registry.judgements``, declared by the env beside its
training options; one, ``eval``, the game as it is, for an env that declares none): HackMatrix
is judged in the parity env as it is (``eval``, decisions R9's cross-stage UNDO loop open, as in
Swift) and with that loop closed (``eval_closed``), the honest figures the summary table shows,
since a win bought through the loop is no win. Each judgement holds the means and the per-stage
report (``stages``: the share of games reaching and clearing every stage).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import time
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from envs import registry
from envs.options import shown_judgement
from purejaxrl import ppo
from purejaxrl.checkpoint import list_checkpoints, load_checkpoint, run_contents, seed_directories
from purejaxrl.config import ConfigError, RunOptions, TrainConfig, config_differences
from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.evaluation import (make_policy_comparison, network_policy, play_episodes,
                                  random_policy, stage_report, summarize_episodes)
from purejaxrl.output_paths import OVERWRITE_FLAG, OutputPathError, check_writable_file
from purejaxrl.provenance import process_commit

EVALUATION_KEY = 20_261_123  # the held-out boards: never a training seed's key stream


@dataclasses.dataclass(frozen=True)
class Tier:
    total_timesteps: Optional[int]  # None: the env's own budget (reference)
    num_seeds: int
    what: str


TIERS = {
    "smoke": Tier(2_097_152, 1, "a few minutes on a 2-core CPU: the pipeline runs end to end"),
    "standard": Tier(20_000_000, 3, "20M env steps x 3 seeds"),
    "full": Tier(50_000_000, 3, "50M env steps x 3 seeds"),
    "long": Tier(200_000_000, 3, "200M env steps x 3 seeds: hours per seed on a CPU, so "
                 "resumed over several sittings (--resume)"),
    "reference": Tier(None, 3, "an env with a published config (a gymnax id): its own budget "
                      "and defaults (PureJaxRL's), 3 seeds; the default tier for such an env"),
}
DEFAULT_NUM_ENVS = 2048
DEFAULT_EVAL_EPISODES = 512
LEDGER = os.path.join("benchmarks", "learning", "ledger.jsonl")
# The reference envs' rows (CartPole, MinAtar: the trainer checked against PureJaxRL's figures).
REFERENCE_LEDGER = os.path.join("benchmarks", "learning", "reference.jsonl")


def judgements_for(config: TrainConfig) -> dict:
    """{ledger key: the game options it sets} of every judgement of ``config.env``
    (``registry.judgements``: HackMatrix's ``eval`` and ``eval_closed``, one ``eval`` for an
    env that declares none)."""
    return {judgement.key: dict(judgement.options)
            for judgement in registry.judgements(config.env)}


def row_env(row: dict) -> str:
    """The env a ledger row judged: rows name it (``env``, or a seed's ``config``); rows
    written before they did are HackMatrix's (the reference ledger's baselines hold no other
    judgement than ``eval``, which every env has)."""
    return row.get("env") or (row.get("config") or {}).get("env") or registry.DEFAULT_ENV


def score_of(summary: dict) -> tuple[str, str]:
    """(summary key, name) of the figure a run is judged by: the mean stage for an env with
    stages (HackMatrix), else the mean return (CartPole, MinAtar)."""
    if "stage_mean" in summary:
        return "stage_mean", "stage"
    return "return_mean", "return"


def evaluation_env(config: TrainConfig, game_options: Optional[dict] = None,
                   agent: bool = True):
    """The parity environment of ``config.env``: the env's own defaults (Swift's reward and
    rules, the default time limit), whatever the training options are, with a judgement's
    ``game_options`` set (HackMatrix's honest judgement closes the R9 loop) and nothing else
    changed. The agent's own env options (``TrainConfig.agent_env_options``: HackMatrix's
    acquire macro) are kept for the trained network (``agent``) and left out for the
    baselines, which play the game's own actions."""
    options = config.agent_env_options() if agent else {}
    env, params = registry.make(config.env, **(game_options or {}), **options)
    return TrainerEnv(env, params), params


def judged(env: TrainerEnv, per_env) -> dict:
    """The summary of one policy's games with their per-stage report."""
    return {**summarize_episodes(per_env, env), "stages": stage_report(per_env, env.num_stages)}


def make_network_evaluator(config: TrainConfig, episodes: int,
                           game_options: Optional[dict] = None) -> Callable:
    """``evaluate(params) -> {"greedy": summary, "sampled": summary}`` on the held-out boards;
    one compile serves every seed and both modes (params and the mode are arguments)."""
    env, env_params = evaluation_env(config, game_options)
    network = ppo.make_network(config, env)
    max_steps = int(env_params.max_steps_in_episode)

    @jax.jit
    def play(params, greedy):
        return play_episodes(env, env_params, network_policy(env, network, params, greedy),
                             jax.random.PRNGKey(EVALUATION_KEY), episodes, max_steps)

    def evaluate(params):
        return {mode: judged(env, play(params, jnp.bool_(mode == "greedy")))
                for mode in ("greedy", "sampled")}
    return evaluate


def evaluate_baselines(config: TrainConfig, episodes: int,
                       game_options: Optional[dict] = None) -> dict:
    """{"random": summary, "heuristic": summary} on the same held-out boards."""
    env, env_params = evaluation_env(config, game_options, agent=False)
    policies = {"random": random_policy(env)}
    heuristic = env.heuristic_policy()
    if heuristic is not None:
        policies["heuristic"] = heuristic
    play = make_policy_comparison(env, env_params, list(policies.values()), episodes,
                                  int(env_params.max_steps_in_episode))
    key = jax.random.PRNGKey(EVALUATION_KEY)
    return {name: judged(env, play(index, key)) for index, name in enumerate(policies)}


def make_judge(config: TrainConfig, episodes: int) -> Callable:
    """``judge(params) -> {judgement: {"greedy": ..., "sampled": ...}}`` for every judgement
    of the env (``judgements_for``)."""
    evaluators = {name: make_network_evaluator(config, episodes, game_options)
                  for name, game_options in judgements_for(config).items()}
    return lambda params: {name: evaluate(params) for name, evaluate in evaluators.items()}


def judge_baselines(config: TrainConfig, episodes: int) -> dict:
    """{policy: {judgement: summary}} for the random and heuristic policies."""
    judgements = judgements_for(config)
    by_judgement = {name: evaluate_baselines(config, episodes, game_options)
                    for name, game_options in judgements.items()}
    first = next(iter(by_judgement.values()))
    return {policy: {name: by_judgement[name][policy] for name in judgements}
            for policy in first}


def kept_baselines(done: dict, config: TrainConfig) -> Optional[dict]:
    """{policy: {judgement: summary}} of the baseline rows a resumed benchmark found in the
    ledger, when they hold every judgement; else None (judge them anew). Their boards and
    rules are those of the label's seeds, so a table of kept seeds keeps their baselines too,
    and a sitting of a long tier does not evaluate them again."""
    rows = {key.split(":", 1)[1]: row for key, row in done.items()
            if isinstance(key, str) and key.startswith("baseline:")
            and row_env(row) == config.env}  # another env's boards are not this run's
    judgements = judgements_for(config)
    if not rows or not all(name in row for row in rows.values() for name in judgements):
        return None
    return {policy: {name: row[name] for name in judgements} for policy, row in rows.items()}


def honest(row: dict, env_id: Optional[str] = None) -> dict:
    """The judgement a table shows for a ledger entry (or a {judgement: summary} dict of
    ``env_id``): the env's shown judgement (HackMatrix's: the R9 loop closed) where the row
    has it, else the first the row holds (rows written before the shown one existed), with
    the other judgements' carried figures beside it (HackMatrix: the parity env's R9
    completions)."""
    judgements = registry.judgements(env_id or row_env(row))
    preferred = shown_judgement(judgements)
    shown = next(j for j in (preferred, *judgements) if row.get(j.key) is not None)
    carried = {key: row[judgement.key] for judgement in judgements
               if judgement is not shown and row.get(judgement.key) is not None
               for key, _ in judgement.carried}
    summary = row[shown.key]
    if not carried:
        return summary

    def with_carried(mode):
        return {**(summary[mode] if mode else summary),
                **{key: (other[mode] if mode else other).get(key)
                   for key, other in carried.items()}}
    if "greedy" in summary:
        return {mode: with_carried(mode) for mode in summary}
    return with_carried(None)


def carried_columns(env_id: str) -> tuple:
    """(summary key, title, format) of the figures ``honest`` carries for ``env_id``."""
    return tuple((key, title, ".2f") for judgement in registry.judgements(env_id)
                 for key, title in judgement.carried)


def learning_curve(records: list[dict], prefix: str = "") -> list[list[float]]:
    """[env_steps, mean stage (an env without stages: mean return) of the training episodes
    that ended in the chunk] per chunk; ``prefix`` selects one seed of a multi-seed run's
    records (``seed<s>/``)."""
    staged = any(record.get(f"{prefix}episode/stage_mean") is not None for record in records)
    key = f"{prefix}episode/{'stage' if staged else 'return'}_mean"
    return [[record["env_steps"], record[key]] for record in records
            if record.get(key) is not None]


def read_jsonl(path: str) -> list[dict]:
    """The records of a JSON-lines file (a ledger, a run's metrics), blank lines skipped."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def logged_curve(run_dir: str, seed: int, num_seeds: int, up_to_env_steps: int) -> list:
    """The learning curve a run logged to ``<run_dir>/metrics.jsonl`` up to a checkpoint (the
    part before a resume; chunks logged after that checkpoint are trained again)."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    records = [r for r in read_jsonl(path) if r.get("env_steps", 0) <= up_to_env_steps]
    return learning_curve(records, f"seed{seed}/" if num_seeds > 1 else "")


def finished_rows(ledger: Optional[str], label: str, tier: str) -> dict:
    """{seed: row} of the seeds of ``label`` (and ``tier``) already in the ledger, and the
    baselines as {"baseline:<policy>": row}: what a resumed benchmark does not redo."""
    if not ledger or not os.path.exists(ledger):
        return {}
    rows = {}
    for row in read_jsonl(ledger):
        if row.get("label") == label and row.get("tier") == tier:
            key = row["seed"] if row.get("kind") == "seed" else f"baseline:{row.get('policy')}"
            rows[key] = row
    return rows


def check_new_label(ledger: Optional[str], label: str, tier: str, run_dirs: list[str]) -> None:
    """A benchmark that is not resumed starts a new label: refuse (ConfigError, before any
    work) a label with rows in the ledger or a run directory that already holds a run."""
    if finished_rows(ledger, label, tier):
        raise ConfigError(f"--label {label} ({tier}) already has rows in {ledger}: continue it "
                          "with --resume, or choose another --label")
    for run_dir in run_dirs:
        if run_contents(run_dir):
            raise ConfigError(f"{run_dir} already holds a run: continue the benchmark with "
                              "--resume, or choose another --label or --checkpoint-dir")


# What may differ between the seeds of one label: the seed, and how the seeds were spread over
# programs and devices (a tier finished on another machine).
SEED_PLACEMENT_FIELDS = ("seed", "num_seeds", "num_devices")


def check_kept_seeds(done: dict, config: TrainConfig, label: str) -> None:
    """A resumed benchmark keeps the seeds the ledger holds for ``label``: refuse
    (ConfigError, before any work) where one of them was trained with another configuration
    than ``config`` (the trainer's defaults changed since, or other flags), naming the first
    differences, so that a table never mixes two configurations under one label."""
    placement = {name: getattr(TrainConfig(), name) for name in SEED_PLACEMENT_FIELDS}
    for seed, row in sorted((key, row) for key, row in done.items() if isinstance(key, int)):
        if "config" not in row:
            continue
        try:
            recorded = TrainConfig.from_dict(row["config"])
        except (ConfigError, TypeError) as error:
            raise ConfigError(f"--resume: seed {seed} of {label} has a config this code "
                              f"cannot read: {error}") from None
        differences = config_differences(recorded.replace(**placement),
                                         config.replace(**placement))
        if differences:
            raise ConfigError(f"--resume: seed {seed} of {label} in the ledger was trained "
                              f"with another configuration ({'; '.join(differences[:3])}): "
                              "give its flags, or choose another --label")


def check_kept_env_version(done: dict, config: TrainConfig, label: str) -> None:
    """A resumed benchmark keeps the label's seeds and baselines from the ledger: refuse
    (ConfigError, before any work) where one of them was played under another version of the
    env's rules than this code's (``registry.env_version``), so that a table never mixes two
    games under one label. Rows written before rows recorded it are not compared."""
    current = registry.env_version(config.env)
    for key, row in sorted(done.items(), key=lambda item: str(item[0])):
        # another env's baselines are judged anew (kept_baselines), not compared
        if row_env(row) == config.env and "env_version" in row \
                and row["env_version"] != current:
            named = f"seed {key}" if isinstance(key, int) else \
                f"the {key.split(':', 1)[1]} baseline"
            raise ConfigError(f"--resume: {named} of {label} in the ledger was played under "
                              f"env version {row['env_version']!r}, this code's is "
                              f"{current!r}: choose another --label")


def check_kept_judgements(done: dict, config: TrainConfig, label: str) -> None:
    """A resumed benchmark keeps the label's seeds from the ledger: refuse (ConfigError, before
    any work) where a kept seed lacks a judgement this code records (HackMatrix's closed R9
    loop, for rows written before it existed), so that one table never shows some seeds under
    one judgement and some under another. Kept baselines without one are judged anew
    (``kept_baselines``)."""
    for seed, row in sorted((key, row) for key, row in done.items() if isinstance(key, int)):
        missing = [name for name in judgements_for(config) if name not in row]
        if missing:
            raise ConfigError(f"--resume: seed {seed} of {label} in the ledger was not judged "
                              f"under {', '.join(missing)} (written before this code judged "
                              "so): choose another --label")


def check_training_seeds(seeds: list[int]) -> None:
    """Refuse (ConfigError) a training seed equal to ``EVALUATION_KEY``: its resets would come
    from the key stream the held-out boards are drawn from."""
    if EVALUATION_KEY in seeds:
        raise ConfigError(f"seed {EVALUATION_KEY} is the held-out boards' key: train on "
                          "another seed")


def check_kept_boards(done: dict, eval_episodes: int, label: str) -> None:
    """A resumed benchmark keeps the label's seeds and baselines from the ledger: refuse
    (ConfigError, before any work) where one of them was judged on other held-out boards than
    this sitting would judge on (another ``--eval-episodes``, or boards drawn from another key
    than ``EVALUATION_KEY``), so that a table never compares policies played on two board
    sets under one board count. Rows that do not record their boards are not compared."""
    def named(key):
        return f"seed {key}" if isinstance(key, int) else f"the {key.split(':', 1)[1]} baseline"
    kept = sorted(done.items(), key=lambda item: (isinstance(item[0], str),
                                                  item[0] if isinstance(item[0], int) else 0,
                                                  str(item[0])))
    counts = sorted({row["eval_episodes"] for _, row in kept
                     if row.get("eval_episodes") is not None})
    if len(counts) > 1:
        # No --eval-episodes matches every kept row: name none, lest the next sitting be
        # refused for the other count.
        raise ConfigError(f"--resume: {label}'s rows in the ledger were judged on "
                          f"{' and '.join(map(str, counts))} held-out boards: choose another "
                          "--label")
    for key, row in kept:
        if row.get("eval_key") not in (None, EVALUATION_KEY):
            raise ConfigError(f"--resume: {named(key)} of {label} in the ledger was judged on "
                              f"boards of key {row['eval_key']}, this code draws them from key "
                              f"{EVALUATION_KEY}: choose another --label")
        if row.get("eval_episodes") not in (None, eval_episodes):
            raise ConfigError(f"--resume: {named(key)} of {label} in the ledger was judged on "
                              f"{row['eval_episodes']} held-out boards, this sitting would judge "
                              f"on {eval_episodes}: pass --eval-episodes {row['eval_episodes']}, "
                              "or choose another --label")


# What the curve may be saved as: the formats matplotlib writes with nothing beyond its own
# dependencies (pgf needs LaTeX; raw and rgba are no image files). Without an extension
# savefig would add ".png", writing another file than the one checked and reported.
PLOT_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg", "eps", "ps", "tif", "tiff")


def check_ledger(path: str) -> None:
    """Refuse (``OutputPathError``, before any work) a ledger the benchmark could not read or
    append to: a directory, a file that is not JSON lines of objects, a place that takes no
    file. A missing ledger is started."""
    what = f"--ledger {path}"
    check_writable_file(path, what)
    if not os.path.exists(path):
        return
    try:
        rows = read_jsonl(path)
    except (ValueError, UnicodeDecodeError) as error:
        raise OutputPathError(f"{what}: not a JSONL ledger ({error})") from None
    if not all(isinstance(row, dict) for row in rows):
        raise OutputPathError(f"{what}: not a JSONL ledger (a line is not a JSON object)")


def check_plot(path: str, what: str, replace: bool) -> None:
    """Refuse (``OutputPathError``, before any work) a curve path matplotlib cannot save to,
    and an existing file unless ``replace`` (``--overwrite``, or the label's own curve being
    redrawn on ``--resume``): a curve is drawn after the first seed, too late to find out."""
    if os.path.isdir(path):
        raise OutputPathError(f"{what}: is a directory")
    extension = os.path.splitext(path)[1][1:].lower()
    if extension not in PLOT_FORMATS:
        formats = ", ".join("." + name for name in PLOT_FORMATS)
        raise OutputPathError(f"{what}: the curve's format is its extension, one of {formats}"
                              + (f"; not .{extension}" if extension else ""))
    if os.path.isfile(path) and not replace:
        raise OutputPathError(f"{what}: already exists; pass {OVERWRITE_FLAG} to replace it, "
                              "or choose a new path")
    check_writable_file(path, what)


def median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def reached(summary: dict, stage: int):
    """Share of the games that reached ``stage`` (None for rows without a stage report)."""
    rows = summary.get("stages") or []
    return next((row["reached"] for row in rows if row["stage"] == stage), None)


def reach_stages(summaries) -> list[int]:
    """The stages after the first that the summaries' stage reports cover (HackMatrix: 2..8)."""
    return sorted({row["stage"] for summary in summaries for row in summary.get("stages") or []
                   if row["stage"] > 1})


def summary_table(seed_rows: list[dict], baselines: dict) -> str:
    """Every seed, the median over seeds, then the baselines: the numbers that judge a run,
    in the env's shown judgement where the rows have it (``honest``: HackMatrix's R9 loop
    closed), its carried figures last; the last columns are the shares of games reaching
    each stage after the first (HackMatrix: 2..8)."""
    shown = reach_stages([honest(r)[mode] for r in seed_rows for mode in ("greedy", "sampled")]
                         + list(baselines.values()))
    columns = (("stage_mean", "stage", ".2f"), ("win_rate", "win", ".3f"),
               ("truncation_rate", "trunc", ".3f"), ("length_mean", "length", ".0f"),
               ("return_mean", "return", ".2f"), ("siphons_per_episode", "siph/ep", ".2f"),
               ("programs_per_episode", "prog/ep", ".2f"), ("invalid_actions", "invalid", "d"),
               ("masked_actions", "masked", "d"))
    columns += carried_columns(row_env(seed_rows[0]) if seed_rows else registry.DEFAULT_ENV)

    def cell(value, fmt, width=10):  # rows written before a column existed show "-"
        if fmt == "d" and isinstance(value, float):  # a median of counts
            fmt = ".0f"
        return f"{'-' if value is None else format(value, fmt):>{width}}"

    def values(summary):
        return ([summary.get(key) for key, _, _ in columns]
                + [reached(summary, k) for k in shown])

    summaries = ([honest(r)[mode] for r in seed_rows for mode in ("greedy", "sampled")]
                 + list(baselines.values()))
    # An env without stages or the HackMatrix economy (CartPole) shows only what it has.
    columns = tuple(column for column in columns
                    if any(summary.get(column[0]) is not None for summary in summaries))
    header = (f"{'policy':<24}" + "".join(f"{title:>10}" for _, title, _ in columns)
              + "".join(f"{'>=' + str(k):>7}" for k in shown))
    lines = [header]
    formats = [fmt for _, _, fmt in columns] + [".1%"] * len(shown)
    widths = [10] * len(columns) + [7] * len(shown)

    def line(name, cells):
        lines.append(f"{name:<24}" + "".join(cell(v, f, w) for v, f, w in
                                             zip(cells, formats, widths)))

    for mode in ("greedy", "sampled"):
        for row in seed_rows:
            line(f"seed {row['seed']} {mode}", values(honest(row)[mode]))
        if len(seed_rows) > 1:
            per_seed = [values(honest(r)[mode]) for r in seed_rows]
            line(f"median {mode}", [median(column) for column in zip(*per_seed)])
    for name, summary in baselines.items():
        line(name, values(summary))
    lines += [throughput_line(row) for row in seed_rows if row.get("sps")]
    return "\n".join(lines)


def throughput_line(row: dict) -> str:
    """What a seed's result cost: env steps, hours of training (every sitting of a resumed
    run, compile apart) and env steps/s, so configurations compare per wall-clock hour too.
    A vmapped program's rate is all its seeds' steps together."""
    hours = row["train_seconds"] / 3600
    together = row.get("seeds_in_program", 1)
    return (f"seed {row['seed']}: {row['env_steps'] / 1e6:.1f}M env steps in {hours:.2f} h of "
            f"training, {row['sps']:,.0f} env steps/s"
            + (f" ({together} seeds in one program)" if together > 1 else "")
            + f", compile {row['compile_seconds']:.0f} s")


def seed_groups(rows: list[dict]) -> dict:
    """{label: its seed rows in seed order, one per seed (the newest where a seed has two:
    a ledger written before duplicates were refused)}, labels in the order they first
    appear."""
    groups = {}
    for row in rows:
        if row.get("kind") == "seed":
            groups.setdefault(row["label"], {})[row.get("seed")] = row
    return {label: sorted(seeds.values(), key=lambda row: row["seed"]
                          if row.get("seed") is not None else -1)
            for label, seeds in groups.items()}


def label_width(labels) -> int:
    """A label column wide enough for every label whole: two configurations never print as
    one."""
    return max([40] + [len(label) + 1 for label in labels])


def ledger_overview(rows: list[dict], tier: Optional[str] = None) -> str:
    """Every configuration of a ledger in one table, from its rows alone: per tier, one line per
    label with every seed's greedy score (the stage; the return for an env without stages) and
    honest wins, never the best seed alone, the medians over its seeds, the share of games
    reaching stage 6, programs per game, and what a seed cost (env steps/s, hours of training);
    the tier's baselines close its group. The last column is the ``tag`` of the judgement
    every seed row holds and tables show (HackMatrix: ``closed``, the R9 loop closed); a
    label whose rows predate it shows the tag of the first judgement they hold (``open``: its
    wins may have been bought through the loop)."""
    def cell(value, fmt, width):
        return f"{'-' if value is None else format(value, fmt):>{width}}"

    def wins(summary, row):
        if summary.get("win_rate") is None:
            return "-"
        return str(round(summary["win_rate"] * row.get("eval_episodes", 0)))

    def judged_by(judged_rows):
        judgements = registry.judgements(row_env(judged_rows[0]))
        held = [j for j in (shown_judgement(judgements), *judgements)
                if all(row.get(j.key) is not None for row in judged_rows)]
        return held[0].tag if held else "-"

    lines = []
    for name in (name for name in TIERS if tier in (None, name)):
        in_tier = [row for row in rows if row.get("tier") == name]
        groups = seed_groups(in_tier)
        if not groups:
            continue
        boards = sorted({row.get("eval_episodes") for row in in_tier} - {None})
        width = label_width(groups)
        # Every seed's score and wins whole, however many seeds: the columns widen to fit.
        def score_text(row):
            greedy = honest(row)["greedy"]
            return f"{greedy[score_of(greedy)[0]]:.2f}"

        by_seed_texts = {label: (" ".join(score_text(row) for row in seeds),
                                 " ".join(wins(honest(row)["greedy"], row) for row in seeds))
                         for label, seeds in groups.items()}
        score_width = max([23] + [len(text) for text, _ in by_seed_texts.values()]) + 1
        wins_width = max([13] + [len(text) for _, text in by_seed_texts.values()]) + 1
        header = (f"{'label':<{width}}{'seeds':>6}{'backend':>8}"
                  f"{'greedy by seed':>{score_width}}{'median':>8}{'sampled':>8}"
                  f"{'wins by seed':>{wins_width}}{'>=6':>7}{'prog/ep':>8}"
                  f"{'steps/s':>9}{'h/seed':>7}{'judged':>7}")
        lines += [f"{name} tier: {', '.join(map(str, boards)) or '?'} held-out boards per "
                  "policy; wins, >=6 (games reaching stage 6) and prog/ep of greedy play; "
                  "sampled, >=6, prog/ep, steps/s and h/seed are medians over the seeds", header]
        for label, seeds in groups.items():
            greedy = [honest(row)["greedy"] for row in seeds]
            sampled = [honest(row)["sampled"] for row in seeds]
            key, _ = score_of(greedy[0])
            by_seed, wins_by_seed = by_seed_texts[label]
            lines.append(
                f"{label:<{width}}{len(seeds):>6}{seeds[0].get('backend', '-'):>8}"
                f"{by_seed:>{score_width}}{median([s[key] for s in greedy]):>8.2f}"
                f"{median([s[key] for s in sampled]):>8.2f}"
                f"{wins_by_seed:>{wins_width}}"
                + cell(median([reached(s, 6) for s in greedy]), ".1%", 7)
                + cell(median([s.get("programs_per_episode") for s in greedy]), ".2f", 8)
                + cell(median([row.get("sps") for row in seeds]), ",.0f", 9)
                + cell(median([row["train_seconds"] / 3600 for row in seeds
                               if row.get("train_seconds")]), ".2f", 7)
                + f"{judged_by(seeds):>7}")
        # Per env and policy, the newest row (the shown judgement where a row has it): a tier
        # may hold labels of several envs (`-- --env CartPole-v1`), whose baselines are named.
        newest = {}
        for row in in_tier:
            shown_key = shown_judgement(registry.judgements(row_env(row))).key
            which = (row_env(row), row.get("policy"))
            if row.get("kind") == "baseline" and (row.get(shown_key) is not None
                                                  or which not in newest):
                newest[which] = row
        for (env_id, policy), row in sorted(newest.items()):
            summary = honest(row)
            key, _ = score_of(summary)
            name = policy if env_id == registry.DEFAULT_ENV else f"{policy}, {env_id}"
            lines.append(f"{'(' + name + ')':<{width}}{'':>{14 + score_width}}"
                         f"{summary[key]:>8.2f}{'':>8}{wins(summary, row):>{wins_width}}"
                         + cell(reached(summary, 6), ".1%", 7))
        lines.append("")
    if not lines:
        return "no seed rows" + (f" in the {tier} tier" if tier else "")
    return "\n".join(lines).rstrip()


def clear_rates(summary: dict) -> dict:
    """{stage: share of the games that started it and cleared it} of a summary's stage report
    (empty for rows without one; None where no game started the stage)."""
    return {row["stage"]: row.get("clear_rate") for row in summary.get("stages") or []
            if "clear_rate" in row}


def ledger_stage_overview(rows: list[dict], tier: Optional[str] = None) -> str:
    """Where each configuration of a ledger loses its games: per tier, one line per label with
    the median over its seeds of the greedy clear rate of every stage (of the games that
    started a stage, the share that cleared it, in %), then the median honest win rate; the
    tier's baselines close its group. Two configurations that lose their games on different
    stages show it here, where the mean stage alone hides it. Labels whose rows carry no
    per-stage report (older rows, envs without stages) are left out and counted."""
    lines = []
    for name in (name for name in TIERS if tier in (None, name)):
        in_tier = [row for row in rows if row.get("tier") == name]
        groups, left_out = {}, 0
        for label, seeds in seed_groups(in_tier).items():
            rates = [clear_rates(honest(row)["greedy"]) for row in seeds]
            if not all(rates):
                left_out += 1
                continue
            groups[label] = (seeds, rates)
        if not groups:
            continue
        stages = sorted({stage for _, rates in groups.values() for r in rates for stage in r})
        width = label_width(groups)
        lines += [f"{name} tier: greedy clear rate by stage (%, of the games that started it; "
                  "median over the seeds), honest wins (%, median)",
                  f"{'label':<{width}}{'seeds':>6}"
                  + "".join(f"{'st' + str(stage):>6}" for stage in stages) + f"{'wins':>7}"]

        def percent(value, cell=6):
            return f"{'-' if value is None else format(100 * value, '.0f'):>{cell}}"
        for label, (seeds, rates) in groups.items():
            win = median([honest(row)["greedy"].get("win_rate") for row in seeds])
            lines.append(f"{label:<{width}}{len(seeds):>6}"
                         + "".join(percent(median([r.get(stage) for r in rates]))
                                   for stage in stages)
                         + f"{'-' if win is None else format(100 * win, '.1f'):>7}")
        newest = {}
        for row in in_tier:
            if row.get("kind") == "baseline" and clear_rates(honest(row)):
                newest[row["policy"]] = row
        for policy, row in sorted(newest.items()):
            rates, win = clear_rates(honest(row)), honest(row).get("win_rate")
            lines.append(f"{'(' + policy + ')':<{width}}{'':>6}"
                         + "".join(percent(rates.get(stage)) for stage in stages)
                         + f"{'-' if win is None else format(100 * win, '.1f'):>7}")
        if left_out:
            lines.append(f"({left_out} label(s) of this tier have no per-stage report)")
        lines.append("")
    if not lines:
        return "no seed rows with a per-stage report" + (f" in the {tier} tier" if tier else "")
    return "\n".join(lines).rstrip()


def plot_learning_curves(path: str, label: str, seed_rows: list[dict], baselines: dict) -> None:
    """PNG: every seed's training stage against env steps, its final greedy evaluation as a
    marker, and the baselines' evaluation levels as horizontal lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5), dpi=110)
    key, name = score_of(honest(seed_rows[0])["greedy"])
    for row in seed_rows:
        curve = np.asarray(row["curve"], dtype=float).reshape(-1, 2)
        lines = axes.plot(curve[:, 0], curve[:, 1], linewidth=1.2,
                          label=f"seed {row['seed']} (training episodes, sampled)")
        axes.plot([row["env_steps"]], [honest(row)["greedy"][key]], marker="o",
                  color=lines[0].get_color(), linestyle="none")
    styles = {"heuristic": ("black", "--"), "random": ("grey", ":")}
    for policy, summary in baselines.items():
        color, style = styles.get(policy, ("grey", "-."))
        axes.axhline(summary[key], color=color, linestyle=style,
                     label=f"{policy} ({summary[key]:.2f})")
    axes.plot([], [], marker="o", color="black", linestyle="none",
              label="final greedy evaluation, held-out boards")
    axes.set_xlabel("env steps")
    axes.set_ylabel("mean stage reached" if key == "stage_mean" else "mean return")
    axes.set_title(label)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, loc="best")
    figure.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    figure.savefig(path)
    plt.close(figure)


def append_rows(path: str, rows: list[dict]) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def run(config: TrainConfig, seeds: list[int], label: str, tier: str, command: str,
        options: RunOptions, eval_episodes: int, ledger: Optional[str],
        plot_path: Optional[str], train: Callable, say=print, vmap_seeds: bool = False,
        resume: bool = False) -> dict:
    """Train and evaluate every seed, then the baselines; append the rows to ``ledger`` and
    draw ``plot_path``. With ``vmap_seeds`` the seeds (consecutive) train together in one
    compiled program (``num_seeds``, run directory ``<label>``), else one after another (run
    directories ``<label>-s<seed>``). ``train(config, options, checkpoint)`` trains (from the
    checkpoint if not None).

    ``resume``: seeds of ``label`` already in the ledger are taken from it, and a training run
    with a checkpoint in its run directory continues from it (exactly: the trainer's resume),
    so a tier longer than one sitting finishes over several. Returns {"seeds": rows,
    "baselines": summaries, "table": text, "appended": the number of rows this call appended
    to the ledger, "drawn": whether it drew the curve, "stop_signal": the signal that
    interrupted a training run, else None, "diverged": the message of a training run that
    stopped on a non-finite update, else None} (such a run's seeds are not recorded: short of
    the budget).
    A vmapped program resumed after some of its seeds' rows were written appends only the
    others'."""
    if vmap_seeds:
        runs = [(config.replace(seed=seeds[0], num_seeds=len(seeds)), label)]
    else:
        runs = [(config.replace(seed=seed), f"{label}-s{seed}") for seed in seeds]
    if not resume:
        check_new_label(ledger, label, tier, [os.path.join(options.checkpoint_dir, name)
                                              for _, name in runs])
    else:
        kept = finished_rows(ledger, label, tier)
        check_kept_seeds(kept, config, label)
        check_kept_boards(kept, eval_episodes, label)
        check_kept_env_version(kept, config, label)
        check_kept_judgements(kept, config, label)
    judge = make_judge(config, eval_episodes)
    judged_in = shown_judgement(registry.judgements(config.env)).words
    common = {"label": label, "tier": tier, "commit": process_commit(), "command": command,
              "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "backend": jax.default_backend(), "eval_episodes": eval_episodes,
              "eval_key": EVALUATION_KEY, "env": config.env,
              "env_version": registry.env_version(config.env)}
    # Baselines first and every seed's row as soon as it is evaluated: an interrupted
    # benchmark keeps the seeds it finished.
    done = finished_rows(ledger, label, tier) if resume else {}
    judged_baselines = kept_baselines(done, config)
    if judged_baselines is None:
        judged_baselines = judge_baselines(config, eval_episodes)
    baselines = {name: honest(judgements, config.env)
                 for name, judgements in judged_baselines.items()}
    baseline_rows = [{**common, "kind": "baseline", "policy": name, **judgements}
                     for name, judgements in judged_baselines.items()
                     if f"baseline:{name}" not in done]
    appended = 0
    if ledger:
        append_rows(ledger, baseline_rows)
        appended += len(baseline_rows)
    # Seeds kept from the ledger belong to every table and curve drawn, from the first one:
    # all of the label's, also those this call does not name (a tier finished one seed per
    # sitting, --seeds 1 --resume, must not redraw the curve without seed 0).
    rows_by_seed = {key: row for key, row in done.items() if isinstance(key, int)}
    stop_signal = diverged = None

    def draw():
        if plot_path and rows_by_seed:
            plot_learning_curves(plot_path, f"{label} ({tier})",
                                 [rows_by_seed[s] for s in sorted(rows_by_seed)], baselines)

    for run_config, run_name in runs:
        if all(seed in done for seed in run_config.seeds):
            say(f"== {label}: seed(s) {', '.join(map(str, run_config.seeds))} already in the "
                "ledger")
            continue
        run_dir = os.path.join(options.checkpoint_dir, run_name)
        checkpoint = None
        if resume and (list_checkpoints(run_dir) or seed_directories(run_dir)):
            checkpoint = load_checkpoint(run_dir, multi_seed=True)
            say(f"   resuming {run_dir} at update {checkpoint['update']}")
        say(f"== {label}: seed{'s' if run_config.num_seeds > 1 else ''} "
            f"{', '.join(map(str, run_config.seeds))}, {config.total_timesteps:,} env steps"
            + (" each, vmapped in one program" if run_config.num_seeds > 1 else ""))
        start = time.perf_counter()
        result = train(run_config, dataclasses.replace(options, run_name=run_name), checkpoint)
        wall = time.perf_counter() - start
        if result.interrupted or result.diverged:
            # A run stopped short of the budget (a signal, or a non-finite update) is not a
            # result of this tier: keep its checkpoint, record nothing, run no further seed.
            why = f": {result.diverged}" if result.diverged else ""
            say(f"   stopped at {result.env_steps:,} env steps per seed{why}; not recorded "
                f"(checkpoint {result.last_checkpoint})")
            stop_signal = result.stop_signal
            diverged = result.diverged
            break
        for seed_result in result.seeds:
            if seed_result.seed in done:  # a vmapped program resumed after its first rows
                continue
            row = seed_row(common, seed_result, run_config, result, wall, options, judge,
                           (checkpoint or {}).get("elapsed_seconds"))
            if checkpoint is not None:
                row["resumed_at_env_steps"] = checkpoint["env_steps"]
                row["curve"] = logged_curve(run_dir, seed_result.seed, run_config.num_seeds,
                                            checkpoint["env_steps"]) + row["curve"]
            rows_by_seed[row["seed"]] = row
            say(f"   seed {row['seed']}: {seed_line(honest(row), judged_in)} "
                f"({wall / 60:.1f} min)")
            if ledger:
                append_rows(ledger, [row])
                appended += 1
        draw()  # after each trained seed: an interrupted benchmark keeps its curve
    draw()
    seed_rows = [rows_by_seed[s] for s in sorted(rows_by_seed)]
    table = summary_table(seed_rows, baselines)
    # The last draw() above drew the curve exactly when there was one to draw.
    return {"seeds": seed_rows, "baselines": baselines, "table": table, "appended": appended,
            "drawn": bool(plot_path and rows_by_seed), "stop_signal": stop_signal,
            "diverged": diverged}


def seed_line(shown: dict, judged: str = "") -> str:
    """One seed's result in words: its greedy and sampled score, and its greedy wins where
    the env has wins, in the judgement ``judged`` names (HackMatrix: "R9 loop closed")."""
    key, name = score_of(shown["greedy"])
    line = f"greedy {name} {shown['greedy'][key]:.2f}, sampled {shown['sampled'][key]:.2f}"
    if "win_rate" in shown["greedy"]:
        line += f", greedy wins {shown['greedy']['win_rate']:.1%}"
        line += f" ({judged})" if judged else ""
    return line


def seed_row(common: dict, seed_result, run_config: TrainConfig, result, wall: float,
             options: RunOptions, judge: Callable,
             resumed_seconds: Optional[float] = None) -> dict:
    """The ledger row of one trained seed: its held-out evaluation, curve and budget. ``sps``
    and the times are those of the training program (all its seeds together when vmapped);
    a sitting that logged no update (resumed at its budget) takes the training time its
    checkpoint holds (``resumed_seconds``)."""
    records = seed_result.records
    train_seconds = records[-1]["elapsed_s"] if records else (resumed_seconds or None)
    program_steps = result.env_steps * run_config.num_seeds
    return {**common, "kind": "seed", "seed": seed_result.seed, "env_steps": result.env_steps,
            "updates": result.updates_done, "wall_seconds": wall,
            "train_seconds": train_seconds,
            "sps": program_steps / train_seconds if train_seconds else None,
            "seeds_in_program": run_config.num_seeds,
            "compile_seconds": result.chunk.compile_seconds,
            # the commit of every sitting that trained it ("commit" is the judging sitting's)
            "sittings": seed_result.sittings,
            "config": run_config.replace(seed=seed_result.seed, num_seeds=1).to_dict(),
            **judge(jax.device_get(seed_result.runner_state.params)),
            "curve": learning_curve(records),
            # relative to --checkpoint-dir: a ledger row names no path of the machine
            "checkpoint": (os.path.relpath(seed_result.last_checkpoint, options.checkpoint_dir)
                           if seed_result.last_checkpoint else None),
            "final_training": {k: v for k, v in (records[-1] if records else {}).items()
                               if k.startswith(("episode/", "ppo/", "actions/"))}}
