"""The twin's inference engine: continuous batching in real time, timed by a step model.

The scheduler follows vLLM V1's policy (docs/serving-facts.md s1). A request reaches the scheduler
`request_overhead_s` after it arrives (the API server's share, when the step model has one; where the API server
runs on the model's own cores, a request it handles while the engine runs lengthens the next step by its CPU time,
`frontend_request_cpu_s`). Every running sequence that is decoding gets one token per step first; what is left of
the token budget (`max_num_batched_tokens`) goes to prefills, oversized prompts in chunks. A waiting request is
admitted only while fewer than `max_num_seqs` run and the KV cache's free blocks hold its whole prompt (vLLM's
full-input admission), and in no step that preempted. When a decoding sequence needs a block and none is free, the
most recently admitted sequence is preempted by recompute: its blocks are freed, it waits at the head of the queue
and is prefilled again (prompt plus what it had generated). Engines the step model describes otherwise are followed
too: no chunked prefill, prefill-only steps, or KV reserved for the whole answer at admission (TensorRT-LLM). Each
step lasts `iteration_time(...)` seconds of wall-clock time; its tokens are handed to the sequences' sinks when the
step ends.

With prefix caching (the step model's `prefix_caching`, the serving configuration's `enable_prefix_caching`) the
engine caches KV blocks by content, as vLLM's automatic prefix caching does
(https://docs.vllm.ai/en/latest/design/prefix_caching.html): a request brings the hashes of its prompt's full
blocks (each chained to the one before it, `block_hashes`); a block is cached once the step that computes it ends;
a request admitted later whose leading blocks are cached reads them instead of prefilling them -- all but the
prompt's last token, which is always computed -- and a cached block is held once however many requests use it.
Blocks no running request holds stay cached while the free pool has room, and the least recently freed go first.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import math
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from sizing.base.errors import InvalidInput, Problem

#: TTFT histogram buckets in seconds, as vLLM exports `vllm:time_to_first_token_seconds`.
TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
)  # fmt: skip


#: Most lag a busy engine makes up by running steps back to back (a few steps of a typical 10-50 ms decode).
MAX_CATCH_UP_S = 0.05


#: Token budget of engines that set none (no chunked prefill): effectively unbounded.
UNBOUNDED_BUDGET = 1 << 30
#: Parameters of an iteration_time that also takes (prefill_attention_pairs, prefill_seqs).
RICH_ITERATION_TIME_PARAMS = 5


class StepModelLike(Protocol):
    """What the engine needs from `sizing.perf.StepModel`."""

    max_num_seqs: int
    max_num_batched_tokens: int
    kv_capacity_tokens: int
    block_size: int

    def iteration_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float: ...


#: A sink receives (tokens generated so far, finished); it is called when a step that produced a token ends.
TokenSink = Callable[[int, bool], None]


@dataclass(eq=False)
class Sequence:
    """One request inside the engine."""

    seq_id: int
    prompt_tokens: int
    max_output: int
    sink: TokenSink
    arrival: float
    computed: int = 0  # tokens whose KV is in the cache
    generated: int = 0
    blocks: int = 0  # KV blocks of its own (cached blocks it reads are in `shared`)
    #: hashes of the prompt's full blocks, each chained to the ones before it (empty: nothing to cache)
    hashes: tuple[int, ...] = ()
    #: the leading prompt blocks it holds through the prefix cache (hashes), held once for all their readers
    shared: list[int] = field(default_factory=list)
    first_token_at: float | None = None
    finished_at: float | None = None
    aborted: bool = False
    done: asyncio.Future[None] | None = field(default=None, repr=False)


@dataclass
class EngineStats:
    """Counters for /metrics."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests_finished: int = 0
    preemptions: int = 0
    steps: int = 0
    ttft_bucket_counts: list[int] = field(default_factory=lambda: [0] * len(TTFT_BUCKETS_S))
    ttft_count: int = 0
    ttft_sum: float = 0.0
    #: how far behind the model's schedule steps ended (real time minus the step's due time): the twin's own
    #: overhead; it stays near zero while the host keeps up
    lag_sum_s: float = 0.0
    lag_max_s: float = 0.0
    #: prompt tokens looked up in the prefix cache, and those found there (vLLM's prefix_cache_queries / _hits)
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0

    def observe_ttft(self, seconds: float) -> None:
        self.ttft_count += 1
        self.ttft_sum += seconds
        for i, edge in enumerate(TTFT_BUCKETS_S):
            if seconds <= edge:
                self.ttft_bucket_counts[i] += 1


