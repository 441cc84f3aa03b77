"""Capacity as a search to the SLO edge, with a confidence interval.

A workload's SLOs are per-request percentiles at an arrival rate, so capacity is searched in arrival rate
(Poisson, the workload's arrival process): the highest rate at which every SLO percentile holds.

- **Each level's verdict is a test, not a point.** A percentile measured on n requests has a distribution-free
  confidence interval from order statistics: the number of samples below the true p-quantile is Binomial(n, p),
  so the ranks (l, u) with P(l <= B < u) >= 95% bound it (`quantile_ci`). A level *passes* when every target's
  interval lies below its limit, *fails* when one lies above, and is *unsure* otherwise. An unsure level runs on
  (its window grows one window at a time, up to its cap) until it decides or the cap is reached; a p99 needs at
  least 367 requests before its upper bound exists at all ("too few samples").
- **A level near the edge reads enough of the queue.** Latencies under load are correlated over long stretches: a
  queue near saturation wanders between backlogs and calm for much longer than one request, so a window of a few
  hundred requests sees one stretch of it, and its percentile reads the calm middle, not the stationary tail
  (`needs_more`). A level whose reading lies near its limit therefore runs on until its percentile rests on
  `level_requests` requests (`TAIL_REQUESTS` beyond the percentile), up to its window cap.
- **A server that falls behind fails.** Above saturation a queue grows without bound, but from an empty server
  it may take longer than a level's cap to push a loose percentile (batch-summarization's e2e p99 <= 300 s) over
  its limit, so such a level would pass. Each open-loop level is also tested for overload
  (`sizing.loadtest.overload`: its backlog's growth over the window against the arrival and completion counts'
  noise); an overloaded level fails whatever its percentiles read, a level whose backlog test is unsure runs on,
  and one overloaded beyond doubt stops early. The edge is then no higher than the rate the server answered at
  while it fell behind (`_served_when_behind`), and the line through the levels' readings leaves such levels out.
- **Bracket from the prediction, then bisect.** The first level is the predicted capacity. While levels pass, the
  rate grows by EXPAND; while they fail, it shrinks by the same factor; once one passes below one that fails, the
  bracket is bisected (geometric mean) until its ends are within 2 x `tolerance` of each other (the edge known to
  +/- `tolerance`) or the level budget is spent. A side of the bracket that no level bounds with confidence gets
  one more level BOUND_STEP further out.
- **The answer states its interval.** Capacity is where a line through the levels' limit / percentile readings
  crosses 1 (`_fitted`: every level's reading pooled), where that lies inside the confident verdicts' interval;
  else where the levels' pass share falls through one half (a monotone fit of their verdicts: the bracket's
  geometric middle when the verdicts are monotone, and a pass above a fail pooled with it when they are not). Its
  interval is the bracket widened to the confident verdicts (a level that passed only on its point estimate does
  not narrow it), with the number of requests behind each level's percentiles.

Stopping rules like this one (a sequential test per level, bisection across levels) are what vLLM's `bench sweep`,
AIPerf's adaptive search and GuideLLM's over-saturation stop do for their load edge; this one prices what it
finds (`sizing.orchestrate.merge`) and says how sure it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from sizing.base.strict import Strict
from sizing.loadtest.confidence import TargetCheck, level_verdict
from sizing.loadtest.metrics import StepResult
from sizing.loadtest.overload import Overload, certain

#: Growth (and shrink) factor of the bracketing phase: an estimate 30% off is bracketed in one or two levels.
EXPAND = 1.5
#: How far beyond a bracket's end the search probes for a confident verdict when its ends decided on point
#: estimates only (about two tolerances out: far enough from the edge for the 95% interval to clear the limit).
BOUND_STEP = 1.2
#: Default half-width of the edge's bracket the search stops at (the issue's +/-5%).
DEFAULT_TOLERANCE = 0.05
#: Default most levels one search runs (bracketing 2-4, bisection from a 1.5x bracket to 1.1x: 3).
DEFAULT_MAX_LEVELS = 10
#: Requests beyond its SLO percentile a level near the edge reads before its verdict stands (`level_requests`: a
#: p95 then rests on 800 requests, a p90 on 400). The estimator's model of rag's first candidate at its estimated
#: capacity reads its TPOT p95 at 0.83 of the limit over 200 requests from an empty replica, 0.87 over 500, 0.89 over
#: 1,800 and 0.90 over 5,000. Searches against the examples' top three on their models (benchmarks/search_model.py,
#: 16 seeds): with 20 beyond a p95 (400 requests) rag's first read 1.11 of the estimate on median, as with no
#: count; with 40 the nine chat, code and rag searches' medians are 0.95-1.09, their models' stationary edges
#: 0.97-1.08 (docs/loadgen.md, "Against the twin").
TAIL_REQUESTS = 40
#: A target's reading is near its limit when its interval reaches within this share of it (either side): about the
#: rates inside the search's final bracket (+/- 2 x DEFAULT_TOLERANCE), where a level's reading sets the edge.
NEAR_EDGE = 2 * DEFAULT_TOLERANCE


class CapacityEstimate(Strict):
    """What the search found: the edge's rate with its interval, and each level probed."""

    capacity_rps: float | None = Field(description="the middle of the bracket; None: no level passed")
    low_rps: float | None = Field(description="highest rate that passed with confidence (None: none did)")
    high_rps: float | None = Field(description="lowest rate that failed with confidence (None: none did)")
    converged: bool = Field(description="the bracket is within 2 x tolerance")
    tolerance: float
    levels: list[dict[str, Any]]
    note: str


