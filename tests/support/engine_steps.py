"""A continuous-batching engine's run as its client would record it, with the steps it really ran: the ground truth
the step rebuild (`sizing.loadtest.steps`) and `sizing steps` are tested against."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sizing.loadtest.metrics import RequestRecord


@dataclass
class Req:
    start: float
    prompt: int
    answer: int
    chunks: list[float] = field(default_factory=list)


def engine_run(arrivals: list[tuple[float, int, int]], jitter_s: float = 0.0005, seed: int = 1):
    """A continuous-batching engine's run: each step admits every waiting prompt and decodes every running
    sequence, and takes 20 ms + 1 ms a running sequence + 0.2 ms a prompt token; its tokens reach the client within
    `jitter_s`. Returns the client's records and the steps as run: (end, decode seqs, prompt tokens, duration or
    None after an idle engine)."""
    rng = random.Random(seed)
    reqs = [Req(t, p, a) for t, p, a in arrivals]
    now, steps, idle = 0.0, [], True
    while any(len(r.chunks) < r.answer for r in reqs):
        waiting = [r for r in reqs if r.start <= now and not r.chunks]
        running = [r for r in reqs if r.chunks and len(r.chunks) < r.answer]
        if not waiting and not running:
            now = min(r.start for r in reqs if not r.chunks)
            idle = True
            continue
        began = now
        now += 0.020 + 0.001 * len(running) + 0.0002 * sum(r.prompt for r in waiting)
        for r in waiting + running:
            r.chunks.append(now + rng.uniform(0, jitter_s))
        steps.append((now, len(running), sum(r.prompt for r in waiting), None if idle else now - began))
        idle = False
    records = [
        RequestRecord(
            start=r.start,
            end=r.chunks[-1],
            ttft_s=r.chunks[0] - r.start,
            itl_s=[b - a for a, b in zip(r.chunks, r.chunks[1:], strict=False)],
            input_tokens=r.prompt,
            output_tokens=r.answer,
        )
        for r in reqs
    ]
    return records, steps
