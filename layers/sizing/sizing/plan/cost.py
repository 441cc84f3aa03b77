"""Cost projection: hour-by-hour replicas and nodes from the traffic profile, then monthly cost on-demand, on spot
and with a Savings Plan, per million output tokens and per user.

Every figure here is arithmetic a finance team can redo: replicas x price x hours, plus the fixed overheads."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sizing.workload.derived import DAYS_PER_MONTH, WorkloadModel

#: Average hours in a month (365.25 x 24 / 12 = 730.5).
HOURS_PER_MONTH = DAYS_PER_MONTH * 24

#: EKS control plane, standard support: $0.10 per cluster-hour [aws.amazon.com/eks/pricing, docs/serving-facts.md s5].
EKS_CONTROL_PLANE_USD_PER_HOUR = 0.10
#: One Application Load Balancer in front of the serving Service: $0.0225/hour in us-east-1 plus LCUs; LLM
#: traffic is a few requests per second of small bodies, so one LCU-hour ($0.008) covers it
#: [aws.amazon.com/elasticloadbalancing/pricing, us-east-1].
LOAD_BALANCER_USD_PER_HOUR = 0.0225 + 0.008

#: Availability zones replicas are spread over when `min_replicas` >= 2: two AZs give zone-failure tolerance, the
#: usual EKS node-group minimum. The manifests' topology spread (maxSkew 1 over topology.kubernetes.io/zone) puts
#: ceil(r / 2) replicas in one zone and floor(r / 2) in the other, and replicas pack only onto nodes of their zone.
AVAILABILITY_ZONES = 2


def spread_zones(wm: WorkloadModel) -> int:
    """Zones the replicas spread over: AVAILABILITY_ZONES once the workload asks for two replicas or more."""
    return AVAILABILITY_ZONES if wm.spec.constraints.min_replicas >= 2 else 1


def nodes_for(replicas: int, replicas_per_instance: int, zones: int) -> int:
    """Nodes holding `replicas` spread evenly over `zones` zones (topology spread, maxSkew 1), each zone's replicas
    packed `replicas_per_instance` to a node of its own: the fleet rule the cost and the manifests' node limits
    both read."""
    zones = max(1, min(zones, replicas))  # no zone without a replica (and one zone for none)
    per_zone, fuller = divmod(replicas, zones)  # `fuller` zones hold one replica more than the others
    return fuller * -(-(per_zone + 1) // replicas_per_instance) + (zones - fuller) * -(
        -per_zone // replicas_per_instance
    )


#: Scale-up lead time, seconds: Karpenter node launch to Ready 80-100 s, GPU allocatable lag, a ~12-28 GB vLLM
#: image pull (5-10 min without a snapshotter) and weight loading (15-60 s from S3/EBS) [docs/serving-facts.md s4].
#: Replicas for a busier hour must start this long before it, so they are billed for it.
SCALE_UP_LEAD_S_GPU = 600
#: Neuron cold start adds graph compilation or a compile-cache load: several minutes [docs/serving-facts.md s3].
SCALE_UP_LEAD_S_NEURON = 900
#: Scale-down lag: HPA's default 300 s stabilisation window plus Karpenter's consolidateAfter (we render 60 s)
#: before an empty node is removed.
SCALE_DOWN_LAG_S = 360

#: 1-year no-upfront Compute/EC2 Instance Savings Plan discount on GPU instances, applied to the always-on base.
#: Assumed: AWS publishes rates per instance, not a family figure; 1-year no-upfront rates on G and P instances
#: sit around 25-35% off on-demand. Stated as an assumption in every result.
SAVINGS_PLAN_1Y_DISCOUNT = 0.30


@dataclass(frozen=True)
class Pricing:
    usd_per_hour: float  # per instance
    price_assumed: bool
    price_source: str
    price_as_of: str
    spot_discount: float | None  # None: no spot (SageMaker)
    spot_assumed: bool
    control_plane_usd_per_hour: float
    lead_time_s: float


def replicas_by_hour(
    wm: WorkloadModel, capacity_rps: float, min_replicas: int, rps_scale: float = 1.0
) -> list[int]:
    """Replicas each local hour needs: ceil(hour's rate / per-replica capacity), at least min_replicas."""
    return [max(min_replicas, math.ceil(r * rps_scale / capacity_rps - 1e-9)) for r in wm.hourly_rps]


def _schedule(
    wm: WorkloadModel, capacity_rps: float, replicas_per_instance: int, lead_time_s: float
) -> tuple[list[int], list[int], float, int]:
    """Replicas and nodes each hour, node-hours billed per day, and the nodes holding the min_replicas base."""
    c = wm.spec.constraints
    hourly = replicas_by_hour(wm, capacity_rps, c.min_replicas)
    zones = spread_zones(wm)
    by_count = {r: nodes_for(r, replicas_per_instance, zones) for r in set(hourly)}
    nodes = [by_count[r] for r in hourly]
    min_nodes = nodes_for(c.min_replicas, replicas_per_instance, zones)
    # node-hours billed per traffic day: each hour's nodes, plus lead time for nodes added for the next hour and
    # the scale-down lag for nodes removed after it
    billed = 0.0
    for h in range(24):
        now, nxt, prev = nodes[h], nodes[(h + 1) % 24], nodes[h - 1]
        billed += now
        if nxt > now:
            billed += (nxt - now) * lead_time_s / 3600
        if prev > now:
            billed += (prev - now) * SCALE_DOWN_LAG_S / 3600
    # per average day of the month: a day without traffic (a business-hours weekend) holds the min_replicas nodes
    traffic_share = wm.traffic_days_per_month / DAYS_PER_MONTH
    billed = billed * traffic_share + min_nodes * 24 * (1 - traffic_share)
    return hourly, nodes, billed, min_nodes


def _on_demand_and_spot(
    billed: float, od_base: int, pricing: Pricing
) -> tuple[float, float | None, float, float]:
    """Monthly cost on demand and on spot (None without spot), and the fixed and compute parts of the first."""
    price = pricing.usd_per_hour
    fixed_per_hour = pricing.control_plane_usd_per_hour + LOAD_BALANCER_USD_PER_HOUR
    fixed_month = fixed_per_hour * HOURS_PER_MONTH
    compute_month = billed * price * DAYS_PER_MONTH
    on_demand = compute_month + fixed_month
    spot = None
    if pricing.spot_discount is not None:
        # the always-on base (min_replicas) stays on-demand; everything above it runs on spot
        spot = (
            od_base * 24 * price + (billed - od_base * 24) * price * (1 - pricing.spot_discount)
        ) * DAYS_PER_MONTH + fixed_month
    return on_demand, spot, fixed_month, compute_month


def monthly_usd(
    wm: WorkloadModel, capacity_rps: float, replicas_per_instance: int, pricings: Sequence[Pricing]
) -> list[tuple[float, float | None]]:
    """`project`'s usd_per_month and usd_per_month_spot alone, to the cent, under each of `pricings` (the
    deployments of one instance type): what the search's cost bound reads for every hardware option, without
    the rest of the figures, and one schedule for the deployments that share a lead time."""
    schedules: dict[float, tuple[list[int], list[int], float, int]] = {}
    out: list[tuple[float, float | None]] = []
    for pricing in pricings:
        lead = pricing.lead_time_s
        if lead not in schedules:
            schedules[lead] = _schedule(wm, capacity_rps, replicas_per_instance, lead)
        _hourly, _nodes, billed, od_base = schedules[lead]
        on_demand, spot, _fixed, _compute = _on_demand_and_spot(billed, od_base, pricing)
        out.append((round(on_demand, 2), None if spot is None else round(spot, 2)))
    return out


def project(
    wm: WorkloadModel,
    capacity_rps: float,
    replicas_per_instance: int,
    pricing: Pricing,
    users_total: int | None,
) -> dict[str, Any]:
    """Monthly cost figures for one architecture whose replica sustains `capacity_rps` under the SLO."""
    hourly, nodes, billed, od_base = _schedule(wm, capacity_rps, replicas_per_instance, pricing.lead_time_s)
    always_on = min(nodes)  # nodes running every hour: what a Savings Plan commitment should cover
    # od_base: nodes holding the min_replicas base, kept on-demand when the rest runs on spot
    price = pricing.usd_per_hour
    fixed_per_hour = pricing.control_plane_usd_per_hour + LOAD_BALANCER_USD_PER_HOUR
    on_demand, spot, fixed_month, compute_month = _on_demand_and_spot(billed, od_base, pricing)
    savings_plan = (
        always_on * 24 * price * (1 - SAVINGS_PLAN_1Y_DISCOUNT) + (billed - always_on * 24) * price
    ) * DAYS_PER_MONTH + fixed_month
    out_tokens_month = wm.requests_per_month * wm.output_tokens.mean
    peak_nodes = max(nodes)
    return {
        "usd_per_hour_peak": round(peak_nodes * price + fixed_per_hour, 2),
        "usd_per_month": round(on_demand, 2),
        "usd_per_month_spot": None if spot is None else round(spot, 2),
        "usd_per_month_savings_plan_1y": round(savings_plan, 2),
        "usd_per_million_output_tokens": round(on_demand / (out_tokens_month / 1e6), 4)
        if out_tokens_month
        else None,
        "usd_per_user_month": round(on_demand / users_total, 4) if users_total else None,
        "breakdown": {
            "instance_usd_per_hour": price,
            # per average day of the month (a business-hours weekend holds the min_replicas nodes)
            "node_hours_per_day": round(billed, 2),
            "compute_usd_per_month": round(compute_month, 2),
            "control_plane_usd_per_month": round(pricing.control_plane_usd_per_hour * HOURS_PER_MONTH, 2),
            "load_balancer_usd_per_month": round(LOAD_BALANCER_USD_PER_HOUR * HOURS_PER_MONTH, 2),
            "hours_per_month": HOURS_PER_MONTH,
        },
        "schedule": {"replicas_by_hour": hourly, "nodes_by_hour": nodes},
        "price": {
            "source": pricing.price_source,
            "as_of": pricing.price_as_of,
            "assumed": pricing.price_assumed,
            "spot_discount": pricing.spot_discount,
            "spot_discount_assumed": pricing.spot_assumed,
            "savings_plan_discount": SAVINGS_PLAN_1Y_DISCOUNT,
            "savings_plan_assumed": True,
        },
        "_nodes": {"peak": peak_nodes, "min": always_on, "mean": sum(nodes) / 24},
    }


def bedrock_bill(
    wm: WorkloadModel, usd_in_per_m: float, usd_out_per_m: float, users_total: int | None
) -> dict[str, Any]:
    """Bedrock on-demand bills tokens: monthly requests x (input x price_in + output x price_out)."""
    requests_month = wm.requests_per_month
    in_cost = requests_month * wm.input_tokens.mean * usd_in_per_m / 1e6
    out_cost = requests_month * wm.output_tokens.mean * usd_out_per_m / 1e6
    total = in_cost + out_cost
    peak_hour = (
        wm.peak_rps
        * 3600
        * (wm.input_tokens.mean * usd_in_per_m + wm.output_tokens.mean * usd_out_per_m)
        / 1e6
    )
    out_tokens_month = requests_month * wm.output_tokens.mean
    return {
        "usd_per_hour_peak": round(peak_hour, 2),
        "usd_per_month": round(total, 2),
        "usd_per_month_spot": None,
        "usd_per_month_savings_plan_1y": None,
        "usd_per_million_output_tokens": round(total / (out_tokens_month / 1e6), 4)
        if out_tokens_month
        else None,
        "usd_per_user_month": round(total / users_total, 4) if users_total else None,
        "breakdown": {
            "requests_per_month": round(requests_month),
            "input_usd_per_month": round(in_cost, 2),
            "output_usd_per_month": round(out_cost, 2),
            "input_usd_per_million": usd_in_per_m,
            "output_usd_per_million": usd_out_per_m,
        },
    }


#: A workload is a batch workload when it uses the `batch` preset or its e2e SLO allows at least this many seconds
#: (an hour: a person is no longer waiting on the answer).
BATCH_E2E_S = 3600.0
#: Bedrock batch inference: "batch inference jobs ... typically completed within 24 hours"
#: (docs.aws.amazon.com/bedrock/latest/userguide/batch-inference.html). AWS publishes no faster bound, so a job's
#: wall time is taken as this bound.
BEDROCK_BATCH_WINDOW_H = 24.0
#: A batch workload's requests are submitted as one job per day (the nightly run); its deadline is the day.
BATCH_JOB_WINDOW_H = 24.0


def is_batch_workload(wm: WorkloadModel) -> bool:
    """A batch workload: the `batch` preset, a job deadline (`slo.deadline_s`), or an e2e SLO of an hour or more."""
    if wm.spec.preset == "batch" or wm.slo.deadline_s is not None:
        return True
    e2e = [limit for metric, _pct, limit in wm.slo.targets() if metric == "e2e_s"]
    return bool(e2e) and min(e2e) >= BATCH_E2E_S


def batch_deadline_h(wm: WorkloadModel) -> float:
    """Hours a batch job may take: its stated deadline (`slo.deadline_s`; the batch preset's day when absent), else
    the tightest e2e SLO (a request of the job ends when the job does)."""
    if wm.slo.deadline_s is not None:
        return wm.slo.deadline_s / 3600
    e2e = [limit for metric, _pct, limit in wm.slo.targets() if metric == "e2e_s"]
    return min(e2e) / 3600 if e2e else BATCH_JOB_WINDOW_H


def token_bill(
    requests: float, in_tokens: float, out_tokens: float, usd_in_per_m: float, usd_out_per_m: float
) -> float:
    """Dollars for `requests` requests of `in_tokens` + `out_tokens` each at per-million-token prices."""
    return requests * (in_tokens * usd_in_per_m + out_tokens * usd_out_per_m) / 1e6


def bedrock_batch_bill(
    wm: WorkloadModel, usd_in_per_m: float, usd_out_per_m: float, users_total: int | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Bedrock batch inference: a day's requests as one job, billed per token at batch prices. Returns the monthly
    cost block and the job (requests, tokens, dollars per job and per million tokens, wall time)."""
    cost = bedrock_bill(wm, usd_in_per_m, usd_out_per_m, users_total)
    requests_day = wm.avg_rps * 86400
    in_day = requests_day * wm.input_tokens.mean
    out_day = requests_day * wm.output_tokens.mean
    per_job = token_bill(
        requests_day, wm.input_tokens.mean, wm.output_tokens.mean, usd_in_per_m, usd_out_per_m
    )
    tokens = in_day + out_day
    job = {
        "requests": round(requests_day),
        "input_tokens": round(in_day),
        "output_tokens": round(out_day),
        "usd_per_job": round(per_job, 2),
        "usd_per_million_tokens": round(per_job / (tokens / 1e6), 4) if tokens else 0.0,
        "wall_time_h": BEDROCK_BATCH_WINDOW_H,
        "wall_time_bound_h": BEDROCK_BATCH_WINDOW_H,
        "wall_time_assumed": True,
        "note": "one job a day of the day's requests; wall time is AWS's stated completion window (typically"
        " within 24 h), not a measurement",
    }
    cost["usd_per_hour_peak"] = 0.0  # a batch job has no peak hour: it is billed per token whenever it runs
    cost["breakdown"] = {
        **cost["breakdown"],
        "mode": "batch",
        "jobs_per_month": round(wm.traffic_days_per_month, 2),
    }
    return cost, job


def provisioned_throughput_bill(
    usd_per_hour_per_unit: float, units: int, hours: float = HOURS_PER_MONTH
) -> float:
    """Bedrock Provisioned Throughput: model units x hourly price x hours (billed while provisioned, used or not)."""
    return units * usd_per_hour_per_unit * hours


#: Provisioned Throughput and Reserved capacity are sized on the busiest hour's tokens per minute with this much room
#: above it: the hour's mean is what the traffic profile gives, and a minute within the hour runs above it (the
#: same margin as the quota increase the planner asks for).
COMMITTED_TPM_HEADROOM = 1.2


def peak_tokens_per_minute(wm: WorkloadModel) -> tuple[float, float]:
    """Input and output tokens per minute in the busiest hour (mean lengths: what a model unit processes)."""
    return wm.peak_rps * 60 * wm.input_tokens.mean, wm.peak_rps * 60 * wm.output_tokens.mean


def provisioned_units(
    in_tpm: float,
    out_tpm: float,
    in_tpm_per_unit: int,
    out_tpm_per_unit: int,
    headroom: float = COMMITTED_TPM_HEADROOM,
) -> int:
    """Model units whose input and output tokens per minute cover the peak (with `headroom`), at least one."""
    need_in = math.ceil(in_tpm * headroom / in_tpm_per_unit - 1e-9)
    need_out = math.ceil(out_tpm * headroom / out_tpm_per_unit - 1e-9)
    return max(1, need_in, need_out)


def reserved_tier_bill(
    in_tpm: float,
    out_tpm: float,
    usd_per_1k_tpm_month: float,
    min_input_tpm: int,
    min_output_tpm: int,
    headroom: float = COMMITTED_TPM_HEADROOM,
) -> tuple[float, int, int]:
    """Bedrock Reserved tier: a fixed monthly price per 1K tokens-per-minute reserved (input and output TPM
    reserved separately, each at least its minimum). Returns the monthly dollars and the TPM reserved."""
    res_in = max(min_input_tpm, math.ceil(in_tpm * headroom))
    res_out = max(min_output_tpm, math.ceil(out_tpm * headroom))
    return (res_in + res_out) / 1000 * usd_per_1k_tpm_month, res_in, res_out


#: SageMaker asynchronous inference scales in after the backlog is empty; the instances keep billing until the
#: scale-in completes. Assumed equal to the EKS scale-down lag (a 300 s cooldown plus instance stop), as AWS states
#: no figure.
ASYNC_SCALE_IN_S = SCALE_DOWN_LAG_S


def async_job(
    requests: float,
    in_tokens: float,
    out_tokens: float,
    rps_per_instance: float,
    usd_per_hour: float,
    deadline_h: float,
    lead_time_s: float,
) -> dict[str, Any]:
    """One batch job on a SageMaker asynchronous endpoint that scales from zero: the fewest instances that finish the
    job's requests within the deadline (after the instances start), each billed from launch until scale-in."""
    work_s = max(deadline_h * 3600 - lead_time_s, 60.0)
    instances = max(1, math.ceil(requests / (rps_per_instance * work_s) - 1e-9))
    run_s = requests / (instances * rps_per_instance)
    billed_h = instances * (lead_time_s + run_s + ASYNC_SCALE_IN_S) / 3600
    usd = billed_h * usd_per_hour
    tokens = requests * (in_tokens + out_tokens)
    return {
        "requests": round(requests),
        "input_tokens": round(requests * in_tokens),
        "output_tokens": round(requests * out_tokens),
        "usd_per_job": round(usd, 2),
        "usd_per_million_tokens": round(usd / (tokens / 1e6), 4) if tokens else 0.0,
        "wall_time_h": round((lead_time_s + run_s) / 3600, 2),
        "wall_time_bound_h": deadline_h,
        "wall_time_assumed": False,
        "instances": instances,
        "instance_hours": round(billed_h, 3),
    }


def expected_spot_interruptions(nodes_by_hour: Sequence[int], od_base: int, monthly_rate: float) -> float:
    """Spot interruptions a month: the Spot Instance Advisor's rate is the share of Spot instances AWS reclaimed in
    the trailing month, so the expectation is that rate x the Spot instances run in a month (those launched each day
    as traffic rises, plus the ones running all month)."""
    spot = [max(0, n - od_base) for n in nodes_by_hour]
    launched_per_day = sum(max(0, spot[h] - spot[h - 1]) for h in range(len(spot)))
    always = min(spot) if spot else 0
    return monthly_rate * (launched_per_day * DAYS_PER_MONTH + always)
