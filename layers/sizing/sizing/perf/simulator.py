"""Continuous-batching simulator: a discrete-event, iteration-level model of an engine's scheduler.

Each engine step decodes one token for every running sequence and spends the rest of the token budget on
prefill chunks (FCFS, chunked when the engine chunks). New requests are admitted while the batch has room
(`max_num_seqs`) and the KV cache has room for their prompt (or, for engines that reserve, prompt + output);
when decoding outgrows the KV cache the newest sequence is preempted and recomputed later (vLLM V1 default).
An engine whose router defers prefills (TGI 2.x) holds waiting prompts back while a batch decodes, until enough
wait or enough decode steps have passed.
Runs of pure-decode steps between events (an arrival, a completion, KV exhaustion) are summed in closed form,
so 2,000 requests take milliseconds, not a per-token loop.
With prefix caching (vLLM's automatic prefix caching) and a prefix every prompt shares, a request reads the full KV
blocks of that prefix from the cache instead of prefilling them, and the cache holds those blocks once for all
requests (`cached_share`).

The parts: the scheduler (`sizing.perf.scheduler`: its decisions and state; it runs the steps it plans, timed by
`sizing.perf.steptime`, queueing what the engine has seen and recording each request's first and last token), the
arrival sources (`sizing.perf.arrivals`), the closed-form decode runs (`sizing.perf.decoderuns`) -- the hot loop,
compiled where it was built (`sizing.perf.native`), with the scheduler's event loop that idles the replica between
arrivals (`Scheduler.run`) -- and here, the requests drawn and the summary (`_summarise`). The hot state stays on the scheduler
and is read once per decision, not once per step: a run of steps that changes only the token counts (full prefill
chunks of one prompt, pure-decode steps) runs in one call.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sizing.perf.native import KERNEL
from sizing.perf.step import StepModel

if TYPE_CHECKING:
    from sizing.base.distributions import TokenDistribution
    from sizing.perf.arrivals import ClosedArrivals, OpenArrivals
    from sizing.perf.config import HardwareConfig
    from sizing.perf.scheduler import Scheduler
    from sizing.traces.replay import TraceReplay
    from sizing.workload.spec import SLO

#: A closed-loop run needs this many rounds of `concurrency` requests for a steady-state window; fewer rounds
#: (or an all-at-once batch) are measured over the whole makespan instead, as offline benchmarks do.
MIN_ROUNDS_FOR_WINDOW = 3


@dataclass(frozen=True)
class ClosedLoop:
    """`concurrency` users, each sending its next request when the previous one ends (+ think time).

    Users start evenly spread over one estimated request duration (`ramp_s=None`), where closed loops settle;
    `ramp_s=R` spreads them over R seconds, and `ramp_s=0` starts them all at once (a static batch, an offline
    run). `wave_gap_s=G` runs the users in waves instead: a wave sends `concurrency` requests G seconds apart, and
    the next wave starts when every request of the wave has ended (a client that collects a whole wave's results
    before launching more, as llmperf's 2024 loop does); think time does not apply to waves. `group=G` starts the
    users in lock-step groups of G (spread over the ramp as single users are): a closed loop of fixed lengths on a
    real engine falls into such groups, each prefilled together and finished together (docs/engine.md,
    "Lock-step"); a measured level states the groups its users formed (`StepResult.lockstep_group`)."""

    concurrency: int
    think_time_s: float = 0.0
    ramp_s: float | None = None
    wave_gap_s: float | None = None
    group: int = 1
    #: its throughput is read as a load generator reads a level's: over a window that opens once every user is in
    #: (after the ramp), not over the run's rounds from its first requests, as a published benchmark's whole run
    steady: bool = False


@dataclass(frozen=True)
class OpenLoop:
    """Poisson arrivals at `rate_rps` requests per second, whatever the replica's state.

    `window=(warm-up s, window s)`: the run is read as the load generator reads one level
    (`sizing.loadtest.metrics.summarize`): the requests sent in the window, which opens the warm-up after the first
    arrival, however long they take, and the throughput as the tokens delivered inside it. Without one, the run's
    steady state: the requests after its `warmup` share, their output over their span."""

    rate_rps: float
    window: tuple[float, float] | None = None


@dataclass(frozen=True)
class Replay:
    """A recorded trace's arrivals and requests (`sizing.traces.replay.TraceReplay`), time-scaled to `rate_rps`:
    an open loop whose gaps, lengths and prefix hits are the trace's, not Poisson draws."""

    rate_rps: float
    trace: TraceReplay


#: The percentiles a Stats holds, as np.percentile(values, [50, 90, 95, 99]) computes its fractions (q / 100).
PERCENTILES = (0.5, 0.9, 0.95, 0.99)


def _percentiles(values: np.ndarray) -> list[float]:
    """np.percentile(values, [50, 90, 95, 99]) to the last bit from one sort, without numpy's per-call overhead
    (four figures of ~1,000 values: the overhead was most of the cost). numpy's "linear" method: virtual index
    (n - 1) q, clamped to the last element, and its lerp (from the upper neighbour when the fraction is >= 0.5);
    any NaN makes every figure NaN."""
    if values.dtype != np.float64 or values.ndim != 1:
        return [float(x) for x in np.percentile(values, [100 * q for q in PERCENTILES])]
    v = np.sort(values)
    last = v.size - 1
    if math.isnan(v[last]):
        return [math.nan] * len(PERCENTILES)
    out = []
    for q in PERCENTILES:
        virtual = last * q
        if virtual >= last:
            lo = hi = last
            gamma = virtual + 1  # numpy marks the clamped index as -1 before taking the fraction
        else:
            lo = math.floor(virtual)
            hi = lo + 1
            gamma = virtual - lo
        a, b = float(v[lo]), float(v[hi])
        diff = b - a
        out.append(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma)
    return out


@dataclass(frozen=True)
class Stats:
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float

    def as_dict(self, digits: int = 3) -> dict[str, float]:
        return {k: round(getattr(self, k), digits) for k in ("mean", "p50", "p95", "p99")}

    def get(self, q: str) -> float:
        return float(getattr(self, q))

    @classmethod
    def of(cls, values: np.ndarray, weights: np.ndarray | None = None) -> Stats:
        if values.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan, math.nan)
        if weights is None:
            # for float64, the sum over the count is numpy's mean to the last bit (the same pairwise sum, one
            # division), without its Python wrapper
            mean = float(values.sum()) / values.size if values.dtype == np.float64 else float(values.mean())
            return cls(mean, *_percentiles(values))
        order = np.argsort(values)
        v, w = values[order], weights[order]
        cum = np.cumsum(w)
        total = cum[-1]
        qs = [float(v[min(int(np.searchsorted(cum, q * total)), v.size - 1)]) for q in (0.5, 0.9, 0.95, 0.99)]
        return cls(float((v * w).sum() / total), *qs)


