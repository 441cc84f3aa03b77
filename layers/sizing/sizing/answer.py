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

from typing import Any

from sizing.base.errors import SizingError
from sizing.base.vocabulary import TWIN
from sizing.catalog import load_catalog
from sizing.results import AnswerRow, Availability, EstimateResult, Figures, Kind, QuotaNote, RowBasis

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


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def kind_of(a: dict[str, Any]) -> Kind:
    """A Bedrock batch inference offer is a batch job; a SageMaker asynchronous inference endpoint draining the day's
    requests (`:async`, or a batch block with instances) an async job; anything else serves requests as they come.
    The answer states it (`invocation`); an older result says it by its blocks."""
    said = a.get("invocation")
    if said == "batch":
        return "batch job"
    if said == "async":
        return "async job"
    if a.get("deployment") == "bedrock" and _dict(a.get("bedrock")).get("mode") == "batch":
        return "batch job"
    batch = _dict(a.get("batch"))
    if a.get("deployment") == "sagemaker" and (
        str(a.get("id", "")).endswith(":async") or batch.get("instances")
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


def tier_of(a: dict[str, Any]) -> str:
    if a.get("deployment") == "bedrock":
        if _dict(a.get("bedrock")).get("mode") == "batch":
            return "batch"
        tier = str(a.get("service_tier") or "standard")
        return BEDROCK_TIER_NAMES.get(tier, f"{tier} tier")
    return str(a.get("capacity_type") or "on-demand")


def _twin_run(result: dict[str, Any]) -> bool:
    """The run says it load-tested local twins (figures recorded before `measured.origin` name none)."""
    if result.get("origin") == TWIN or result.get("twins") is True:
        return True
    ranking = _dict(result.get("ranking"))
    rows = result.get("calibration_rows") or ranking.get("calibration_rows")
    return isinstance(rows, list) and any(_dict(x).get("origin") == TWIN for x in rows)


def basis_of(a: dict[str, Any], result: dict[str, Any] | None = None) -> RowBasis:
    """Load-test figures are measured on a real endpoint and simulated on a local twin (the run's own word when
    the figures name no origin); otherwise the estimate's basis."""
    measured = a.get("measured")
    if isinstance(measured, dict) and any(measured.get(k) for k in ("ttft_ms", "tpot_ms", "e2e_s")):
        origin = measured.get("origin")
        if origin == TWIN:
            return "simulated (twin)"
        if origin is None and (_twin_run(result or {}) or TWIN in str(measured.get("how") or "").lower()):
            return "simulated (twin)"
        return "measured"
    basis = a.get("basis") or _dict(a.get("calibration")).get("estimate_basis")
    if basis == "measured":
        return "measured"
    if basis == "calibrated":
        return "calibrated"
    return "estimated"


def availability_of(a: dict[str, Any], region: str | None) -> tuple[Availability, str | None]:
    """Whether the hardware is known to be sold in the row's Region, and the Region its price is from when that is
    another. The planner says so (`availability`, `price_region`); an older result says only that its price was
    assumed, which outside the price snapshot means the us-east-1 price stood in."""
    said = a.get("availability")
    if said in ("sold here", "unknown"):
        return said, a.get("price_region")
    if a.get("deployment") == "bedrock" or not region or region == PRICE_FALLBACK_REGION:
        return "sold here", None
    price = _dict(_dict(a.get("cost")).get("price"))
    source = str(price.get("source") or "")
    if price.get("assumed") and "/ us-east-1 =" not in source:
        return "unknown", PRICE_FALLBACK_REGION
    return "sold here", None


def ec2_quota(a: dict[str, Any], region: str | None) -> QuotaNote | None:
    """The EC2 On-Demand vCPU quota an EKS architecture's peak nodes need (spot draws on the Spot quotas, named
    the same way)."""
    if a.get("deployment") != "eks" or not a.get("instance_type"):
        return None
    try:
        it = load_catalog().instance(str(a["instance_type"]))
    except (SizingError, KeyError, AttributeError):
        return None
    nodes = _dict(a.get("instances")).get("peak") or _dict(a.get("replicas")).get("peak")
    if not nodes:
        return None
    vcpus = int(nodes) * it.vcpu
    family = it.family
    prefix = next((p for p in sorted(EC2_VCPU_QUOTAS, key=len, reverse=True) if family.startswith(p)), None)
    name, code = EC2_VCPU_QUOTAS[prefix] if prefix else EC2_STANDARD_QUOTA
    default = EC2_DEFAULT_VCPUS_ACCELERATED if prefix else EC2_DEFAULT_VCPUS_STANDARD
    if vcpus <= default:
        return None
    spot = a.get("capacity_type") == "spot"
    if spot:
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


def bedrock_quota(a: dict[str, Any]) -> QuotaNote | None:
    quota = _dict(a.get("quota"))
    if not quota.get("needs_increase") or not quota.get("message"):
        return None
    return QuotaNote(
        service="bedrock",
        message=f"Bedrock {quota['message']}",
        request=quota.get("request"),
        source=quota.get("source"),
    )


def _percentiles(result: dict[str, Any]) -> dict[str, str]:
    """The percentile each metric's SLO bounds (the highest when several), p95 where none."""
    out = {"ttft_ms": "p95", "tpot_ms": "p95", "e2e_s": "p95"}
    slo = _dict(_dict(result.get("workload")).get("slo"))
    if slo.get("deadline_s") is not None and not any(slo.get(m) for m in out):
        out["e2e_s"] = "p99"  # a deadline alone: a job's requests are sized at e2e p99 (`SLO.targets`)
    for metric, by_pct in slo.items():
        if metric in out and isinstance(by_pct, dict):
            pcts = [p for p, v in by_pct.items() if isinstance(v, int | float) and p in ("p50", "p95", "p99")]
            if pcts:
                out[metric] = max(pcts, key=lambda p: float(p[1:]))
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def figures_of(a: dict[str, Any], kind: Kind, pcts: dict[str, str]) -> Figures:
    measured = a.get("measured")
    shown = measured if isinstance(measured, dict) and measured.get("e2e_s") else _dict(a.get("predicted"))
    cost = _dict(a.get("cost"))
    reps, inst, per = _dict(a.get("replicas")), _dict(a.get("instances")), _dict(a.get("per_replica"))
    batch = _dict(a.get("batch"))
    job = bool(batch) or kind != "real-time"
    in_flight = _num(per.get("in_flight"))
    if in_flight is None:
        in_flight = _num(per.get("max_concurrency"))
    return Figures(
        percentiles=pcts,
        ttft_ms=_num(_dict(shown.get("ttft_ms")).get(pcts["ttft_ms"])),
        tpot_ms=_num(_dict(shown.get("tpot_ms")).get(pcts["tpot_ms"])),
        e2e_s=_num(_dict(shown.get("e2e_s")).get(pcts["e2e_s"])),
        in_flight=None if job or not a.get("instance_type") else in_flight,
        capacity_rps=_num(per.get("rps_slo_limit")) if a.get("instance_type") else None,
        replicas_min=reps.get("min"),
        replicas_peak=reps.get("peak"),
        instances_peak=inst.get("peak"),
        usd_per_month=_num(cost.get("usd_per_month")),
        usd_per_month_spot=_num(cost.get("usd_per_month_spot")),
        usd_per_million_output_tokens=_num(cost.get("usd_per_million_output_tokens")),
        usd_per_job=_num(batch.get("usd_per_job")),
        job_wall_time_h=_num(batch.get("wall_time_h")),
    )


def answer_row(a: dict[str, Any], result: dict[str, Any]) -> AnswerRow:
    """The row of one architecture (its JSON) of `result`."""
    region = a.get("region") or _dict(result.get("region")).get("code")
    kind = kind_of(a)
    availability, price_region = availability_of(a, region)
    quotas = [q for q in (bedrock_quota(a), ec2_quota(a, region)) if q is not None]
    if a.get("deployment") == "bedrock":
        where = str(_dict(a.get("bedrock")).get("model_id") or str(a.get("id", "")).split(":", 1)[-1])
        config = "per-token"
    else:
        where = str(a.get("instance_type") or a.get("id", "?"))
        parts = [
            f"TP{a['tensor_parallel']}" if a.get("tensor_parallel") else "",
            a.get("quantization"),
            a.get("engine"),
        ]
        config = " ".join(str(p) for p in parts if p)
    return AnswerRow(
        rank=a.get("rank"),
        id=str(a.get("id", "")),
        deployment=DEPLOYMENT_NAMES.get(str(a.get("deployment")), str(a.get("deployment", "?"))),
        where=where,
        config=config,
        kind=kind,
        tier=tier_of(a),
        quotas=quotas,
        region=region,
        availability=availability,
        price_region=price_region,
        basis=basis_of(a, result),
        meets_slo=a.get("meets_slo") is not False,
        figures=figures_of(a, kind, _percentiles(result)),
    )


def answer_rows(result: dict[str, Any], key: str = "architectures") -> list[AnswerRow]:
    """The rows of a result's ranked architectures (or of another list of architectures in it: `managed_options`)."""
    return [answer_row(a, result) for a in result.get(key) or [] if isinstance(a, dict)]


def result_rows(result: EstimateResult) -> list[AnswerRow]:
    """The rows of an estimate's ranked architectures, in rank order."""
    return answer_rows(result.as_json())


def with_rows(result: dict[str, Any]) -> dict[str, Any]:
    """The result's JSON with its rows (`rows`, one per ranked architecture, in rank order): what the JSON outputs
    print, so a reader of the JSON sees the qualifiers the table, the report and Slack show."""
    return {**result, "rows": [r.model_dump(mode="json") for r in answer_rows(result)]}


def region_line(result: dict[str, Any]) -> str | None:
    """`Region us-east-1 (US East (N. Virginia)); data residency: geography`: what the report's header says."""
    return region_text(_dict(result.get("region")))


def region_text(reg: dict[str, Any] | None) -> str | None:
    """The line `region_line` says, of an estimate's `region` block."""
    reg = reg or {}
    code = reg.get("code")
    if not code:
        return None
    name = f" ({reg['name']})" if reg.get("name") else ""
    residency = reg.get("data_residency") or "none stated"
    return f"Region {code}{name}; data residency: {residency}"


__all__ = [
    "AnswerRow",
    "Figures",
    "QuotaNote",
    "answer_row",
    "answer_rows",
    "region_line",
    "region_text",
    "result_rows",
    "with_rows",
]
