"""What the answer says of itself: why nothing is feasible, why cheaper hardware is not ranked, the Region block and
the assumptions the estimate rests on."""

from __future__ import annotations

from typing import Any

from sizing.catalog.regions import region_name
from sizing.perf.calibration import load_profiles
from sizing.plan.candidates import HardwareOption
from sizing.plan.cost import SAVINGS_PLAN_1Y_DISCOUNT, SCALE_UP_LEAD_S_GPU, SCALE_UP_LEAD_S_NEURON
from sizing.plan.serving import CONTEXT_PERCENTILE
from sizing.plan.state import Option, SearchState
from sizing.results import Architecture, NotCheaper
from sizing.workload.derived import WorkloadModel
from sizing.workload.spec import SLO

#: The summary names the SLO that excluded cheaper hardware when the answer costs at least this many times the
#: cheapest hardware option's cost bound.
MUCH_DEARER = 2.0


#: Cheaper excluded options listed in `why_not_cheaper`.
WHY_NOT_CHEAPER_SHOWN = 3


def assumptions(headroom: float, slo: SLO) -> dict[str, Any]:

    prof = load_profiles()
    return {
        "headroom": headroom if slo.confidence is None else None,
        "confidence": slo.confidence,
        "headroom_reasoning": f"fixed {headroom:.0%} load headroom"
        if slo.confidence is None
        else f"confidence {slo.confidence:g}: every SLO target holds at the {100 * slo.confidence:g}th percentile of"
        " the estimator's own cross-validated error for each architecture's family and engine (predicted"
        " latencies scaled up, capacity down; each architecture's headroom.reasoning states its factors) instead"
        " of a fixed load headroom",
        "calibration": {k: prof.get(k) for k in ("version", "date") if k in prof},
        "prices": "on-demand EC2/SageMaker prices per catalog entry (source and as-of in each architecture's cost.price)",
        "spot": "spot discounts per family, most assumed (see cost.price.spot_discount_assumed); the min_replicas base stays on-demand",
        "savings_plan_1y_discount": SAVINGS_PLAN_1Y_DISCOUNT,
        "scale_up_lead_s": {"gpu": SCALE_UP_LEAD_S_GPU, "neuron": SCALE_UP_LEAD_S_NEURON},
        "bedrock_latency": "assumed until measured (catalog latency profiles)",
        "arrivals": "Poisson within each hour; hourly rates from the traffic profile",
        "serving": f"each architecture's serving block is the deployment as estimated; max_model_len covers the"
        f" {CONTEXT_PERCENTILE} of input + output; runtime parameters searched per hardware option (tuning)",
    }


def region_block(s: SearchState) -> dict[str, Any]:
    c = s.wm.spec.constraints
    return {
        "code": c.region,
        "name": region_name(c.region),
        "data_residency": c.data_residency,
        "prices": "EC2 prices per Region from the price snapshot (catalog data/regions.yaml) where it covers the"
        " family, else the us-east-1 price marked assumed; SageMaker ml.* prices outside us-east-1 are derived"
        " from EC2 (assumed); Bedrock prices per offer (cost.price.region)",
        "unavailable_here": sorted(
            {r["id"].split("@")[0] for r in s.enum.rejected if r["id"].endswith(f"@{c.region}")}
        ),
        "nearest_region_with_hardware": s.enum.nearest_region,
    }


def infeasible(s: SearchState, feasible: list[Architecture]) -> dict[str, Any] | None:
    """Why nothing is feasible: no hardware in the Region, or the SLO that binds nearest."""
    if feasible:
        return None
    if s.enum.region_gap and not s.enum.hardware:
        return {
            "binding": None,
            "region": s.wm.spec.constraints.region,
            "nearest_region": s.enum.nearest_region,
            "message": s.enum.region_gap,
        }
    return _diagnose(s.wm, s.near)


def _diagnose(
    wm: WorkloadModel, near: list[tuple[HardwareOption | Option, dict[str, float]]]
) -> dict[str, Any]:
    """When nothing is feasible: which SLO binds, and what the closest candidate achieves."""
    if not near:
        return {"binding": None, "message": "no candidate fits the constraints (see rejected)"}
    counts: dict[str, int] = {}
    best: dict[str, tuple[float, str]] = {}
    for cand, closest in near:
        hw = cand.hw if isinstance(cand, Option) else cand
        label = f"{hw.instance_type} TP{hw.tensor_parallel} {hw.quantization}"
        for key, value in closest.items():
            counts[key] = counts.get(key, 0) + 1
            if key not in best or value < best[key][0]:
                best[key] = (value, label)
    binding = max(counts, key=lambda k: counts[k])
    value, where = best[binding]
    metric, pct = binding.split(".", 1)
    name, unit, _ = {"ttft_ms": ("TTFT", "ms", 1), "tpot_ms": ("TPOT", "ms", 1), "e2e_s": ("e2e", "s", 1)}[
        metric
    ]
    shown = f"{value:.2f} s" if unit == "s" else f"{value:.0f} ms"
    msg = f"best {name} {pct} is {shown} on {where}; relax {name} {pct} to {shown}"
    if metric in ("e2e_s",) and wm.output_tokens.mean > 1:
        limit = dict((p, v) for m, p, v in wm.slo.targets() if m == metric)[pct]
        ratio = limit / value
        cap = int(wm.output_tokens.percentile(pct if pct in ("p50", "p95", "p99") else "p95") * ratio)
        msg += f" or cap output at about {max(cap, 1)} tokens"
    return {"binding": binding, "closest": {"value": value, "on": where}, "message": msg}


def why_not_cheaper(
    feasible: list[Architecture], excluded: list[tuple[float, str, str]], wm: WorkloadModel
) -> tuple[list[NotCheaper], str | None]:
    """The cheaper hardware an SLO excluded, and a sentence when the answer is much dearer than it."""
    hosted = [a for a in feasible if a.deployment != "bedrock"]
    if not hosted or not excluded:
        return [], None
    best = hosted[0]
    cheaper = sorted(e for e in excluded if e[0] < best.ranked_usd_per_month)
    shown = [
        NotCheaper(option=o, usd_per_month=round(b, 2), reason=r)
        for b, o, r in cheaper[:WHY_NOT_CHEAPER_SHOWN]
    ]
    if not cheaper or best.ranked_usd_per_month < MUCH_DEARER * cheaper[0][0]:
        return shown, None
    bound, option, reason = cheaper[0]
    text = (
        f"The answer costs {best.ranked_usd_per_month / bound:.1f}x the cheapest hardware that fits in memory:"
        f" {option} (at least ${bound:,.0f}/month) misses {reason.split(' (')[0].split(' even')[0]}"
    )
    e2e = [(p, v) for m, p, v in wm.slo.targets() if m == "e2e_s"]
    if e2e and "e2e" in reason:
        pct, limit = e2e[0]
        out_tokens = wm.output_tokens.percentile(pct if pct in ("p50", "p95", "p99") else "p95")
        ttft_s = (best.predicted.ttft_ms.p50 or 0.0) / 1000
        if out_tokens > 1:
            need = max(limit - ttft_s, 0.0) / (out_tokens - 1) * 1000
            text += f"; TPOT ≤ {need:.0f} ms is needed for {out_tokens:,.0f} output tokens within {limit:g} s"
    return shown, text + "."
