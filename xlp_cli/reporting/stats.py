"""The statistics every report uses to compare runs over seeds (one rule for every table; no scipy).

    paired_test(diffs, sign)        one-sided paired t-test of "run - baseline is on the claimed side" (+ the other side)
    holm(ps)                        Holm's step-down adjustment of a family of p-values
    mde(sd, n, alpha, power)        the smallest true mean difference a one-sided paired t-test of n pairs with this
                                    spread detects with probability `power` at level `alpha`
    welch_two_sided(a, b)           two-sided Welch t-test of two groups given as (mean, std, n): the ▲/▼ marks of
                                    the per-language tables (xnli, pos, retrieval, xtreme), which have no seed pairing
    verdict(p_for, p_against, a)    "reproduced in direction" / "not reproduced" / "inconclusive at this scale"

Student's t tail is computed from the regularised incomplete beta function (Numerical Recipes' continued fraction);
its quantile by bisection on the tail.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced in direction", "not reproduced", "inconclusive at this scale"


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((qam + 2 * m) * (a + 2 * m)), -(a + m) * (qab + m) * x / ((a + 2 * m) * (qap + 2 * m))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom."""
    if t == 0:
        return 0.5
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    x = df / (df + t * t)
    a, b = df / 2.0, 0.5
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    ibeta = front * _betacf(a, b, x) / a if x < (a + 1) / (a + b + 2) else 1.0 - front * _betacf(b, a, 1 - x) / b
    return ibeta / 2.0 if t > 0 else 1.0 - ibeta / 2.0


def t_ppf(q: float, df: float) -> float:
    """The t with P(T <= t) = q (bisection on `t_sf`; |error| < 1e-10)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {q}")
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if 1.0 - t_sf(mid, df) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10:
            break
    return (lo + hi) / 2


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    m = sum(values) / n
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0


def paired_test(diffs: Sequence[float], sign: int) -> dict[str, Any]:
    """One-sided paired t-test of `sign * diffs > 0` over n pairs. Returns n, mean_diff (of `diffs`, unsigned),
    sd_diff, t (of the signed differences), p (the claimed side) and p_against (the other side); p is NaN with
    fewer than 2 pairs or no spread."""
    n = len(diffs)
    out: dict[str, Any] = {"n": n, "mean_diff": math.nan, "sd_diff": math.nan, "t": math.nan, "p": math.nan,
                           "p_against": math.nan}
    if n == 0:
        return out
    m, sd = _mean_sd([float(d) for d in diffs])
    out.update(mean_diff=m, sd_diff=sd)
    if n < 2 or sd == 0.0:
        return out
    t = sign * m / (sd / math.sqrt(n))
    out.update(t=t, p=t_sf(t, n - 1), p_against=t_sf(-t, n - 1))
    return out


def holm(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (NaN stays NaN and does not count towards the family size)."""
    idx = sorted((i for i, p in enumerate(ps) if not math.isnan(p)), key=lambda i: ps[i])
    m = len(idx)
    out = [math.nan] * len(ps)
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def mde(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true mean difference that a one-sided paired t-test of n pairs, whose differences have standard
    deviation `sd`, detects with probability `power` at level `alpha`: (t_{1-alpha} + t_{power}) * sd / sqrt(n),
    both quantiles of t with n - 1 degrees of freedom (the usual approximation of the non-central t)."""
    if n < 2 or math.isnan(sd):
        return math.nan
    return (t_ppf(1 - alpha, n - 1) + t_ppf(power, n - 1)) * sd / math.sqrt(n)


def verdict(p_for: float, p_against: float, alpha: float) -> str:
    if not math.isnan(p_for) and p_for < alpha:
        return REPRODUCED
    if not math.isnan(p_against) and p_against < alpha:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def welch_two_sided(a: tuple[float, float, int], b: tuple[float, float, int]) -> float:
    """Two-sided p of Welch's t-test for groups given as (mean, sample std, n); NaN with n < 2 in either group or
    no spread in both."""
    (ma, sa, na), (mb, sb, nb) = a, b
    if na < 2 or nb < 2 or any(math.isnan(v) for v in (ma, mb, sa, sb)):
        return math.nan
    va, vb = sa * sa / na, sb * sb / nb
    if va + vb == 0.0:
        return 0.0 if ma != mb else 1.0
    t = (ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va * va / (na - 1) + vb * vb / (nb - 1)) if va and vb else (na - 1 if va else nb - 1)
    return 2.0 * t_sf(abs(t), df)
