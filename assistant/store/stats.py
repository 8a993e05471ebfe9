"""The little statistics correlation needs, in plain Python (no SciPy for a few exact tails).

Concentration and recurrence are counts compared with what the fleet's rate predicts, so the
question each time is "how surprising is seeing at least *k*?". The counts are often small —
four hosts of one leaf, three incidents of one node — where a Poisson approximation is wrong
by a factor that decides the verdict, so the tails here are exact:

- ``hypergeom_log_sf``: *k* or more of the *n* affected units fall in a group holding *K* of
  the *N* units, when the affected ones are a random draw without replacement (concentration:
  "4 of the 4 affected hosts sit under leaf-02, which holds 16 of the 48");
- ``binom_log_sf``: *k* or more successes in *n* independent trials of probability *p*
  (recurrence: a host raised the code in k of the n incidents it took part in).

Both are computed in log space because the patterns worth reporting are far out in the tail
(p = 1e-300 and below), and ranking them must not collapse them all to 0; terms are summed
relative to the first one, and the sum stops once a term no longer changes it.
"""

from __future__ import annotations

import math

_STOP = 1e-17  # a term this small relative to the sum no longer changes a double


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def hypergeom_log_pmf(k: int, big_n: int, big_k: int, n: int) -> float:
    """ln P(X = k) for X ~ Hypergeometric(population N, K successes in it, n draws)."""
    if k < max(0, n - (big_n - big_k)) or k > min(n, big_k):
        return -math.inf
    return _log_choose(big_k, k) + _log_choose(big_n - big_k, n - k) - _log_choose(big_n, n)


def hypergeom_log_sf(k: int, big_n: int, big_k: int, n: int) -> float:
    """ln P(X >= k) for X ~ Hypergeometric(N, K, n): exact (to float precision).

    At or below the mean the upper tail is computed as 1 - the lower one (both are short
    sums then), so a count that is not over-represented gets its true p, close to 1.
    """
    big_n, big_k, n, k = int(big_n), int(big_k), int(n), int(k)
    if big_n <= 0 or n <= 0 or big_k < 0:
        return 0.0
    big_k, n = min(big_k, big_n), min(n, big_n)
    low, high = max(0, n - (big_n - big_k)), min(n, big_k)
    if k <= low:
        return 0.0
    if k > high:
        return -math.inf
    mean = n * big_k / big_n
    if k > mean:
        return _hyper_sum(k, high, big_n, big_k, n, +1)
    below = math.exp(_hyper_sum(k - 1, low, big_n, big_k, n, -1))
    return math.log1p(-below) if below < 1.0 else -math.inf


def _hyper_sum(start: int, end: int, big_n: int, big_k: int, n: int, step: int) -> float:
    """ln of the pmf summed from *start* towards *end* (step +1 up, -1 down)."""
    first = hypergeom_log_pmf(start, big_n, big_k, n)
    total, term, x = 1.0, 1.0, start
    while x != end:
        if step > 0:  # pmf(x+1) / pmf(x)
            term *= (big_k - x) * (n - x) / ((x + 1) * (big_n - big_k - n + x + 1))
        else:  # pmf(x-1) / pmf(x)
            term *= x * (big_n - big_k - n + x) / ((big_k - x + 1) * (n - x + 1))
        x += step
        total += term
        if term < _STOP * total:
            break
    return first + math.log(total)


def binom_log_sf(k: int, n: int, p: float) -> float:
    """ln P(X >= k) for X ~ Binomial(n, p): exact (to float precision)."""
    k, n = int(k), int(n)
    if k <= 0:
        return 0.0
    if k > n or p <= 0.0:
        return -math.inf
    if p >= 1.0:
        return 0.0
    if k <= n * p:
        below = math.exp(_binom_sum(k - 1, 0, n, p, -1))
        return math.log1p(-below) if below < 1.0 else -math.inf
    return _binom_sum(k, n, n, p, +1)


def _binom_sum(start: int, end: int, n: int, p: float, step: int) -> float:
    odds = p / (1.0 - p)
    first = _log_choose(n, start) + start * math.log(p) + (n - start) * math.log1p(-p)
    total, term, x = 1.0, 1.0, start
    while x != end:
        if step > 0:
            term *= (n - x) / (x + 1) * odds
        else:
            term *= x / (n - x + 1) / odds
        x += step
        total += term
        if term < _STOP * total:
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
