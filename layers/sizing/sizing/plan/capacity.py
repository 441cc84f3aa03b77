"""Capacity under SLO: the highest per-replica request rate at which every SLO percentile holds.

Found by search over the continuous-batching simulator (Poisson arrivals, the workload's token distributions):
a check at one user first (an SLO that fails with no queueing fails at any load), then a search of the grid of
2^BISECTION_STEPS rates between zero and the roofline's saturated rate, which no replica can exceed, for the edge
between the last rate that meets the SLO and the first that misses it. Bisection finds that edge in
BISECTION_STEPS probes whatever the workload; the search here guesses it from the latencies already simulated
and confirms the guess, which usually takes two or three probes. Where meeting the SLO is monotone in the rate
the two find the same edge (tests/unit/test_plan_capacity_search.py). The edge is then read on longer runs
(`edge_crossing`, EDGE_REQUESTS each): the capacity is the highest rate such a run meets the SLO at, found
within EDGE_TOLERANCE under where their SLO score crosses its limit, so it is the model's long-run edge -- what a
load test's capacity search reads on the candidate's twin (`sizing.loadtest.capacity`) -- and not the last pass
of one short, noisy run. The reported prediction at an operating point is such a run too (`predict_at`): the
figures shown at the capacity are the run that decided it.

Searches and operating-point predictions are memoised per process (`sizing.plan.memo`): a warm container
answering the same workload again does not simulate again, and one re-sizing it for another user count or region
reuses its capacity searches (they depend on the replica, token shape and shared prefix, SLO and seed, not on the
load offered). The replica's prefix caching is part of its step model's fingerprint."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sizing.perf.amplification import STEP_SCALE
from sizing.perf.simulator import ClosedLoop, OpenLoop, Replay, SimResult, forget_draws, simulate
from sizing.plan.edge import (
    EDGE_AIM,
    EDGE_BRACKET,
    EDGE_MAX_RUNS,
    EDGE_RUNS,
    EDGE_TOLERANCE,
    edge_crossing,
    line_crossing,
)
from sizing.plan.margin import Margin, describe_violation, margin, margin_at, stat, violations
from sizing.plan.memo import LRU, fingerprint
from sizing.workload.derived import WorkloadModel
from sizing.workload.spec import SLO

#: Requests simulated per probe (the first tenth, from an empty replica, left out of its percentiles). Near the
#: edge a queue takes long to settle, and a p95 of a few hundred requests scatters by several percent, which an e2e
#: SLO (flat in the rate: the answer's length dominates it) turns into tens of percent of rate: with 500-request
#: probes the examples' top-3 capacities moved by up to 20% against 1,000- or 2,000-request ones (code-assistant's
#: first candidate 8.93 against 10.7 req/s; docs/loadgen.md, "Against the twin"), which a capacity search against
#: the candidate's twin then reads as the estimate's error. 2,000 requests is what the simulator's speed target is
#: set for (benchmarks/speed.py: milliseconds a probe), and an estimate's searches take a few tenths of a second.
PROBE_REQUESTS = 2000
#: Bisection steps between 0 and the saturated rate: 2^-5 = 3% of the saturated rate, finer than the
#: estimator's own error (see benchmarks/accuracy.py) and than the 20% default headroom. The grid of probed rates
#: is sat x k / 2^BISECTION_STEPS whatever order the probes take.
BISECTION_STEPS = 5
#: Probes the guided search may spend beyond plain bisection's BISECTION_STEPS before it falls back to halving the
#: bracket: a bound on its worst case (three simulations more than bisection), not a tuning of its usual case.
#: Over 691 feasible searches of workloads derived from examples/ it took 3.6 simulations on average (bisection:
#: 6), used the whole budget in 3, and found bisection's capacity in every one.
GUIDED_EXTRA_PROBES = 3
#: Requests of an edge run: the simulations that decide the capacity once the grid's probes have bracketed it
#: (`edge_crossing`), and the reported prediction at an operating point (REPORT_REQUESTS), the first tenth left out
#: of its percentiles as a probe's is. Where an SLO is flat in the rate (an e2e p95, which the answer's length
#: dominates) a percentile's scatter becomes several times its share of rate: over the nine top-3 candidates of
#: chatbot, code-assistant and rag, the edge of one 2,000-request run sat 0.90-1.15 of the model's long-run edge
#: across eight seeds (the median of six pooled runs of 4 x 10,000 requests), seed 0's -5.3% to +5.5%; of one
#: 8,000-request run 0.95-1.14, seed 0's -1.6% to +2.9%; 16,000 requests narrowed seed 0 to -2.2% to +0.3% at twice
#: the cost (benchmarks/results/twin-capacity.md, "On the model, after the estimate reads its long-run edge"). An
#: edge run costs four probes, and a search makes about two and a half.
EDGE_REQUESTS = 8000
#: Capacity searches memoised per process. An entry is a few numbers; the catalog offers ~200 hardware options a
#: workload, so this holds every search of several recent workloads.
CAPACITY_CACHE_SIZE = 1024
#: Operating-point predictions memoised per process. An entry keeps the per-request arrays of REPORT_REQUESTS
#: requests (~175 kB), so 128 entries stay under ~22 MB of a 1 GB Lambda; ~30-60 are made per workload (its
#: operating points and the capacity searches' edge runs), so this holds the last workload's or two.
PREDICTION_CACHE_SIZE = 128
#: Single probes memoised per process (the runtime-parameter search's, outside a capacity search): an entry is
#: two numbers; a workload's tuning makes ~10.
PROBE_CACHE_SIZE = 1024
#: Probe-length simulations memoised per process, whatever the SLO that reads them: the estimate's reruns with one
#: target relaxed (`sizing.plan.slo_cost`) probe the same replicas at the same grid rates and one user, which was a
#: quarter to a third of an estimate's probes (rag's example: 124,000 of 440,000 simulated requests). An entry keeps
#: a run's percentiles, not its per-request arrays (~2 kB); an estimate makes ~250.
RUN_CACHE_SIZE = 2048
#: Floor and ceiling of an SLO score (achieved / limit) used to guess the edge: keeps 1/score finite when a
#: figure is zero (a one-token output has no TPOT) or a limit is tiny.
SCORE_CLAMP = (1e-9, 1e9)
#: Requests simulated for the reported prediction at an operating point (and the report's latency curves): an edge
#: run's, so the figures reported at the capacity are the run the search decided it on, and a curve crosses its SLO
#: where the capacity says (a shorter run reads less of the queue near the edge: with 1,000 requests an 8B chat
#: replica's TTFT curve crossed its 300 ms SLO 22% above the capacity 2,000-request probes found). p99 rests on 72
#: requests.
REPORT_REQUESTS = EDGE_REQUESTS


@dataclass
class Capacity:
    rate_rps: float  # highest rate per replica meeting every SLO target (before headroom)
    feasible: bool
    reason: str = ""
    probes: int = 0
    closest: dict[str, float] | None = None  # best achieved figure per violated target (for diagnosis)
    #: mean e2e seconds the search's probe at `rate_rps` saw (None when no probe ran there): with the rate, the
    #: requests in flight at the SLO capacity (Little's law on the simulation)
    e2e_mean_s: float | None = None
    #: the team's measurement of this replica's configuration, when one matched (`sizing.plan.measured`): the
    #: capacity then comes from it (`MeasuredPlan.answered`), or it says why it could not
    measured: Any = None
    #: the estimator's own capacity when a measurement replaced it (`measured`)
    estimated_rps: float | None = None

    @property
    def comparable_rps(self) -> float:
        """The capacity on the estimator's scale: what the runtime-parameter search compares serving
        configurations of one replica by. A measured configuration against its neighbours' estimates would
        compare a measurement with an estimate: the estimator's error would decide the choice."""
        return self.rate_rps if self.estimated_rps is None else self.estimated_rps


