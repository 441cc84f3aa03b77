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
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from sizing.perf.config import HardwareConfig
    from sizing.perf.step import StepModel
    from sizing.workload import SLO, TokenDistribution

#: Share of the KV cache kept free when admitting (vLLM V0's watermark 0.01): admission never fills the cache to
#: the last block, which would preempt on the very next decode step.
KV_WATERMARK = 0.01
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
    before launching more, as llmperf's 2024 loop does); think time does not apply to waves."""

    concurrency: int
    think_time_s: float = 0.0
    ramp_s: float | None = None
    wave_gap_s: float | None = None


@dataclass(frozen=True)
class OpenLoop:
    """Poisson arrivals at `rate_rps` requests per second, whatever the replica's state."""

    rate_rps: float


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
            return cls(float(values.mean()), *_percentiles(values))
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


# --- closed-form sums over runs of decode steps ----------------------------------------------------------------
def _line_sum(a: float, b: float, k0: int, k1: int) -> float:
    """sum_{k=k0}^{k1-1} (a + b k)."""
    n = k1 - k0
    return n * a + b * (k0 + k1 - 1) * n * 0.5 if n > 0 else 0.0


def _split(a1: float, b1: float, a2: float, b2: float, n: int) -> tuple[int, float, float, float, float]:
    """max(a1 + b1 k, a2 + b2 k) on [0, n) as line (A, B) on [0, ks) then line (A2, B2) on [ks, n)."""
    if a1 >= a2:
        if b1 >= b2:
            return n, a1, b1, a1, b1
        ks = math.ceil((a1 - a2) / (b2 - b1))
        return min(max(ks, 0), n), a1, b1, a2, b2
    if b2 >= b1:
        return n, a2, b2, a2, b2
    ks = math.ceil((a2 - a1) / (b1 - b2))
    return min(max(ks, 0), n), a2, b2, a1, b1


def _first_reaching(a: float, b: float, k0: int, delta: float) -> int:
    """Smallest m >= 1 with sum_{k=k0}^{k0+m-1} (a + b k) >= delta (delta > 0)."""
    alpha = a + b * k0
    if b <= 0:
        m = math.ceil(delta / alpha - 1e-12)
        return m if m > 1 else 1
    # b/2 m^2 + (alpha - b/2) m - delta = 0
    h = alpha - b * 0.5
    m = math.ceil((-h + math.sqrt(h * h + 2 * b * delta)) / b - 1e-9)
    if m < 1:
        m = 1
    while m > 1 and (m - 1) * alpha + b * (m - 1) * (m - 2) * 0.5 >= delta:
        m -= 1
    while m * alpha + b * m * (m - 1) * 0.5 < delta:
        m += 1
    return m


def _run(
    lines: tuple[float, float, float, float, float], C: float, D: int, n: int, delta: float
) -> tuple[int, float, float, float]:
    """Decode steps: time of step k is max(c0 + c1 (C + kD), m0 + m1 (C + kD)) + o. Run at most `n` steps, stopping
    after the step during which the elapsed time first reaches `delta` (inf: no limit). Returns (steps,
    elapsed, first step time, last step time)."""
    c0, c1, m0, m1, o = lines
    a1, b1 = c0 + c1 * C + o, c1 * D
    a2, b2 = m0 + m1 * C + o, m1 * D
    if a2 >= a1 and b2 >= b1:  # memory-bound throughout (the common decode case): one line
        elapsed = n * a2 + b2 * (n - 1) * n * 0.5
        if delta != math.inf and elapsed >= delta:
            reach = _first_reaching(a2, b2, 0, delta)
            if reach < n:
                n = reach
                elapsed = n * a2 + b2 * (n - 1) * n * 0.5
        return n, elapsed, a2, a2 + b2 * (n - 1)
    ks, A, B, A2, B2 = _split(a1, b1, a2, b2, n)
    if delta == math.inf and ks >= n:
        last = A + B * (n - 1)
        return n, n * A + B * (n - 1) * n * 0.5, A, last
    if delta != math.inf:
        s1 = _line_sum(A, B, 0, ks)
        if s1 >= delta:
            n = min(n, _first_reaching(A, B, 0, delta))
        elif s1 + _line_sum(A2, B2, ks, n) > delta:
            # only when the limit falls inside the run: for a far-off delta (the next arrival at a rate of
            # 1e-40 req/s) the search would step one at a time through ~1e20 candidates
            n = min(n, ks + _first_reaching(A2, B2, ks, delta - s1))
    k1 = min(ks, n)
    elapsed = _line_sum(A, B, 0, k1) + _line_sum(A2, B2, k1, n)
    first = max(a1, a2)
    last_k = n - 1
    last = max(a1 + b1 * last_k, a2 + b2 * last_k)
    return n, elapsed, first, last


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
    if cached > 0:
        todo = inp - cached
        prefill = sm.iteration_time(int(todo), 0, 0, todo * (cached + todo / 2))
    else:
        prefill = sm.iteration_time(int(inp), 0, 0)
    return prefill + outp * sm.iteration_time(0, b, int(b * (inp + outp / 2)))


