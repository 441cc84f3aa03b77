"""One rendering of every answer: the typed rows the table (`sizing estimate`), the HTML report, Slack and the JSON
(`rows`) all read, built once from an estimate or run result.

A row states what a buyer must not miss about an architecture, in the same words everywhere: its kind (a real-time
endpoint, a batch job, an asynchronous job), its tier (Bedrock's service tier, or on-demand/spot capacity), the
quotas to raise before it can serve the peak (Bedrock tokens per minute, the EC2 On-Demand vCPU quota), the Region
it runs in and whether the hardware is known to be sold there, what its figures rest on (estimated, calibrated,
measured, or simulated by a local twin), and the figures that apply to its kind (a batch job has no requests in
flight at a steady rate, and states a job's wall time rather than a request's latency).

`AnswerRow.qualifiers` is the list of phrases every output carries for the row; a test renders every example in
every output and checks each carries them."""

from __future__ import annotations

from typing import Any, Literal

from sizing.base.errors import SizingError
from sizing.base.vocabulary import TWIN
from sizing.catalog import load_catalog
from sizing.results import (
    AnswerRow,
    Architecture,
    Availability,
    EstimateResult,
    Figures,
    Kind,
    Measured,
    Percentiles,
    Predicted,
    QuotaNote,
    RowBasis,
)
from sizing.results.blocks import RegionInfo
from sizing.workload.spec import PercentileBounds

DEPLOYMENT_NAMES = {"eks": "EKS", "sagemaker": "SageMaker", "bedrock": "Bedrock"}
#: The Region whose prices stand in where the price snapshot has none for a Region (`InstanceType.price`).
PRICE_FALLBACK_REGION = "us-east-1"

#: EC2 On-Demand vCPU quotas by instance family prefix (Service Quotas, service `ec2`): name and code. An EKS
#: architecture's nodes count against the quota of their family in the Region, in vCPUs.
#: Source: AWS EC2 User Guide, "On-Demand Instance quotas" (docs.aws.amazon.com/ec2/latest/instancetypes/
#: ec2-instance-quotas.html) for the names; codes as Service Quotas lists them.
EC2_VCPU_QUOTAS: dict[str, tuple[str, str | None]] = {
    "g": ("Running On-Demand G and VT instances", "L-DB2E81BA"),
    "p": ("Running On-Demand P instances", "L-417A185B"),
    "inf": ("Running On-Demand Inf instances", None),
    "trn": ("Running On-Demand Trn instances", None),
}
EC2_STANDARD_QUOTA = ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "L-1216C47A")
#: The vCPUs a new account has of the accelerated families' quotas (G and VT, P, Inf, Trn): 0, and 5 of Standard.
#: Source: AWS EC2 User Guide, "Spot Instance quotas" (docs.aws.amazon.com/AWSEC2/latest/UserGuide/
#: using-spot-limits.html), whose table lists these defaults; On-Demand quotas are set per account and start at
#: the same values on a new one, so the buyer is told what to check rather than that it is surely short.
EC2_DEFAULT_VCPUS_ACCELERATED = 0
EC2_DEFAULT_VCPUS_STANDARD = 5
EC2_QUOTA_SOURCE = (
    "AWS EC2 User Guide, On-Demand Instance quotas and Spot Instance quotas (defaults: 0 vCPUs for G and VT, P,"
    " Inf and Trn; 5 for Standard); your account's value is in Service Quotas > Amazon EC2"
)


def _bedrock_mode(a: Architecture) -> str | None:
    return a.bedrock.mode if a.bedrock is not None else None


def kind_of(a: Architecture) -> Kind:
    """A Bedrock batch inference offer is a batch job; a SageMaker asynchronous inference endpoint draining the day's
    requests (`:async`, or a batch block with instances) an async job; anything else serves requests as they come.
    The answer states it (`invocation`); an older result says it by its blocks."""
    if a.invocation == "batch":
        return "batch job"
    if a.invocation == "async":
        return "async job"
    if a.deployment == "bedrock" and _bedrock_mode(a) == "batch":
        return "batch job"
    if a.deployment == "sagemaker" and (
        a.id.endswith(":async") or (a.batch is not None and a.batch.instances)
    ):
        return "async job"
    return "real-time"


BEDROCK_TIER_NAMES = {
    "standard": "Standard tier",
    "priority": "Priority tier",
    "flex": "Flex tier",
    "reserved": "Reserved tier",
    "provisioned": "provisioned throughput",
}