_capacities: LRU[Capacity] = LRU(CAPACITY_CACHE_SIZE)
_predictions: LRU[Any] = LRU(PREDICTION_CACHE_SIZE)
_probes: LRU[tuple[bool, float]] = LRU(PROBE_CACHE_SIZE)
_runs: LRU[SimResult] = LRU(RUN_CACHE_SIZE)


def clear_caches() -> None:
    """Forget every memoised search, probe and prediction, and the simulator's kept draws (benchmarks measuring a
    new workload; tests)."""
    _capacities.clear()
    _predictions.clear()
    _probes.clear()
    _runs.clear()
    forget_draws()


def cache_info() -> dict[str, dict[str, int]]:
    return {
        "capacity": _capacities.info(),
        "prediction": _predictions.info(),
        "probe": _probes.info(),
        "run": _runs.info(),
    }


def score(sim: Any, slo: SLO, scale: Margin | None = None) -> float:
    """The SLO target closest to failing, as achieved (times `scale`'s factor) / limit: at most 1 where every
    target holds."""
    lo, hi = SCORE_CLAMP
    ratios = [
        stat(sim, m, p) * (scale.factor(m) if scale else 1.0) / max(limit, lo)
        for m, p, limit in slo.targets()
    ]
    finite = [r for r in ratios if not math.isnan(r)]
    return min(max(max(finite, default=lo), lo), hi)


