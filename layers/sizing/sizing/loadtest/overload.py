"""Whether an open-loop level overloads its server: completions falling behind arrivals.

Above its saturation rate a server's queue grows without bound, but from an empty server it grows at only
(rate - saturation) requests a second: a level 20% above the batch-summarization example's saturation adds about
0.1 request a second to a queue of tens, so its e2e p99 needs far longer than one capped level (15 minutes) to
reach a 300 s limit, and the level *passes* its SLO while the server falls further behind with every minute. A
real server run that way fails its users within the hour. This module recognises that from what the level
measures, whatever the SLO says.

**The test.** Over the span judged [a0, t1) -- the level's window [t0, t1) less the server's fill, below -- let A
be the requests that arrived and D the requests that ended (answered, or failed) -- every request of the level,
those sent in its warm-up included. The requests in the system then grew by A - D over the span: `N(t1) - N(a0)`,
where N(t) is what was sent before t and had not ended by it, read from each request's send and end times and
from those still running. A server that keeps up holds N about steady (it wanders), so the growth's mean is about
0; a server that falls behind adds (rate - saturation) x span. The test is

    z = (A - D) / noise,   noise = sqrt(max(A + D, the span's own growth variance))

one-sided, of "the server keeps up": the level is *overloaded* when z >= OVERLOAD_Z at the end of its last window.

- **The fill is left out.** From an empty server N(t) climbs to its level as the requests sent since the level's
  start end: it lacks lambda x E[(e2e - t)+] of it at t. Requests of seconds fill within the warm-up; requests of a
  minute (batch summaries) fill over one or two, and a window that starts before they have grows by the fill:
  on a 128-slot server of one-minute requests 999-1,000 of 1,000 levels at 0.90-0.98 of saturation were flagged.
  The span judged therefore starts once the level's e2e's FILL_QUANTILE (its requests ended so far) has passed
  since the level began (`fill_time`), at most MAX_FILL_SHARE into the window. The fill also under-reads the rate
  an overloaded server answers at (`sizing.loadtest.capacity._served_when_behind`): on batch-summarization's third
  candidate's model, whose completions reach its saturated throughput about three minutes after an empty start,
  the whole window read 0.82-0.86 of it, the span after the fill 0.98-0.99.
- **The noise is the larger of two.** Arrivals are Poisson, and a server whose completions are as smooth as a
  superposition of many requests' ends adds about as much again: variance A + D over a span short against the
  queue's relaxation, less over a longer one (its pull back to the mean). A batching server's completions clump
  (a stretch of long prompts slows every sequence in the batch): on batch-summarization's third candidate's model
  the growth over 150 s at 0.95 of saturation varied 3x as much as A + D (at 0.90-0.98: 1.0-1.4x on its second
  candidate, 0.5-0.7x on its first). So the growth's variance is also read from the span itself (`growth_variance`, batch means: the
  span cut in VAR_BINS bins, the variance of their growths times VAR_BINS), and the larger of the two is used. A
  steady overload grows alike in every bin, so the bins add little to its noise; a growth that comes all at once
  is judged against its own scatter, and its level runs on (below) until the growth persists.

Its false-alarm rate is measured, not assumed (docs/loadgen.md, "A server that falls behind"): levels run as a
search runs them, flagged at 0.90, 0.95 and 0.98 of saturation: on a synthetic FIFO server of 8 slots 0, 0 and 0
of 1,000 (7 at 1.00); on a single-slot server with a service time of log-sigma 1, 0, 0 and 5 of 1,000; on the
128-slot server of one-minute requests 3, 1 and 5 of 1,000; on the estimator's models of batch-summarization's
three candidates 0-1 of 100 each.

**Its cost.** The test sees overload of a share e above saturation once e x n / (1 + e) clears OVERLOAD_Z x
sqrt(2n) on the span's n arrivals: 11% above saturation on the 800 requests of a p95's level, 5% on 4,000; a span
that loses half its window to a long fill needs sqrt(2) x that, and clumped completions more. A level whose z
lies between RUN_ON_Z and OVERLOAD_Z, or above it before its last window, is unsure and runs on (its window grows,
within its cap), as an unsure percentile does (`sizing.loadtest.capacity.needs_more`): a backlog of a queue that
wanders near saturation then has the time to come back. So levels a few percent above saturation may pass; the
search's answer is then held to the rate at which its overloaded levels' server answered over their spans
(`sizing.loadtest.capacity`): a server behind its arrivals, once filled, works at its saturated throughput.

**Stopping early.** Once overload is certain the level stops: its verdict will fail whatever its percentiles
read, and the rest of its window (and its tail, which an overloaded level always spends to the cap: its queue
never empties) measures nothing the verdict needs. The load generator (`sizing.loadtest.sweep`) looks every
LOOK_EVERY_S from the end of the level's first window on, and at each window's end before awaiting its tail, and
stops at z >= STOP_Z: a bound of 4 standard errors, whose one-sided chance 3e-5 over the 90 looks of a 15-minute
level (Bonferroni) keeps false stops under 0.3%. At the end of a level's last window an overloaded level
(z >= OVERLOAD_Z) ends without awaiting its tail. The arrivals then pause until what the level left in flight has
ended, as after every open-loop level.

**What the user reads.** An overloaded level fails with "the server fell behind: D of A requests answered over the
last T s of the window, after F s of the server filling (the backlog grew by G, z x what its noise allows), waits
rising X s per minute" ("over the T s window" where no fill was left out) -- the waits' slope is the
least-squares slope of the span's waits (time to first token; e2e where no token time was measured) against when
each request was sent, a figure to read, not part of the test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import Field

from sizing.base.strict import Strict

#: One-sided bound on z for an overloaded level: the normal's 97.5th percentile, so a server that keeps up is
#: flagged at most 2.5% of the time where the noise the test uses bounds the growth's (over a window longer than the
#: queue's relaxation it overstates it: measured 0-0.1% at 0.95 of saturation, see the module docstring). At 2.326 (1%)
#: the batch-summarization example's three searches read 1.24, 1.13 and 1.09 of the estimate before the
#: throughput cap, at 1.96 1.20, 1.12 and 1.08, at 1.645 1.20, 1.12 and 1.05 with 7% of levels at 0.93 of
#: saturation flagged: 1.96 keeps the issue's ~5% at rates a few percent below saturation.
OVERLOAD_Z = 1.96
#: Below OVERLOAD_Z, a z this high leaves the level unsure: its window grows (within its cap) so that the test can
#: decide. One standard error: a server that keeps up reaches it on about one level in six, and then runs one more
#: window, not to its cap, unless its backlog keeps growing.
RUN_ON_Z = 1.0
#: z at which a level stops before its window ends (see the module docstring: under 0.3% false stops).
STOP_Z = 4.0
#: Seconds between the load generator's looks for a certain overload inside a window (its progress lines' interval,
#: `sizing.loadtest.sweep.PROGRESS_EVERY_S`): 90 looks in a 15-minute level.
LOOK_EVERY_S = 10.0
#: Fewest arrivals in a window before the test says anything: below, the counts are too few for the normal bound
#: (a Poisson count of 30 is within 5% of its normal approximation's tail at 2 standard errors).
MIN_ARRIVALS = 30
#: Seconds per minute: the waits' slope is stated per minute of the window.
S_PER_MIN = 60.0
#: The e2e percentile a level's server is taken to fill in (`fill_time`): the growth is judged after it. Chosen on
#: batch-summarization's third candidate's model (40 levels a rate): with the 50th its overloaded levels (1.05-1.5x
#: saturation) read 0.95-0.96 of its saturated throughput and its searches 1.017 [0.93-1.04] of the estimate; with
#: the 90th 0.98-0.99 and 1.043 [1.01-1.05]; with the 99th 0.98-1.00, but 14 of 40 levels at 1.05x flagged (25
#: with the 90th) and 1 to 2 of 40 at 0.95-0.98x (0).
FILL_QUANTILE = 0.9
#: At most this share of the window is left out as the fill, so that a level whose e2e outgrows its window (an
#: overload's waits keep growing) is still judged on the later half of it: the test then sees overload of a share e
#: above saturation on half the arrivals, sqrt(2) x the full window's threshold.
MAX_FILL_SHARE = 0.5
#: Bins the judged span is cut into for the growth's variance read from the level (`growth_variance`): the batch
#: means' variance has VAR_BINS - 1 degrees of freedom. Chosen on figures: on batch-summarization's third
#: candidate 4 bins left 3 of 40 levels at 0.95 of saturation flagged, 8 and 16 bins 1, 12 bins 0.
VAR_BINS = 12


class Overload(Strict):
    """Whether a level's server kept up with its arrivals (the backlog test of `sizing.loadtest.overload`)."""

    overloaded: bool = Field(
        description="the backlog grew beyond what the counts' noise allows (z >= OVERLOAD_Z, 1.96)"
    )
    z: float = Field(description="the backlog's growth over its noise (`noise`)")
    arrivals: int = Field(ge=0, description="requests sent in the span judged (the window after its fill)")
    completions: int = Field(
        ge=0, description="requests of the level that ended in the span judged (any sent)"
    )
    backlog_start: int = Field(ge=0, description="requests in the system at the span's start")
    backlog_end: int = Field(ge=0, description="requests in the system at the span's (the window's) end")
    window_s: float = Field(description="the span the counts cover: the window less its fill (seconds)")
    fill_s: float = Field(
        default=0.0,
        ge=0,
        description="seconds at the window's start left out as the server filling from empty",
    )
    noise: float | None = Field(
        default=None,
        description="the growth's standard error the test used: the larger of sqrt(A + D) and the"
        " span's own (batch means)",
    )
    wait_slope_s_per_min: float | None = Field(
        default=None, description="how fast the window's waits rose: seconds per minute of the window"
    )
    stopped_early: bool = Field(
        default=False, description="the level stopped before its window's end once overload was certain"
    )

    @property
    def unsure(self) -> bool:
        """Not overloaded yet, but the backlog grew enough that more of the level could decide it."""
        return not self.overloaded and self.z >= RUN_ON_Z

    def reason(self) -> str:
        waits = (
            ""
            if self.wait_slope_s_per_min is None
            else f", waits rising {self.wait_slope_s_per_min:.3g} s per minute"
        )
        span = (
            f"the {self.window_s:.0f} s window"
            if self.fill_s <= 0
            else f"the last {self.window_s:.0f} s of the window, after {self.fill_s:.0f} s of the server filling"
        )
        return (
            f"the server fell behind: {self.completions} of {self.arrivals} requests answered over {span}"
            f" (the backlog grew by {self.backlog_end - self.backlog_start}, {self.z:.1f}x what its noise"
            f" allows){waits}"
        )