@dataclass
class SimResult:
    """Latency distributions (post-warmup requests) and throughput of one simulated run."""

    ttft_ms: Stats
    tpot_ms: Stats
    itl_ms: Stats
    e2e_s: Stats
    requests_per_s: float
    output_tokens_per_s: float
    completed: int
    preemptions: int
    duration_s: float
    truncated: int = 0
    #: tokens emitted by the simulated engine and tokens the requests asked for (equal: nothing is lost)
    output_tokens_generated: int = 0
    output_tokens_drawn: int = 0
    #: per-request arrays of the measured requests: ttft_ms, tpot_ms, e2e_s
    per_request: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def goodput(self, slo: SLO) -> float:
        """Share of measured requests meeting every SLO target (each target read per request)."""
        ok = np.ones(self.per_request["e2e_s"].size, dtype=bool)
        for metric, _q, limit in slo.targets():
            vals = self.per_request[metric]
            ok &= np.nan_to_num(vals, nan=0.0) <= limit
        return float(ok.mean()) if ok.size else 0.0

    def meets(self, slo: SLO) -> bool:
        """Every percentile target of the SLO holds."""
        for metric, q, limit in slo.targets():
            value = getattr(self, metric).get(q)
            if not math.isnan(value) and value > limit:
                return False
        return True

    def as_dict(self) -> dict[str, Any]:
        return {
            "ttft_ms": self.ttft_ms.as_dict(1),
            "tpot_ms": self.tpot_ms.as_dict(2),
            "itl_ms": self.itl_ms.as_dict(2),
            "e2e_s": self.e2e_s.as_dict(3),
            "requests_per_s": round(self.requests_per_s, 4),
            "output_tokens_per_s": round(self.output_tokens_per_s, 1),
            "completed": self.completed,
            "preemptions": self.preemptions,
        }


