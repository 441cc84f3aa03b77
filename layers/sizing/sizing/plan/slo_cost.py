"""The cost of each SLO: every target the spec states, relaxed one step alone (its bound doubled), and the cheapest
answer under each, beside the answer's cost; the target whose relaxation saves most is the one that binds, and the
summary says by how much and why (what the hardware needs for it before any queueing).

The answer itself meets every relaxed target (a looser bound), so the cheapest answer under a relaxation is never
dearer than the answer: relaxing a target never raises the cheapest cost."""

from __future__ import annotations

from collections.abc import Callable

from sizing.base.distributions import PERCENTILES
from sizing.perf.simulator import bounds
from sizing.plan.margin import UNITS
from sizing.plan.state import SearchState
from sizing.results import Architecture, EstimateResult, SloCost
from sizing.workload.spec import WorkloadSpec

#: One step of relaxation: the stated bound doubled (TTFT p99 150 -> 300 ms), each target alone.
RELAX_FACTOR = 2.0
#: A relaxation binds when it saves at least this share of the answer's monthly cost (below it, noise of the search).
BINDING_MIN_SAVING = 0.01

Rerun = Callable[[WorkloadSpec], EstimateResult]


def relaxed(spec: WorkloadSpec, metric: str, pct: str, factor: float = RELAX_FACTOR) -> WorkloadSpec:
    """`spec` with one target's bound multiplied by `factor`, every other as stated -- except a higher percentile
    of the same metric that the looser bound now exceeds, which is raised to it: bounds must not decrease from p50
    to p99 (a p50 of 1 ms with a p90 of 1 ms, the p50 relaxed to 2 ms, holds the p90 at 2 ms too)."""
    block = getattr(spec.slo, metric)
    bound = getattr(block, pct) * factor
    update = {pct: bound}
    for higher in PERCENTILES[PERCENTILES.index(pct) + 1 :]:
        value = getattr(block, higher)
        if value is not None and value < bound:
            update[higher] = bound
    loose = block.model_copy(update=update)
    return spec.model_copy(update={"slo": spec.slo.model_copy(update={metric: loose})})


def _fmt(metric: str, value: float) -> str:
    unit = UNITS[metric][1]
    if unit == "s":
        return f"{value:g} s"
    return f"{value / 1000:g} s" if value >= 1000 else f"{value:g} ms"


def _usd(x: float | None) -> str:
    return "none" if x is None else f"${x:,.0f}"


def slo_costs(spec: WorkloadSpec, answer: Architecture | None, rerun: Rerun) -> list[SloCost]:
    """Each stated target relaxed one step alone, the cheapest answer under it and the dollar difference; the
    target saving most is marked `binding`."""
    base = answer.ranked_usd_per_month if answer is not None else None
    out: list[SloCost] = []
    for metric, pct, limit in spec.slo.stated_targets():
        result = rerun(relaxed(spec, metric, pct))
        best = result.architectures[0] if result.architectures else None
        cost = best.ranked_usd_per_month if best is not None else None
        # the answer meets the looser target too: it bounds the cheapest answer under the relaxation
        if base is not None and (cost is None or cost > base):
            best, cost = answer, base
        loose = limit * RELAX_FACTOR
        name = f"{UNITS[metric][0]} {pct}"
        out.append(
            SloCost(
                target=f"{metric}.{pct}",
                name=name,
                limit=limit,
                relaxed_limit=loose,
                usd_per_month=None if base is None else round(base, 2),
                relaxed_usd_per_month=None if cost is None else round(cost, 2),
                saving_usd_per_month=None if base is None or cost is None else round(base - cost, 2),
                relaxed_answer=best.id if best is not None else None,
                line=f"{name} {_fmt(metric, limit)} → {_fmt(metric, loose)}: {_usd(base)} → {_usd(cost)}/month",
            )
        )
    savings = [(c.saving_usd_per_month or 0.0, i) for i, c in enumerate(out)]
    if out and base:
        top, i = max(savings)
        if top >= BINDING_MIN_SAVING * base:
            out[i] = out[i].model_copy(update={"binding": True})
    return out


def binding_sentence(s: SearchState, answer: Architecture | None, costs: list[SloCost]) -> str | None:
    """The target that binds, by how much and why: `TTFT p99 <= 150 ms binds: relaxed to 300 ms the answer costs
    $96,033/month instead of $784,350; the answer predicts 142 ms, 5% under it. TTFT p99 is prefill of
    11,000-token prompts: 140 ms on p5.48xlarge (TP8) before any queueing.`"""
    bound = next((c for c in costs if c.binding), None)
    if bound is None or answer is None:
        return None
    metric, pct = bound.target.split(".", 1)
    text = (
        f"{bound.name} <= {_fmt(metric, bound.limit)} binds: relaxed to {_fmt(metric, bound.relaxed_limit)} the"
        f" cheapest answer costs {_usd(bound.relaxed_usd_per_month)}/month instead of {_usd(bound.usd_per_month)}"
    )
    shown = getattr(answer.predicted, metric)
    value = getattr(shown, pct, None) or shown.p99 or shown.p95
    if value is not None:
        margin = (bound.limit - value) / bound.limit
        shown_value = round(value, 2 if metric == "e2e_s" else 1)
        text += f"; the answer predicts {_fmt(metric, shown_value)}, {margin:.0%} under it"
    why = _why(s, answer, metric, pct)
    return text + "." + (f" {why}." if why else "")


def _why(s: SearchState, answer: Architecture, metric: str, pct: str) -> str | None:
    """What the answer's hardware needs for the target before any queueing (the roofline of one request)."""
    opt = next(
        (
            o
            for o in s.options
            if o.hw.instance_type == answer.instance_type
            and o.hw.tensor_parallel == answer.tensor_parallel
            and o.hw.quantization == answer.quantization
            and o.hw.engine == answer.engine
        ),
        None,
    )
    if opt is None or answer.instance_type is None:
        return None
    wm = s.wm
    q = pct if pct in ("p50", "p95", "p99") else "p95"
    inp, outp = wm.input_tokens.percentile(q), wm.output_tokens.percentile(q)
    b = bounds(opt.replica.step, inp, outp, wm.shared_prefix_tokens)
    where = f"{answer.instance_type} (TP{answer.tensor_parallel} {answer.quantization})"
    if metric == "ttft_ms":
        return (
            f"TTFT {pct} is prefill of {inp:,.0f}-token prompts: {b.min_ttft_s * 1000:,.0f} ms on {where} before"
            " any queueing"
        )
    if metric == "tpot_ms":
        return (
            f"TPOT {pct} is one decode step over a {inp + outp / 2:,.0f}-token context: {b.min_tpot_s * 1000:.1f} ms"
            f" on {where} alone, more as the batch grows"
        )
    e2e = b.min_ttft_s + b.min_tpot_s * max(outp - 1, 0)
    return (
        f"e2e {pct} is prefill plus {outp:,.0f} output tokens one after another: {e2e:.2f} s on {where} before any"
        " queueing"
    )