def assess(
    starts: Sequence[float] | np.ndarray, ends: Sequence[float] | np.ndarray, window: tuple[float, float],
    waits: Sequence[float | None] | np.ndarray | None = None, level_start: float = -math.inf,
) -> Overload | None:  # fmt: skip
    """The backlog test over `window` (t0, t1) for a level's requests: when each was sent (`starts`) and ended
    (`ends`: math.inf for one still running), every request sent since `level_start`. `waits`, one per request
    (None or NaN where unknown), give the waits' slope. None when the window holds fewer than MIN_ARRIVALS."""
    t0, t1 = window
    s = np.asarray(starts, dtype=float)
    e = np.asarray(ends, dtype=float)
    mine = s >= level_start
    s, e = s[mine], e[mine]
    if t1 <= t0 or s.size == 0:
        return None
    began = float(s.min()) if math.isinf(level_start) else level_start
    fill = fill_time(s, e, t1)
    a0 = max(t0, min(began + fill, t0 + MAX_FILL_SHARE * (t1 - t0)))  # the judged span: [a0, t1)
    arrived = int(np.count_nonzero((s >= a0) & (s < t1)))
    if arrived < MIN_ARRIVALS:
        return None
    ended = int(np.count_nonzero((e >= a0) & (e < t1)))
    before = int(np.count_nonzero((s < a0) & (e >= a0)))
    after = int(np.count_nonzero((s < t1) & (e >= t1)))
    noise = math.sqrt(max(arrived + ended, growth_variance(s, e, (a0, t1))))
    z = (arrived - ended) / noise
    slope = None
    if waits is not None:
        w = np.asarray([math.nan if x is None else x for x in waits], dtype=float)[mine]
        pick = (s >= a0) & (s < t1) & np.isfinite(w)
        if np.count_nonzero(pick) >= 2 and float(np.ptp(s[pick])) > 0:
            slope = round(float(np.polyfit(s[pick], w[pick], 1)[0]) * S_PER_MIN, 3)
    return Overload(
        overloaded=z >= OVERLOAD_Z, z=round(z, 3), arrivals=arrived, completions=ended, backlog_start=before,
        backlog_end=after, window_s=round(t1 - a0, 3), fill_s=round(a0 - t0, 3),
        noise=round(noise, 3), wait_slope_s_per_min=slope,
    )  # fmt: skip


