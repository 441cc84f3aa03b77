"""Latency-against-throughput curves of the top candidates, predicted by the continuous-batching simulator.

The planner keeps only the operating point of each architecture; a reader also wants to see how far that point
is from the knee. One replica is simulated at a ladder of Poisson rates around its SLO capacity; EKS and SageMaker
architectures on the same hardware share one curve."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sizing.workload import TokenDistribution, WorkloadModel

#: Distinct hardware configurations given a curve (the report's charts stay readable with four lines).
CURVE_CANDIDATES = 4
#: Offered rates as fractions of the replica's SLO capacity (`per_replica.rps_slo_limit`): from light load,
#: through the capacity, to clearly past it so the knee shows.
RATE_FRACTIONS = (0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.15, 1.3, 1.5)
#: Requests per simulated point: p95 rests on 25 requests beyond it -- enough for a curve's shape; the ranked
#: table's figures come from the planner's longer runs. Keeps a report's curves around half a second.
CURVE_REQUESTS = 500
METRICS = ("ttft_ms", "tpot_ms", "e2e_s")
PERCENTILES = ("p50", "p90", "p95", "p99")


@dataclass
class CurvePoint:
    offered_rps: float
    requests_per_s: float
    #: metric -> percentile -> value (ms for ttft/tpot, s for e2e)
    latency: dict[str, dict[str, float]]


@dataclass
class Curve:
    """Predicted latency against throughput of one replica of one hardware configuration."""

    key: str
    label: str
    architecture_ids: list[str]
    points: list[CurvePoint] = field(default_factory=list)


def token_distribution(block: dict[str, Any]) -> TokenDistribution:
    """Rebuild a token distribution from the result's `workload.input_tokens` (or output) block."""
    kind = block.get("kind")
    mean = float(block["mean"])
    if kind == "lognormal" and block.get("sigma") is not None and block.get("mu") is not None:
        return TokenDistribution("lognormal", mean, float(block["mu"]), float(block["sigma"]))
    if kind == "fixed" or block.get("p95") is None or float(block["p95"]) <= mean:
        return TokenDistribution.fixed(max(1, round(mean)))
    # empirical samples are not in the result: a lognormal through the same mean and p95 stands in for them
    return TokenDistribution.from_mean_p95(mean, float(block["p95"]))


def hardware_key(arch: dict[str, Any]) -> str | None:
    """What the performance model depends on: accelerator, tensor parallelism, quantization and engine (g6e.xlarge
    and g6e.8xlarge both hold one L40S: one curve). None for per-token services and incomplete entries."""
    if not all(arch.get(k) for k in ("instance_type", "tensor_parallel", "quantization", "engine")):
        return None
    device = arch.get("accelerator") or arch["instance_type"]
    return f"{device}:tp{arch['tensor_parallel']}:{arch['quantization']}:{arch['engine']}"


def hardware_label(arch: dict[str, Any]) -> str:
    return f"{arch['instance_type']} TP{arch['tensor_parallel']} {arch['quantization']} {arch['engine']}"


def pick_candidates(
    result: dict[str, Any], limit: int = CURVE_CANDIDATES, always: list[str] | None = None
) -> list[tuple[dict[str, Any], list[str]]]:
    """The best-ranked architecture of each of the first `limit` distinct hardware configurations (with the ids
    of every architecture sharing that hardware), plus any in `always` (measured candidates get their predicted
    curve whatever their rank)."""
    chosen: dict[str, dict[str, Any]] = {}
    ids: dict[str, list[str]] = {}
    wanted = set(always or [])
    for a in result.get("architectures") or []:
        key = hardware_key(a)
        if key is None:
            continue
        if key in chosen:
            ids[key].append(a["id"])
            continue
        if len(chosen) < limit or a["id"] in wanted:
            chosen[key] = a
            ids[key] = [a["id"]]
    return [(a, ids[key]) for key, a in chosen.items()]


def _summary(sim: Any) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for m in METRICS:
        stats = getattr(sim, m)
        out[m] = {q: float(getattr(stats, q)) for q in PERCENTILES}
    return out


def latency_curves(
    result: dict[str, Any],
    workload: WorkloadModel | None = None,
    *,
    limit: int = CURVE_CANDIDATES,
    always: list[str] | None = None,
    n_requests: int = CURVE_REQUESTS,
    seed: int = 0,
) -> list[Curve]:
    """Simulated curves for the top distinct hardware configurations of `result` (none for Bedrock)."""
    from sizing.errors import SizingError
    from sizing.perf.config import HardwareConfig
    from sizing.perf.simulator import OpenLoop, simulate
    from sizing.perf.step import StepModel

    w = result.get("workload") or {}
    if workload is not None:
        in_dist, out_dist = workload.input_tokens, workload.output_tokens
    else:
        try:
            in_dist, out_dist = token_distribution(w["input_tokens"]), token_distribution(w["output_tokens"])
        except (KeyError, TypeError, ValueError, AttributeError):
            return []  # no usable token distributions: no predicted curve (measured points still show)
    curves: list[Curve] = []
    for a, ids in pick_candidates(result, limit, always):
        slo_rps = (a.get("per_replica") or {}).get("rps_slo_limit")
        limit_rps = float(slo_rps) if isinstance(slo_rps, int | float) else 0.0
        if limit_rps <= 0:
            continue
        model = a.get("model") or w.get("model")
        try:
            cfg = HardwareConfig(
                model, a["instance_type"], a["tensor_parallel"], a["quantization"], a["engine"]
            )
            step = StepModel.for_config(cfg)
        except (SizingError, ValueError, KeyError, TypeError):
            continue  # a hardware entry the catalog or the perf model cannot build: no curve for it
        curve = Curve(hardware_key(a) or a["id"], hardware_label(a), ids)
        for f in RATE_FRACTIONS:
            rate = limit_rps * f
            sim = simulate(step, OpenLoop(rate), in_dist, out_dist, n_requests=n_requests, seed=seed)
            if not math.isfinite(sim.requests_per_s):
                continue
            curve.points.append(CurvePoint(rate, float(sim.requests_per_s), _summary(sim)))
        curves.append(curve)
    return curves
