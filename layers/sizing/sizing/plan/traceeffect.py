"""How a trace changed the answer: the estimate with the trace replayed, against the same workload with Poisson
arrivals at the same rate and the trace's own lengths (`trace.replay: false`). Bursts a Poisson stream does not
have queue requests at the replicas, so a bursty trace needs more replicas (or a larger instance) for the same
TTFT bound, and predicts a higher TTFT on the same replicas; prefix hits work the other way.

`compare` reads the two estimate results and says it, with the figures: the best architecture of
each, and the trace's best architecture as Poisson would size it (replicas at peak, TTFT p95 and monthly cost).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sizing.results import Architecture, EstimateResult
from sizing.results.blocks import TraceEffect
from sizing.workload.spec import WorkloadSpec


def poisson_twin(spec: WorkloadSpec) -> WorkloadSpec | None:
    """The spec with the trace's arrivals and prefix hits not replayed (None: no trace, or not replayed)."""
    if spec.trace is None or not spec.trace.replay:
        return None
    return spec.model_copy(update={"trace": spec.trace.model_copy(update={"replay": False})})


def _figures(a: Architecture | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return {
        "id": a.id,
        "replicas_peak": a.replicas.peak if a.replicas else None,
        "ttft_ms_p95": a.predicted.ttft_ms.p95,
        "e2e_s_p95": a.predicted.e2e_s.p95,
        "usd_per_month": a.cost.usd_per_month,
    }


def _way(trace: float | None, poisson: float | None, what: str, fmt: Callable[[float], str]) -> str | None:
    """`raises X from a to b`, `lowers ...`, or `leaves X the same (a)`."""
    if trace is None or poisson is None:
        return None
    if fmt(trace) == fmt(poisson):
        return f"leaves {what} the same ({fmt(trace)})"
    verb = "raises" if trace > poisson else "lowers"
    return f"{verb} {what} from {fmt(poisson)} to {fmt(trace)}"


def compare(traced: EstimateResult, poisson: EstimateResult) -> dict[str, Any]:
    """The difference between an estimate with the trace replayed (`traced`) and with Poisson arrivals at the same
    means (`poisson`)."""
    t_best = traced.architectures[0] if traced.architectures else None
    p_best = poisson.architectures[0] if poisson.architectures else None
    same = None
    if t_best is not None:
        same = next((a for a in poisson.architectures if a.id == t_best.id), None)
    out: dict[str, Any] = {
        "against": "Poisson arrivals at the same peak rate, with the trace's lengths and its median shared prefix for"
        " every request instead of its recorded prefix hits",
        "trace_best": _figures(t_best),
        "poisson_best": _figures(p_best),
        "poisson_on_trace_best": _figures(same),
    }
    parts: list[str] = []
    tb, pb, ps = out["trace_best"], out["poisson_best"], out["poisson_on_trace_best"]
    if tb and pb:
        said = _way(tb["usd_per_month"], pb["usd_per_month"], "the best monthly cost", lambda x: f"${x:,.0f}")
        if said:
            parts.append(said)
    if tb and ps:
        for said in (
            _way(
                tb["replicas_peak"],
                ps["replicas_peak"],
                f"the peak replicas of {tb['id']}",
                lambda x: f"{x:g}",
            ),
            _way(tb["ttft_ms_p95"], ps["ttft_ms_p95"], "its TTFT p95 at peak", lambda x: f"{x:,.0f} ms"),
        ):
            if said:
                parts.append(said)
    out["summary"] = (
        "against Poisson at the same means, the trace " + "; ".join(parts)
        if parts
        else "no architecture to compare"
    )
    return out


def with_effect(
    spec: WorkloadSpec, traced: EstimateResult, estimate: Callable[[WorkloadSpec], EstimateResult]
) -> EstimateResult:
    """`traced` with `workload.trace.effect` filled in, from `estimate` of the Poisson twin; unchanged when the spec
    replays no trace."""
    twin = poisson_twin(spec)
    if twin is None or traced.workload.trace is None:
        return traced
    return with_trace_effect(traced, compare(traced, estimate(twin)))


def with_trace_effect(traced: EstimateResult, effect: dict[str, Any]) -> EstimateResult:
    """`traced` with `workload.trace.effect` set to `effect` (`compare`'s); unchanged when it states no trace."""
    trace = traced.workload.trace
    if trace is None:
        return traced
    stated = trace.model_copy(update={"effect": TraceEffect.model_validate(effect)})
    return traced.model_copy(update={"workload": traced.workload.model_copy(update={"trace": stated})})
