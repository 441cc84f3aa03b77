"""The ranking: cheapest first, instance sizes of identical performance folded into one row ("also fits on"), numbered,
and marked on the Pareto front of monthly cost and p95 end-to-end latency."""

from __future__ import annotations

import math
from typing import Any

from sizing.plan.margin import describe_violation
from sizing.plan.state import Option
from sizing.results import AlsoFits, Architecture, Rejected, RejectedKind
from sizing.workload.derived import WorkloadModel

#: The predicted percentiles an architecture states, lowest first: a target at another percentile (p90) is judged
#: by the next one above it, which bounds it.
STATED_PERCENTILES = ("p50", "p95", "p99")
#: Relative slack for rounding when a prediction is compared with its target (figures are rounded to 0.1 ms).
BIND_TOLERANCE = 1e-6


def _predicted(a: Architecture, metric: str, pct: str) -> float | None:
    block = getattr(a.predicted, metric)
    later = STATED_PERCENTILES[next((i for i, q in enumerate(STATED_PERCENTILES) if q >= pct), 2) :]
    return next((v for q in (pct, *later) if (v := getattr(block, q, None)) is not None), None)


def misses(a: Architecture, wm: WorkloadModel) -> str | None:
    """How an architecture misses a target the spec states, in words; None when it meets every one. A job (Bedrock
    batch inference, a SageMaker asynchronous job) is judged by its wall time against the deadline, and its
    requests by the per-request targets stated: a request ends when its job does, and a job states no TTFT."""
    job = a.invocation in ("batch", "async")
    out = []
    for metric, pct, limit in wm.slo.stated_targets():
        value = _predicted(a, metric, pct)
        if value is None:
            if job:
                out.append(f"{metric.split('_')[0].upper()} {pct} is not stated by a {a.invocation} job")
            continue
        if value > limit * (1 + BIND_TOLERANCE):
            what = describe_violation(metric, pct, value, limit)
            out.append(what + (" (the job's wall time: its requests end when it does)" if job else ""))
    deadline = wm.slo.deadline_s
    if (
        job
        and deadline is not None
        and a.batch is not None
        and a.batch.wall_time_h * 3600 > deadline * (1 + BIND_TOLERANCE)
    ):
        out.append(f"the job takes {a.batch.wall_time_h:g} h > its deadline {deadline / 3600:g} h")
    return "; ".join(out) or None


def binding(archs: list[Architecture], wm: WorkloadModel) -> tuple[list[Architecture], list[Rejected]]:
    """The architectures that meet every SLO as the spec states it, and a rejection for each that does not: a
    ranked row never misses a stated target."""
    kept, rejected = [], []
    for a in archs:
        why = misses(a, wm)
        if why is None:
            kept.append(a)
        else:
            rejected.append(Rejected(id=a.id, kind=RejectedKind.slo, reason=why + " (as stated)"))
    return kept, rejected


def ranked(feasible: list[Architecture]) -> list[Architecture]:
    """Cheapest first, same-performance sizes folded into one row, numbered, and marked on the Pareto front."""
    feasible = _fold(sorted(feasible, key=Architecture.rank_key))
    return _pareto([a.model_copy(update={"rank": r}) for r, a in enumerate(feasible, start=1)])


def _fold(archs: list[Architecture]) -> list[Architecture]:
    """Instance sizes with identical performance (one replica of the same accelerators and serving configuration,
    packed alike) fold into the cheapest: one row with "also fits on"."""
    kept: dict[tuple[Any, ...], int] = {}
    out: list[Architecture] = []
    extra: dict[int, list[AlsoFits]] = {}
    for a in archs:
        if a.deployment == "bedrock" or a.serving is None:
            out.append(a)
            continue
        key = _fold_key(a)
        if key in kept:
            extra.setdefault(kept[key], []).append(
                AlsoFits(instance_type=a.instance_type or "", usd_per_month=round(a.ranked_usd_per_month, 2))
            )
            continue
        kept[key] = len(out)
        out.append(a)
    return [
        a.model_copy(update={"also_fits_on": [*a.also_fits_on, *extra[i]]}) if i in extra else a
        for i, a in enumerate(out)
    ]


def _fold_key(a: Architecture) -> tuple[Any, ...]:
    """What makes two architectures one row: deployment, capacity, accelerator, serving configuration, packing."""
    if a.deployment == "bedrock" or a.serving is None:
        return (a.id,)
    # an asynchronous-inference job is its own row, beside the real-time endpoint of the same hardware
    return (a.deployment, a.capacity_type, a.accelerator, a.serving, a.replicas_per_instance, a.invocation)


def row_costs(placed: list[tuple[Option, list[Architecture]]]) -> list[float]:
    """The costs of the ranking's rows found so far, cheapest first (same-performance instance sizes fold into one
    row)."""
    rows: dict[tuple[Any, ...], float] = {}
    for _, archs in placed:
        for a in archs:
            rows[_fold_key(a)] = min(rows.get(_fold_key(a), math.inf), a.ranked_usd_per_month)
    return sorted(rows.values())


def _pareto(archs: list[Architecture]) -> list[Architecture]:
    """Mark the architectures no other beats on both monthly cost and p95 e2e latency."""
    order = sorted(
        range(len(archs)), key=lambda i: (archs[i].ranked_usd_per_month, archs[i].predicted.e2e_s.p95 or 0.0)
    )
    flags = [False] * len(archs)
    best = math.inf
    for i in order:
        lat = archs[i].predicted.e2e_s.p95 or 0.0
        flags[i] = lat < best
        best = min(best, lat)
    return [a.model_copy(update={"pareto": f}) for a, f in zip(archs, flags, strict=True)]
