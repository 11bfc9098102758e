"""Run records: per-chunk metric summaries, a JSONL file in the run directory, console
progress lines, and (optionally) Weights & Biases."""

from __future__ import annotations

import json
import math
import os
import sys

import numpy as np

from purejaxrl.health import progress_metrics
from purejaxrl.ppo import ACTION_KINDS, NUM_STAGE_BINS, UpdateMetrics

_LOSS_FIELDS = ("total_loss", "policy_loss", "value_loss", "entropy", "normalized_entropy",
                "approx_kl",
                "clip_fraction", "grad_norm", "explained_variance", "learning_rate")


def _ratio(numerator: float, denominator: float) -> float | None:
    return float(numerator) / float(denominator) if denominator > 0 else None


def summarize_chunk(metrics: UpdateMetrics, reward_components: tuple[str, ...]) -> dict:
    """Reduce the stacked per-update metrics of one chunk (host numpy arrays, leading axis K)
    to one flat record. Episode statistics cover only episodes that finished in the chunk;
    rates are per finished episode, action fractions per env step."""
    active = np.asarray(metrics.active) > 0
    total = lambda field: np.asarray(getattr(metrics, field))[active].sum(axis=0)
    episodes = float(total("episodes"))
    record = {"episode/count": episodes,
              "episode/return_mean": _ratio(total("return_sum"), episodes),
              "episode/length_mean": _ratio(total("length_sum"), episodes),
              "episode/win_rate": _ratio(total("wins"), episodes),
              "episode/death_rate": _ratio(total("deaths"), episodes),
              "episode/truncation_rate": _ratio(total("truncations"), episodes)}
    stage_hist = total("stage_hist")
    record["episode/stage_mean"] = _ratio(float((stage_hist * np.arange(NUM_STAGE_BINS)).sum()),
                                          episodes)
    for stage in range(NUM_STAGE_BINS):
        if stage_hist[stage] > 0:
            record[f"stage_reached/{stage}"] = float(stage_hist[stage]) / episodes
    breakdown = dict(zip(reward_components, total("breakdown_sum")))
    for name, value in breakdown.items():
        record[f"reward/{name}"] = _ratio(value, episodes)
    record.update(progress_metrics(stage_hist, float(total("wins")), episodes,
                                   float(total("length_sum")),
                                   breakdown.get("distance_shaping")))
    action_counts = total("action_counts")
    steps = float(action_counts.sum())
    for name, count in zip(ACTION_KINDS, action_counts):
        record[f"actions/{name}_fraction"] = _ratio(count, steps)
    record["actions/invalid"] = float(total("invalid_actions"))
    record["actions/masked_sampled"] = float(total("masked_actions_sampled"))
    record["undo_exploit_completions"] = float(total("undo_exploit_completions"))
    record["env/overflow_episodes"] = float(total("overflow_episodes"))
    for field in _LOSS_FIELDS:
        values = np.asarray(getattr(metrics, field))[active]
        record[f"ppo/{field}"] = float(np.nanmean(values)) if np.isfinite(values).any() else None
    return record


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (np.floating, np.integer)):
        return _json_safe(value.item())
    return value


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def progress_line(record: dict, total_env_steps: int) -> str:
    def number(key, fmt):
        value = record.get(key)
        return format(value, fmt) if value is not None else "-"
    percent = 100.0 * record["env_steps"] / max(total_env_steps, 1)
    return (f"update {record['update']} | steps {record['env_steps']:,}/{total_env_steps:,} "
            f"({percent:.1f}%) | SPS {record.get('sps', 0):,.0f} | "
            f"ETA {format_duration(record.get('eta_s'))} | "
            f"return {number('episode/return_mean', '.3f')} | "
            f"stage {number('episode/stage_mean', '.2f')} | "
            f"win {number('episode/win_rate', '.3f')} | "
            f"invalid {int(record.get('actions/invalid', 0))}"
            + _alerts(record))


def _alerts(record: dict) -> str:
    """Things a researcher must see at once: sampled illegal actions (a masking bug), UNDO-
    exploit stage completions (decisions R9), dropped entity appends (env capacity)."""
    alerts = []
    if record.get("actions/masked_sampled"):
        alerts.append(f"MASKED ACTIONS SAMPLED {int(record['actions/masked_sampled'])}")
    if record.get("undo_exploit_completions"):
        alerts.append(f"UNDO-exploit stage completions {int(record['undo_exploit_completions'])}")
    if record.get("env/overflow_episodes"):
        alerts.append(f"episodes with slot overflow {int(record['env/overflow_episodes'])}")
    return "".join(f" | {alert}" for alert in alerts)


class RunLogger:
    """Writes every record to ``<run_dir>/metrics.jsonl`` (appending on resume), prints
    progress, and mirrors records to wandb when enabled."""

    def __init__(self, run_dir: str, *, use_wandb: bool, quiet: bool = False,
                 wandb_project: str | None = None, wandb_entity: str | None = None,
                 wandb_mode: str = "online", wandb_run_id: str | None = None,
                 run_name: str | None = None, config: dict | None = None):
        os.makedirs(run_dir, exist_ok=True)
        self.run_dir = run_dir
        self.quiet = quiet
        self.metrics_path = os.path.join(run_dir, "metrics.jsonl")
        self._file = open(self.metrics_path, "a", encoding="utf-8")
        self.wandb_run = None
        if use_wandb and wandb_mode != "disabled":
            import wandb
            init = lambda mode: wandb.init(
                project=wandb_project, entity=wandb_entity, name=run_name, id=wandb_run_id,
                resume="allow" if wandb_run_id else None, mode=mode, config=config,
                dir=run_dir)
            try:
                self.wandb_run = init(wandb_mode)
            except Exception as error:  # not logged in, no network: keep training, log locally
                if wandb_mode != "online":
                    raise
                print(f"warning: wandb online init failed ({type(error).__name__}: {error}); "
                      f"logging offline to {run_dir}/wandb (upload later with `wandb sync`)",
                      file=sys.stderr, flush=True)
                self.wandb_run = init("offline")

    @property
    def wandb_run_id(self) -> str | None:
        return self.wandb_run.id if self.wandb_run is not None else None

    def print(self, message: str) -> None:
        if not self.quiet:
            print(message, file=sys.stdout, flush=True)

    def log(self, record: dict) -> None:
        clean = {key: _json_safe(value) for key, value in record.items()}
        self._file.write(json.dumps(clean) + "\n")
        self._file.flush()
        if self.wandb_run is not None:
            self.wandb_run.log({k: v for k, v in clean.items() if v is not None},
                               step=int(record["env_steps"]))

    def log_checkpoint_artifact(self, path: str, run_name: str, update: int) -> None:
        """Upload a checkpoint as a new version of the run's single checkpoint artifact."""
        if self.wandb_run is None:
            return
        import wandb
        artifact = wandb.Artifact(f"{run_name}-checkpoint", type="model",
                                  metadata={"update": update})
        artifact.add_file(path)
        self.wandb_run.log_artifact(artifact, aliases=["latest", f"update-{update}"])

    def close(self) -> None:
        self._file.close()
        if self.wandb_run is not None:
            self.wandb_run.finish()
            self.wandb_run = None


class SilentLogger:
    """The logger of processes other than 0 in a multi-process run: they write no files and
    print nothing (process 0 reports for the whole run)."""

    wandb_run_id = None

    def print(self, message: str) -> None:
        pass

    def log(self, record: dict) -> None:
        pass

    def log_checkpoint_artifact(self, path: str, run_name: str, update: int) -> None:
        pass

    def close(self) -> None:
        pass
