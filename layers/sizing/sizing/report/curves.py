"""Latency-against-load curves of the top candidates, from the very simulations the ranked table reports.

The planner keeps only the operating point of each architecture; a reader also wants to see how far that point
is from the knee. Each curve is one replica simulated by `sizing.plan.capacity.predict_at` -- the planner's own
call, so the same request count, the same seed and the same memo -- on the architecture's serving configuration
(`serving`), at a ladder of offered Poisson rates that includes exactly the operating point
(`per_replica.rps_at_peak`) and the SLO capacity (`per_replica.rps_slo_limit`). The star a chart draws at the
operating point is therefore a point of its curve, and the capacity line is where that curve crosses the SLO.

Every point is placed at its *offered* rate (what the planner sizes by; past saturation a replica serves less
than it is offered, and a served-rate axis would fold the curve back on itself). Architectures with the same
hardware and serving configuration (EKS and SageMaker, instance sizes of one family) share one curve."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any

from sizing.base.distributions import TokenDistribution
from sizing.base.errors import SizingError
from sizing.perf.config import HardwareConfig
from sizing.perf.step import StepModel
from sizing.results import Architecture, EstimateResult, Percentiles, Predicted
from sizing.results.blocks import TokenSummary
from sizing.workload.derived import WorkloadModel, build_model
from sizing.workload.parse import parse_spec

#: Distinct hardware configurations given a curve (the report's charts stay readable with four lines).
CURVE_CANDIDATES = 4
#: Offered rates as fractions of the replica's SLO capacity (`per_replica.rps_slo_limit`): from light load,
#: through the capacity (1.0: the table's capacity itself is a point of the curve), to clearly past it so the
#: knee shows. The operating point's own rate is added to these.
RATE_FRACTIONS = (0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.15, 1.3, 1.5)
#: Further fractions simulated, in order, only while every SLO target still holds at the last rate: the curve
#: must reach the SLO for the capacity line to sit on its crossing. 3x is beyond any capacity the planner's
#: 1000-request check can have passed where its 500-request search failed.
EXTRA_FRACTIONS = (1.75, 2.0, 2.5, 3.0)
METRICS = ("ttft_ms", "tpot_ms", "e2e_s")
PERCENTILES = ("p50", "p90", "p95", "p99")
#: Half the last digit the planner keeps of a predicted figure (`plan.search`: ms to 0.1, seconds to 0.001): a
#: simulation "reproduces the table" when each figure is within this of the table's.
TABLE_ROUNDING = {"ttft_ms": 0.05, "tpot_ms": 0.05, "e2e_s": 0.0005}
#: Seed of the planner's simulations when the result does not record one (`sizing.plan.search.estimate`).
DEFAULT_SEED = 0


@dataclass
class CurvePoint:
    offered_rps: float
    requests_per_s: float
    #: metric -> percentile -> value (ms for ttft/tpot, s for e2e)
    latency: dict[str, dict[str, float]]

    def value(self, metric: str, q: str) -> float | None:
        v = (self.latency.get(metric) or {}).get(q)
        return v if v is not None and math.isfinite(v) else None


@dataclass
class Curve:
    """Predicted latency against offered load of one replica of one hardware and serving configuration."""

    key: str
    label: str
    architecture_ids: list[str]
    points: list[CurvePoint] = field(default_factory=list)
    #: the operating point of the curve's first architecture (its busiest hour): one of `points`
    operating: CurvePoint | None = None
    #: the SLO capacity the planner reported for that architecture (`per_replica.rps_slo_limit`)
    slo_limit_rps: float | None = None
    #: the simulation at the operating point gives the ranked table's figures (False: the result lacked what
    #: the planner simulated exactly -- its workload or its exact rates -- and the curve is re-simulated from
    #: the result's rounded figures)
    matches_table: bool = False

    def value_at(self, metric: str, q: str, x: float) -> float | None:
        """The curve's `metric` `q` at offered rate `x`, linear between its points; None outside them."""
        pts = [(p.offered_rps, p.value(metric, q)) for p in self.points]
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            if y0 is None or y1 is None or not x0 <= x <= x1:
                continue
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        return None

    def crossing(self, metric: str, q: str, limit: float) -> float | None:
        """The offered rate at which the curve reaches `limit`: linear between the last point that meets it and
        the first that misses it. None when no point misses it, or the first point already does."""
        last: tuple[float, float] | None = None
        for p in self.points:
            y = p.value(metric, q)
            if y is None:
                continue
            if y > limit:
                if last is None:
                    return None
                (x0, y0), x1 = last, p.offered_rps
                return x0 + (limit - y0) * (x1 - x0) / (y - y0)
            last = (p.offered_rps, y)
        return None

    def capacity(self, targets: list[tuple[str, str, float]]) -> tuple[float, str, str] | None:
        """(rate, metric, percentile) of the first SLO target the curve crosses as load rises: its capacity under
        every target. None when it crosses none of them."""
        found = [(x, m, q) for m, q, limit in targets if (x := self.crossing(m, q, limit)) is not None]
        return min(found) if found else None


