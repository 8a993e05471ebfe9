"""The little statistics correlation needs, in plain Python (no SciPy for one Poisson tail).

Concentration and recurrence are counts compared with what the fleet's rate predicts, so the
question each time is "how surprising is seeing at least *k* when *lam* was expected?" — the
Poisson upper tail. It is computed in log space because the patterns worth reporting are far
out in the tail (p = 1e-300 and below), and ranking them must not collapse them all to 0.
"""

from __future__ import annotations

import math


def poisson_log_sf(k: int, lam: float) -> float:
    """ln P(X >= k) for X ~ Poisson(lam). Exact (to float precision) when k > lam; for k <= lam
    it returns 0.0 (p = 1): a count at or below expectation is never a concentration."""
    if k <= 0:
        return 0.0
    if lam <= 0.0:
        return -math.inf
    if k <= lam:
        return 0.0
    log_lam = math.log(lam)
    first = -lam + k * log_lam - math.lgamma(k + 1)
    # Terms fall geometrically (ratio lam / (j + 1) < 1): sum them relative to the first.
    total, term, j = 1.0, 1.0, k
    while True:
        j += 1
        term *= lam / j
        total += term
        if term < 1e-17 * total or j > k + 100_000:
            break
    return first + math.log(total)


def lift(n: float, n_total: float, e: float, e_total: float) -> float:
    """(share of the events in a group) / (share of the exposure in it): 1 = the fleet's rate,
    6 = six times it. 0 when either share is undefined."""
    if n_total <= 0 or e <= 0 or e_total <= 0:
        return 0.0
    return (n / n_total) / (e / e_total)


def safe_log(p: float) -> float:
    """ln p, with ln 0 = -inf: thresholds are compared in log space like the tails."""
    return math.log(p) if p > 0 else -math.inf


def p_from_log(log_p: float) -> float:
    """A log-space tail as a p-value to show: three significant digits, 0.0 below the float
    range (e^-745)."""
    return float(f"{math.exp(log_p):.3g}") if log_p > -745 else 0.0
