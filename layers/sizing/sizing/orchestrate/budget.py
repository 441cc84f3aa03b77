"""The budget guard: what measuring the chosen candidates will cost, in arithmetic a person can check.

Each candidate runs one replica's worth of instances for its provisioning lead time, its load-test sweep and its
teardown; the load generator runs on Fargate (a master and workers) for the sweep."""

from __future__ import annotations

import math
from typing import Any

from sizing.catalog import Catalog
from sizing.plan.cost import SCALE_UP_LEAD_S_GPU, SCALE_UP_LEAD_S_NEURON

#: Fargate on-demand, us-east-1, Linux/x86: $0.04048 per vCPU-hour and $0.004445 per GB-hour
#: [aws.amazon.com/fargate/pricing].
FARGATE_USD_PER_VCPU_HOUR = 0.04048
FARGATE_USD_PER_GB_HOUR = 0.004445
#: Each Locust process (master or worker) gets 2 vCPU and 4 GB: one core drives ~256 streams with a few ms of
#: TTFT error (docs/serving-facts.md s8), the second absorbs the master's aggregation and TLS.
LOADGEN_VCPU = 2
LOADGEN_GB = 4
#: Time to tear down and for Karpenter to remove the empty node (consolidateAfter + termination).
TEARDOWN_S = 300


def candidate_measurement_cost(
    arch: dict[str, Any], cat: Catalog, sweep_s: float, workers: int, region: str
) -> dict[str, Any]:
    """Cost of measuring one candidate: instances for one replica x hours, plus the Fargate load generator."""
    if arch["deployment"] == "bedrock":
        # a sweep on Bedrock is billed per token: at most the requests the sweep sends
        return {
            "id": arch["id"],
            "usd": 0.0,
            "gpu_hours": 0.0,
            "note": "Bedrock: billed per token (a few dollars)",
        }
    inst = cat.instance(arch["instance_type"])
    neuron = cat.accelerator_of(inst).kind == "neuron"
    lead = SCALE_UP_LEAD_S_NEURON if neuron else SCALE_UP_LEAD_S_GPU
    hours = (lead + sweep_s + TEARDOWN_S) / 3600
    instances = max(1, math.ceil(1 / max(arch.get("replicas_per_instance") or 1, 1)))
    price = (
        cat.sagemaker_price(inst, region).usd_per_hour
        if arch["deployment"] == "sagemaker"
        else inst.price(region).usd_per_hour
    )
    assert price is not None
    gpu_usd = instances * price * hours
    loadgen_hours = sweep_s / 3600
    fargate_usd = (
        (1 + workers)
        * loadgen_hours
        * (LOADGEN_VCPU * FARGATE_USD_PER_VCPU_HOUR + LOADGEN_GB * FARGATE_USD_PER_GB_HOUR)
    )
    return {
        "id": arch["id"],
        "usd": round(gpu_usd + fargate_usd, 2),
        "gpu_hours": round(instances * hours * (arch.get("accelerators_per_replica") or 1), 3),
        "arithmetic": f"{instances} x {arch['instance_type']} x ${price:.2f}/h x {hours:.2f} h"
        f" (lead {lead / 60:.0f} min + sweep {sweep_s / 60:.0f} min + teardown {TEARDOWN_S / 60:.0f} min)"
        f" + Fargate {1 + workers} x {LOADGEN_VCPU} vCPU/{LOADGEN_GB} GB x {loadgen_hours:.2f} h"
        f" = ${gpu_usd + fargate_usd:.2f}",
    }


def measurement_cost(
    candidates: list[dict[str, Any]], cat: Catalog, sweep_s: float, workers: int, region: str
) -> dict[str, Any]:
    parts = [candidate_measurement_cost(a, cat, sweep_s, workers, region) for a in candidates]
    return {"usd": round(sum(p["usd"] for p in parts), 2), "candidates": parts}