def block_distribution(block: TokenSummary) -> TokenDistribution:
    """Rebuild a token distribution from the result's `workload.input_tokens` (or output) block: a lognormal
    through its mean and p95 (how most specs state it, and both are kept, so this is then the spec's own), else a
    fixed length. TypeError when the block states no mean."""
    if block.mean is None:
        raise TypeError("the token block states no mean")
    mean = float(block.mean)
    if block.kind == "fixed" or block.p95 is None or float(block.p95) <= mean:
        return TokenDistribution.fixed(max(1, round(mean)))
    # empirical samples are not in the result: a lognormal through the same mean and p95 stands in for them
    return TokenDistribution.from_mean_p95(mean, float(block.p95))


def serving_signature(arch: Architecture) -> str:
    """The architecture's serving settings as a stable string ('' when it states none)."""
    if arch.serving is None:
        return ""
    s = arch.serving.model_dump(mode="json")
    return json.dumps({k: v for k, v in s.items() if v is not None}, sort_keys=True, default=str)


def hardware_key(arch: Architecture) -> str | None:
    """What the performance model depends on: accelerator, tensor parallelism, quantization, engine and the
    serving settings (g6e.xlarge and g6e.8xlarge both hold one L40S: one curve). None for per-token services and
    incomplete entries."""
    if not (arch.instance_type and arch.tensor_parallel and arch.quantization and arch.engine):
        return None
    device = arch.accelerator or arch.instance_type
    key = f"{device}:tp{arch.tensor_parallel}:{arch.quantization}:{arch.engine}"
    sig = serving_signature(arch)
    return f"{key}:{sig}" if sig else key


def hardware_label(arch: Architecture) -> str:
    return f"{arch.instance_type} TP{arch.tensor_parallel} {arch.quantization} {arch.engine}"


def pick_candidates(
    result: EstimateResult, limit: int = CURVE_CANDIDATES, always: list[str] | None = None
) -> list[tuple[Architecture, list[str]]]:
    """The best-ranked architecture of each of the first `limit` distinct hardware configurations (with the ids
    of every architecture sharing that hardware), plus any in `always` (measured candidates get their predicted
    curve whatever their rank)."""
    chosen: dict[str, Architecture] = {}
    ids: dict[str, list[str]] = {}
    wanted = set(always or [])
    for a in result.architectures:
        key = hardware_key(a)
        if key is None:
            continue
        if key in chosen:
            ids[key].append(a.id)
            continue
        if len(chosen) < limit or a.id in wanted:
            chosen[key] = a
            ids[key] = [a.id]
    return [(a, ids[key]) for key, a in chosen.items()]


def step_model(arch: Architecture, model_id: str | None) -> Any:
    """The replica the planner simulated for `arch`: its full serving configuration on its instance type
    (`HardwareConfig.from_serving`); for an older result whose `serving` block was partial (read as unknown:
    `sizing.upgrade`), the hardware alone with the engine's defaults, as the planner then built it. Raises
    SizingError/ValueError/KeyError/TypeError when neither can be built."""
    if arch.instance_type is None or arch.tensor_parallel is None or arch.quantization is None:
        raise TypeError(f"{arch.id} states no hardware to simulate")
    if arch.serving is not None:
        cfg = HardwareConfig.from_serving(arch.serving, arch.instance_type)
    else:
        model = str(arch.catalog_model or arch.model or model_id)
        cfg = HardwareConfig(model, arch.instance_type, arch.tensor_parallel, arch.quantization, arch.engine)
    return StepModel.for_config(cfg)


def _summary(sim: Any) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for m in METRICS:
        stats = getattr(sim, m)
        out[m] = {q: float(getattr(stats, q)) for q in PERCENTILES}
    return out


def reproduces(sim: Any, predicted: Predicted) -> bool:
    """The simulation gives the table's predicted figures (each within the table's rounding)."""
    checked = 0
    for m, tol in TABLE_ROUNDING.items():
        block: Percentiles = getattr(predicted, m)
        for q in ("p50", "p95", "p99"):
            v: float | None = getattr(block, q)
            if v is None:
                continue
            got = float(getattr(getattr(sim, m), q))
            if not math.isfinite(got) or abs(got - float(v)) > tol + 1e-9:
                return False
            checked += 1
    return checked > 0


