"""Engine steps rebuilt from what the client saw.

A continuous-batching engine (vLLM's scheduler among them) runs in steps: each step gives every running sequence
one token and may prefill new prompts, and the tokens of one step leave the server together. On loopback they reach
the client within a few milliseconds of each other, while steps last from about 7 ms (the engine tier's tiny models)
to seconds. Grouping every streamed chunk of a level's requests by arrival time therefore gives the engine's steps
back, without access to the server: how many sequences each step decoded, whose prompts it finished prefilling (a
request's first token), the context its decodes read, and how long it took -- the time since the previous step's
tokens, where the engine had work waiting then. A step after an idle engine has no duration, nor has a step the
client read late: when a request's next chunk comes in one burst with its last (the client fell behind a fast
engine), that step, the one before and the one after are left untimed.

That is the data a step-time model is checked and fitted against, step by step rather than through the averages of
whole levels (`benchmarks/engine.py steps`). Its limits: a prompt longer than the engine's token budget is prefilled
over several steps and shows only in the last; a chunk that carries several tokens (a client slower than the
engine) counts as one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from .metrics import RequestRecord
from .stepsample import IDLE_KEPT, STEPS_KEPT, EngineStep, StepsSample

#: Chunks closer than this share of the level's median inter-token gap belong to one step: the spread of one step's
#: chunks on loopback is 0.2-1.3 ms at the median and under 8 ms at the 99th percentile (the engine tier's
#: small-llama, 1-30 sequences), its steps 55 ms or more; tiny models' steps are 7-20 ms with a spread under 1 ms.
STEP_GAP_SHARE = 0.25


def _chunk_times(r: RequestRecord) -> np.ndarray:
    assert r.ttft_s is not None
    first = r.start + r.ttft_s
    return first + np.concatenate(([0.0], np.cumsum(r.itl_s)))


def rebuild(
    records: Sequence[RequestRecord], gap_s: float | None = None, span: tuple[float, float] | None = None
) -> list[EngineStep]:
    """The engine steps of one level's successful requests (`records`), in order. Chunks within `gap_s` of the
    previous one (default: `STEP_GAP_SHARE` of the median inter-token gap) are one step, unless a request already
    has a chunk in it. `span`: only the steps whose chunks arrived within it (every record still counts for the
    sequences running in them)."""
    ok = [r for r in records if r.error is None and r.ttft_s is not None]
    if not ok:
        return []
    times = [_chunk_times(r) for r in ok]
    t = np.concatenate(times)
    req = np.concatenate([np.full(len(ts), i) for i, ts in enumerate(times)])
    k = np.concatenate([np.arange(len(ts)) for ts in times])
    if span is not None:
        inside = (t >= span[0]) & (t <= span[1])
        t, req, k = t[inside], req[inside], k[inside]
        if not t.size:
            return []
    order = np.argsort(t, kind="stable")
    t, req, k = t[order], req[order], k[order]
    if gap_s is None:
        gaps = [g for r in ok for g in r.itl_s]
        gap_s = STEP_GAP_SHARE * float(np.median(gaps)) if gaps else float("inf")
    bounds = [0]
    # steps that began inside a burst of chunks: a request's next chunk came with its last one, so the client read
    # two steps' tokens at once (it fell behind) and neither step's end is when the engine ended it
    bunched: set[int] = set()
    seen: set[int] = {int(req[0])}
    for j in range(1, len(t)):
        close = t[j] - t[j - 1] <= gap_s
        if not close or int(req[j]) in seen:
            if close:
                bunched.add(len(bounds))
            bounds.append(j)
            seen = set()
        seen.add(int(req[j]))
    bounds.append(len(t))
    # a bunched step's duration, its predecessor's (cut short) and its successor's (from a late end) are not the
    # engine's
    untimed = {i + d for i in bunched for d in (-1, 0, 1)}
    prompt = np.array([r.input_tokens or 0 for r in ok])
    last = np.array([len(ts) - 1 for ts in times])
    starts = np.sort([r.start for r in ok])
    firsts = np.sort([ts[0] for ts in times])
    steps: list[EngineStep] = []
    prev_end: float | None = None
    running = 0
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
        rr, kk = req[a:b], k[a:b]
        dec = kk > 0
        end = float(t[a])
        duration = None
        if prev_end is not None and i not in untimed:
            # work was waiting when the previous step ended: sequences it left running, or prompts sent a step's gap
            # before it ended (sent later, the engine may have idled until they came) and not yet answered
            sent = np.searchsorted(starts, prev_end - gap_s, side="right")
            answered = np.searchsorted(firsts, prev_end, side="right")
            if running > 0 or sent > answered:
                duration = end - prev_end
        steps.append(
            EngineStep(
                end=end,
                duration_s=duration,
                decode_seqs=int(dec.sum()),
                prefills=int((~dec).sum()),
                prefill_tokens=int(prompt[rr[~dec]].sum()),
                context_tokens=int(prompt[rr[dec]].sum() + kk[dec].sum()),
                spread_s=float(t[b - 1] - t[a]),
            )
        )
        running = int((kk < last[rr]).sum())
        prev_end = end
    return steps


def idle_first_tokens_of(records: Sequence[RequestRecord]) -> list[tuple[RequestRecord, tuple[float, int]]]:
    """Each successful request sent while no other request was in flight, with its (first token s, prompt tokens):
    at an idle engine, the first token is the request's own cost and its prompt's step alone."""
    ok = sorted((r for r in records if r.error is None and r.ttft_s is not None), key=lambda r: r.start)
    out: list[tuple[RequestRecord, tuple[float, int]]] = []
    busy_until = -math.inf  # the latest end of the requests sent before this one
    for r in ok:
        if busy_until <= r.start and r.ttft_s is not None:
            out.append((r, (r.ttft_s, int(r.input_tokens or 0))))
        busy_until = max(busy_until, r.end)
    return out


#: Most streamed chunks a level's steps are rebuilt from: the rebuild walks them one by one (~1 us each), between two
#: levels of a running load test; a level with more (a fast server's minutes of load) is rebuilt over a slice of its
#: window's middle that holds about this many, which still gives thousands of steps.
MAX_CHUNKS = 200_000


def _span(records: Sequence[RequestRecord], lo: float, hi: float) -> tuple[float, float] | None:
    """The part of the window [lo, hi] whose steps are rebuilt where the level streamed more than `MAX_CHUNKS`
    chunks: a middle slice of about that many (its first step untimed: the one before it is not rebuilt). None:
    every chunk."""
    chunks = sum(len(r.itl_s) + 1 for r in records if r.error is None and r.ttft_s is not None)
    if chunks <= MAX_CHUNKS or not math.isfinite(lo) or not math.isfinite(hi):
        return None
    half = (hi - lo) * MAX_CHUNKS / chunks / 2
    mid = (lo + hi) / 2
    return mid - half, mid + half


def sample(
    records: Sequence[RequestRecord],
    window: tuple[float, float] | None = None,
    keep: int = STEPS_KEPT,
    idle_keep: int = IDLE_KEPT,
) -> StepsSample:
    """A level's steps rebuilt from its `records` (every request that ran during it: its warm-up's too, or the
    window's first steps would miss sequences already running), those that ended inside `window` (after it, the
    requests the next level sent run in them unseen), `keep` of the timed ones picked evenly through it; and up to
    `idle_keep` first tokens of the window's requests at an idle engine (`StepsSample`)."""
    lo, hi = window if window is not None else (-math.inf, math.inf)
    steps = [s for s in rebuild(records, span=_span(records, lo, hi)) if lo <= s.end <= hi]
    timed = [s for s in steps if s.duration_s is not None and s.duration_s > 0]
    picks = timed if len(timed) <= keep else [timed[int(i)] for i in np.linspace(0, len(timed) - 1, keep)]
    idle = [(t, n) for r, (t, n) in idle_first_tokens_of(records) if lo <= r.start < hi]
    if len(idle) > idle_keep:
        idle = [idle[int(i)] for i in np.linspace(0, len(idle) - 1, idle_keep)]
    return StepsSample(
        rebuilt=len(steps),
        timed=len(timed),
        steps=[
            (round(s.duration_s * 1e3, 3), s.decode_seqs, s.prefills, s.prefill_tokens, s.context_tokens)
            for s in picks
            if s.duration_s is not None
        ],
        idle_first_tokens=[(round(t * 1e3, 3), n) for t, n in idle],
    )


__all__ = ["STEP_GAP_SHARE", "EngineStep", "StepsSample", "idle_first_tokens_of", "rebuild", "sample"]
