"""How a trace changed the answer: the estimate with the trace replayed, against the same workload with Poisson
arrivals at the same rate and the trace's own lengths (`trace.replay: false`). Bursts a Poisson stream does not
have queue requests at the replicas, so a bursty trace needs more replicas (or a larger instance) for the same
TTFT bound, and predicts a higher TTFT on the same replicas; prefix hits work the other way.

`compare` reads the two estimate results (their JSON) and says it, with the figures: the best architecture of
each, and the trace's best architecture as Poisson would size it (replicas at peak, TTFT p95 and monthly cost).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sizing.workload.spec import WorkloadSpec


def poisson_twin(spec: WorkloadSpec) -> WorkloadSpec | None:
    """The spec with the trace's arrivals and prefix hits not replayed (None: no trace, or not replayed)."""
    if spec.trace is None or not spec.trace.replay:
        return None
    return spec.model_copy(update={"trace": spec.trace.model_copy(update={"replay": False})})


def _figures(a: dict[str, Any] | None) -> dict[str, Any] | None:
    if a is None:
        return None
    reps = a.get("replicas") or {}
    pred = a.get("predicted") or {}
    return {
        "id": a.get("id"),
        "replicas_peak": reps.get("peak"),
        "ttft_ms_p95": (pred.get("ttft_ms") or {}).get("p95"),
        "e2e_s_p95": (pred.get("e2e_s") or {}).get("p95"),
        "usd_per_month": (a.get("cost") or {}).get("usd_per_month"),
    }


def _way(trace: float | None, poisson: float | None, what: str, fmt: Callable[[float], str]) -> str | None:
    """`raises X from a to b`, `lowers ...`, or `leaves X the same (a)`."""
    if trace is None or poisson is None:
        return None
    if fmt(trace) == fmt(poisson):
        return f"leaves {what} the same ({fmt(trace)})"
    verb = "raises" if trace > poisson else "lowers"
    return f"{verb} {what} from {fmt(poisson)} to {fmt(trace)}"


def compare(traced: dict[str, Any], poisson: dict[str, Any]) -> dict[str, Any]:
    """The difference between an estimate with the trace replayed (`traced`) and with Poisson arrivals at the same
    means (`poisson`), both estimate results' JSON."""
    t_best = (traced.get("architectures") or [None])[0]
    p_best = (poisson.get("architectures") or [None])[0]
    same = None
    if t_best is not None:
        same = next((a for a in poisson.get("architectures") or [] if a.get("id") == t_best.get("id")), None)
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
    spec: WorkloadSpec, traced: dict[str, Any], estimate: Callable[[WorkloadSpec], dict[str, Any]]
) -> dict[str, Any]:
    """`traced` (an estimate result's JSON) with `workload.trace.effect` filled in, from `estimate` of the Poisson
    twin; unchanged when the spec replays no trace."""
    twin = poisson_twin(spec)
    trace = (traced.get("workload") or {}).get("trace")
    if twin is None or trace is None:
        return traced
    trace["effect"] = compare(traced, estimate(twin))
    return traced
