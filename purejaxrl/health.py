"""Learning-health signals that return alone hides (return can be farmed).

* An env's own signals come from its ``health_metrics`` hook (``envs/contract.py``; HackMatrix:
  stage completions per episode, steps and shaping per stage completed), logged with each chunk.
* ``StallingDetector``: the stalling signature of HackMatrix training (the one the original
  training effort never got past): episode length keeps rising while the stage reached does not.
  It watches any env that logs a mean stage (``episode/stage_mean``), and is silent for others.
"""

from __future__ import annotations

from typing import Optional


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