def grid_rate(k: int, top: float, steps: int) -> float:
    """Rate of grid point k of 2^steps between 0 and `top`, computed as bisection computes its midpoints (halving
    sums along the path to k), so each probe simulates bisection's rate to the last bit."""
    lo, hi = 0.0, top
    lo_k, hi_k = 0, 2**steps
    if k <= lo_k:
        return lo
    if k >= hi_k:
        return hi
    while True:
        mid, mid_k = (lo + hi) / 2, (lo_k + hi_k) // 2
        if k == mid_k:
            return mid
        if k > mid_k:
            lo, lo_k = mid, mid_k
        else:
            hi, hi_k = mid, mid_k


def find_edge(
    probe: Callable[[int], tuple[bool, float]], grid: int, y0: float, budget: int, start: int = 0
) -> tuple[int, int]:
    """The grid point k in [0, grid) with probe(k) passing and probe(k + 1) failing -- point 0 passes and point
    `grid` fails without a probe -- and the probes made. `probe(k)` returns (meets the SLO, 1 / score); `y0` is
    1 / score at no load.

    Latency under load behaves like L0 / (1 - rate / R) (a queue: M/M/1 and its relatives), so 1 / score is
    about linear in the rate and crosses 1 at the edge: the next probe is next to where the line through the two
    nearest probes on either side of the edge crosses 1 (through the two highest passes while nothing has failed,
    and toward `grid`, the saturated rate, at first). Once the probes made and the halvings still needed would
    exceed `budget`, the bracket is halved instead, so the search never costs more than `budget` probes. `start`
    (with `y0` its 1 / score) is a point known to pass other than 0."""
    lo, hi = start, grid
    passes = [(float(start), y0)]
    fail: tuple[float, float] | None = None
    probes = 0
    while hi - lo > 1:
        if probes + math.ceil(math.log2(hi - lo)) >= budget:
            k = (lo + hi) // 2
        else:
            if fail is not None:
                r = line_crossing(passes[-1], fail)
            elif len(passes) >= 2:
                r = line_crossing(passes[-2], passes[-1])
                if r is None or r < lo:  # latency not rising with the rate: no edge in sight below the top
                    r = float(hi)
            else:
                r = line_crossing(passes[-1], (float(grid), 0.0))
            if r is None or not math.isfinite(r):
                k = (lo + hi) // 2
            else:
                # bracket first: while nothing has failed, the point just past the guessed edge; then the point
                # just below it (one probe each side of the edge settles it)
                k = math.floor(r) if fail is not None else math.ceil(r)
                k = min(max(k, lo + 1), hi - 1)
        ok, y = probe(k)
        probes += 1
        if ok:
            lo = k
            passes.append((float(k), y))
        else:
            hi = k
            fail = (float(k), y)
    return lo, probes


