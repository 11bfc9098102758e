"""Learning-health signals: HackMatrix's (stages completed, steps and shaping per stage
completed, its health_metrics hook) and the trainer's stalling warning (episode length rising
while the stage reached does not)."""

import json
import os

import numpy as np
import pytest

from envs.hackmatrix.training import health_metrics, stage_completions
from purejaxrl.health import StallingDetector

STALLED_RUN = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "learning",
                           "learn-cpu-256.metrics.jsonl")


def test_stage_completions_count_stages_left_behind_and_the_won_final_stage():
    """Episodes ending on stages 1, 1, 3 and a victory (stage stays 8): 0 + 0 + 2 + 8."""
    hist = np.zeros(10)
    hist[1], hist[3], hist[8] = 2, 1, 1
    assert stage_completions(hist, wins=1) == 10


def totals(hist, wins, episodes, length_sum, shaping_sum):
    """A chunk's totals as the trainer hands them to health_metrics."""
    return {"stage_hist": hist, "won": wins, "episodes": episodes, "length_sum": length_sum,
            "return_sum": 0.0, "breakdown": {"distance_shaping": shaping_sum}}


def test_progress_metrics_divide_by_stages_completed():
    hist = np.zeros(9)
    hist[2], hist[3] = 2, 2  # 1 + 1 + 2 + 2 = 6 stages completed by 4 episodes
    metrics = health_metrics(totals(hist, wins=0, episodes=4, length_sum=120, shaping_sum=1.5))
    assert metrics == {"progress/stages_completed_per_episode": 1.5,
                       "progress/steps_per_stage": 20.0, "progress/shaping_per_stage": 0.25}
    none = health_metrics(totals(np.eye(9)[1] * 3, wins=0, episodes=3, length_sum=90,
                                 shaping_sum=0.3))
    assert none["progress/steps_per_stage"] is None  # no stage completed: undefined, not inf


def record(steps, length, stage):
    return {"env_steps": steps, "episode/length_mean": length, "episode/stage_mean": stage}


def test_stalling_warning_fires_on_the_repositorys_stalled_run():
    """The 5M-step default run of SPEC §4.4 (length 44 -> 165, stage 1.19 -> 1.31)."""
    if not os.path.exists(STALLED_RUN):
        pytest.fail(f"the recorded run {STALLED_RUN} is part of the repository")
    detector = StallingDetector()
    with open(STALLED_RUN, encoding="utf-8") as handle:
        warnings = [detector.update(json.loads(line)) for line in handle]
    assert any(warnings)
    assert "stalling" in next(w for w in warnings if w)


def test_no_warning_while_stage_rises_with_length_and_repeats_only_after_a_window():
    detector = StallingDetector(window=3)
    progressing = [record(i, 40 + 20 * i, 1.2 + 0.2 * i) for i in range(6)]
    assert not any(detector.update(r) for r in progressing)

    detector = StallingDetector(window=3)
    stalled = [detector.update(record(i, 40 * 1.3 ** i, 1.3)) for i in range(10)]
    fired = [i for i, warning in enumerate(stalled) if warning]
    assert fired[0] == 3 and all(b - a >= 3 for a, b in zip(fired, fired[1:]))
