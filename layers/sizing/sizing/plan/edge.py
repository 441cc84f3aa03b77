"""Reading a capacity's edge on runs whose SLO score scatters: where the line through the runs nearest the edge
crosses the SLO's limit, and the highest rate a run was found to pass close under it (`edge_crossing`).

A pass/fail bisection on such runs reports its last pass, anywhere within its last step under the crossing, and
one run's edge besides; `sizing.plan.capacity` brackets the edge on short probes first and reads it here on longer
runs, each the prediction it reports there, so the capacity is the run's own edge to EDGE_TOLERANCE and the figures
shown at it meet the SLO."""

from __future__ import annotations

import math
from collections.abc import Callable

#: Most the capacity may sit under where its edge runs' SLO score crosses the limit (the line through the runs
#: nearest the edge): the search stops at a run that meets the SLO within this of it. A pass/fail bisection's last
#: pass sat anywhere within its last step (4% before) under the crossing; this is finer than an edge run's own
#: scatter (2-3%). On the examples (aiming EDGE_AIM under) a tolerance of 1% took 2.7 edge runs a search and 2%
#: took 2.5; the top-3 capacities of chatbot, code-assistant and rag sat 0.2% and 1.0% under their long-run edges
#: on average, within 2.3% and 2.4% at most.
EDGE_TOLERANCE = 0.02
#: How far under the crossing each edge run aims, so that it lands on the passing side of a line read off noisy
#: runs and ends the search: a quarter of EDGE_TOLERANCE. Aiming half of it under took as many runs (2.56 a
#: search against 2.52) and left the nine capacities 0.5% lower on average.
EDGE_AIM = EDGE_TOLERANCE / 4
#: Most edge runs a search spends before it keeps the highest rate one passed: the first at the grid probes'
#: crossing, the second at the first run's, a third once the two have bracketed the edge. A bound on the
#: estimate's time, not a tuning: over the four examples' 33 searches a fourth run would have been made in 4, and
#: with three every search found a pass.
EDGE_RUNS = 3
#: Most edge runs a search spends while its highest pass lies more than EDGE_BRACKET under its lowest failure
#: after EDGE_RUNS: the runs left it straddling a wide bracket, and its highest pass is no reading of the edge. On
#: a flat SLO curve (1 / score moving 8% a request per second: an 8B model on g6e.12xlarge under a 400 ms TTFT
#: p95) the first edge run, 3% slower than the shorter probes read, sent the second one from 1.11 to 0.39 req/s,
#: the third failed at 0.85 by half a percent, and the capacity came out at 0.39 against an edge at 0.81 -- above
#: the capacity of the same workload asked at a higher confidence. Two more runs close such a bracket; a bound on
#: the estimate's time all the same.
EDGE_MAX_RUNS = EDGE_RUNS + 2
#: The bracket (highest pass to lowest failure) wide enough, after EDGE_RUNS, for the search to run on: a pass
#: more than this under a failure may be far from the edge (twice EDGE_TOLERANCE plus an edge run's own scatter).
EDGE_BRACKET = 0.08


def line_crossing(a: tuple[float, float], b: tuple[float, float]) -> float | None:
    """Where the line through (rate or grid point, 1/score) pairs `a` and `b` reaches 1/score = 1, the SLO's edge."""
    (xa, ya), (xb, yb) = a, b
    if ya == yb:
        return None
    return xa + (ya - 1.0) / (ya - yb) * (xb - xa)


def edge_crossing(
    run: Callable[[float], tuple[bool, float]],
    guess: float,
    slope: float,
    top: float,
) -> tuple[float | None, int]:
    """(the highest rate `run` was found to pass within EDGE_TOLERANCE under the crossing of its 1 / score with 1,
    or None where no run passed; the runs made). `run(rate)` returns (meets the SLO, 1 / score) of an edge run;
    `guess` is where the grid's probes cross, `slope` their 1 / score per unit of rate (negative where latency
    rises with the rate), and no rate above `top`, the saturated rate, is run.

    The crossing is read off the line through the runs nearest the edge -- the highest pass and the lowest
    failure; while the runs lie on one side, the two nearest it; with one run, the probes' slope through it --
    and the next run goes EDGE_AIM under it, so it passes close to it. The search stops at a pass within
    EDGE_TOLERANCE of a crossing that rests on two runs (or at a pass at `top`), or after EDGE_RUNS runs (the
    highest pass; while that pass lies more than EDGE_BRACKET under the lowest failure, up to EDGE_MAX_RUNS)."""
    passes: list[tuple[float, float]] = []
    fails: list[tuple[float, float]] = []
    rate = min(guess, top)
    for runs in range(1, EDGE_MAX_RUNS + 1):
        if runs > EDGE_RUNS and not (passes and fails and fails[0][0] > passes[-1][0] * (1 + EDGE_BRACKET)):
            return (passes[-1][0] if passes else None), runs - 1
        ok, y = run(rate)
        (passes if ok else fails).append((rate, y))
        passes.sort()
        fails.sort()
        p = passes[-1] if passes else None
        f = fails[0] if fails else None
        if p is not None and f is not None:
            cross = line_crossing(p, f)
            if runs >= EDGE_RUNS and cross is not None:
                # past the usual runs the bracket is wide and its line, through a pass far down a curved score,
                # keeps landing on the failing side: read the crossing off the two runs nearest it instead
                at = cross
                near = sorted(sorted(passes + fails, key=lambda r: abs(r[0] - at))[:2])
                local = line_crossing(near[0], near[1])
                if local is not None and p[0] < local < f[0]:
                    cross = local
        elif len(passes) >= 2:
            cross = line_crossing(passes[-2], passes[-1])
        elif len(fails) >= 2:
            cross = line_crossing(fails[0], fails[1])
        else:
            cross = rate + (y - 1.0) / -slope if slope < 0 else None
        if cross is not None and ((f is None and p and cross < p[0]) or (p is None and f and cross > f[0])):
            cross = None  # the line points away from the runs: not a crossing
        if cross is None or not math.isfinite(cross) or cross <= 0:
            # latency not rising with the rate between the runs: halve the bracket, or step a tenth outward
            cross = math.sqrt(p[0] * f[0]) if p and f else rate * (1.1 if ok else 1 / 1.1)
        if f is not None:
            cross = min(cross, f[0])
        if p is not None:
            cross = max(cross, p[0])
        cross = min(cross, top)
        # a pass close to the crossing ends the search, where the crossing rests on two runs (the probes' slope, from
        # shorter runs, is not the edge runs' own: a pass 3.5% over its limit read as 2% under the crossing on it
        # was 4% under on the runs'), or the pass is the saturated rate
        settled = runs >= 2 or (p is not None and p[0] >= top)
        if p is not None and settled and p[0] * (1 + EDGE_TOLERANCE) >= cross:
            return p[0], runs
        rate = cross / (1 + EDGE_AIM)
        if p is not None and rate <= p[0]:  # the crossing within a hair of the pass: close the bracket
            rate = math.sqrt(p[0] * cross)
    return (passes[-1][0] if passes else None), EDGE_MAX_RUNS
