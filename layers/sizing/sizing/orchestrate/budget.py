"""The budget guard: what measuring the chosen candidates will cost, in arithmetic a person can check.

Each candidate runs one replica's worth of instances for its provisioning lead time, its load-test sweep and its
teardown; the load generator runs on Fargate (a master and workers) for the sweep. How many workers a level needs
follows from the streams one core of load generation was measured to sustain (`loadgen_layout`; docs/loadgen.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sizing.base.errors import InvalidInput, Problem
from sizing.catalog import Catalog
from sizing.plan.cost import SCALE_UP_LEAD_S_GPU, SCALE_UP_LEAD_S_NEURON

#: Fargate on-demand, us-east-1, Linux/x86: $0.04048 per vCPU-hour and $0.004445 per GB-hour
#: [aws.amazon.com/fargate/pricing].
FARGATE_USD_PER_VCPU_HOUR = 0.04048
FARGATE_USD_PER_GB_HOUR = 0.004445
#: Streams one core of load generation (one Locust process: a single thread) is given, a margin under what every
#: repeated run sustained with TTFT error p99 <= 5 ms against a server with exactly known timing, the server pinned
#: to the other core (`benchmarks/loadgen.py --pin --skip-twin`, reads stamped by the kernel), on two 2-core Xeon
#: machines of this workplace: on one (2026-12-05, load 0.3-0.6) 256 and 384 streams at 0.01-0.02 ms and 512 at
#: 24-25 ms, twice; on the other (2026-12-06) 256-640 at 0.02-0.04 ms, twice. 384 held in all four runs, 512 in
#: two; 320 keeps a sixth under 384. (An earlier 2-core AMD EPYC machine sustained 576: docs/loadgen.md.)
STREAMS_PER_CORE = 320
#: Streams each worker process is given at most: the measured figure (a level above it gets another worker).
STREAMS_PER_WORKER = STREAMS_PER_CORE
#: The same with reads stamped when they return (the kernel's stamps are plain HTTP's only): an HTTPS endpoint,
#: and SageMaker's streams, which the load generator reads through botocore over TLS. 224 is `--pin`'s figure for
#: read-time stamps on the same machine (TTFT error p99 3.8 ms; 256 streams: 5.6-10.9 ms); botocore's per-event
#: parsing costs more than our client's, not measured here, so this is an upper bound there.
STREAMS_PER_WORKER_READ_STAMPED = 224


def kernel_stamped(endpoint_url: str | None, deployment: str) -> bool:
    """Whether the load generator's reads of this endpoint carry the kernel's receive stamps: a plain-HTTP URL
    (`sizing.loadtest.http`), or before one is known, an EKS service (plain HTTP inside the VPC); SageMaker and
    Bedrock are read through botocore over TLS."""
    if endpoint_url:
        return endpoint_url.startswith("http://")
    return deployment == "eks"


def streams_per_worker(stamped: bool = True) -> int:
    """Streams one worker drives at most, for reads stamped by the kernel (`stamped`) or when they return."""
    return STREAMS_PER_WORKER if stamped else STREAMS_PER_WORKER_READ_STAMPED


#: Each Locust process (master or worker) gets 2 vCPU and 4 GB: its one thread has the core the streams-per-core
#: figure was measured on, and the second vCPU takes what that measurement left out: the kernel's network work,
#: TLS on a real endpoint, the master's merging of every worker's records and the load task's heartbeat (a
#: Fargate vCPU counted as the measured core: assumed, not measured on Fargate). 4 GB is Fargate's smallest memory
#: for 2 vCPU [docs.aws.amazon.com/AmazonECS/latest/developerguide/fargate-tasks-services.html#fargate-tasks-size];
#: a step's records take tens of MB at 1,024 streams.
LOADGEN_VCPU = 2
LOADGEN_GB = 4
#: Time to tear down and for Karpenter to remove the empty node (consolidateAfter + termination).
TEARDOWN_S = 300


def workers_for(streams: int, stamped: bool = True) -> int:
    """Worker processes a level of `streams` concurrent streams needs: one per `streams_per_worker`, at least one."""
    return max(1, math.ceil(max(streams, 0) / streams_per_worker(stamped)))


def sweep_workers(configured: int, levels: Sequence[float], stamped: bool = True) -> int:
    """Load-generator workers for a sweep: none where it runs as one process (the embedded default, `configured`
    0), else the configured count or as many as its highest level needs (`workers_for`), if more. The load test
    starts these, and the budget guard prices them. `stamped`: see `kernel_stamped`."""
    if configured == 0 or not levels:
        return configured
    return max(configured, workers_for(math.ceil(max(levels)), stamped))


@dataclass(frozen=True)
class LoadgenLayout:
    """How a level's streams are laid out on Fargate: a master (it runs no users: it steps the load, merges every
    worker's records and stores the figures) and `workers` workers, each a Locust process of LOADGEN_VCPU vCPU
    and LOADGEN_GB GB, each worker driving at most STREAMS_PER_WORKER streams."""

    streams: int
    workers: int
    streams_per_worker: int
    vcpu_each: int = LOADGEN_VCPU
    gb_each: int = LOADGEN_GB

    @property
    def processes(self) -> int:
        return 1 + self.workers

    @property
    def vcpu(self) -> int:
        return self.processes * self.vcpu_each

    @property
    def gb(self) -> int:
        return self.processes * self.gb_each

    def describe(self) -> str:
        return (
            f"{self.streams} streams: a master and {self.workers} workers ({self.streams_per_worker} streams each"
            f" at most), {self.vcpu_each} vCPU / {self.gb_each} GB each, {self.vcpu} vCPU / {self.gb} GB in all"
        )


def loadgen_layout(streams: int, stamped: bool = True) -> LoadgenLayout:
    """The load generator a level of `streams` concurrent streams needs (`workers_for`)."""
    n = workers_for(streams, stamped)
    return LoadgenLayout(streams=streams, workers=n, streams_per_worker=math.ceil(streams / n))


#: Fargate task sizes the load generator's one task may take: vCPU -> (smallest, largest, step) memory in GB
#: [docs.aws.amazon.com/AmazonECS/latest/developerguide/fargate-tasks-services.html#fargate-tasks-size]. The task
#: definition's own size (4 vCPU / 8 GB) is the smallest used.
FARGATE_SIZES = {4: (8, 30, 1), 8: (16, 60, 4), 16: (32, 120, 8)}
#: Workers one task holds beside its master at LOADGEN_VCPU each: the largest size's vCPUs.
MAX_WORKERS_PER_TASK = max(FARGATE_SIZES) // LOADGEN_VCPU - 1


def fargate_task_size(workers: int) -> tuple[int, int]:
    """The (vCPU, GB) of the one Fargate task that runs the master and `workers` worker processes at LOADGEN_VCPU
    and LOADGEN_GB each: the smallest size that holds them. InvalidInput when no task size does."""
    need_vcpu, need_gb = (1 + workers) * LOADGEN_VCPU, (1 + workers) * LOADGEN_GB
    for vcpu, (lo, hi, step) in sorted(FARGATE_SIZES.items()):
        if vcpu >= need_vcpu:
            gb = max(lo, math.ceil(need_gb / step) * step)
            if gb <= hi:
                return vcpu, gb
    raise InvalidInput(
        f"a load generator of {workers} workers needs {need_vcpu} vCPU; one Fargate task holds at most"
        f" {MAX_WORKERS_PER_TASK} ({MAX_WORKERS_PER_TASK * STREAMS_PER_WORKER:,} streams at the measured"
        f" {STREAMS_PER_WORKER} per core of a plain-HTTP endpoint, {MAX_WORKERS_PER_TASK * STREAMS_PER_WORKER_READ_STAMPED:,}"
        f" of an HTTPS or SageMaker one)",
        [Problem("levels", f"the highest level needs {workers} load-generator workers")],
    )


def candidate_measurement_cost(
    arch: dict[str, Any],
    cat: Catalog,
    sweep_s: float,
    workers: int,
    region: str,
) -> dict[str, Any]:
    """Cost of measuring one candidate: instances for one replica x hours, plus the Fargate load generator's task
    at its size (`fargate_task_size`) for the sweep with its `workers` (`sweep_workers`)."""
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
    # the task is billed at its size: the smallest Fargate size holding the master and the workers
    vcpu, gb = fargate_task_size(workers)
    fargate_usd = loadgen_hours * (vcpu * FARGATE_USD_PER_VCPU_HOUR + gb * FARGATE_USD_PER_GB_HOUR)
    return {
        "id": arch["id"],
        "usd": round(gpu_usd + fargate_usd, 2),
        "gpu_hours": round(instances * hours * (arch.get("accelerators_per_replica") or 1), 3),
        "arithmetic": f"{instances} x {arch['instance_type']} x ${price:.2f}/h x {hours:.2f} h"
        f" (lead {lead / 60:.0f} min + sweep {sweep_s / 60:.0f} min + teardown {TEARDOWN_S / 60:.0f} min)"
        f" + Fargate {vcpu} vCPU/{gb} GB (a master and {workers} workers) x {loadgen_hours:.2f} h"
        f" = ${gpu_usd + fargate_usd:.2f}",
    }


def measurement_cost(
    candidates: list[dict[str, Any]], cat: Catalog, sweep_s: float, workers: Sequence[int], region: str
) -> dict[str, Any]:
    """The candidates' measurement costs and their sum; `workers`, one per candidate, its sweep's workers."""
    parts = [
        candidate_measurement_cost(a, cat, sweep_s, n, region)
        for a, n in zip(candidates, workers, strict=True)
    ]
    return {"usd": round(sum(p["usd"] for p in parts), 2), "candidates": parts}
