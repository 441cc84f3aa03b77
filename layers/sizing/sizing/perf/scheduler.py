"""The engine's scheduler in the continuous-batching simulator: which requests are admitted, which prompt chunks a
step prefills, which sequence is preempted, and which ones complete.

State: the waiting queue (request ids, FCFS; a preempted request goes back to its front), the prefilling requests,
the decoding batch (D sequences, a heap of the decode step each one finishes at) and the KV tokens they hold. It
counts decode steps (`G`, one per step that decodes). `advance` runs the engine from a time until it has nothing
left to run: before each step it queues the requests the engine has seen (`sizing.perf.arrivals`), plans the step
and runs it on the step model, and records when each request got its first token and its last; the event loop
(`run`) idles it until the next arrival. The state stays on the scheduler between steps and is
read once per decision: the steps that follow a prefill step and only continue its one prompt (full chunks) run
back to back in one call, and runs of pure-decode steps are summed in closed form (`sizing.perf.decoderuns`).

KV accounting, in tokens:
- `kv_fixed`: the prompts of the prefilling requests (incremental admission), or the prompt + output of every
  admitted request (`reserve`), plus the shared prefix's blocks (`pinned`), held once;
- a decoding sequence i holds `base[i] + G` tokens of context (its prompt, and the tokens decoded so far), so the
  D of them hold `S_base + D * G`; of those, `S_shared` lie in the shared prefix's blocks, which are counted once,
  in `kv_fixed`.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, Final, Protocol

# relative: the simulator's hot loop is also built as a compiled copy under another package (sizing.perf.native)
from .arrivals import ClosedArrivals, Waiting
from .decoderuns import decode_run
from .steptime import DecodeLines, StepTime, StepTimeTerms

if TYPE_CHECKING:
    from .arrivals import OpenArrivals

#: Share of the KV cache kept free when admitting (vLLM V0's watermark 0.01): admission never fills the cache to
#: the last block, which would preempt on the very next decode step.
KV_WATERMARK: Final = 0.01
#: Stale heap entries (of preempted sequences) tolerated beyond 4 per decoding sequence before the heap is
#: rebuilt without them (a bound on memory, not a model figure: any value gives the same run).
STALE_HEAP_SLACK: Final = 64

INF: Final = math.inf
#: heapq's functions, bound once: compiled, a Final module attribute is a C static, where an imported name is
#: looked up in the module's dictionary at every call
heappush: Final = heapq.heappush
heappop: Final = heapq.heappop
heapify: Final = heapq.heapify
#: More decode steps than any run holds (a reserving engine's KV bound).
INF_STEPS: Final = 1 << 62
#: Seconds a run of decode steps lasts at least when an arrival is already due (so a run is never empty).
MIN_WAIT_S: Final = 1e-12


class StepLimits(Protocol):
    """What the scheduler reads off a step model (`sizing.perf.step.StepModel`): its limits and policies, and the
    terms of its step time. Named here rather than imported, so the hot loop compiles without the model."""

    kv_capacity_tokens: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    chunked_prefill: bool
    mixed_prefill_decode: bool
    admission: str
    prefill_defer_ratio: float
    prefill_defer_steps: int

    def step_time_terms(self) -> StepTimeTerms: ...


class Scheduler:
    """Admission (batch room `max_num_seqs`, KV room for the prompt, or prompt + output where the engine
    reserves), FCFS prefill chunks within the step's token budget (chunked or whole prompts), preemption of the
    newest decoding sequence when the KV cache cannot hold the next decode step (recomputed later, vLLM V1's
    default), and TGI 2.x's deferral of new prefills while a batch decodes.

    `prompt`, `out`: each request's prompt and output tokens; `shared`: its prompt tokens in the shared prefix's
    full blocks (empty: no prefix caching), `pinned` the KV tokens of those blocks, held once.

    The decoding sequences sit in a heap of integer keys `(G at which it finishes) << shift | idx`, ordered as
    (finish, idx); `live[idx]` is the key of its current stint (-1: not decoding), so the entry a preempted
    stint leaves behind is stale and skipped."""

    __slots__ = (
        "D",
        "G",
        "S_base",
        "S_shared",
        "adm_cap",
        "base",
        "budget_max",
        "cap",
        "chunked",
        "cold",
        "decode_order",
        "defer_ratio",
        "defer_steps",
        "deferred",
        "defers",
        "emitted",
        "finish",
        "first",
        "gen_before",
        "heap",
        "itl",
        "itl_v",
        "itl_w",
        "kv_fixed",
        "lines_by_d",
        "live",
        "mask",
        "max_seqs",
        "mixed",
        "out",
        "pad",
        "preemptions",
        "prefill",
        "prompt",
        "reserve",
        "shared",
        "sharing",
        "shift",
        "since_prefill",
        "step_kv",
        "time",
        "waiting",
    )

    def __init__(
        self,
        sm: StepLimits,
        prompt: list[int],
        out: list[int],
        shared: list[int],
        pinned: int,
        itl: bool = True,
    ):
        n = len(prompt)
        self.time = StepTime(*sm.step_time_terms())  # this package's StepTime: compiled with the loop
        # the steps' inter-token latencies and their weights (tokens), where recorded
        self.itl = itl
        self.itl_v: list[float] = []
        self.itl_w: list[float] = []
        # when each request got its first token and its last (NaN: not yet)
        self.first = [math.nan] * n
        self.finish = [math.nan] * n
        self.prompt = prompt
        self.out = out
        self.shared = shared
        self.sharing = bool(shared)
        self.cold = self.sharing  # the first admission computes the prefix; every later one finds it cached
        self.cap = sm.kv_capacity_tokens
        self.adm_cap = self.cap * (1.0 - KV_WATERMARK)
        self.reserve = sm.admission == "reserve"
        # the engine holds KV in whole blocks: a sequence's last block is half empty on average, so each one takes
        # `pad` tokens more than its context (vLLM's CPU blocks of 128 tokens: 64 a sequence; a server short of
        # KV preempted 50 times in 75 requests where token accounting preempted none: docs/engine.md, "Dynamics")
        self.pad = 0 if self.reserve else max(0, sm.block_size // 2)
        # KV a decoding sequence's next step takes: its token, and its share of the partly filled blocks
        self.step_kv = 1 + self.pad
        self.max_seqs = sm.max_num_seqs
        self.budget_max = sm.max_num_batched_tokens if sm.max_num_batched_tokens > 0 else sm.max_model_len
        self.chunked = sm.chunked_prefill
        self.mixed = sm.mixed_prefill_decode
        self.defer_ratio = sm.prefill_defer_ratio
        self.defers = self.defer_ratio > 0
        self.defer_steps = sm.prefill_defer_steps
        # per request: tokens generated before the current decode stint (preemption), and its context less G
        # while it decodes (the stint began at G = prompt + gen_before - base)
        self.gen_before = [0] * n
        self.base = [0] * n
        self.shift = max(1, (n - 1).bit_length())
        self.mask = (1 << self.shift) - 1
        self.live = [-1] * n
        self.heap: list[int] = []
        self.decode_order: list[int] = []  # decoding sequences, oldest first (preemption takes the newest)
        self.waiting = Waiting()
        self.prefill: list[list[int]] = []  # [idx, remaining, done, prompt_eff, remaining_out (reserve)]
        self.G = 0
        self.D = 0
        self.S_base = 0
        self.S_shared = 0
        self.kv_fixed = pinned
        self.since_prefill = 0  # decode steps since the last prefill (TGI 2.x's waiting_tokens)
        self.deferred = False
        self.preemptions = 0
        self.emitted = 0  # output tokens produced
        # decode_lines(D) by batch size D (admission keeps D <= max_num_seqs)
        self.lines_by_d: list[DecodeLines | None] = [None] * (self.max_seqs + 1)

    def run(self, arrivals: OpenArrivals | ClosedArrivals, n: int) -> int:
        """The event loop: advance time until every one of the `n` requests completed. The engine runs while it
        has work (`advance`: queueing what it sees from `arrivals`, recording each request's times), and idles
        until the next arrival. Returns the requests completed."""
        closed = isinstance(arrivals, ClosedArrivals)
        t = 0.0
        completed = 0
        while completed < n:
            t, done = self.advance(t, arrivals, closed)
            completed += done
            if completed >= n or not arrivals.pending():
                break
            t = max(t, arrivals.next_seen)  # idle until the next arrival
        return completed

    def advance(self, t: float, arrivals: OpenArrivals | ClosedArrivals, closed: bool) -> tuple[float, int]:
        """Run the engine from time `t`: before each step, queue the requests it has seen by then (`arrivals`);
        plan the step as the engine plans it (make room for its decode tokens by preempting, then prefill the
        chunks of the prompts being prefilled and admit what fits, else decode up to the next event) and run
        it; in a `closed` loop, each completion lets its user send the next request. Stops when nothing is left
        to run (idle until the next arrival, or done). Requests handled on the engine's own cores while it runs
        delay its next step by their share (`arrivals.debt`). Returns (the time, the requests completed)."""
        completed = 0
        next_seen = arrivals.next_seen
        room = False  # the KV cache holds the next decode step: no preemption to check for
        arrivals.busy_since = t
        while True:
            if next_seen <= t:
                next_seen = arrivals.due(t)
                if arrivals.debt > 0.0:
                    # the requests handled on the engine's cores while it ran took their time from its steps
                    t += arrivals.debt
                    arrivals.debt = 0.0
            D = self.D
            if (
                D > 1
                and not room
                and not self.reserve
                and self.kv_fixed + self.S_base - self.S_shared + D * self.G + D * self.step_kv > self.cap
            ):
                self._preempt()
                D = self.D
            P = 0
            prefill = self.prefill
            if self.defers and self._defer(D):
                pass
            elif prefill or self.waiting.size() > 0:
                budget = self.budget_max - D if self.mixed else self.budget_max
                if budget > 0:
                    if prefill:
                        P, pairs, nchunks, done_any = self._continue_prefills(budget)
                    else:
                        pairs, nchunks, done_any = 0.0, 0, False
                    if budget > P and self.waiting.size() > 0 and D + len(prefill) < self.max_seqs:
                        P, pairs, nchunks, done_any = self._admit(budget, P, pairs, nchunks, done_any)
            if P:
                t, done = self._prefill(t, next_seen, D, P, pairs, nchunks, done_any)
                room = False
            elif D:
                t, done, room = self._decode(t, next_seen, D)
            else:
                return t, completed
            if done:
                completed += done
                if closed:
                    for _ in range(done):
                        arrivals.ended(t)
                    next_seen = arrivals.next_seen

    def _defer(self, D: int) -> bool:
        """TGI 2.x: while a batch decodes, new prompts wait until they are numerous enough or waited long enough."""
        self.deferred = (
            D > 0
            and not self.prefill
            and self.since_prefill < self.defer_steps
            and self.waiting.size() < int(D * self.defer_ratio)
        )
        return self.deferred

    # --- preemption ------------------------------------------------------------------------------------------
    def _preempt(self) -> None:
        """Incremental KV: preempt the newest decoding sequences until the cache holds this step's decode tokens
        (one more per sequence); the last one is never preempted. A preempted request returns to the front of
        the queue with what it generated, to be recomputed."""
        cap, kv_fixed, G, step_kv = self.cap, self.kv_fixed, self.G, self.step_kv
        D, S_base, S_shared = self.D, self.S_base, self.S_shared
        order, live, base = self.decode_order, self.live, self.base
        gen_before, prompt, shared, sharing = self.gen_before, self.prompt, self.shared, self.sharing
        while kv_fixed + S_base - S_shared + D * G + D * step_kv > cap and D > 1:
            while True:
                v = order.pop()
                if live[v] >= 0:
                    break
            live[v] = -1
            D -= 1
            S_base -= base[v]
            if sharing:
                S_shared -= shared[v]
            gen_before[v] = G + base[v] - prompt[v]  # + the G - (prompt + gen_before - base) decoded since
            self.waiting.push_front(v)
            self.preemptions += 1
        self.D, self.S_base, self.S_shared = D, S_base, S_shared

    # --- prefill -------------------------------------------------------------------------------------------
    def _continue_prefills(self, budget: int) -> tuple[int, float, int, bool]:
        """The next chunks of the requests already prefilling, FCFS, within `budget` tokens."""
        P = 0
        pairs = 0.0
        nchunks = 0
        done_any = False
        chunked = self.chunked
        for e in self.prefill:
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
        return P, pairs, nchunks, done_any

    def _admit(
        self, budget: int, P: int, pairs: float, nchunks: int, done_any: bool
    ) -> tuple[int, float, int, bool]:
        """Admit waiting requests in order, each while the batch, the KV cache (less the watermark) and the token
        budget have room: its first chunk joins this step (`P` tokens, `pairs`, `nchunks` so far)."""
        waiting = self.waiting
        prefill = self.prefill
        gen_before = self.gen_before
        reserve = self.reserve
        kv_fixed = self.kv_fixed
        D = self.D
        busy = D + len(prefill)  # sequences in the batch
        held = 0 if reserve else self.S_base - self.S_shared + D * self.G  # KV of the decoding sequences
        while waiting.size() > 0 and budget - P > 0 and busy < self.max_seqs:
            i = waiting.first()
            g = gen_before[i]
            p_eff = self.prompt[i] + g
            if reserve:
                r_out = self.out[i] - g
                need = p_eff + r_out
            else:
                need = p_eff
                r_out = 0  # read only where the engine reserves
            hit = 0  # prompt tokens read from the prefix cache, not prefilled
            if self.sharing:
                need -= self.shared[i]  # its shared blocks are held once, in `pinned`
                hit = 0 if self.cold else self.shared[i]
            todo = p_eff - hit
            if kv_fixed + held + need + self.pad * (busy + 1) > self.adm_cap and busy > 0:
                break
            room = budget - P
            if todo > room and not self.chunked and P > 0:
                break
            waiting.pop_first()
            self.cold = False
            take = room if room < todo and self.chunked else todo
            kv_fixed += need
            # the chunk's queries attend to the cached prefix too
            pairs += take * (hit + take * 0.5) if hit else take * take * 0.5
            P += take
            nchunks += 1
            busy += 1
            prefill.append([i, todo - take, hit + take, p_eff, r_out])
            if take == todo:
                done_any = True
        self.kv_fixed = kv_fixed
        return P, pairs, nchunks, done_any

    def _prefill(
        self, t: float, next_seen: float, D: int, P: int, pairs: float, nchunks: int, done_any: bool
    ) -> tuple[float, int]:
        """Run a step that prefills `P` prompt tokens in `nchunks` chunks (their attention `pairs`; `done_any`: a
        prompt completes), decoding the batch of `D` sequences where the engine mixes them: they advance one
        token if the step carried them, and the requests whose prompt completed emit a token and start
        decoding, or complete when that was their last. Returns (the time, the requests completed)."""
        if self.mixed:
            dt = self.time.iteration_time(P, D, self.S_base + D * self.G, pairs, nchunks)
        else:
            dt = self.time.iteration_time(P, 0, 0, pairs, nchunks)
        t += dt
        self.since_prefill = 0
        done = 0
        if D:
            if self.itl:
                self.itl_v.append(dt)
                self.itl_w.append(float(D))
            if self.mixed:
                G = self.G = self.G + 1
                self.emitted += D
                if self.heap[0] >> self.shift <= G:
                    done = self._complete(t)
        if done_any:
            return t, done + self._start_decoding(t)
        if done or next_seen <= t or len(self.prefill) != 1 or not self.chunked:
            return t, done
        return self._chunks(t, next_seen)

    def _chunks(self, t: float, next_seen: float) -> tuple[float, int]:
        """The steps after a prefill step that only continue the one prompt being prefilled (chunked), decoding
        the batch where the engine mixes them, run back to back without planning each: they stop before a step
        that would preempt or admit, and after the prompt's last chunk, a sequence finishing, or the step the
        engine sees the next request in. Returns as `_prefill`."""
        e = self.prefill[0]
        D, G, S_base = self.D, self.G, self.S_base
        time, itl_v, mixed, cap = self.time, self.itl_v, self.mixed, self.cap
        budget = self.budget_max - D if mixed else self.budget_max
        may_preempt = D > 1 and not self.reserve
        kv_held = self.kv_fixed + S_base - self.S_shared  # less the batch's D tokens a step
        can_admit = self.max_seqs > D + 1 and self.waiting.size() > 0
        advance = mixed and D > 0  # the steps decode the batch: G advances
        finish_at = self.heap[0] >> self.shift if advance else -1  # the next sequence to finish
        d_seqs = D if mixed else 0
        record = D > 0 and self.itl
        g0 = G
        prompt_done = False
        step_kv = self.step_kv
        while not (may_preempt and kv_held + D * G + D * step_kv > cap):
            left = e[1]
            take = left if left <= budget else budget
            if take < budget and can_admit:
                break
            pairs = take * (e[2] + take * 0.5)
            e[1] = left - take
            e[2] += take
            dt = time.iteration_time(take, d_seqs, (S_base + D * G) if mixed else 0, pairs, 1)
            t += dt
            if record:
                itl_v.append(dt)
                self.itl_w.append(float(D))
            if advance:
                G += 1
            prompt_done = left == take
            if prompt_done or finish_at == G or next_seen <= t:
                break
        self.G = G
        self.emitted += D * (G - g0)
        done = self._complete(t) if finish_at == G else 0
        if prompt_done:
            done += self._start_decoding(t)
        return t, done

    def _start_decoding(self, t: float) -> int:
        """At `t` the requests whose prompt completed emit a token (their first, or the first since a
        preemption) and join the decoding batch, or complete when that was their last. Returns how many
        completed."""
        keep: list[list[int]] = []
        completed = 0
        gen_before, out, G = self.gen_before, self.out, self.G
        for e in self.prefill:
            if e[1] > 0:
                keep.append(e)
                continue
            i = e[0]
            self.emitted += 1
            gen = gen_before[i] + 1
            if gen == 1:  # its first token (a preempted request had generated one at least)
                self.first[i] = t
            s_i = self.shared[i] if self.sharing else 0
            if self.reserve:
                if gen >= out[i]:
                    self.kv_fixed -= e[3] + e[4] - s_i
            else:
                self.kv_fixed -= e[3] - s_i
            if gen >= out[i]:
                self.finish[i] = t
                completed += 1
                continue
            gen_before[i] = gen
            b = self.base[i] = e[3] + 1 - G
            self.S_base += b
            if s_i:
                self.S_shared += s_i
            self.D += 1
            self.decode_order.append(i)
            key = (G + out[i] - gen) << self.shift | i
            self.live[i] = key
            heappush(self.heap, key)
        self.prefill = keep
        if self.preemptions and len(self.heap) > 4 * (self.D + 1) + STALE_HEAP_SLACK:
            self._compact()
        return completed

    # --- decoding ------------------------------------------------------------------------------------------
    def _decode(self, t: float, next_seen: float, D: int) -> tuple[float, int, bool]:
        """Run pure-decode steps, no further than anything but the token counts changes: the next completion, the
        last step the KV cache holds one more token per sequence for, the end of a deferral, a single step while
        a prompt waits for budget; and at most until the step during which the engine sees the next request
        (`next_seen`), unless requests wait for room rather than for time (an arrival would only join them). The
        steps of the `D` sequences are summed in closed form (`decode_run`). Returns as `_prefill`, and whether
        the KV cache still holds the next step (the run stopped short of its edge: completions only free KV)."""
        heap = self.heap
        top = heap[0]
        if self.preemptions:  # only a preempted sequence leaves a stale entry behind
            live, mask = self.live, self.mask
            while live[top & mask] != top:
                heappop(heap)
                top = heap[0]
        G = self.G
        end = top >> self.shift  # the decode step the next sequence finishes at
        steps = end - G
        C = self.S_base + D * G
        by_kv = INF_STEPS
        if not self.reserve:
            by_kv = (self.cap - (self.kv_fixed + C - self.S_shared) - D * self.pad) // D
            if by_kv < steps:
                steps = by_kv if by_kv > 1 else 1
        deferred = self.deferred
        if deferred:
            # until the deferral ends: enough decode steps, or an arrival that makes the waiting enough
            steps = min(steps, self.defer_steps - self.since_prefill)
        if self.prefill:
            steps = 1
        if next_seen == INF or (self.waiting.size() > 0 and not deferred):
            until = INF
        else:
            until = next_seen - t
            if until <= 0:
                until = MIN_WAIT_S
        lines = self.lines_by_d[D]
        if lines is None:  # memoised per batch size
            lines = self.lines_by_d[D] = self.time.decode_lines(D)
        k, elapsed, f_step, l_step = decode_run(lines, C, D, steps, until)
        self.G = G = G + k
        if self.defers:
            self.since_prefill += k
        self.emitted += D * k
        if self.itl:
            # the steps' times grow linearly, so the first and the last each stand for half of their tokens
            half = D * k * 0.5
            self.itl_v += (f_step, l_step)
            self.itl_w += (half, half)
        t += elapsed
        # k < by_kv: D (k + 1) <= cap - the KV held before the run, so the next step fits
        if end <= G:
            return t, self._complete(t), k < by_kv
        return t, 0, k < by_kv

    def _complete(self, t: float) -> int:
        """At `t` the sequences whose last token was decoded leave the batch and free their KV; returns how
        many."""
        heap = self.heap
        limit = (self.G + 1) << self.shift  # keys of the sequences finishing by step G
        live, mask = self.live, self.mask
        completed = 0
        while heap and heap[0] < limit:
            key = heappop(heap)
            i = key & mask
            if live[i] != key:
                continue
            live[i] = -1
            completed += 1
            self.S_base -= self.base[i]
            if self.sharing:
                self.S_shared -= self.shared[i]
            if self.reserve:
                self.kv_fixed -= self.prompt[i] + self.out[i] - (self.shared[i] if self.sharing else 0)
            self.finish[i] = t
        self.D -= completed
        return completed

    def _compact(self) -> None:
        """Drop stale heap entries (preempted stints) when they outnumber the live ones by far: only a bound on
        memory, since every reader skips them."""
        live, mask = self.live, self.mask
        self.heap = [key for key in self.heap if live[key & mask] == key]
        heapify(self.heap)