def rebuilt_workload(result: EstimateResult) -> WorkloadModel | None:
    """The WorkloadModel the result's workload block describes, for a report rendered from the JSON alone (its
    token shapes and peak rate are kept rounded there); None when the block is unusable."""
    w = result.workload
    if w.input_tokens is None or w.output_tokens is None or w.peak_rps is None:
        return None
    try:
        ins, outs = block_distribution(w.input_tokens), block_distribution(w.output_tokens)
        model = w.model or "model"
        base = parse_spec(
            {
                "name": w.name or "report",
                "model": model,
                "rate": {"peak_rps": float(w.peak_rps)},
                "tokens": {"input": {"fixed": 1}, "output": {"fixed": 1}},
                "slo": w.slo.model_dump(exclude_none=True) if w.slo is not None else {},
            }
        )
    except (TypeError, ValueError, SizingError):
        return None
    wm = build_model(base, model)
    extra: dict[str, Any] = {}
    prefix = w.shared_prefix_tokens
    if (
        isinstance(prefix, int)
        and prefix > 0
        and "shared_prefix_tokens" in {f.name for f in dataclasses.fields(wm)}
    ):
        extra["shared_prefix_tokens"] = prefix
    return dataclasses.replace(wm, input_tokens=ins, output_tokens=outs, **extra)


def _rates_to_try(arch: Architecture, wm: WorkloadModel, exact: bool) -> list[float]:
    """The operating point's rate as the planner computed it (the exact workload's peak rate / replicas at peak,
    unrounded), then as the result rounds it (all a rebuilt workload has)."""
    out: list[float] = []
    peak_replicas = arch.replicas.peak if arch.replicas is not None else None
    if exact and peak_replicas is not None and peak_replicas > 0:
        out.append(wm.peak_rps / peak_replicas)
    at_peak = arch.per_replica.rps_at_peak if arch.per_replica is not None else None
    if at_peak is not None and at_peak > 0 and float(at_peak) not in out:
        out.append(float(at_peak))
    return out


def _misses(point: CurvePoint, targets: list[tuple[str, str, float]]) -> bool:
    return any((v := point.value(m, q)) is not None and v > limit for m, q, limit in targets)


def latency_curves(
    result: EstimateResult,
    workload: WorkloadModel | None = None,
    *,
    limit: int = CURVE_CANDIDATES,
    always: list[str] | None = None,
    seed: int | None = None,
) -> list[Curve]:
    """Simulated curves for the top distinct hardware configurations of `result` (none for Bedrock).

    `workload`: the WorkloadModel the planner sized (exact token shapes and rates); without it the workload is
    rebuilt from the result's block. `seed`: the planner's (the result's `search.seed`, else 0)."""
    from sizing.plan.capacity import predict_at

    if seed is None:
        recorded = result.search.seed if result.search is not None else None
        seed = recorded if recorded is not None else DEFAULT_SEED
    exact = workload is not None
    wm = workload if workload is not None else rebuilt_workload(result)
    if wm is None:
        return []  # no usable token distributions: no predicted curve (measured points still show)
    targets = list(wm.slo.targets())
    model_id = result.workload.model
    curves: list[Curve] = []
    for a, ids in pick_candidates(result, limit, always):
        limit_rps = float(a.per_replica.rps_slo_limit) if a.per_replica is not None else 0.0
        if limit_rps <= 0:
            continue
        try:
            step = step_model(a, model_id)
        except (SizingError, ValueError, KeyError, TypeError):
            continue  # a hardware entry the catalog or the perf model cannot build: no curve for it
        # the operating rate whose simulation is the table's (the planner's memo has it); else the table's rate
        rates_tried = _rates_to_try(a, wm, exact)
        operating = rates_tried[0] if rates_tried else None
        matched = False
        for rate in rates_tried:
            if reproduces(predict_at(step, wm, rate, seed), a.predicted):
                operating, matched = rate, True
                break
        if not matched and len(rates_tried) > 1:
            operating = rates_tried[-1]  # the table's own rounded rate: the star's x is the table's figure
        curve = Curve(hardware_key(a) or a.id, hardware_label(a), ids, slo_limit_rps=limit_rps)
        curve.matches_table = matched
        for rate in sorted({limit_rps * f for f in RATE_FRACTIONS} | ({operating} if operating else set())):
            _add_point(curve, step, wm, rate, seed)
        for f in EXTRA_FRACTIONS:
            if not curve.points or _misses(curve.points[-1], targets):
                break
            _add_point(curve, step, wm, limit_rps * f, seed)
        curve.operating = next((p for p in curve.points if p.offered_rps == operating), None)
        curves.append(curve)
    return curves


def _add_point(curve: Curve, step: Any, wm: WorkloadModel, rate: float, seed: int) -> None:
    from sizing.plan.capacity import predict_at

    sim = predict_at(step, wm, rate, seed)
    if math.isfinite(sim.requests_per_s):
        curve.points.append(CurvePoint(rate, float(sim.requests_per_s), _summary(sim)))
