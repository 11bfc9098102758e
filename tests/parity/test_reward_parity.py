"""Reward parity against the golden table of ``reward_cases.py`` (programs-rewards-observation §8,
§11; errata E1): the calculator directly, and one step through each engine backend with Swift's
14 reported keys (§8.10)."""

import jax
import jax.numpy as jnp
import pytest

from envs.hackmatrix.core import rewards
from envs.hackmatrix.swift_io.compare import floats_close

from reward_cases import INPUT_CASES, STEP_CASES


@pytest.fixture(scope="module")
def calculator():
    def run(inputs):
        breakdown = rewards.compute_reward(inputs)
        return breakdown, rewards.total_reward(breakdown)
    return jax.jit(run)


def _assert_components(actual: dict, expected: dict, context: str):
    for name in rewards.REWARD_FIELDS:
        if name in actual:
            want = expected.get(name, 0.0)
            assert floats_close(actual[name], want), f"{context}: {name} {actual[name]} != {want}"


@pytest.mark.parametrize("case", INPUT_CASES + STEP_CASES, ids=lambda c: c.name)
def test_golden_totals_are_the_sum_of_their_components(case):
    """The table itself: each hand-derived total is the sum of its listed components (§8.2)."""
    assert floats_close(sum(case.expected.values()), case.total)


@pytest.mark.parametrize("case", INPUT_CASES, ids=lambda c: c.name)
def test_calculator_matches_golden_inputs(calculator, case):
    """rewards.compute_reward on hand-set inputs: every component and the total (§8.2)."""
    inputs = rewards.RewardInputs(**{k: jnp.asarray(v) for k, v in case.inputs.items()})
    breakdown, total = calculator(inputs)
    actual = {name: float(getattr(breakdown, name)) for name in rewards.REWARD_FIELDS}
    _assert_components(actual, case.expected, f"{case.name} ({case.section})")
    assert floats_close(float(total), case.total), f"{case.name}: total {float(total)}"


@pytest.mark.parametrize("case", STEP_CASES, ids=lambda c: c.name)
def test_engine_step_matches_golden_table(engine, case):
    """One step from a setState scenario: Swift's 14 breakdown keys (no step penalty, §8.10),
    the total, done (§10.3) and the invalid_action flag (§8.9, R4)."""
    engine.set_state(case.scenario)
    result = engine.step(case.action)
    reported = result.info["reward_breakdown"]
    assert set(reported) == set(rewards.SWIFT_KEYS.values())
    actual = {name: reported[swift] for name, swift in rewards.SWIFT_KEYS.items()}
    _assert_components(actual, case.expected, f"{case.name} ({case.section})")
    assert floats_close(result.reward, case.total), f"{case.name}: reward {result.reward}"
    assert result.done is case.done
    failed = not case.expected
    assert result.info.get("invalid_action", False) is failed
    assert result.info.get("stage_complete", False) is ("stage_completion" in case.expected)
    assert result.info.get("death", False) is ("death_penalty" in case.expected)
    # §8.10: for a successful action the 14 keys sum to reward + 0.01.
    assert floats_close(sum(reported.values()), result.reward + (0.0 if failed else 0.01))