def max_rate_under_slo(
    step: Any,
    wm: WorkloadModel,
    saturated_rps: float,
    seed: int = 0,
    start: tuple[int, float] | None = None,
) -> Capacity:
    """The edge of the SLO on the grid of rates below the saturated rate (deterministic for a seed); memoised.
    `start` is a grid point already known to meet the SLOs and its 1 / score (`probe`'s answer): the search then
    looks for the edge above it only."""
    key = (
        start,
        *workload_key(step, wm),
        tuple(wm.slo.targets()),
        margin(step, wm.slo, 0.0, wm).key,
        float(saturated_rps),
        seed,
        PROBE_REQUESTS,
        BISECTION_STEPS,
        GUIDED_EXTRA_PROBES,
        EDGE_REQUESTS,
        EDGE_TOLERANCE,
        EDGE_AIM,
        EDGE_RUNS,
        EDGE_MAX_RUNS,
        EDGE_BRACKET,
        REPORT_REQUESTS,
    )
    known = _capacities.get(key)
    if known is None:
        known = _search(step, wm, saturated_rps, seed, start)
        _capacities.put(key, known)
    # the caller owns its copy (a failed verification lowers rate_rps in place)
    return dataclasses.replace(known, closest=dict(known.closest) if known.closest else None)


def workload_key(step: Any, wm: WorkloadModel) -> tuple[Any, ...]:
    """What every memoised simulation of the capacity search is keyed by first: the step model and the workload's
    lengths, shared prefix and replayed trace."""
    return (fingerprint(step), wm.input_tokens, wm.output_tokens, wm.shared_prefix_tokens, wm.replay)


def probe(step: Any, wm: WorkloadModel, saturated_rps: float, k: int, seed: int = 0) -> tuple[bool, float]:
    """One probe of the capacity search: grid point `k` of the rates below `saturated_rps` meets every SLO target,
    and 1 / score there. Memoised as the searches are (the runtime-parameter search probes each variant once per
    workload: a repeated request probes nothing)."""
    scale = margin(step, wm.slo, 0.0, wm)
    key = (
        *workload_key(step, wm),
        tuple(wm.slo.targets()),
        scale.key,
        float(saturated_rps),
        k,
        seed,
        PROBE_REQUESTS,
        BISECTION_STEPS,
    )
    known = _probes.get(key)
    if known is None:
        sim, at = _checked(
            scale,
            lambda r: _probe_run(step, wm, OpenLoop(r), seed),
            grid_rate(k, max(saturated_rps, 1e-6), BISECTION_STEPS),
        )
        known = (not violations(sim, wm.slo, at), 1.0 / score(sim, wm.slo, at))
        _probes.put(key, known)
    return known


def _checked(scale: Margin, run: Callable[[float], SimResult], rate: float) -> tuple[SimResult, Margin]:
    """`run` at `rate`, and `scale` resolved for it (`margin_at`: the same requests at `STEP_SCALE` times the rate,
    where the margin reads an amplification)."""
    sim = run(rate)
    return sim, margin_at(scale, sim, lambda: run(rate * STEP_SCALE))


def _probe_run(step: Any, wm: WorkloadModel, arrivals: OpenLoop | ClosedLoop, seed: int) -> SimResult:
    """A probe's simulation (PROBE_REQUESTS requests under `arrivals`), memoised whatever SLO reads it; its
    percentiles only (read-only)."""
    key = (
        *workload_key(step, wm),
        arrivals,
        seed,
        PROBE_REQUESTS,
    )
    sim = _runs.get(key)
    if sim is None:
        sim = dataclasses.replace(_simulated(step, wm, arrivals, PROBE_REQUESTS, seed), per_request={})
        _runs.put(key, sim)
    return sim