def level_requests(percentiles: Sequence[str], tail: int = TAIL_REQUESTS) -> int:
    """Requests a level near the edge reads before its verdict stands: `tail` beyond the strictest of the SLO
    percentiles ("p95" -> 800). Beyond it, the tail's share rests on `tail` requests, not on a handful."""
    q = max((float(p.lstrip("p")) / 100.0 for p in percentiles), default=0.5)
    return math.ceil(tail / max(1.0 - q, 1e-6))


def near_limit(check: TargetCheck, share: float = NEAR_EDGE) -> bool:
    """The target's interval reaches within `share` of its limit (an interval without a side reaches anywhere)."""
    if check.ci_low is None or check.ci_high is None:
        return True
    return check.ci_low <= check.limit * (1 + share) and check.ci_high >= check.limit * (1 - share)


def needs_more(
    checks: Sequence[TargetCheck], min_requests: int | None, overload: Overload | None = None
) -> bool:
    """Whether a level runs on: a target is unsure (its interval straddles its limit), or a target's reading lies
    near its limit (`near_limit`) on fewer than `min_requests` requests, or the server's backlog grew without yet
    proving it fell behind (`Overload.unsure`). Near the edge the verdict and the reading the search fits its edge
    to must be the queue's stationary ones, not those of one stretch of it: a few hundred requests from an empty
    replica read a percentile there 5-8% low (TAIL_REQUESTS), which passes a rate the steady state fails. A level
    whose every interval lies clear of the band decides on what it has; an overloaded one fails on it."""
    if certain(overload):
        return False
    if overload is not None and (overload.overloaded or overload.unsure):
        return True
    if level_verdict(checks) == "unsure":
        return True
    if not min_requests:
        return False
    return any(near_limit(c) and c.samples < min_requests for c in checks)


def _crossing(history: Sequence[StepResult]) -> float | None:
    """Where the levels' pass share falls through one half, read from a monotone (non-increasing in rate) fit of
    their pass/fail verdicts (pool-adjacent-violators): with verdicts that go pass, fail, pass, fail near the edge
    -- noise, when every level there is unsure -- a pass above a fail is pooled with it instead of setting the edge
    on its own. With monotone verdicts this is the bracket's geometric middle."""
    pts = sorted((r.sent_rps, 1.0 if r.meets_slo else 0.0) for r in history if r.meets_slo is not None)
    blocks: list[list[float]] = []  # [passes, levels, lowest rate, highest rate]
    for rate, y in pts:
        blocks.append([y, 1.0, rate, rate])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            last = blocks.pop()
            blocks[-1] = [blocks[-1][0] + last[0], blocks[-1][1] + last[1], blocks[-1][2], last[3]]
    shares = [b[0] / b[1] for b in blocks]
    for i, share in enumerate(shares):
        if share < 0.5:
            if i == 0:
                return None
            before = blocks[i - 1]
            if shares[i - 1] == 0.5:  # the crossing lies inside a pooled block
                return round(math.sqrt(before[2] * before[3]), 4)
            return round(math.sqrt(before[3] * blocks[i][2]), 4)
        if share == 0.5 and i == len(shares) - 1:
            return round(math.sqrt(blocks[i][2] * blocks[i][3]), 4)
    return None


