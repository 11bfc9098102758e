"""Learning-health signals that return alone hides (return can be farmed).

* ``progress_metrics``: stage completions per finished episode, env steps per stage completed,
  and distance shaping earned per stage completed. A policy that farms the shaping or survives
  without progressing shows a rising ``steps_per_stage`` and ``shaping_per_stage``.
* ``StallingDetector``: the stalling signature of HackMatrix training (the one the original
  training effort never got past): episode length keeps rising while the stage reached does not.
"""

from __future__ import annotations

from typing import Optional

import numpy as np


def stage_completions(stage_hist: np.ndarray, wins: float) -> float:
    """Stages completed by the finished episodes: an episode that ended on stage s completed
    s - 1 stages, and a victory also completed the last one (the stage stays 8, game-rules
    §10.1)."""
    stages = np.arange(len(stage_hist))
    return float((stage_hist * np.maximum(stages - 1, 0)).sum() + wins)


def progress_metrics(stage_hist: np.ndarray, wins: float, episodes: float, length_sum: float,
                     shaping_sum: Optional[float]) -> dict:
    completions = stage_completions(stage_hist, wins)

    def ratio(numerator, denominator):
        return float(numerator) / denominator if denominator > 0 and numerator is not None \
            else None
    return {"progress/stages_completed_per_episode": ratio(completions, episodes),
            "progress/steps_per_stage": ratio(length_sum, completions),
            "progress/shaping_per_stage": ratio(shaping_sum, completions)}


class StallingDetector:
    """Warns when, over the last ``window`` logged chunks, the mean episode length grew by at
    least ``length_growth`` times while the mean stage reached rose by less than
    ``stage_gain``. Repeats only after another full window, so a run that stays stalled is
    reminded, not flooded."""

    def __init__(self, window: int = 3, length_growth: float = 1.25, stage_gain: float = 0.05):
        self.window = window
        self.length_growth = length_growth
        self.stage_gain = stage_gain
        self._history: list[tuple[float, float, float]] = []
        self._quiet_until = 0

    def update(self, record: dict) -> Optional[str]:
        length, stage = record.get("episode/length_mean"), record.get("episode/stage_mean")
        if length is None or stage is None:
            return None
        self._history.append((record["env_steps"], length, stage))
        if len(self._history) <= self.window or len(self._history) < self._quiet_until:
            return None
        steps0, length0, stage0 = self._history[-1 - self.window]
        if length < self.length_growth * length0 or stage - stage0 >= self.stage_gain:
            return None
        self._quiet_until = len(self._history) + self.window
        return (f"warning: stalling: episode length rose {length0:.0f} -> {length:.0f} since "
                f"{steps0:,.0f} env steps while the mean stage reached went {stage0:.2f} -> "
                f"{stage:.2f}; the policy is surviving, not progressing (check "
                f"progress/shaping_per_stage and the reward options)")