def _simulated(step: Any, wm: WorkloadModel, arrivals: Any, n_requests: int, seed: int) -> Any:
    """The workload's requests under `arrivals` on `step`, without inter-token latency (the planner reads TTFT,
    TPOT and e2e). A workload built from a trace replays it (`wm.replay`): an open loop at a rate is the trace's
    own arrivals, lengths and prefix hits time-scaled to that rate, not a Poisson stream."""
    if wm.replay is not None and isinstance(arrivals, OpenLoop):
        arrivals = Replay(arrivals.rate_rps, wm.replay)
    return simulate(
        step,
        arrivals,
        wm.input_tokens,
        wm.output_tokens,
        n_requests=n_requests,
        seed=seed,
        itl=False,
        prefix_tokens=wm.shared_prefix_tokens,
    )


def grid_point_above(rate: float, saturated_rps: float) -> int | None:
    """The first grid point of the search below `saturated_rps` whose rate exceeds `rate` (None: none does)."""
    top = max(saturated_rps, 1e-6)
    for k in range(1, 2**BISECTION_STEPS):
        if grid_rate(k, top, BISECTION_STEPS) > rate:
            return k
    return None


def _search(
    step: Any, wm: WorkloadModel, saturated_rps: float, seed: int, start: tuple[int, float] | None = None
) -> Capacity:
    slo = wm.slo
    scale = margin(step, slo, 0.0, wm)
    grid = 2**BISECTION_STEPS
    top = max(saturated_rps, 1e-6)
    budget = BISECTION_STEPS + GUIDED_EXTRA_PROBES
    probed_y: dict[int, float] = {}

    def probed(k: int) -> tuple[bool, float]:
        sim, at = _checked(
            scale, lambda r: _probe_run(step, wm, OpenLoop(r), seed), grid_rate(k, top, BISECTION_STEPS)
        )
        probed_y[k] = 1.0 / score(sim, slo, at)
        return not violations(sim, slo, at), probed_y[k]

    if start is not None:
        # a grid point known to pass: no one-user check, the edge lies above it
        probed_y[start[0]] = start[1]
        edge, probes = find_edge(probed, grid, start[1], budget, start=start[0])
        rate, runs = _edge_rate(step, wm, edge, top, scale, seed, probed_y)
        return Capacity(rate, True, "", probes + runs, e2e_mean_s=_e2e_at(step, wm, rate, seed))
    single = _probe_run(step, wm, ClosedLoop(1), seed)
    alone = scale.at(single)  # one user: no queue to multiply a step error
    bad = violations(single, slo, alone)
    if bad:
        reasons = "; ".join(describe_violation(*v) for v in bad)
        if scale.latency:
            reasons += (
                f" ({scale.reasoning.split(':')[0]}: predicted latencies scaled by the estimator's error)"
            )
        closest = {f"{m}.{p}": v for m, p, v, _ in bad}
        return Capacity(0.0, False, f"{reasons} even at 1 user", 1, closest)
    probed_y[0] = 1.0 / score(single, slo, alone)
    edge, probes = find_edge(probed, grid, probed_y[0], budget)
    lo, runs = _edge_rate(step, wm, edge, top, scale, seed, probed_y)
    probes += runs
    if lo <= 0:
        # passes at one user, fails at every probed rate: capacity is below the first probe -- half one user's
        # worth, and never above the midpoint below that failed probe (bisection's next), so a stricter SLO
        # margin can never find more capacity than a looser one that passed the first probe
        lo = min(1.0 / max(single.e2e_s.mean, 1e-3) * 0.5, grid_rate(1, top, BISECTION_STEPS) / 2)
    return Capacity(lo, True, "", 1 + probes, e2e_mean_s=_e2e_at(step, wm, lo, seed))


def _e2e_at(step: Any, wm: WorkloadModel, rate: float, seed: int) -> float | None:
    """Mean e2e seconds of the edge run at the capacity (a memo hit: the search ran it), for Little's law."""
    return float(predict_at(step, wm, rate, seed).e2e_s.mean) if rate > 0 else None


