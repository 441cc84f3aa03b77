"""Runs of pure-decode steps summed in closed form: between two events (an arrival, a completion, KV exhaustion)
every step decodes the same D sequences, and the context they read grows by D tokens a step, so each step's time
is a line in the step number (or the larger of two: compute and memory bound) and a run of them sums without a
per-token loop."""

from __future__ import annotations

import math

# relative: the simulator's hot loop is also built as a compiled copy under another package (sizing.perf.native)
from .steptime import DecodeLines


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


def decode_run(lines: DecodeLines, C: int, D: int, n: int, delta: float) -> tuple[int, float, float, float]:
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