def _fitted(history: Sequence[StepResult]) -> float | None:
    """Where a least-squares line through the levels' limit / percentile (the target closest to failing; each level
    weighted by its requests) reaches 1: a queue's latency grows as L0 / (1 - rate / R), so limit / latency falls
    about linearly in the rate and crosses 1 at the edge. Unlike the verdicts, which each read one level's
    percentile against the limit, the line pools every level's reading: near a flat SLO (an e2e that the answer's
    length dominates, +19% from 7.5 to 12.3 req/s on a chat replica) a percentile's few percent of noise moves a
    single verdict's edge by tens of percent of rate. A level whose server fell behind (`StepResult.overload`) is
    left out: its percentile reads a queue still growing, not a stationary one. None with fewer than two levels or a
    line that does not fall."""
    pts: list[tuple[float, float, float]] = []
    for r in history:
        if r.overload is not None and r.overload.overloaded:
            continue
        scores = [c.value / c.limit for c in r.checks if c.value is not None and c.limit > 0]
        if not scores or r.requests <= 0 or not all(math.isfinite(x) and x > 0 for x in scores):
            continue
        pts.append((r.sent_rps, 1.0 / max(scores), float(r.requests)))
    if len({x for x, _, _ in pts}) < 2:
        return None
    total = sum(w for _, _, w in pts)
    mx = sum(x * w for x, _, w in pts) / total
    my = sum(y * w for _, y, w in pts) / total
    sxx = sum(w * (x - mx) ** 2 for x, _, w in pts)
    slope = sum(w * (x - mx) * (y - my) for x, y, w in pts) / sxx
    if slope >= 0:
        return None
    return round(mx + (1.0 - my) / slope, 4)


#: Standard errors below the rate a server answered at while it fell behind that a capacity held to it states as its
#: interval's low end (two-sided 95%, as the levels' own intervals).
SERVED_Z = 1.96


def _behind(history: Sequence[StepResult]) -> tuple[int, float]:
    """(completions, seconds) over the spans the backlog test judged in every overloaded level."""
    behind = [r.overload for r in history if r.overload is not None and r.overload.overloaded]
    return sum(o.completions for o in behind), sum(o.window_s for o in behind)


def _served_noise(history: Sequence[StepResult]) -> float:
    """The standard error of `_served_when_behind`: its completions as a Poisson count over the spans judged."""
    completions, seconds = _behind(history)
    return math.sqrt(completions) / seconds if seconds > 0 else 0.0


def _served_when_behind(history: Sequence[StepResult]) -> float | None:
    """The rate at which the server answered while it fell behind its arrivals (`StepResult.overload`): the
    completions of every overloaded level over the spans their test judged (each window after its server's fill
    from empty, which answers below saturation: `sizing.loadtest.overload.fill_time`), pooled. A server behind its
    arrivals has a queue to work on throughout, so it answers at its saturated throughput, and no rate above it can
    be served for long: the edge lies at or below it, wherever the levels' verdicts put the bracket's middle (the
    backlog test sees an overload of a few percent only on thousands of requests, so levels just above saturation
    pass, and the bracket's middle lies above it). None when no level fell behind."""
    completions, seconds = _behind(history)
    return round(completions / seconds, 4) if seconds > 0 else None