def edge_guess(probed_y: dict[int, float], edge: int, top: float) -> tuple[float, float]:
    """(where the grid's probes cross the SLO between grid point `edge`, which passed, and the next, which failed;
    their 1 / score per unit of rate there): the line through the probes at the two points, or, where the next is
    the saturated rate (never probed), through the two highest passes. `probed_y`: grid point -> 1 / score."""
    lo = grid_rate(edge, top, BISECTION_STEPS)
    hi = grid_rate(edge + 1, top, BISECTION_STEPS)
    below = sorted(k for k in probed_y if k <= edge)
    y_lo = probed_y[below[-1]]
    if edge + 1 in probed_y:
        slope = (probed_y[edge + 1] - y_lo) / (hi - lo)
    elif len(below) >= 2:
        k0 = below[-2]
        slope = (y_lo - probed_y[k0]) / (lo - grid_rate(k0, top, BISECTION_STEPS))
    else:
        slope = -y_lo / (top - lo)
    guess = lo + (y_lo - 1.0) / -slope if slope < 0 else (lo + hi) / 2
    return min(max(guess, lo), hi), slope


def _edge_rate(
    step: Any,
    wm: WorkloadModel,
    edge: int,
    top: float,
    scale: Margin,
    seed: int,
    probed_y: dict[int, float],
) -> tuple[float, int]:
    """(the capacity from the grid's edge -- grid point `edge` passes, the next fails -- and the simulations it
    took): the edge read on edge runs (`edge_crossing`, each the reported prediction there, `predict_at`) from where
    the grid's probes `probed_y` (grid point -> 1 / score) cross; where no edge run passes, the grid point the
    report check settles on (`_reported_edge`). Grid point 0 (nothing probed passed) is left to the caller."""
    lo = grid_rate(edge, top, BISECTION_STEPS)
    if edge < 1:
        return lo, 0
    guess, slope = edge_guess(probed_y, edge, top)

    def run(rate: float) -> tuple[bool, float]:
        sim, at = _checked(scale, lambda r: predict_at(step, wm, r, seed), rate)
        return not violations(sim, wm.slo, at), 1.0 / score(sim, wm.slo, at)

    rate, runs = edge_crossing(run, guess, slope, top)
    if rate is not None:
        return rate, runs
    edge, checked = _reported_edge(step, wm, edge, top, scale, seed)
    return grid_rate(edge, top, BISECTION_STEPS), runs + checked


#: Grid points the capacity may step down when no edge run passed within EDGE_RUNS (a long run failing well under
#: where the short probes' edge is): the highest grid point at or under the edge whose edge run meets the SLO.
#: Each step is 1/2^BISECTION_STEPS of the saturated rate; a bound, so a search never costs more than this many
#: edge runs more.
REPORT_CHECK_STEPS = 4


def _reported_edge(
    step: Any, wm: WorkloadModel, edge: int, top: float, scale: Margin, seed: int
) -> tuple[int, int]:
    """(the highest grid point at or below `edge`, within REPORT_CHECK_STEPS, whose reported prediction meets the
    SLO, the simulations it took): the capacity a reader sees is one the reported figures meet."""
    runs = 0
    while edge > 1 and runs < REPORT_CHECK_STEPS:
        runs += 1
        sim, at = _checked(
            scale, lambda r: predict_at(step, wm, r, seed), grid_rate(edge, top, BISECTION_STEPS)
        )
        if not violations(sim, wm.slo, at):
            break
        edge -= 1
    return edge, runs


def predict_at(step: Any, wm: WorkloadModel, rate_rps: float, seed: int = 0) -> SimResult:
    """The simulation reported for an operating point (REPORT_REQUESTS requests); memoised, so read-only. Without
    inter-token latency (NaN): the planner reports TTFT, TPOT and e2e."""
    key = (
        *workload_key(step, wm),
        float(rate_rps),
        seed,
        REPORT_REQUESTS,
    )
    sim: SimResult | None = _predictions.get(key)
    if sim is None:
        sim = _simulated(step, wm, OpenLoop(rate_rps), REPORT_REQUESTS, seed)
        _predictions.put(key, sim)
    return sim
