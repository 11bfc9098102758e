"""Comparison of the parity harness: when two engines' replies count as equal, and the list of
differences when they do not (the parity tests, scripts/parity_diff.py and the oracle lockstep
all judge with these).

JSON values compare exactly except floats (decisions R7); the oracle's mirror is compared with
Swift's reply on every part of it: raw and numeric observation, internal state, valid actions,
reward, done and info.
"""

import numpy as np

from .raw_observation import (host_state, internal_state, numeric_observation, raw_observation,
                              step_info)

FLOAT_ABS_TOL, FLOAT_REL_TOL = 1e-5, 1e-6
# The numeric observation (§9.2) holds float32 scalings of the same integers on both sides: only
# rounding can tell them apart.
NUMERIC_ABS_TOL = 1e-6


def floats_close(a: float, b: float) -> bool:
    """Reward values are compared as numbers (decisions R7): 1e-5 absolute or 1e-6 relative."""
    return abs(a - b) <= max(FLOAT_ABS_TOL, FLOAT_REL_TOL * max(abs(a), abs(b)))


def json_differences(a, b, path: str = "") -> list:
    """Paths where two JSON values differ; floats compared with ``floats_close``, ints and
    bools exactly (a bool never equals an int)."""
    if isinstance(a, dict) and isinstance(b, dict):
        diffs = []
        for key in sorted(set(a) | set(b)):
            where = f"{path}.{key}" if path else key
            if key not in a or key not in b:
                diffs.append(f"{where}: {a.get(key, '<absent>')!r} != {b.get(key, '<absent>')!r}")
            else:
                diffs += json_differences(a[key], b[key], where)
        return diffs
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)} ({a!r} != {b!r})"]
        return [d for i, (x, y) in enumerate(zip(a, b))
                for d in json_differences(x, y, f"{path}[{i}]")]
    if isinstance(a, bool) or isinstance(b, bool):
        return [] if a is b else [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, int) and isinstance(b, int):
            return [] if a == b else [f"{path}: {a!r} != {b!r}"]
        return [] if floats_close(float(a), float(b)) else [f"{path}: {a!r} != {b!r}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def mirror_differences(state, mask, swift, numeric) -> list:
    """The mirror (host ``state`` and its action ``mask``) against Swift's reply ``swift`` (an
    ``oracle.SwiftStep``): raw observation, internal state and valid actions, then, only where
    those are equal, the numeric observation (§9.2): ``numeric(state)`` is the mirror's, with
    host leaves, and the numeric encoding of equal JSON must be equal too."""
    host = host_state(state)
    diffs = [f"observation.{d}" for d in json_differences(raw_observation(host),
                                                           swift.observation)]
    diffs += [f"internal.{d}" for d in json_differences(internal_state(host), swift.internal)]
    valid = [int(i) for i in np.flatnonzero(mask)]
    if valid != swift.valid:
        diffs.append(f"validActions: {valid} != {swift.valid}")
    if not diffs:
        ours = numeric(state)
        theirs = numeric_observation(swift.observation)
        for part in ("player", "programs", "grid"):
            if not np.allclose(getattr(ours, part), theirs[part], atol=NUMERIC_ABS_TOL):
                where = np.argwhere(~np.isclose(getattr(ours, part), theirs[part],
                                                atol=NUMERIC_ABS_TOL))
                diffs.append(f"numeric {part} differs at {where[:5].tolist()}")
    return diffs


def mirror_step_differences(candidate, swift, numeric) -> list:
    """A mirror step (``candidate``: state, mask, reward, done, reward breakdown and event flags
    of the step) against Swift's reply to it: ``mirror_differences``, then reward, done and
    info."""
    diffs = mirror_differences(candidate.state, candidate.mask, swift, numeric)
    if not floats_close(candidate.reward, swift.reward):
        diffs.append(f"reward: {candidate.reward!r} != {swift.reward!r}")
    if candidate.done != swift.done:
        diffs.append(f"done: {candidate.done} != {swift.done}")
    info = step_info(candidate.breakdown, candidate.flags["invalid_action"],
                     candidate.flags["stage_complete"], candidate.flags["died"])
    diffs += [f"info.{d}" for d in json_differences(info, swift.info)]
    return diffs