# --- the simulation ---------------------------------------------------------------------------------------------
def cached_share(step_model: StepModel, prefix_tokens: int, prompt_tokens: int) -> int:
    """Tokens of a `prompt_tokens` prompt that prefix caching serves from the KV cache when every prompt starts
    with the same `prefix_tokens`: vLLM's automatic prefix caching reuses full KV blocks only, and always computes
    the prompt's last token (its logits give the first output token), so floor(min(prefix, prompt - 1) / block) x
    block; 0 when the step model does not cache prefixes.
    https://docs.vllm.ai/en/latest/design/prefix_caching.html"""
    if not step_model.prefix_caching or prefix_tokens <= 0 or prompt_tokens <= 1:
        return 0
    block = max(1, step_model.block_size)
    return (min(prefix_tokens, prompt_tokens - 1) // block) * block


def _request_duration(sm: StepModel, inp: float, outp: float, concurrency: int, cached: float = 0.0) -> float:
    """Rough time one request spends in a replica holding `concurrency` of them (spreads closed-loop starts);
    `cached` of its `inp` prompt tokens come from the prefix cache."""
    b = max(1, min(concurrency, sm.max_num_seqs))
    step = sm.timing()
    if cached > 0:
        todo = inp - cached
        prefill = step.iteration_time(int(todo), 0, 0, todo * (cached + todo / 2))
    else:
        prefill = step.iteration_time(int(inp), 0, 0)
    return prefill + outp * step.iteration_time(0, b, int(b * (inp + outp / 2)))


def simulate(
    step_model: StepModel,
    load: ClosedLoop | OpenLoop | Replay,
    input_dist: TokenDistribution,
    output_dist: TokenDistribution,
    n_requests: int = 2000,
    seed: int = 0,
    warmup: float = 0.1,
    itl: bool = True,
    prefix_tokens: int = 0,
) -> SimResult:
    """Simulate `n_requests` through one replica under `load`. Deterministic for a seed.

    `itl=False` skips the inter-token latency bookkeeping (its Stats are then NaN) for callers that do not read
    it, as the planner does not; every other figure is the same either way.

    `prefix_tokens`: tokens at the start of every prompt that all requests share (the workload's
    `tokens.shared_prefix`). When the step model caches prefixes, the first request admitted computes them (a cold
    cache) and every later admission, a preempted request's recomputation included, reads its `cached_share`
    from the cache: those tokens are not prefilled, though the prompt's remaining tokens still attend to them, and
    the KV cache holds the shared blocks once, not once per request. Without prefix caching, or with 0, the run is
    the one without a prefix to the last bit.

    The run is the scheduler (`sizing.perf.scheduler`: admission, prefill chunks, preemption, completions, and
    each request's times) driven by its event loop (`Scheduler.run`: idle time until arrivals), then summarised
    (`_summarise`).

    Under a `Replay` the requests are the trace's (its lengths, in its order) and so are their prefix hits, bounded
    by this replica's KV cache (`TraceReplay.cached`); `input_dist`, `output_dist` and `prefix_tokens` are not
    read, and the cache holds the largest hit once (the prefix most requests share)."""
    sm = step_model
    n = int(n_requests)
    if n < 1:
        raise ValueError("n_requests must be at least 1")
    if prefix_tokens < 0:
        raise ValueError("prefix_tokens must not be negative")
    if isinstance(load, Replay):
        draws = _replayed(load.trace, n)
        inp_a, out_a, truncated, inp_l, out_l = _draw_requests(sm, draws)
        shared, pinned = _replayed_blocks(sm, load.trace, inp_a)
    else:
        draws = _draws(input_dist, output_dist, int(seed), n)
        inp_a, out_a, truncated, inp_l, out_l = _draw_requests(sm, draws)
        shared, pinned = _shared_blocks(sm, inp_a, prefix_tokens)
    sched = KERNEL.scheduler(sm, inp_l, out_l, shared, pinned, itl)
    arrival_a, arrivals = _arrivals(load, draws.exponential, sm, sched)
    completed = sched.run(arrivals, n)
    res = _summarise(
        np.array(arrivals.arrival, dtype=np.float64) if arrival_a is None else arrival_a,
        np.array(sched.first, dtype=np.float64),
        np.array(sched.finish, dtype=np.float64),
        out_a,
        warmup,
        load,
        sched.preemptions,
        completed,
        np.array(sched.itl_v, dtype=np.float64),
        np.array(sched.itl_w, dtype=np.float64),
        truncated,
    )
    res.output_tokens_generated = sched.emitted
    res.output_tokens_drawn = int(out_a.sum())
    return res


#: A level read in windows is predicted over this many simulated requests in its windows at least (as many windows
#: as that takes, `MIN_WINDOWS` to `MAX_WINDOWS`), each window from an idle engine on a seed of its own: near
#: saturation one Poisson window of a few dozen answers reads its mean TPOT 2-5x apart from one draw of arrivals to
#: the next (docs/engine.md, "A Poisson window is one draw"), so one simulated window is a draw too, not the level.
WINDOW_REQUESTS = 1200
MIN_WINDOWS = 4
MAX_WINDOWS = 32
#: Windows of arrivals simulated after a window: the load generator holds the level's load until every request sent
#: in the window has been answered, for at most one more window (`sizing.loadtest.locustfile.SweepShape`), so the
#: window's last requests share the engine with arrivals to the end.
TAIL_WINDOWS = 1.0


@dataclass(frozen=True)
class Windows:
    """A load-test level predicted as its windows read: `pooled`, the requests of every window together (rates:
    the windows' mean; inter-token latencies not kept); `means`, each window's own figure (`ttft_ms`, `tpot_ms`,
    `e2e_s`: its requests' mean; `output_tokens_per_s`): the spread one measured window is drawn from."""

    pooled: SimResult
    means: dict[str, np.ndarray]

    def _measured(self, metric: str) -> np.ndarray:
        """The windows' figures for `metric`, those of windows that measured it."""
        v = self.means[metric]
        measured: np.ndarray = v[~np.isnan(v)]
        return measured

    def band(self, metric: str, lo: float = 10.0, hi: float = 90.0) -> tuple[float, float]:
        """The `lo`-th and `hi`-th percentiles of the windows' figure for `metric` (NaN: no window measured it)."""
        v = self._measured(metric)
        if not v.size:
            return math.nan, math.nan
        return float(np.percentile(v, lo)), float(np.percentile(v, hi))

    def scatter(self, metric: str) -> float:
        """The median distance of one window's figure for `metric` from the level's (pooled), relative: what a
        prediction of the level's figure that is exactly right errs by against one measured window."""
        v = self._measured(metric)
        pooled = self.pooled
        level = (
            pooled.output_tokens_per_s if metric == "output_tokens_per_s" else getattr(pooled, metric).mean
        )
        return float(np.median(np.abs(v / level - 1.0))) if v.size and level else math.nan


def simulate_windows(
    step_model: StepModel,
    rate_rps: float,
    warmup_s: float,
    window_s: float,
    input_dist: TokenDistribution,
    output_dist: TokenDistribution,
    seed: int = 0,
    prefix_tokens: int = 0,
) -> Windows:
    """Poisson arrivals at `rate_rps` read as a load generator reads one level (`OpenLoop.window`), over windows
    enough for `WINDOW_REQUESTS` requests (seeds `seed`, `seed + 1`, ...): its figures, and their spread from one
    window to the next. Deterministic for a seed."""
    if rate_rps <= 0 or window_s <= 0 or warmup_s < 0:
        raise ValueError("a window needs a positive rate and length and a warm-up of 0 or more")
    arrivals = rate_rps * (warmup_s + (1.0 + TAIL_WINDOWS) * window_s)
    # a Poisson count: three standard deviations over its mean leave the tail's arrivals short once in ~700 runs
    n = math.ceil(arrivals + 3.0 * math.sqrt(arrivals)) + 1
    k = min(MAX_WINDOWS, max(MIN_WINDOWS, math.ceil(WINDOW_REQUESTS / max(rate_rps * window_s, 1.0))))
    load = OpenLoop(rate_rps, (warmup_s, window_s))
    runs = [
        simulate(
            step_model,
            load,
            input_dist,
            output_dist,
            n_requests=n,
            seed=seed + i,
            warmup=0.0,
            itl=False,
            prefix_tokens=prefix_tokens,
        )
        for i in range(k)
    ]
    per = {m: np.concatenate([r.per_request[m] for r in runs]) for m in ("ttft_ms", "tpot_ms", "e2e_s")}
    tpot = per["tpot_ms"]
    pooled = SimResult(
        ttft_ms=Stats.of(per["ttft_ms"]),
        tpot_ms=Stats.of(tpot[~np.isnan(tpot)]),
        itl_ms=Stats.of(np.asarray([])),
        e2e_s=Stats.of(per["e2e_s"]),
        requests_per_s=float(np.mean([r.requests_per_s for r in runs])),
        output_tokens_per_s=float(np.mean([r.output_tokens_per_s for r in runs])),
        completed=sum(r.completed for r in runs),
        preemptions=sum(r.preemptions for r in runs),
        duration_s=sum(r.duration_s for r in runs),
        truncated=sum(r.truncated for r in runs),
        output_tokens_generated=sum(r.output_tokens_generated for r in runs),
        output_tokens_drawn=sum(r.output_tokens_drawn for r in runs),
        per_request=per,
    )
    means = {
        "ttft_ms": np.array([r.ttft_ms.mean for r in runs]),
        "tpot_ms": np.array([r.tpot_ms.mean for r in runs]),
        "e2e_s": np.array([r.e2e_s.mean for r in runs]),
        "output_tokens_per_s": np.array([r.output_tokens_per_s for r in runs]),
    }
    return Windows(pooled, means)


class _Draws:
    """The random numbers one run of `n` requests draws for a seed, in the order `simulate` always drew them from
    `np.random.default_rng(seed)`: each request's prompt tokens, its output tokens (both stratified by blocks of
    `sizing.base.distributions.STRATUM`, as the load generator draws them: every block of requests holds the
    distribution's quantiles, so a p95 read over a few hundred requests is the workload's, not one sample's that
    missed its tail -- docs/loadgen.md, "Against the twin"), then n standard exponentials
    (an open loop's inter-arrival gaps, or a closed loop's think times, at their scale: numpy's
    `exponential(scale)` is `scale * standard_exponential()`, bit for bit). Read-only, with the token counts also
    as lists (what the scheduler takes) and the largest output and request, so the cut to a replica's limit is
    skipped when nothing reaches it."""

    __slots__ = ("exponential", "inp", "inp_list", "longest", "out", "out_list", "out_max")

    def __init__(
        self, input_dist: TokenDistribution | None, output_dist: TokenDistribution | None, seed: int, n: int
    ) -> None:
        if input_dist is None or output_dist is None:
            return  # `given`'s: it sets the fields
        rng = np.random.default_rng(seed)
        self._set(
            input_dist.sample(rng, n, stratified=True),
            output_dist.sample(rng, n, stratified=True),
            rng.standard_exponential(n),
        )

    @classmethod
    def given(cls, inp: np.ndarray, out: np.ndarray, exponential: np.ndarray) -> _Draws:
        """Requests given, not drawn (a replayed trace's)."""
        d = cls(None, None, 0, 0)
        d._set(inp.astype(np.int64), out.astype(np.int64), exponential)
        return d

    def _set(self, inp: np.ndarray, out: np.ndarray, exponential: np.ndarray) -> None:
        self.inp, self.out, self.exponential = inp, out, exponential
        for a in (self.inp, self.out, self.exponential):
            a.setflags(write=False)
        self.inp_list: list[int] = self.inp.tolist()
        self.out_list: list[int] = self.out.tolist()
        self.out_max = int(self.out.max())
        self.longest = int((self.inp + self.out).max())


#: Draws kept per (input distribution, output distribution, seed, requests): an estimate's simulations share a
#: handful (its probes and reports draw the same requests at every rate, on every replica). A bound on memory,
#: not a model figure.
DRAWS_KEPT = 64


@functools.lru_cache(maxsize=DRAWS_KEPT)
def _draws(input_dist: TokenDistribution, output_dist: TokenDistribution, seed: int, n: int) -> _Draws:
    return _Draws(input_dist, output_dist, seed, n)


def forget_draws() -> None:
    """Empty the kept draws (what a new workload's first estimate finds)."""
    _draws.cache_clear()
    _replayed.cache_clear()


@functools.lru_cache(maxsize=DRAWS_KEPT)
def _replayed(trace: TraceReplay, n: int) -> _Draws:
    """The first `n` requests of a replayed trace (no random draws: the gaps come from the trace)."""
    inp, out = trace.lengths(n)
    return _Draws.given(inp, out, np.zeros(0))


def _replayed_blocks(sm: StepModel, trace: TraceReplay, inp_a: np.ndarray) -> tuple[list[int], int]:
    """As `_shared_blocks`, from a replayed trace's own prefix hits, bounded by this replica's KV cache."""
    if not sm.prefix_caching:
        return [], 0
    share_a = trace.cached(inp_a.size, inp_a, sm.block_size, sm.kv_capacity_tokens)
    if share_a.any():
        return share_a.tolist(), int(share_a.max())
    return [], 0


def _draw_requests(sm: StepModel, d: _Draws) -> tuple[np.ndarray, np.ndarray, int, list[int], list[int]]:
    """Each request's prompt and output tokens (int64, and as lists), and how many were cut: a request longer than
    the KV cache (or max_model_len) is cut, as the server would refuse or truncate it."""
    cap = sm.kv_capacity_tokens
    if cap < 2 or sm.max_num_seqs < 1:
        raise ValueError("the replica has no KV-cache capacity (the model does not fit)")
    limit = min(cap - 1, max(sm.max_model_len, 2))
    out_cap = max(1, limit // 2)
    if d.out_max <= out_cap and d.longest <= limit:
        return d.inp, d.out, 0, d.inp_list, d.out_list  # nothing reaches the limit: the draws as they are
    out_a = np.minimum(d.out, out_cap)
    inp_a = d.inp
    over = inp_a + out_a > limit
    truncated = int(over.sum())
    if truncated:
        inp_a = np.where(over, np.maximum(limit - out_a, 1), inp_a)
    return inp_a, out_a, truncated, inp_a.tolist(), out_a.tolist()


def _shared_blocks(sm: StepModel, inp_a: np.ndarray, prefix_tokens: int) -> tuple[list[int], int]:
    """Per request, its prompt tokens in the shared prefix's full blocks (empty: nothing shared, the plain run),
    and the KV tokens of those blocks, held once for every request."""
    if sm.prefix_caching and prefix_tokens > 0:
        block = max(1, sm.block_size)
        share_a = (np.minimum(int(prefix_tokens), inp_a - 1) // block) * block
        if share_a.any():
            return share_a.tolist(), int(share_a.max())
    return [], 0


def poisson_gaps(exponential: np.ndarray, rate_rps: float) -> np.ndarray:
    """Gaps between a run's Poisson arrivals at `rate_rps`: its standard exponential draws scaled so that the run
    arrives at exactly `rate_rps` on average. Drawn as they come, n gaps' mean scatters by 1/sqrt(n) of itself:
    the 400 requests a calibration row simulates (seed 0) arrived 12% slower than their stated rate, and an
    estimate's 2,000-request run 1% faster, so a row measured at half load was simulated at 44% and an edge read on
    one seed moved with that seed's rate. Scaled, the arrival times are those of a Poisson process given its count
    over the run (n uniform points in order), at the stated rate."""
    mean = float(exponential.mean()) if exponential.size else 1.0
    return exponential * (1.0 / (rate_rps * mean) if mean > 0 else 1.0 / rate_rps)


def _arrivals(
    load: ClosedLoop | OpenLoop | Replay, exponential: np.ndarray, sm: StepModel, sched: Scheduler
) -> tuple[np.ndarray | None, OpenArrivals | ClosedArrivals]:
    """The requests' source under `load` (and, for an open loop, the arrival times as an array); `exponential`:
    the run's standard exponential draws, the gaps between arrivals or the think times at their scale."""
    n = len(sched.prompt)
    #: the API server's share of each request (tokenise, schedule, stream): the engine sees it this much later
    delay = sm.request_overhead_s
    #: the API server's CPU time a request where it runs on the model's own cores (a CPU server of one physical
    #: core): taken from the steps running while it is handled
    cpu = sm.frontend_request_cpu_s
    if isinstance(load, Replay):
        arrival_a = load.trace.arrivals(n, load.rate_rps)
        return arrival_a, KERNEL.open_arrivals(arrival_a.tolist(), delay, sched.waiting, cpu)
    if isinstance(load, OpenLoop):
        if load.rate_rps <= 0:
            raise ValueError("rate_rps must be positive")
        arrival_a = np.cumsum(poisson_gaps(exponential, load.rate_rps))
        return arrival_a, KERNEL.open_arrivals(arrival_a.tolist(), delay, sched.waiting, cpu)
    if load.concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    think = (load.think_time_s * exponential if load.think_time_s > 0 else np.zeros(n)).tolist()
    k0 = min(load.concurrency, n)
    ramp = load.ramp_s
    if load.wave_gap_s is not None:
        ramp = load.wave_gap_s * k0
    elif ramp is None:
        # users evenly spread over one request duration: closed loops settle there (a request delayed by a
        # collision shifts its user's next cycle); random phases predicted TTFT worse in cross-validation
        ramp = _request_duration(
            sm,
            float(np.mean(sched.prompt)),
            float(np.mean(sched.out)),
            k0,
            float(np.mean(sched.shared)) if sched.sharing else 0.0,
        )
    group = max(1, min(int(load.group), k0))
    return None, KERNEL.closed_arrivals(
        [0.0] * n, delay, sched.waiting, k0, ramp, think, load.wave_gap_s, group, cpu
    )


def _all_started(arrival: np.ndarray, load: ClosedLoop | OpenLoop | Replay) -> float:
    """When the last of a steady closed loop's users (`ClosedLoop.steady`) sent its first request: the
    `concurrency`-th arrival (the first arrival for any other load)."""
    if not isinstance(load, ClosedLoop) or not load.steady:
        return float(arrival.min())
    k = max(1, min(int(load.concurrency), arrival.size))
    return float(np.partition(arrival, k - 1)[k - 1])


def delivered_tokens(first: np.ndarray, finish: np.ndarray, out: np.ndarray, t0: float, t1: float) -> float:
    """Output tokens delivered in [t0, t1]: each answer's first token at `first`, its others spread evenly up to
    `finish`. A loop's throughput as the load generator measures it (`loadtest.metrics.delivered_tokens`):
    counting whole answers that finished in the window read a few-stream loop's waves instead, one answer more or
    fewer per stream (a stream of 1.45 s answers read 97 tokens/s where it delivers 88)."""
    rest = np.maximum(out - 1, 0)
    dur = finish - first
    overlap = np.clip(np.minimum(finish, t1) - np.maximum(first, t0), 0.0, None)
    share = np.divide(overlap, dur, out=((finish >= t0) & (finish <= t1)).astype(float), where=dur > 0)
    return float(((first >= t0) & (first <= t1)).sum() + (rest * share).sum())


def _summarise(
    arrival: np.ndarray,
    first: np.ndarray,
    finish: np.ndarray,
    out: np.ndarray,
    warmup: float,
    load: ClosedLoop | OpenLoop | Replay,
    preemptions: int,
    completed: int,
    itl_v: np.ndarray,
    itl_w: np.ndarray,
    truncated: int,
) -> SimResult:
    closed = isinstance(load, ClosedLoop)
    n = arrival.size
    skip = int(n * warmup)
    if n - skip < 1:
        skip = 0
    measured: slice | np.ndarray
    window = load.window if isinstance(load, OpenLoop) else None
    if window is not None:
        # a load generator's level: the requests sent in its window (arrivals are in order: a slice)
        lo = float(arrival[0]) + window[0]
        first_in, end = np.searchsorted(arrival, [lo, lo + window[1]])
        measured = slice(int(first_in), int(end))
        sent = int(end) - int(first_in)
        t0 = lo
        t1 = lo + window[1]
    elif n < 2 or bool((arrival[1:] >= arrival[:-1]).all()):
        # arrivals already in order (an open loop's always are): the stable sort is the identity, so the
        # measured requests are a slice, read without copying, and the window's ends are its first and last
        measured = slice(skip, None)
        t0 = float(arrival[skip])
        t1 = float(arrival[-1])
    else:
        measured = np.argsort(arrival, kind="stable")[skip:]
        t0 = float(arrival[measured].min())
        t1 = float(arrival.max())
    ttft = (first[measured] - arrival[measured]) * 1e3
    e2e = finish[measured] - arrival[measured]
    o = out[measured]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(o > 1, (finish[measured] - first[measured]) / np.maximum(o - 1, 1) * 1e3, np.nan)
    tpot_valid = tpot[~np.isnan(tpot)]
    # throughput: completions inside the steady-state window [first measured arrival, last arrival]
    rounds_ok = closed and n >= MIN_ROUNDS_FOR_WINDOW * getattr(load, "concurrency", 1)
    if window is not None:
        rps = sent / window[1]
        tps = delivered_tokens(first, finish, out, t0, t1) / window[1]
    elif not closed:
        # open loop: output of the measured requests over the time from their first arrival to their last
        # completion (equals the offered rate when it is served, the capacity when it is not)
        span = float(finish[measured].max() - t0)
        rps = (n - skip) / span if span > 0 else math.inf
        tps = float(out[measured].sum()) / span if span > 0 else math.inf
    elif rounds_ok and t1 - (t0 := max(t0, _all_started(arrival, load))) > 0:
        # a steady loop's window opens once every user has sent its first request: users ramped in over one
        # request duration complete nothing until the first of them is answered, and a window opened inside the
        # ramp read such a loop's throughput 15-20% low (four rounds of requests, the ramp in the window)
        inside = (finish >= t0) & (finish <= t1)
        span = t1 - t0
        rps = float(inside.sum()) / span
        # read as the harness reads it: the load generator counts the tokens delivered in its window; a published
        # benchmark's loop counts the answers it completed
        by_token = isinstance(load, ClosedLoop) and load.steady
        tps = (delivered_tokens(first, finish, out, t0, t1) if by_token else float(out[inside].sum())) / span
    else:
        span = float(finish.max() - arrival.min())
        rps = n / span if span > 0 else math.inf
        tps = float(out.sum()) / span if span > 0 else math.inf
    itl = Stats.of(itl_v * 1e3, itl_w) if itl_v.size else Stats.of(np.asarray([]))
    return SimResult(
        ttft_ms=Stats.of(ttft),
        tpot_ms=Stats.of(tpot_valid),
        itl_ms=itl,
        e2e_s=Stats.of(e2e),
        requests_per_s=rps,
        output_tokens_per_s=tps,
        completed=completed,
        preemptions=preemptions,
        duration_s=float(finish.max() - arrival.min()),
        truncated=truncated,
        per_request={"ttft_ms": ttft, "tpot_ms": tpot, "e2e_s": e2e},
    )


# --- saturation and bounds ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bounds:
    """Optimistic limits of a replica (for pruning): no queueing, perfect batching."""

    min_ttft_s: float
    min_tpot_s: float
    max_requests_per_s: float


def saturating_concurrency(
    step_model: StepModel, input_mean: float, output_mean: float, prefix_tokens: int = 0
) -> int:
    """Concurrency beyond which requests only queue: the batch limit or what the KV cache holds (a cached shared
    prefix held once, the rest of each request per request)."""
    shared = cached_share(step_model, prefix_tokens, max(1, int(input_mean)))
    if shared:
        per_request = max(1.0, input_mean - shared + output_mean / 2)
        by_kv = math.ceil(max(1, step_model.kv_capacity_tokens - shared) / per_request * 1.25)
    else:
        per_request = max(1.0, input_mean + output_mean / 2)
        by_kv = math.ceil(step_model.kv_capacity_tokens / per_request * 1.25)
    return max(1, min(step_model.max_num_seqs, by_kv))


def saturated(
    cfg_or_step_model: HardwareConfig | StepModel,
    input_dist: TokenDistribution,
    output_dist: TokenDistribution,
    n_requests: int = 2000,
    seed: int = 0,
    prefix_tokens: int = 0,
) -> SimResult:
    """Maximum throughput: a closed loop at the saturating concurrency (`prefix_tokens` as for `simulate`)."""
    sm = (
        cfg_or_step_model
        if isinstance(cfg_or_step_model, StepModel)
        else StepModel.for_config(cfg_or_step_model)
    )
    c = saturating_concurrency(sm, input_dist.mean, output_dist.mean, prefix_tokens)
    n = max(n_requests, MIN_ROUNDS_FOR_WINDOW * c + c)
    return simulate(
        sm, ClosedLoop(c), input_dist, output_dist, n_requests=n, seed=seed, prefix_tokens=prefix_tokens
    )


def bounds(
    step_model: StepModel, input_tokens: float, output_tokens: float, prefix_tokens: int = 0
) -> Bounds:
    """Optimistic limits of the calibrated step model (not a plain roofline: its efficiencies, overheads and
    compiled shapes included): TTFT of a lone prompt, TPOT of a lone sequence, and requests/s with a full batch and
    prefill perfectly packed into the token budget. With a shared prefix the step model caches (`prefix_tokens`
    as for `simulate`), a prompt prefills only what the cache does not hold, and the KV cache holds the shared
    blocks once."""
    sm = step_model
    step = sm.timing()  # one snapshot of the step time for every step timed here
    inp = max(1, int(input_tokens))
    outp = max(1, int(output_tokens))
    shared = cached_share(sm, prefix_tokens, inp)
    todo = inp - shared  # prompt tokens prefilled
    budget = sm.max_num_batched_tokens if sm.max_num_batched_tokens > 0 else sm.max_model_len
    chunk = min(todo, budget) if sm.chunked_prefill else todo
    chunks = math.ceil(todo / chunk)
    if shared:
        ttft = sum(
            step.iteration_time(chunk, 0, 0, chunk * (shared + k * chunk + chunk / 2)) for k in range(chunks)
        )
    else:
        ttft = sum(step.iteration_time(chunk, 0, 0, chunk * (k * chunk + chunk / 2)) for k in range(chunks))
    tpot = step.iteration_time(0, 1, inp + outp // 2)
    b = saturating_concurrency(sm, inp, outp, prefix_tokens)
    if shared:
        # the cache holds the shared blocks once and each sequence its own tokens, todo + outp / 2 over its life:
        # with most of the prompt shared, the answer's share is too large to count in full (the run would beat
        # the bound)
        b = max(1, min(b, int((sm.kv_capacity_tokens - shared) // max(1, todo + outp // 2)) or 1))
    else:
        b = max(1, min(b, int(sm.kv_capacity_tokens // max(1, inp + outp)) or 1))
    prefill_s = todo * b / budget * step.iteration_time(budget, 0, 0) if budget else ttft * b
    decode_s = (outp - 1) * step.iteration_time(0, b, b * (inp + outp // 2))
    busy = prefill_s + decode_s
    if shared and sm.mixed_prefill_decode:
        # what is left of a prompt to prefill is short enough to ride in the decode steps (memory-bound, their
        # compute idle), so the two overlap: at best the replica is busy for the longer of them, not their sum
        busy = max(prefill_s, decode_s)
    rps = b / busy if busy > 0 else math.inf
    return Bounds(ttft, tpot, rps)