def fill_time(starts: np.ndarray, ends: np.ndarray, until: float) -> float:
    """Seconds a level's server takes to fill from empty: the FILL_QUANTILE of the e2e times of its requests that
    ended before `until` (0 before any did). A request sent at u is in the system until u + its e2e, so from an
    empty start the requests in the system number lambda x the integral from 0 to t of P(e2e > x) dx: by the e2e's
    90th percentile all but its top decile's excess has built up."""
    done = np.isfinite(ends) & (ends < until)
    if not np.any(done):
        return 0.0
    return float(np.quantile(ends[done] - starts[done], FILL_QUANTILE))


def growth_variance(starts: np.ndarray, ends: np.ndarray, span: tuple[float, float]) -> float:
    """The growth's variance over `span` read from the span itself (batch means): the span cut in VAR_BINS equal
    bins, the variance of the bins' growths (arrivals - completions) times VAR_BINS. It is what the counts' Poisson
    bound misses where a server's completions clump (0 with fewer than two bins' worth)."""
    lo, hi = span
    edges = np.linspace(lo, hi, VAR_BINS + 1)
    growth = np.histogram(starts, edges)[0] - np.histogram(ends[np.isfinite(ends)], edges)[0]
    return VAR_BINS * float(np.var(growth, ddof=1))


def certain(o: Overload | None) -> bool:
    """Overload beyond doubt (z >= STOP_Z): the level can stop before its window ends."""
    return o is not None and o.z >= STOP_Z


def stop_time(
    starts: Sequence[float] | np.ndarray, ends: Sequence[float] | np.ndarray, window_start: float,
    looks_from: float, until: float, every: float = LOOK_EVERY_S,
    waits: Sequence[float | None] | np.ndarray | None = None,
) -> tuple[float, Overload] | None:  # fmt: skip
    """When a level whose requests were sent and ended as given (everything it will send, `ends` as they will be)
    stops on a certain overload, looking as the load generator does: every `every` seconds from `looks_from` (its
    first window's end) until `until` (its window's end); with the test's figures then. None: it runs on."""
    for t in np.arange(looks_from, until, every):
        look = assess(starts, ends, (window_start, float(t)), waits)
        if certain(look):
            assert look is not None
            return float(t), look
    return None
