"""How sure a level's verdict is: distribution-free confidence intervals of percentiles (order statistics), and
a verdict per SLO target -- pass when the interval lies below the limit, fail when above, unsure otherwise."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from sizing.base.strict import Strict

#: Confidence of each percentile's interval (two-sided).
CONFIDENCE = 0.95

Verdict = Literal["pass", "fail", "unsure"]


def _log_binom_pmf(k: int, n: int, p: float) -> float:
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )


def quantile_ci_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int | None, int | None]:
    """0-based ranks (l, u) of the sorted sample that bound the q-quantile with at least `confidence`, each side
    taking half the miss: P(B < l+1) <= alpha/2 and P(B >= u+1) <= alpha/2 for B ~ Binomial(n, q). None where n is
    too small for that side to exist (a p99 from 100 requests has no upper bound)."""
    if n <= 0:
        return None, None
    alpha = (1.0 - confidence) / 2.0
    pmf = [math.exp(_log_binom_pmf(k, n, q)) for k in range(n + 1)]
    cdf = 0.0
    lower: int | None = None
    for k in range(
        n + 1
    ):  # largest l with P(B <= l-1) <= alpha: the l-th smallest (1-based) is below the quantile
        if cdf + pmf[k] > alpha:
            lower = k - 1 if k >= 1 else None
            break
        cdf += pmf[k]
    tail = 0.0
    upper: int | None = None
    for k in range(n, -1, -1):  # smallest u with P(B >= u) <= alpha
        if tail + pmf[k] > alpha:
            upper = k if k <= n - 1 else None
            break
        tail += pmf[k]
    return lower, upper


def quantile_ci(
    values: Sequence[float], q: float, confidence: float = CONFIDENCE, design_effect: float = 1.0
) -> tuple[float | None, float | None]:
    """Distribution-free confidence interval of the q-quantile (0 < q < 1) of `values`' population. With a
    `design_effect` above 1 (correlated samples), the ranks are those of n / design_effect independent samples,
    mapped back onto the n sorted values: a wider interval, and none at all where the effective n is too few."""
    xs = sorted(values)
    n = len(xs)
    n_eff = max(1, int(n / max(design_effect, 1.0)))
    lo, hi = quantile_ci_ranks(n_eff, q, confidence)

    def at(rank: int | None) -> float | None:
        if rank is None:
            return None
        return xs[min(n - 1, max(0, round((rank + 0.5) * n / n_eff - 0.5)))]

    return at(lo), at(hi)


#: Contiguous batches (in send order) the design effect is estimated from, and the fewest requests a batch needs.
BATCHES = 10
MIN_PER_BATCH = 10
#: Fewest requests whose neighbours' correlation says anything (below five batches of `MIN_PER_BATCH`, the design
#: effect is read from it: `lag_design_effect`); fewer tell nothing and count as independent.
MIN_LAG_SAMPLES = 12
#: Largest lag-1 correlation read: at 0.9 a level counts for a nineteenth of its requests; beyond it a few dozen
#: requests cannot tell 0.9 from 0.99, and no cap would leave a level of near-identical neighbours worth one request.
MAX_LAG_CORRELATION = 0.9


def design_effect(exceeds: Sequence[bool]) -> float:
    """How much less a level's requests tell than as many independent ones, for the share above a limit: the
    variance of that share across contiguous batches of requests (in the order they were sent) over its binomial
    variance (batch means). Requests of one level are not independent -- a burst of Poisson arrivals queues many
    of them together -- and treating them as independent made two runs' 95% intervals of one server's capacity
    exclude each other's point (5.42-5.70 and 6.00-6.31 req/s). A level of fewer than five batches (a slow server's
    window of 14-54 answers) reads it from neighbours' correlation instead (`lag_design_effect`); 1 when too few
    requests to tell."""
    n = len(exceeds)
    batches = min(BATCHES, n // MIN_PER_BATCH)
    if batches < 5:
        return lag_design_effect(exceeds)
    size = n // batches
    shares = [sum(exceeds[i * size : (i + 1) * size]) / size for i in range(batches)]
    p = sum(exceeds[: batches * size]) / (batches * size)
    binomial = p * (1 - p) / size
    if binomial <= 0:
        return 1.0
    mean = sum(shares) / batches
    between = sum((x - mean) ** 2 for x in shares) / (batches - 1)
    return max(1.0, between / binomial)


def lag_design_effect(exceeds: Sequence[bool]) -> float:
    """The design effect of a few dozen requests, from the correlation of each with the next one sent (lag 1):
    (1 + r) / (1 - r), the variance of a mean of an autocorrelated (first-order) series over that of independent
    samples, r read at 0 to `MAX_LAG_CORRELATION`. Measured on one slow server (tiny-llama on one EPYC core, 50-s
    Poisson windows of 14-54 answers), the next request's TPOT correlated with the last's at 0.84-0.96 near
    capacity, and the same level's mean TPOT moved 4x between windows a minute apart, where the answers'
    independent 95% interval was +-4-48% of it (docs/engine.md, "A Poisson window is one draw"). 1 with fewer than
    `MIN_LAG_SAMPLES` requests or every one on one side of the limit."""
    n = len(exceeds)
    if n < MIN_LAG_SAMPLES:
        return 1.0
    p = sum(exceeds) / n
    var = p * (1 - p)
    if var <= 0:
        return 1.0
    xs = [float(x) - p for x in exceeds]
    r = sum(a * b for a, b in itertools.pairwise(xs)) / (n * var)
    r = min(max(r, 0.0), MAX_LAG_CORRELATION)
    return (1 + r) / (1 - r)


class TargetCheck(Strict):
    """One SLO target at one level: its point estimate, interval, the requests behind it, and the verdict."""

    target: str = Field(description="metric.percentile, e.g. e2e_s.p95")
    limit: float
    value: float | None
    ci_low: float | None
    ci_high: float | None
    samples: int
    design_effect: float = Field(
        default=1.0, description="the requests' correlation's cost: the interval is that of samples / this"
    )
    verdict: Verdict
    note: str | None = Field(
        default=None, description='"too few samples" where an interval side does not exist'
    )


def check_target(
    values: Sequence[float], metric: str, pct: str, limit: float, unfinished: int = 0
) -> TargetCheck:
    """The verdict of one target on a level's samples, in the order the requests were sent. Unfinished requests
    (still running at the step's end) are longer than any e2e measured: they count above every limit of e2e, and
    for other metrics they are unknown (left out)."""
    q = float(pct.lstrip("p")) / 100.0
    xs = list(values)
    if metric == "e2e_s" and unfinished:
        xs = xs + [math.inf] * unfinished
    n = len(xs)
    if n == 0:
        return TargetCheck(target=f"{metric}.{pct}", limit=limit, value=None, ci_low=None, ci_high=None, samples=0,
                           verdict="unsure", note="no samples")  # fmt: skip
    deff = design_effect([x > limit for x in xs])
    lo, hi = quantile_ci(xs, q, design_effect=deff)
    ordered = sorted(xs)
    point = ordered[min(n - 1, max(0, math.ceil(q * n) - 1))]
    if hi is not None and hi <= limit:
        verdict: Verdict = "pass"
    elif lo is not None and lo > limit:
        verdict = "fail"
    else:
        verdict = "unsure"
    note = None if lo is not None and hi is not None else "too few samples"

    def finite(v: float | None) -> float | None:
        return None if v is None or math.isinf(v) else round(v, 4)

    return TargetCheck(
        target=f"{metric}.{pct}", limit=limit, value=finite(point), ci_low=finite(lo), ci_high=finite(hi),
        samples=n, design_effect=round(deff, 2), verdict=verdict, note=note,
    )  # fmt: skip


def level_verdict(checks: Sequence[TargetCheck]) -> Verdict:
    if any(c.verdict == "fail" for c in checks):
        return "fail"
    if checks and all(c.verdict == "pass" for c in checks):
        return "pass"
    return "unsure"