def tier_of(a: Architecture) -> str:
    if a.deployment == "bedrock":
        if _bedrock_mode(a) == "batch":
            return "batch"
        tier = a.service_tier or "standard"
        return BEDROCK_TIER_NAMES.get(tier, f"{tier} tier")
    return str(a.capacity_type or "on-demand")


def _has_figures(measured: Measured | None) -> bool:
    return measured is not None and any(
        p is not None for p in (measured.ttft_ms, measured.tpot_ms, measured.e2e_s)
    )


def basis_of(a: Architecture, twin_run: bool = False) -> RowBasis:
    """Load-test figures are measured on a real endpoint and simulated on a local twin (the run's own word when
    the figures name no origin: `twin_run`); otherwise the estimate's basis."""
    measured = a.measured
    if measured is not None and _has_figures(measured):
        if measured.origin == TWIN:
            return "simulated (twin)"
        if measured.origin is None and (twin_run or TWIN in (measured.how or "").lower()):
            return "simulated (twin)"
        return "measured"
    if a.basis == "measured":
        return "measured"
    if a.basis == "calibrated":
        return "calibrated"
    return "estimated"


def availability_of(a: Architecture, region: str | None) -> tuple[Availability, str | None]:
    """Whether the hardware is known to be sold in the row's Region, and the Region its price is from when that is
    another. The planner says so (`availability`, `price_region`); an older result says only that its price was
    assumed, which outside the price snapshot means the us-east-1 price stood in."""
    if a.availability is not None:
        return a.availability, a.price_region
    if a.deployment == "bedrock" or not region or region == PRICE_FALLBACK_REGION:
        return "sold here", None
    price = a.cost.price
    source = (price.source if price is not None else None) or ""
    if price is not None and price.assumed and "/ us-east-1 =" not in source:
        return "unknown", PRICE_FALLBACK_REGION
    return "sold here", None


def ec2_quota(a: Architecture, region: str | None) -> QuotaNote | None:
    """The EC2 On-Demand vCPU quota an EKS architecture's peak nodes need (spot draws on the Spot quotas, named
    the same way)."""
    if a.deployment != "eks" or not a.instance_type:
        return None
    try:
        it = load_catalog().instance(a.instance_type)
    except (SizingError, KeyError, AttributeError):
        return None
    nodes = (a.instances.peak if a.instances else None) or (a.replicas.peak if a.replicas else None)
    if not nodes:
        return None
    vcpus = int(nodes) * it.vcpu
    family = it.family
    prefix = next((p for p in sorted(EC2_VCPU_QUOTAS, key=len, reverse=True) if family.startswith(p)), None)
    name, code = EC2_VCPU_QUOTAS[prefix] if prefix else EC2_STANDARD_QUOTA
    default = EC2_DEFAULT_VCPUS_ACCELERATED if prefix else EC2_DEFAULT_VCPUS_STANDARD
    if vcpus <= default:
        return None
    if a.capacity_type == "spot":
        name = name.replace("Running On-Demand", "All").replace(" instances", " Spot Instance Requests")
        code = None
    where = f" in {region}" if region else ""
    return QuotaNote(
        service="ec2",
        message=f"needs EC2 quota '{name}' of {vcpus:,} vCPUs{where} ({nodes} x {it.instance_type})",
        request=f"Service Quotas > Amazon EC2 > '{name}'{f' ({code})' if code else ''}{where}: at least {vcpus:,}"
        f" vCPUs (a new account has {default})",
        source=EC2_QUOTA_SOURCE,
    )


def bedrock_quota(a: Architecture) -> QuotaNote | None:
    quota = a.quota
    if quota is None or not quota.needs_increase or not quota.message:
        return None
    return QuotaNote(
        service="bedrock",
        message=f"Bedrock {quota.message}",
        request=quota.request,
        source=quota.source,
    )


def _percentiles(result: EstimateResult) -> dict[str, str]:
    """The percentile each metric's SLO bounds (the highest when several), p95 where none."""
    out = {"ttft_ms": "p95", "tpot_ms": "p95", "e2e_s": "p95"}
    slo = result.workload.slo
    if slo is None:
        return out
    stated = {metric: bounds for metric in out if (bounds := getattr(slo, metric)) is not None}
    if slo.deadline_s is not None and not stated:
        out["e2e_s"] = "p99"  # a deadline alone: a job's requests are sized at e2e p99 (`SLO.targets`)
    for metric, bounds in stated.items():
        if isinstance(bounds, PercentileBounds):
            pcts = [p for p, _ in bounds.items() if p in ("p50", "p95", "p99")]
            if pcts:
                out[metric] = max(pcts, key=lambda p: float(p[1:]))
    return out