class Engine:
    """Real-time continuous batching on the running asyncio loop. Create it inside the loop; `submit` requests.

    `time_scale` K > 1 runs the model K times faster than real time: every step and the request overhead last
    1/K of their modelled seconds on the wall clock, so a client that sends K times the rate and reads latencies
    times K sees the model's own figures in a K-th of the time (`sizing.loadtest.timescale`)."""

    def __init__(self, step_model: StepModelLike, time_scale: float = 1.0) -> None:
        if not time_scale >= 1.0:
            raise InvalidInput(
                f"time_scale must be at least 1 (the model runs that many times faster than real time), got {time_scale}",
                [Problem("time_scale", str(time_scale))],
            )
        self.time_scale = float(time_scale)
        self.step = step_model
        self.block_size = max(1, int(step_model.block_size))
        self.total_blocks = max(1, int(step_model.kv_capacity_tokens) // self.block_size)
        self.used_blocks = 0
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.stats = EngineStats()
        self._ids = itertools.count(1)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        # engine policy, when the step model describes it (sizing.perf.StepModel does): chunked prefill, prefill
        # mixed into decode steps, and KV admission by reservation (TensorRT-LLM GUARANTEED_NO_EVICT)
        self.chunked = bool(getattr(step_model, "chunked_prefill", True))
        self.mixed = bool(getattr(step_model, "mixed_prefill_decode", True))
        self.reserve = getattr(step_model, "admission", "") == "reserve"
        #: the API server's share of a request (tokenise, schedule, stream): the engine sees it this much later
        self.request_overhead_s = (
            float(getattr(step_model, "request_overhead_s", 0.0) or 0.0) / self.time_scale
        )
        #: where that share is work on the model's own cores (a CPU server of one physical core), a request
        #: handled while the engine runs takes it from the engine's next step (as `sizing.perf.arrivals` does)
        self.frontend_request_cpu_s = (
            float(getattr(step_model, "frontend_request_cpu_s", 0.0) or 0.0) / self.time_scale
        )
        self._debt = 0.0
        try:
            n_params = len(inspect.signature(step_model.iteration_time).parameters)
        except (TypeError, ValueError):
            n_params = 3
        #: sizing.perf's iteration_time also takes the prefill attention pairs and the number of prefill chunks
        self._rich_step_model = n_params >= RICH_ITERATION_TIME_PARAMS
        self.prefix_caching = bool(getattr(step_model, "prefix_caching", False))
        #: cached blocks that running sequences hold (hash -> readers), and those none holds (oldest first)
        self._held: dict[int, int] = {}
        self._cached_free: OrderedDict[int, None] = OrderedDict()

    # --- public --------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = self._loop.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def submit(
        self, prompt_tokens: int, max_output: int, sink: TokenSink, block_hashes: Iterable[int] = ()
    ) -> Sequence:
        """Queue a request. `block_hashes`: its prompt's full blocks by content (`block_hashes`), read from the
        prefix cache when the engine caches prefixes. Raises InvalidInput when prompt plus output can never fit
        in the KV cache."""
        need = prompt_tokens + max_output
        if self._blocks_for(need) > self.total_blocks:
            raise InvalidInput(
                f"this request needs {need} tokens of KV cache;"
                f" the replica holds {self.total_blocks * self.block_size}",
                [Problem("max_tokens", "prompt plus max_tokens exceeds the KV-cache capacity")],
            )
        seq = Sequence(next(self._ids), max(1, prompt_tokens), max(1, max_output), sink, self._loop.time())
        if self.prefix_caching:
            seq.hashes = tuple(block_hashes)
        seq.done = self._loop.create_future()
        if self.frontend_request_cpu_s > 0 and (self.running or self.waiting):
            self._debt += self.frontend_request_cpu_s
        if self.request_overhead_s > 0:
            self._loop.call_later(self.request_overhead_s, self._enqueue, seq)
        else:
            self._enqueue(seq)
        return seq

    def _enqueue(self, seq: Sequence) -> None:
        if not seq.aborted:
            self.waiting.append(seq)
            self._wake.set()

    def abort(self, seq: Sequence) -> None:
        """The client went away: free the sequence's KV and drop it."""
        if seq.finished_at is not None or seq.aborted:
            return
        seq.aborted = True
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self._free(seq)
        if seq.done is not None and not seq.done.done():
            seq.done.set_result(None)

    def abort_all(self) -> None:
        """Drop every request (the twin is stopping)."""
        for seq in [*self.running, *self.waiting]:
            self.abort(seq)

    @property
    def kv_usage(self) -> float:
        return self.used_blocks / self.total_blocks

    # --- scheduling ----------------------------------------------------------------------------------------
    def _blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    def _need(self, seq: Sequence, tokens: int) -> int:
        """Blocks the sequence needs beyond those it holds to hold `tokens` of KV."""
        return self._blocks_for(tokens) - seq.blocks - len(seq.shared)

    def _grow(self, seq: Sequence, tokens: int) -> bool:
        need = self._need(seq, tokens)
        if need <= 0:
            return True
        if self.used_blocks + need > self.total_blocks:
            return False
        self.used_blocks += need
        seq.blocks += need
        self._trim_cache()
        return True

    def _fits(self, seq: Sequence, tokens: int) -> bool:
        """Whether the free blocks hold `tokens` of the sequence's KV beyond the blocks it already holds."""
        return self.used_blocks + self._need(seq, tokens) <= self.total_blocks

    def _free(self, seq: Sequence) -> None:
        self.used_blocks -= seq.blocks
        seq.blocks = 0
        for h in seq.shared:
            readers = self._held[h] - 1
            if readers:
                self._held[h] = readers
            else:
                del self._held[h]
                self._cached_free[h] = None
                self.used_blocks -= 1
        seq.shared = []
        self._trim_cache()

    def _trim_cache(self) -> None:
        """Cached blocks no one holds live in the free pool: as it shrinks, the least recently freed go."""
        while self._cached_free and len(self._cached_free) > self.total_blocks - self.used_blocks:
            self._cached_free.popitem(last=False)

    def _read_cached(self, seq: Sequence) -> None:
        """Hold the leading prompt blocks of a sequence about to be admitted that the cache has (all but the
        prompt's last token: its logits give the first output token). A block taken from the free pool was
        already counted in it, so this never overfills the cache. Undone by `_unread`."""
        if not seq.hashes:
            return
        limit = min(len(seq.hashes), (seq.prompt_tokens - 1) // self.block_size)
        for h in seq.hashes[:limit]:
            if h in self._held:
                self._held[h] += 1
            elif h in self._cached_free:
                del self._cached_free[h]
                self._held[h] = 1
                self.used_blocks += 1
            else:
                break
            seq.shared.append(h)
        seq.computed = len(seq.shared) * self.block_size

    def _cache_computed(self, seq: Sequence) -> None:
        """After a prefill step: the sequence's newly completed prompt blocks become cached, held once (a block
        another sequence computed at the same time stays this sequence's own, and so do the ones after it)."""
        full = min(seq.computed, seq.prompt_tokens) // self.block_size
        while len(seq.shared) < min(full, len(seq.hashes)) and seq.blocks > 0:
            h = seq.hashes[len(seq.shared)]
            if h in self._held or h in self._cached_free:
                return
            self._held[h] = 1
            seq.shared.append(h)
            seq.blocks -= 1

    def _preempt(self, victim: Sequence) -> None:
        self.running.remove(victim)
        self._free(victim)
        victim.computed = 0
        self.waiting.appendleft(victim)
        self.stats.preemptions += 1

    def _unread(self, seq: Sequence) -> None:
        """A sequence that is not admitted after all gives its cached blocks back and waits as it was."""
        self._free(seq)
        seq.computed = 0

    def _kv_target(self, seq: Sequence) -> int:
        """KV tokens the sequence must hold before sampling its next token."""
        return seq.prompt_tokens + max(seq.generated - 1, 0) if seq.generated else seq.prompt_tokens

    def _decodes(self, budget: int) -> tuple[list[Sequence], int]:
        """Running sequences that are decoding, oldest first, one token each; a sequence that needs a KV block
        when none is free preempts the newest running sequence (possibly itself)."""
        decodes: list[Sequence] = []
        context = 0
        i = 0
        while i < len(self.running) and len(decodes) < budget:
            seq = self.running[i]
            if seq.computed >= self._kv_target(seq):
                while not self._grow(seq, seq.computed + 1):
                    victim = self.running[-1]
                    self._preempt(victim)
                    if victim is seq:
                        break
                if seq not in self.running:
                    break
                decodes.append(seq)
                context += seq.computed + 1
            i += 1
        return decodes, context

    def _take(self, remaining: int, room: int, scheduled: int) -> int:
        """Prefill tokens of one sequence this step: all that fit, a chunk when chunking, or (engines without
        chunked prefill) the whole prompt when it is the step's first."""
        if remaining <= room:
            return remaining
        if self.chunked:
            return room
        return remaining if scheduled == 0 else 0

    def _prefills(self, budget: int, admit: bool = True) -> list[tuple[Sequence, int]]:
        """This step's prefill chunks: the prompts already being prefilled first, then (`admit`) waiting requests
        in order while they fit."""
        prefills: list[tuple[Sequence, int]] = []
        used = 0
        for seq in self.running:  # partly prefilled sequences continue first
            target = self._kv_target(seq)
            if seq.computed >= target or budget - used <= 0:
                continue
            chunk = self._take(target - seq.computed, budget - used, used)
            while chunk > 0 and not self._grow(seq, seq.computed + chunk):
                chunk -= self.block_size
            if chunk > 0:
                prefills.append((seq, chunk))
                used += chunk
        while (
            admit and self.waiting and budget - used > 0 and len(self.running) < int(self.step.max_num_seqs)
        ):
            seq = self.waiting[0]
            self._read_cached(seq)
            target = self._kv_target(seq)
            chunk = self._take(target - seq.computed, budget - used, used)
            if chunk <= 0:
                self._unread(seq)
                break
            reserve_to = seq.prompt_tokens + seq.max_output if self.reserve else seq.computed + chunk
            if not self.reserve and not self._fits(seq, target):
                # admitted only if the KV cache holds its whole prompt (and, resumed, what it had generated),
                # not just the first chunk: vLLM's full-input admission (`scheduler_reserve_full_isl`, on by
                # default since vLLM PR 37307), as the estimator's scheduler admits. Admitted on its first chunk, a
                # long prompt was prefilled in chunks until the cache filled, preempted, admitted again and
                # recomputed from scratch: the twin of batch-summarization's 32B model on g6e.xlarge preempted
                # 1,486 times in 800 requests at 0.57 req/s and served 0.39 req/s where its model serves 0.55.
                self._unread(seq)
                break
            if not self._grow(seq, reserve_to):
                self._unread(seq)
                break
            self.waiting.popleft()
            self.running.append(seq)
            if seq.hashes:
                self.stats.prefix_cache_queries += seq.prompt_tokens
                self.stats.prefix_cache_hits += seq.computed
            prefills.append((seq, chunk))
            used += chunk
        return prefills

    def schedule(self) -> tuple[list[tuple[Sequence, int]], list[Sequence], int]:
        """Pick one step's work: (prefill chunks, decoding sequences, KV tokens the decodes read)."""
        budget = int(self.step.max_num_batched_tokens) or UNBOUNDED_BUDGET
        if self.mixed:
            preempted = self.stats.preemptions
            decodes, context = self._decodes(budget)
            # a step that preempted admits no waiting request (vLLM V1's scheduler: the WAITING queue is scheduled
            # only `if not preempted_reqs`): the victim, back at the queue's head, would otherwise be admitted again
            # into the blocks its own preemption freed and preempted the next step, recomputed from scratch each
            # time. Batch-summarization's 32B model on g6e.xlarge preempted 548-661 times a level so and answered
            # 143 output tokens a second overloaded against 195 at 70% of its load.
            admit = self.stats.preemptions == preempted
            return self._prefills(budget - len(decodes), admit), decodes, context
        prefills = self._prefills(budget)  # prefill-only steps take priority over decodes
        if prefills:
            return prefills, [], 0
        decodes, context = self._decodes(budget)
        return [], decodes, context

    def step_time(self, prefills: list[tuple[Sequence, int]], decodes: list[Sequence], context: int) -> float:
        p = sum(c for _, c in prefills)
        if not self._rich_step_model:
            return float(self.step.iteration_time(p, len(decodes), context))
        pairs = sum(c * (seq.computed + c / 2) for seq, c in prefills)
        return float(self.step.iteration_time(p, len(decodes), context, pairs, len(prefills)))  # type: ignore[call-arg]

    def _finish_step(self, prefills: list[tuple[Sequence, int]], decodes: list[Sequence], now: float) -> None:
        emitted: list[Sequence] = []
        for seq in decodes:
            seq.computed += 1
            seq.generated += 1
            emitted.append(seq)
        for seq, chunk in prefills:
            seq.computed += chunk
            if seq.hashes:
                self._cache_computed(seq)
            if seq.computed >= self._kv_target(seq):
                fresh = seq.generated == 0
                seq.generated += 1
                if fresh:
                    self.stats.prompt_tokens += seq.prompt_tokens
                emitted.append(seq)
        for seq in emitted:
            if seq.aborted:
                continue
            self.stats.generation_tokens += 1
            if seq.first_token_at is None:
                seq.first_token_at = now
                self.stats.observe_ttft(now - seq.arrival)
            finished = seq.generated >= seq.max_output
            if finished:
                seq.finished_at = now
                self.running.remove(seq)
                self._free(seq)
                self.stats.requests_finished += 1
            seq.sink(seq.generated, finished)
            if finished and seq.done is not None and not seq.done.done():
                seq.done.set_result(None)

    async def _run(self) -> None:
        loop = self._loop
        deadline = loop.time()
        while True:
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
                deadline = loop.time()  # an idle engine starts the next step on arrival
            prefills, decodes, context = self.schedule()
            if not prefills and not decodes:  # nothing fits yet (cannot happen with a non-empty batch)
                self._wake.clear()
                await self._wake.wait()
                continue
            dt = self.step_time(prefills, decodes, context) / self.time_scale + self._debt
            self._debt = 0.0
            # a busy engine runs step after step: keep the model's pace even when a sleep overshoots (timer
            # granularity is about 1 ms), but do not replay more than MAX_CATCH_UP_S of lag after a stall
            deadline = max(deadline, loop.time() - MAX_CATCH_UP_S) + dt
            self.stats.steps += 1
            delay = deadline - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            lag = max(0.0, loop.time() - deadline)
            self.stats.lag_sum_s += lag
            self.stats.lag_max_s = max(self.stats.lag_max_s, lag)
            self._finish_step(prefills, decodes, deadline)
