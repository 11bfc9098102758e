"""Two-sample tests of "the same law" for the Swift-parity statistics (scripts/swift_soak.py,
scripts/swift_generation_stats.py): chi-square homogeneity of categorical features, and
permutation chi-square tests of feature totals for unpaired and paired samples."""

import numpy as np
from scipy import stats

# A feature fails parity when its p-value is below LEVEL (on two independent samples).
LEVEL = 0.001
MIN_EXPECTED = 5.0  # adjacent categories are merged until every expected count reaches this


def chi_square_categorical(a: np.ndarray, b: np.ndarray):
    """(statistic, dof, p) of the 2 x C homogeneity test; categories in sorted order, adjacent
    ones merged until every expected count is at least 5."""
    categories = np.union1d(a, b)
    table = np.stack([np.array([np.sum(a == c) for c in categories]),
                      np.array([np.sum(b == c) for c in categories])]).astype(float)
    merged, current = [], np.zeros(2)
    total = table.sum()
    for column in table.T:
        current = current + column
        if (current.sum() * table.sum(axis=1) / total).min() >= MIN_EXPECTED:
            merged.append(current)
            current = np.zeros(2)
    if current.sum():
        if merged:
            merged[-1] = merged[-1] + current
        else:
            merged.append(current)
    table = np.array(merged).T
    if table.shape[1] < 2:  # one category: nothing to test
        return 0.0, 0, None
    statistic, p, dof, _ = stats.chi2_contingency(table, correction=False)
    return float(statistic), int(dof), float(p)


def _totals_chi_square(totals_a, totals_b, n_a, n_b):
    pooled = totals_a + totals_b
    expected_a = pooled * n_a / (n_a + n_b)
    expected_b = pooled * n_b / (n_a + n_b)
    return (((totals_a - expected_a) ** 2 / expected_a).sum(axis=-1)
            + ((totals_b - expected_b) ** 2 / expected_b).sum(axis=-1))


def permutation_chi_square(a: np.ndarray, b: np.ndarray, permutations: int, rng):
    """(statistic, components, p): the chi-square statistic of the per-feature totals of two
    samples of boards, with its p-value from random relabellings of the boards."""
    keep = (a.sum(axis=0) + b.sum(axis=0)) > 0
    a, b = a[:, keep].astype(np.float64), b[:, keep].astype(np.float64)
    if a.shape[1] < 2 or not len(a) or not len(b):  # one component: nothing to test
        return 0.0, int(a.shape[1]), None
    observed = _totals_chi_square(a.sum(axis=0), b.sum(axis=0), len(a), len(b))
    pooled = np.concatenate([a, b])
    exceed, done, chunk = 0, 0, 200
    while done < permutations:
        size = min(chunk, permutations - done)
        labels = np.zeros((size, len(pooled)), np.float64)
        for row in labels:
            row[rng.choice(len(pooled), len(a), replace=False)] = 1.0
        totals_a = labels @ pooled
        totals_b = pooled.sum(axis=0) - totals_a
        exceed += int(np.sum(_totals_chi_square(totals_a, totals_b, len(a), len(b))
                             >= observed - 1e-9))
        done += size
    return float(observed), int(a.shape[1]), (exceed + 1) / (permutations + 1)


def paired_permutation_chi_square(a: np.ndarray, b: np.ndarray, permutations: int, rng):
    """(statistic, components, p) for paired samples: row i of ``a`` and of ``b`` come from the
    same situation (Swift's draw and ours from one state). The chi-square statistic of their
    totals, with its p-value from random swaps within pairs (exchangeable when the two laws
    are equal)."""
    keep = (a.sum(axis=0) + b.sum(axis=0)) > 0
    a, b = a[:, keep].astype(np.float64), b[:, keep].astype(np.float64)
    if a.shape[1] < 2 or not len(a):
        return 0.0, int(a.shape[1]), None
    n = len(a)
    observed = _totals_chi_square(a.sum(axis=0), b.sum(axis=0), n, n)
    difference, total = a - b, (a + b).sum(axis=0)
    exceed, done, chunk = 0, 0, 500
    while done < permutations:
        size = min(chunk, permutations - done)
        swaps = rng.integers(0, 2, (size, n)).astype(np.float64)
        totals_a = b.sum(axis=0) + swaps @ difference
        exceed += int(np.sum(_totals_chi_square(totals_a, total - totals_a, n, n)
                             >= observed - 1e-9))
        done += size
    return float(observed), int(a.shape[1]), (exceed + 1) / (permutations + 1)