def _pct(p: Percentiles | None, which: str) -> float | None:
    return None if p is None else getattr(p, which, None)


def figures_of(a: Architecture, kind: Kind, pcts: dict[str, str]) -> Figures:
    shown: Measured | Predicted = (
        a.measured if a.measured is not None and a.measured.e2e_s is not None else a.predicted
    )
    cost, reps, inst, per, batch = a.cost, a.replicas, a.instances, a.per_replica, a.batch
    job = batch is not None or kind != "real-time"
    in_flight = None
    if per is not None:
        in_flight = per.in_flight if per.in_flight is not None else per.max_concurrency
    return Figures(
        percentiles=pcts,
        ttft_ms=_pct(shown.ttft_ms, pcts["ttft_ms"]),
        tpot_ms=_pct(shown.tpot_ms, pcts["tpot_ms"]),
        e2e_s=_pct(shown.e2e_s, pcts["e2e_s"]),
        in_flight=None if job or not a.instance_type else in_flight,
        capacity_rps=per.rps_slo_limit if per is not None and a.instance_type else None,
        replicas_min=reps.min if reps else None,
        replicas_peak=reps.peak if reps else None,
        instances_peak=inst.peak if inst else None,
        usd_per_month=cost.usd_per_month,
        usd_per_month_spot=cost.usd_per_month_spot,
        usd_per_million_output_tokens=cost.usd_per_million_output_tokens,
        usd_per_job=batch.usd_per_job if batch else None,
        job_wall_time_h=batch.wall_time_h if batch else None,
    )


def answer_row(a: Architecture, result: EstimateResult, *, twin_run: bool = False) -> AnswerRow:
    """The row of one architecture of `result`; `twin_run`: the result is a run's that load-tested local twins
    (`sizing.upgrade.twin_run` of its JSON)."""
    region = a.region or (result.region.code if result.region is not None else None)
    kind = kind_of(a)
    availability, price_region = availability_of(a, region)
    quotas = [q for q in (bedrock_quota(a), ec2_quota(a, region)) if q is not None]
    if a.deployment == "bedrock":
        where = a.bedrock.model_id if a.bedrock is not None and a.bedrock.model_id else a.id.split(":", 1)[-1]
        config = "per-token"
    else:
        where = a.instance_type or a.id
        parts = [f"TP{a.tensor_parallel}" if a.tensor_parallel else "", a.quantization, a.engine]
        config = " ".join(str(p) for p in parts if p)
    return AnswerRow(
        rank=a.rank,
        id=a.id,
        deployment=DEPLOYMENT_NAMES.get(str(a.deployment), str(a.deployment)),
        where=where,
        config=config,
        kind=kind,
        tier=tier_of(a),
        quotas=quotas,
        region=region,
        availability=availability,
        price_region=price_region,
        basis=basis_of(a, twin_run),
        meets_slo=a.meets_slo,
        figures=figures_of(a, kind, _percentiles(result)),
    )


def answer_rows(
    result: EstimateResult,
    key: Literal["architectures", "managed_options"] = "architectures",
    *,
    twin_run: bool = False,
) -> list[AnswerRow]:
    """The rows of a result's ranked architectures, in rank order (or of its `managed_options`)."""
    archs = result.architectures if key == "architectures" else result.managed_options
    return [answer_row(a, result, twin_run=twin_run) for a in archs]


def with_rows(result: EstimateResult) -> dict[str, Any]:
    """The result's JSON (`document()`) with its rows (`rows`, one per ranked architecture, in rank order): what the
    JSON outputs print, so a reader of the JSON sees the qualifiers the table, the report and Slack show."""
    return {**result.document(), "rows": [r.model_dump(mode="json") for r in answer_rows(result)]}


def region_line(result: EstimateResult) -> str | None:
    """`Region us-east-1 (US East (N. Virginia)); data residency: geography`: what the report's header says."""
    return region_text(result.region)


def region_text(reg: RegionInfo | None) -> str | None:
    """The line `region_line` says, of an estimate's `region` block."""
    if reg is None or not reg.code:
        return None
    name = f" ({reg.name})" if reg.name else ""
    residency = reg.data_residency or "none stated"
    return f"Region {reg.code}{name}; data residency: {residency}"


__all__ = [
    "AnswerRow",
    "Figures",
    "QuotaNote",
    "answer_row",
    "answer_rows",
    "region_line",
    "region_text",
    "with_rows",
]