def simulate(
    step_model: StepModel,
    load: ClosedLoop | OpenLoop,
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
    the one without a prefix to the last bit."""
    sm = step_model
    n = int(n_requests)
    if n < 1:
        raise ValueError("n_requests must be at least 1")
    rng = np.random.default_rng(seed)
    inp_a = input_dist.sample(rng, n)
    out_a = output_dist.sample(rng, n)
    cap = sm.kv_capacity_tokens
    if cap < 2 or sm.max_num_seqs < 1:
        raise ValueError("the replica has no KV-cache capacity (the model does not fit)")
    # a request longer than the KV cache (or max_model_len) is cut, as the server would refuse or truncate it
    limit = min(cap - 1, max(sm.max_model_len, 2))
    out_a = np.minimum(out_a, max(1, limit // 2))
    over = inp_a + out_a > limit
    truncated = int(over.sum())
    inp_a = np.where(over, np.maximum(limit - out_a, 1), inp_a)
    prompt = inp_a.tolist()
    out = out_a.tolist()
    if prefix_tokens < 0:
        raise ValueError("prefix_tokens must not be negative")
    # per request: its prompt tokens in the shared prefix's full blocks (empty: nothing shared, the plain run)
    shared: list[int] = []
    pinned = 0  # KV tokens of the shared blocks, held once for every request
    if sm.prefix_caching and prefix_tokens > 0:
        block = max(1, sm.block_size)
        share_a = (np.minimum(int(prefix_tokens), inp_a - 1) // block) * block
        if share_a.any():
            shared = share_a.tolist()
            pinned = int(share_a.max())
    sharing = bool(shared)
    cold = sharing  # the first admission computes the prefix; every later one finds it cached

    closed = isinstance(load, ClosedLoop)
    arrival = [0.0] * n
    if isinstance(load, OpenLoop):
        if load.rate_rps <= 0:
            raise ValueError("rate_rps must be positive")
        arrival = np.cumsum(rng.exponential(1.0 / load.rate_rps, n)).tolist()
        think: list[float] = []
    else:
        if load.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        think = (rng.exponential(load.think_time_s, n) if load.think_time_s > 0 else np.zeros(n)).tolist()

    first = [math.nan] * n
    finish = [math.nan] * n
    gen_before = [0] * n  # tokens generated before the current decode stint (preemption)
    g_start = [0] * n
    base = [0] * n
    version = [0] * n

    max_seqs = sm.max_num_seqs
    #: the API server's share of each request (tokenise, schedule, stream): the engine sees it this much later
    delay = sm.request_overhead_s
    budget_max = sm.max_num_batched_tokens if sm.max_num_batched_tokens > 0 else sm.max_model_len
    chunked = sm.chunked_prefill
    mixed = sm.mixed_prefill_decode
    reserve = sm.admission == "reserve"
    defer_ratio = sm.prefill_defer_ratio
    defer_steps = sm.prefill_defer_steps
    since_prefill = 0  # decode steps since the last prefill (TGI 2.x's waiting_tokens)
    adm_cap = cap * (1.0 - KV_WATERMARK)
    it = sm.iteration_time
    # decode_lines(D) by batch size D (admission keeps D <= max_num_seqs)
    lines_by_d: list[tuple[float, float, float, float, float] | None] = [None] * (max_seqs + 1)
    inf = math.inf
    isnan = math.isnan
    heappush = heapq.heappush
    heappop = heapq.heappop

    t = 0.0
    G = 0
    D = 0
    S_base = 0
    # tokens held by prefilling requests (incremental) or by every admitted request (reserve), and the shared
    # prefix blocks
    kv_fixed = pinned
    # decoding sequences' tokens in the shared blocks: in their context (S_base + D G, which their attention reads)
    # but held once, in `pinned`, so the KV cache holds S_base + D G - S_shared of theirs
    S_shared = 0
    heap: list[tuple[int, int, int]] = []  # (g_finish, idx, version)
    decode_order: list[int] = []
    in_decode = [False] * n
    waiting: deque[int] = deque()
    prefill: list[list[int]] = []  # [idx, remaining, done, prompt_eff, remaining_out]
    future: list[tuple[float, int]] = []  # closed loop: (arrival time, idx)
    # open loop: when the engine sees request next_idx (arrival + the API server's delay; inf when none is left)
    next_idx = 0
    next_seen = arrival[0] + delay if not closed else inf
    users = iter(range(0))  # closed loop: the requests still to send, in order
    k0 = 0
    wave_gap: float | None = None  # closed loop in waves: the gap between a wave's requests
    wave_left = 0  # requests of the current wave still running
    if closed:
        assert isinstance(load, ClosedLoop)
        k0 = min(load.concurrency, n)
        ramp = load.ramp_s
        if load.wave_gap_s is not None:
            ramp = load.wave_gap_s * k0
        elif ramp is None:
            # users evenly spread over one request duration: closed loops settle there (a request delayed by a
            # collision shifts its user's next cycle); random phases predicted TTFT worse in cross-validation
            ramp = _request_duration(
                sm,
                float(np.mean(prompt)),
                float(np.mean(out)),
                k0,
                float(np.mean(shared)) if sharing else 0.0,
            )
        starts = [ramp * k / k0 for k in range(k0)]
        for k in range(k0):
            arrival[k] = starts[k]
            if arrival[k] + delay <= 0:
                waiting.append(k)
            else:
                heappush(future, (arrival[k] + delay, k))
        users = iter(range(k0, n))
        wave_gap, wave_left = load.wave_gap_s, k0
    completed = 0
    preemptions = 0
    itl_v: list[float] = []
    itl_w: list[float] = []
    emitted = 0

    def next_of_user(when: float) -> None:
        """Closed loop: a request ended at `when`; its user sends the next one after thinking (in waves: the last
        request of a wave to end launches the next wave)."""
        nonlocal wave_left
        if wave_gap is not None:
            wave_left -= 1
            if wave_left > 0:
                return
            for k in range(k0):
                j = next(users, -1)
                if j < 0:
                    break
                wave_left += 1
                arrival[j] = when + k * wave_gap
                heappush(future, (arrival[j] + delay, j))
            return
        j = next(users, -1)
        if j >= 0:
            arrival[j] = when + think[j]
            if think[j] + delay > 0:
                heappush(future, (arrival[j] + delay, j))
            else:
                waiting.append(j)

    while completed < n:
        # arrivals up to now
        if closed:
            while future and future[0][0] <= t:
                waiting.append(heappop(future)[1])
        else:
            while next_seen <= t and next_idx < n:
                waiting.append(next_idx)
                next_idx += 1
                next_seen = arrival[next_idx] + delay if next_idx < n else inf
        # make room for this step's decode tokens (incremental KV)
        if D and not reserve:
            while kv_fixed + S_base - S_shared + D * G + D > cap and D > 1:
                while True:
                    v = decode_order.pop()
                    if in_decode[v]:
                        break
                in_decode[v] = False
                version[v] += 1
                D -= 1
                S_base -= base[v]
                if sharing:
                    S_shared -= shared[v]
                generated = gen_before[v] + (G - g_start[v])
                gen_before[v] = generated
                waiting.appendleft(v)
                preemptions += 1
        # schedule prefill chunks (a run of pure decode steps has none to schedule)
        P = 0
        # TGI 2.x: while a batch decodes, new prompts wait until they are numerous enough or waited long enough
        deferred = (
            defer_ratio > 0
            and D > 0
            and not prefill
            and since_prefill < defer_steps
            and len(waiting) < int(D * defer_ratio)
        )
        if (prefill or waiting) and not deferred:
            budget = budget_max - (D if mixed else 0)
            pairs = 0.0
            nchunks = 0
            done_any = False
            if budget > 0:
                for e in prefill:
                    room = budget - P
                    if room <= 0:
                        break
                    take = e[1] if (e[1] <= room or (not chunked and P == 0)) else (room if chunked else 0)
                    if take <= 0:
                        break
                    pairs += take * (e[2] + take * 0.5)
                    P += take
                    e[1] -= take
                    e[2] += take
                    nchunks += 1
                    if e[1] == 0:
                        done_any = True
                while waiting and budget - P > 0 and D + len(prefill) < max_seqs:
                    i = waiting[0]
                    p_eff = prompt[i] + gen_before[i]
                    r_out = out[i] - gen_before[i]
                    need = p_eff + r_out if reserve else p_eff
                    hit = 0  # prompt tokens read from the prefix cache, not prefilled
                    if sharing:
                        need -= shared[i]  # its shared blocks are held once, in `pinned`
                        hit = 0 if cold else shared[i]
                    todo = p_eff - hit
                    used = kv_fixed + (0 if reserve else S_base - S_shared + D * G)
                    if used + need > adm_cap and (D + len(prefill)) > 0:
                        break
                    room = budget - P
                    if todo > room and not chunked and P > 0:
                        break
                    waiting.popleft()
                    cold = False
                    take = room if chunked and room < todo else todo
                    kv_fixed += need
                    # the chunk's queries attend to the cached prefix too
                    pairs += take * (hit + take * 0.5) if hit else take * take * 0.5
                    P += take
                    nchunks += 1
                    prefill.append([i, todo - take, hit + take, p_eff, r_out])
                    if take == todo:
                        done_any = True
        if P == 0:
            if D == 0:
                # idle until the next arrival
                if closed:
                    if not future:
                        break
                    if future[0][0] > t:
                        t = future[0][0]
                else:
                    if next_idx >= n:
                        break
                    if next_seen > t:
                        t = next_seen
                continue
            # a run of pure-decode steps up to the next event
            top = heap[0]
            if preemptions:  # only a preempted sequence leaves a stale entry behind
                while top[2] != version[top[1]] or not in_decode[top[1]]:
                    heappop(heap)
                    top = heap[0]
            steps = top[0] - G
            C = S_base + D * G
            if not reserve:
                by_kv = (cap - (kv_fixed + C - S_shared)) // D
                if by_kv < 1:
                    by_kv = 1
                if by_kv < steps:
                    steps = by_kv
            if deferred:
                # until the deferral ends: enough decode steps, or (below) an arrival that makes the waiting enough
                steps = min(steps, defer_steps - since_prefill)
            if waiting and not deferred:
                delta = inf  # blocked requests wait for a completion; arrivals only join the queue
            else:
                nxt = (future[0][0] if future else inf) if closed else next_seen
                delta = nxt - t if nxt != inf else inf
                if delta <= 0:
                    delta = 1e-12
            if prefill:
                steps = 1
            lines = lines_by_d[D]
            if lines is None:
                lines = lines_by_d[D] = sm.decode_lines(D)
            k, elapsed, f_step, l_step = _run(lines, C, D, steps, delta)
            t += elapsed
            G += k
            since_prefill += k
            emitted += D * k
            if itl:
                half = D * k * 0.5
                itl_v.append(f_step)
                itl_w.append(half)
                itl_v.append(l_step)
                itl_w.append(half)
        else:
            dt = it(P, D if mixed else 0, (S_base + D * G) if mixed else 0, pairs, nchunks)
            t += dt
            since_prefill = 0
            if D:
                if itl:
                    itl_v.append(dt)
                    itl_w.append(float(D))
                if mixed:
                    G += 1
                    emitted += D
            # prefills that finished produce a token
            if done_any:
                keep = []
                for e in prefill:
                    if e[1] > 0:
                        keep.append(e)
                        continue
                    i = e[0]
                    emitted += 1
                    if isnan(first[i]):
                        first[i] = t
                    gen = gen_before[i] + 1
                    s_i = shared[i] if sharing else 0
                    if not reserve:
                        kv_fixed -= e[3] - s_i
                    if gen >= out[i]:
                        if reserve:
                            kv_fixed -= e[3] + e[4] - s_i
                        finish[i] = t
                        completed += 1
                        if closed:
                            next_of_user(t)
                        continue
                    gen_before[i] = gen
                    g_start[i] = G
                    base[i] = e[3] + 1 - G
                    S_base += base[i]
                    S_shared += s_i
                    D += 1
                    in_decode[i] = True
                    decode_order.append(i)
                    heappush(heap, (G + out[i] - gen, i, version[i]))
                prefill = keep
        # completions
        while heap and heap[0][0] <= G:
            _g, i, ver = heappop(heap)
            if ver != version[i] or not in_decode[i]:
                continue
            in_decode[i] = False
            D -= 1
            S_base -= base[i]
            if sharing:
                S_shared -= shared[i]
            if reserve:
                kv_fixed -= prompt[i] + out[i] - (shared[i] if sharing else 0)
            finish[i] = t
            completed += 1
            if closed:
                next_of_user(t)
        if preemptions and len(heap) > 4 * (D + 1) + 64:
            heap = [h for h in heap if h[2] == version[h[1]] and in_decode[h[1]]]
            heapq.heapify(heap)

    res = _summarise(
        np.asarray(arrival),
        np.asarray(first),
        np.asarray(finish),
        np.asarray(out),
        warmup,
        closed,
        load,
        preemptions,
        completed,
        np.asarray(itl_v),
        np.asarray(itl_w),
        truncated,
    )
    res.output_tokens_generated = emitted
    res.output_tokens_drawn = int(sum(out))
    return res


def _summarise(
    arrival: np.ndarray,
    first: np.ndarray,
    finish: np.ndarray,
    out: np.ndarray,
    warmup: float,
    closed: bool,
    load: ClosedLoop | OpenLoop,
    preemptions: int,
    completed: int,
    itl_v: np.ndarray,
    itl_w: np.ndarray,
    truncated: int,
) -> SimResult:
    n = arrival.size
    order = np.argsort(arrival, kind="stable")
    skip = int(n * warmup)
    measured = order[skip:] if n - skip >= 1 else order
    ttft = (first - arrival)[measured] * 1e3
    e2e = (finish - arrival)[measured]
    o = out[measured]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(o > 1, (finish - first)[measured] / np.maximum(o - 1, 1) * 1e3, np.nan)
    tpot_valid = tpot[~np.isnan(tpot)]
    # throughput: completions inside the steady-state window [first measured arrival, last arrival]
    t0 = float(arrival[measured].min())
    t1 = float(arrival.max())
    rounds_ok = closed and n >= MIN_ROUNDS_FOR_WINDOW * getattr(load, "concurrency", 1)
    if not closed:
        # open loop: output of the measured requests over the time from their first arrival to their last
        # completion (equals the offered rate when it is served, the capacity when it is not)
        span = float(finish[measured].max() - t0)
        rps = measured.size / span if span > 0 else math.inf
        tps = float(out[measured].sum()) / span if span > 0 else math.inf
    elif rounds_ok and t1 - t0 > 0:
        inside = (finish >= t0) & (finish <= t1)
        span = t1 - t0
        rps = float(inside.sum()) / span
        tps = float(out[inside].sum()) / span
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
    from sizing.perf.step import StepModel

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
    """Roofline limits: TTFT of a lone prompt, TPOT of a lone sequence, and requests/s with a full batch and
    prefill perfectly packed into the token budget. With a shared prefix the step model caches (`prefix_tokens`
    as for `simulate`), a prompt prefills only what the cache does not hold, and the KV cache holds the shared
    blocks once."""
    sm = step_model
    inp = max(1, int(input_tokens))
    outp = max(1, int(output_tokens))
    shared = cached_share(sm, prefix_tokens, inp)
    todo = inp - shared  # prompt tokens prefilled
    budget = sm.max_num_batched_tokens if sm.max_num_batched_tokens > 0 else sm.max_model_len
    chunk = min(todo, budget) if sm.chunked_prefill else todo
    chunks = math.ceil(todo / chunk)
    if shared:
        ttft = sum(
            sm.iteration_time(chunk, 0, 0, chunk * (shared + k * chunk + chunk / 2)) for k in range(chunks)
        )
    else:
        ttft = sum(sm.iteration_time(chunk, 0, 0, chunk * (k * chunk + chunk / 2)) for k in range(chunks))
    tpot = sm.iteration_time(0, 1, inp + outp // 2)
    b = saturating_concurrency(sm, inp, outp, prefix_tokens)
    if shared:
        # the cache holds the shared blocks once and each sequence its own tokens, todo + outp / 2 over its life:
        # with most of the prompt shared, the answer's share is too large to count in full (the run would beat
        # the bound)
        b = max(1, min(b, int((sm.kv_capacity_tokens - shared) // max(1, todo + outp // 2)) or 1))
    else:
        b = max(1, min(b, int(sm.kv_capacity_tokens // max(1, inp + outp)) or 1))
    prefill_s = todo * b / budget * sm.iteration_time(budget, 0, 0) if budget else ttft * b
    decode_s = (outp - 1) * sm.iteration_time(0, b, b * (inp + outp // 2))
    busy = prefill_s + decode_s
    if shared and sm.mixed_prefill_decode:
        # what is left of a prompt to prefill is short enough to ride in the decode steps (memory-bound, their
        # compute idle), so the two overlap: at best the replica is busy for the longer of them, not their sum
        busy = max(prefill_s, decode_s)
    rps = b / busy if busy > 0 else math.inf
    return Bounds(ttft, tpot, rps)