class CapacitySearch:
    """The level plan of a capacity search (`sizing.loadtest.plan.LevelPlan`): rates from `start`, bracketing by
    EXPAND, then geometric bisection to `tolerance`. A step's `meets_slo` is its point verdict; its `capacity`
    record carries the confident one."""

    def __init__(
        self, start: float, *, tolerance: float = DEFAULT_TOLERANCE, max_levels: int = DEFAULT_MAX_LEVELS,
        max_rate: float | None = None,
    ) -> None:  # fmt: skip
        self.start = start
        self.tolerance = tolerance
        self.max_levels = max_levels
        self.max_rate = max_rate

    @staticmethod
    def passed(r: StepResult) -> bool | None:
        return r.meets_slo

    def bracket(self, history: Sequence[StepResult]) -> tuple[float | None, float | None]:
        passing = [r.sent_rps for r in history if r.meets_slo]
        failing = [r.sent_rps for r in history if r.meets_slo is False]
        hi = min(failing) if failing else None
        below = [x for x in passing if hi is None or x < hi]
        return (max(below) if below else None), hi

    def converged(self, lo: float | None, hi: float | None) -> bool:
        return lo is not None and hi is not None and hi <= lo * (1 + 2 * self.tolerance)

    def next_level(self, history: Sequence[StepResult]) -> float | None:
        if len(history) >= self.max_levels:
            return None
        if not history:
            return round(self.start, 4)
        lo, hi = self.bracket(history)
        if self.converged(lo, hi):
            return self._bound(history, lo, hi)
        if hi is None:  # every level passed: grow
            assert lo is not None
            nxt = lo * EXPAND
            if self.max_rate is not None:
                if lo >= self.max_rate:
                    return None
                nxt = min(nxt, self.max_rate)
        elif lo is None:  # every level failed: shrink
            nxt = hi / EXPAND
        else:
            nxt = math.sqrt(lo * hi)
        tried = {round(r.level, 4) for r in history}
        nxt = round(nxt, 4)
        if nxt in tried and lo is not None and hi is not None:
            # the geometric middle was asked for already (its level landed off target): the arithmetic one
            nxt = round((lo + hi) / 2, 4)
        return None if nxt in tried else nxt

    def _bound(self, history: Sequence[StepResult], lo: float | None, hi: float | None) -> float | None:
        """Once the edge is bracketed, one level further out on a side that no confident verdict bounds yet (both
        ends passed or failed on their point estimates only), so the stated interval is closed: BOUND_STEP below
        the bracket for a confident pass, above it for a confident fail. None when both sides are bounded."""
        assert lo is not None and hi is not None
        rates = [r.sent_rps for r in history]
        if not any(r.capacity_verdict == "pass" and r.sent_rps <= lo for r in history):
            below = round(lo / BOUND_STEP, 4)
            if not any(x < lo for x in rates):
                return below
        if not any(r.capacity_verdict == "fail" and r.sent_rps >= hi for r in history):
            above = round(hi * BOUND_STEP, 4)
            if not any(x > hi for x in rates) and (self.max_rate is None or above <= self.max_rate):
                return above
        return None

    def summary(self, history: Sequence[StepResult]) -> dict[str, Any]:
        return self.estimate(history).model_dump(mode="json")

    def estimate(self, history: Sequence[StepResult]) -> CapacityEstimate:
        lo, hi = self.bracket(history)
        confident_pass = [
            r.sent_rps for r in history if r.capacity_verdict == "pass" and (hi is None or r.sent_rps < hi)
        ]
        confident_fail = [r.sent_rps for r in history if r.capacity_verdict == "fail"]
        low = max(confident_pass) if confident_pass else None
        high = min(confident_fail) if confident_fail else None
        if lo is None:
            capacity = None
            note = "no level met the SLOs: capacity is below the lowest rate probed"
        elif hi is None:
            capacity = lo
            note = "every level met the SLOs: capacity is at least the highest rate probed"
        else:
            capacity = _crossing(history) or round(math.sqrt(lo * hi), 4)
            fitted = _fitted(history)
            if fitted is not None and (low or 0.0) <= fitted <= (high or math.inf):
                # inside what the confident verdicts allow, the line through every level's reading places the edge
                capacity = fitted
            served = _served_when_behind(history)
            if served is not None and served < capacity:
                # no higher than what the server answered while it fell behind: its saturated throughput
                capacity = served
                if low is not None and low > capacity:
                    # a level that passed above that rate passed before its queue could show (an overload of a
                    # few percent shows only on thousands of requests): the interval's low end comes down to the
                    # served rate less its counting noise, so the answer lies inside its own interval (a twin of
                    # batch-summarization read 0.663 req/s [0.764 - 0.816])
                    low = round(max(capacity - SERVED_Z * _served_noise(history), 0.0), 4)
                if high is not None and high < capacity:
                    high = capacity
            note = f"the SLO edge lies between {lo:g} and {hi:g} req/s" + (
                ""
                if self.converged(lo, hi)
                else f" (not narrowed to +/-{self.tolerance:.0%}: level budget spent)"
            )
            if served is not None and capacity == served:
                note += f"; held to {served:g} req/s, what the server answered while it fell behind"
        return CapacityEstimate(
            capacity_rps=capacity, low_rps=low, high_rps=high, converged=self.converged(lo, hi),
            tolerance=self.tolerance,
            levels=[
                {"rate_rps": r.sent_rps, "target_rps": r.level, "meets_slo": r.meets_slo, "verdict": r.capacity_verdict,
                 "requests": r.requests, "unfinished": r.unfinished,
                 "checks": [c.model_dump(mode="json") for c in r.checks],
                 **({"overload": r.overload.model_dump(mode="json")} if r.overload is not None else {})}
                for r in history
            ],
            note=note,
        )  # fmt: skip


def from_records(
    records: Sequence[dict[str, Any]], start: float, tolerance: float = DEFAULT_TOLERANCE
) -> CapacityEstimate:
    """The search's answer from its stored levels (each a StepResult as JSON, with what the run recorded beside)."""
    fields = StepResult.model_fields
    steps = [StepResult.model_validate({k: v for k, v in r.items() if k in fields}) for r in records]
    return CapacitySearch(start, tolerance=tolerance).estimate(steps)
