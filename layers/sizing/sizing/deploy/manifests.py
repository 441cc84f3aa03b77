"""Kubernetes objects that run one architecture on EKS: Karpenter NodePool + EC2NodeClass, and the engine's
OpenAI server (vLLM, or vLLM on Neuron) as a Deployment with its Service, PodDisruptionBudget and
HorizontalPodAutoscaler, configured exactly by the architecture's `ServingConfig` (`arch.serving`).

Two purposes (`RenderOptions.purpose`):
- `serve` (the default of `sizing manifests`): a production deployment. Also renders the Namespace and the
  prometheus-adapter rule the autoscaler's metric needs; nodes never expire on their own and are replaced (on
  drift, i.e. a new AMI pin) only outside business hours, one at a time. See docs/manifests.md.
- `run` (what a sizing run's provisioner renders: it sets `expires_at`): short-lived measurement nodes that expire
  after the run's maximum duration whatever happens, the backstop behind teardown and the janitor. The provisioner
  creates the shared namespace itself, and a run's fixed load needs no adapter.

Autoscaler: **HPA v2** on a per-pod serving metric (running requests), not KEDA. HPA is a core API, validated
offline by kubernetes-validate like the Deployment, and needs no extra operator or CRD; the metric reaches it
through **prometheus-adapter**, whose rule (vLLM's `vllm:num_requests_running` exposed as the custom metric
`vllm_num_requests_running`) is rendered as a ConfigMap for `serve`. A cluster without the adapter simply ignores
the HPA: the Deployment still runs its fixed replicas.

Every per-run object carries the run and candidate labels of `sizing.deploy.labels`; teardown and the janitor
select on exactly those (the shared Namespace and adapter ConfigMap carry only the manager label, so no teardown
removes them). Nothing that changes between two applies of the same candidate (such as a deadline) is put in a
pod or node template, so re-applying never restarts pods nor replaces GPU nodes."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

import yaml
from pydantic import BaseModel, ConfigDict, Field

from sizing.base.errors import InvalidInput, Problem
from sizing.base.serving_config import ServingConfig, parse_vllm_args, vllm_args
from sizing.base.vocabulary import Engine
from sizing.catalog import Catalog, load_catalog
from sizing.deploy import labels as L
from sizing.deploy.architecture import Architecture
from sizing.deploy.labels import DEFAULT_MAX_DURATION_S
from sizing.perf.engines import NEURON_MEMORY_FRACTION
from sizing.plan.cost import AVAILABILITY_ZONES, nodes_for

KARPENTER_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"

GPU_RESOURCE = "nvidia.com/gpu"
NEURON_RESOURCE = "aws.amazon.com/neuron"
#: The taints the NVIDIA and Neuron device-plugin setups on EKS use, so only accelerator pods land there.
GPU_TAINT = {"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}
NEURON_TAINT = {"key": NEURON_RESOURCE, "value": "true", "effect": "NoSchedule"}
#: A CPU inference node has no device plugin and no accelerator resource: the product's own taint keeps other pods
#: off it (vLLM's CPU backend binds its threads to every core the pod sees), and only the serving pod tolerates it.
CPU_TAINT = {"key": f"{L.PREFIX}/cpu-inference", "value": "true", "effect": "NoSchedule"}

#: vLLM's OpenAI server port (its default); it serves Prometheus metrics on `/metrics` of the same port.
SERVING_PORT = 8000
SERVICE_PORT = 80
GIB = 2**30
#: `/dev/shm` (a memory-backed emptyDir, counted against the pod's memory limit): 1 GiB for the API server
#: process plus 1 GiB per engine worker process. vLLM runs one worker per tensor-parallel rank on GPUs; they
#: exchange inputs through a shared-memory broadcast queue, and NCCL falls back to its SHM transport (buffers of
#: NCCL_BUFFSIZE = 4 MiB per channel and peer) between GPUs without peer-to-peer access (PCIe g5/g6/g6e). vLLM's
#: docs: "vLLM uses PyTorch, which uses shared memory to share data between processes under the hood,
#: particularly for tensor parallel inference" (docs.vllm.ai, Using Docker); TP1 gives 2 GiB, the size of vLLM's
#: Kubernetes example. vLLM on Neuron drives every NeuronCore from one worker process (NxD Inference parallelises
#: inside the Neuron runtime), so it gets the TP1 size whatever its tp_degree.
SHM_BASE_GIB = 1
SHM_GIB_PER_WORKER = 1
#: Share of a node's vCPUs and memory the serving pods request; the rest is left for the kubelet, system
#: reservations and DaemonSets (device plugin, CNI, kube-proxy, CSI), which together take well under 20%.
POD_SHARE_OF_NODE = 0.8
#: Root volume: Karpenter's default AL2023 root volume (20 GiB) for the OS and kubelet, plus the vLLM image
#: (28.6 GB unpacked and ~12 GB compressed during the pull, docs/serving-facts.md s4) rounded to 45 GiB, plus
#: the weights each pod downloads into its cache, with 10% for tokenizer files and partial downloads.
OS_GIB = 20
IMAGE_GIB = 45
CACHE_MARGIN = 1.1
#: Neuron compile cache (NEFFs) next to the weights; assumed, no published size found.
NEURON_CACHE_GIB = 10
VOLUME_STEP_GIB = 10
#: The kubelet's default hard eviction threshold `nodefs.available<10%`: allocatable ephemeral storage is the
#: volume less that, so the volume is sized for the pods' requests to fit under it.
NODEFS_EVICTION_FRACTION = 0.10
#: Bottlerocket keeps the OS on a small first volume (Karpenter's default 4 GiB) and images/pods on the second.
BOTTLEROCKET_OS_GIB = 4
#: gp3 at its maximum throughput and IOPS (AWS EBS gp3 limits: 1,000 MiB/s, 16,000 IOPS): loading weights
#: from gp3 at its baseline took 48 s for an 8B model against 7.5 s from io2 (docs/serving-facts.md s4).
GP3_THROUGHPUT_MIBS = 1000
GP3_IOPS = 16000
#: Model load budgets before the startup probe gives up: GPU images pull + download + compile in minutes to
#: tens of minutes (s4: 11 min for 13 GiB on a homelab); a Neuron compile on a cache miss "may take up to one
#: hour" (s3).
GPU_STARTUP_S = 30 * 60
NEURON_STARTUP_S = 60 * 60
PROBE_PERIOD_S = 10
#: Karpenter waits this long before removing an empty node: long enough that a restarting pod does not bounce
#: its GPU node, short enough that an idle GPU node costs minutes, not hours.
CONSOLIDATE_AFTER = "2m"
#: Sizing run: bound on how long Karpenter waits for pods (do-not-disrupt included) when a node expires or is
#: deleted; the run is over by then.
NODE_TERMINATION_GRACE = "10m"
#: Serving: a node being replaced drains one pod at a time (the PDB allows one unavailable); each evicted pod's
#: replacement loads the model within the startup budget before the next may go. The grace period is that budget
#: for every pod of the node plus this margin for the eviction and the scheduling of the replacement.
SERVE_GRACE_MARGIN_S = 10 * 60
#: Serving nodes do not expire: in Karpenter v1 expiry is forceful (it ignores disruption budgets and
#: `karpenter.sh/do-not-disrupt`), so an expiry would reload models at any hour. Nodes are replaced by drift
#: instead (a new AMI pin below), which the disruption budgets keep outside business hours.
SERVE_EXPIRE_AFTER = "Never"
#: Business hours during which serving nodes are never disrupted for Drifted/Underutilized: Karpenter budget
#: cron (UTC; Karpenter schedules have no time zone) and duration: 08:00-18:00 UTC, Monday to Friday.
BUSINESS_HOURS_SCHEDULE = "0 8 * * 1-5"
BUSINESS_HOURS_DURATION = "10h"
#: Local business hours the serving nodes are protected in: 08:00 for 10 hours, Monday to Friday (the window above,
#: in the workload's own time zone when it has one: `business_hours_window`).
BUSINESS_HOURS_START = 8
BUSINESS_HOURS_LENGTH = 10


@dataclass(frozen=True)
class BusinessHoursWindow:
    """Karpenter's budget window (cron in UTC, duration) for local business hours on a given date, and when the
    zone's UTC offset next changes (the window then moves by the change: re-render, or see `note`)."""

    schedule: str
    duration: str
    utc_offset_h: float
    next_change: date | None
    note: str


def business_hours_window(timezone: str, on: date | None = None) -> BusinessHoursWindow:
    """Local BUSINESS_HOURS_START for BUSINESS_HOURS_LENGTH hours, Monday to Friday, in `timezone` on date `on`
    (default today), as a Karpenter budget: its cron is UTC (Karpenter schedules have no time zone), so a local
    08:00 in New York is 13:00 UTC in winter and 12:00 in summer, and a start that falls on the UTC day before
    (Tokyo's 08:00 is 23:00 UTC) moves the weekdays with it. A zone whose offset changes states when."""
    zone = ZoneInfo(timezone)
    day = on or datetime.now(UTC).date()
    local = datetime.combine(day, time(BUSINESS_HOURS_START), tzinfo=zone)
    offset = local.utcoffset() or timedelta(0)
    start = local.astimezone(UTC)
    shift = (start.date() - day).days  # -1: the UTC start is the day before; +1: the day after
    days = {-1: "0-4", 0: "1-5", 1: "2-6"}[shift]
    minute = f"{start.minute}" if start.minute else "0"
    schedule = f"{minute} {start.hour} * * {days}"
    change = None
    for k in range(1, 367):  # the next date whose 08:00 has another offset (DST), within a year
        later = datetime.combine(day + timedelta(days=k), time(BUSINESS_HOURS_START), tzinfo=zone)
        if later.utcoffset() != offset:
            change = later.date()
            break
    hours = offset.total_seconds() / 3600
    note = f"{BUSINESS_HOURS_START:02d}:00-{BUSINESS_HOURS_START + BUSINESS_HOURS_LENGTH:02d}:00 {timezone}"
    note += f" (UTC{hours:+g}) is {start:%H:%M}-{(start + timedelta(hours=BUSINESS_HOURS_LENGTH)):%H:%M} UTC"
    if change is not None:
        note += f" until {change:%Y-%m-%d}, when the zone's offset changes: render again then"
    return BusinessHoursWindow(schedule, f"{BUSINESS_HOURS_LENGTH}h", hours, change, note)


#: HPA: scale up at once, scale down only after 10 minutes of lower load (a GPU pod takes minutes to start).
SCALE_DOWN_WINDOW_S = 600

#: Pinned EKS-optimized AMI releases (Karpenter `amiSelectorTerms` alias `family@version`). A pin makes node
#: images reproducible; `@latest` would drift every node whenever AWS publishes an AMI. AL2023 v20260818:
#: https://github.com/awslabs/amazon-eks-ami/releases/tag/v20260818 (its NVIDIA and Neuron variants are what
#: Karpenter picks for GPU and Neuron instances); Bottlerocket v1.62.0:
#: https://github.com/bottlerocket-os/bottlerocket/releases/tag/v1.62.0. Bump the pin deliberately: the change
#: drifts the nodes, which the serving budgets replace outside business hours.
AMI_VERSIONS: dict[str, str] = {"al2023": "v20260818", "bottlerocket": "v1.62.0"}

#: Arguments per quantization when the model's own (unquantized) checkpoint is served: vLLM quantizes fp8
#: dynamically and int4 in flight with bitsandbytes. int8 has no in-flight path in vLLM: it needs a
#: pre-quantized (W8A8) checkpoint given in `RenderOptions.checkpoints`.
GPU_QUANT_ARGS: dict[str, list[str]] = {
    "bf16": ["--dtype=bfloat16"],
    "fp8": ["--quantization=fp8"],
    "int4": ["--quantization=bitsandbytes"],
    # the checkpoint's own format (gpt-oss ships MXFP4 experts; NVFP4 checkpoints are ModelOpt exports): stated so
    # the server refuses a checkpoint in another format instead of serving it differently than estimated
    "mxfp4": ["--quantization=mxfp4"],
    "nvfp4": ["--quantization=modelopt_fp4"],
}
#: On Neuron, vLLM quantizes weights at load time with `neuron_quant` and NEURON_QUANT_DTYPE.
NEURON_QUANT_DTYPE = {"fp8": "f8e4m3fn", "int8": "s8"}
#: What vLLM on Neuron runs with whatever it is told: it has no flag for these `ServingConfig` fields (memory and
#: KV cache are laid out at compile time, prefill runs alone in static buckets, no prefix cache in the image), so a
#: configuration stating other values cannot be deployed as estimated. `sizing.perf.engines`' Neuron defaults.
NEURON_FIXED: dict[str, object] = {
    "gpu_memory_utilization": NEURON_MEMORY_FRACTION,
    "kv_cache_dtype": "auto",
    "enable_chunked_prefill": False,
    "enable_prefix_caching": False,
}
#: Engines whose own server we render: vLLM on GPUs and vLLM on Neuron. The planner also estimates TensorRT-LLM,
#: SGLang and TGI; their manifests are not written, so such an architecture is refused rather than deployed on
#: another engine than the one estimated.
RENDERED_ENGINES: tuple[Engine, ...] = ("vllm", "neuron")
#: Pod annotation naming the quantization of a pre-quantized checkpoint (no vLLM flag states it then).
CHECKPOINT_QUANT = f"{L.PREFIX}/checkpoint-quantization"
#: Deployment annotation stating how replicas land on nodes and zones (the rule the cost counts).
PLACEMENT = f"{L.PREFIX}/placement"
#: Quantizations served from a downloaded 16-bit checkpoint (what the cache must hold).
ONLINE_FROM_BF16 = {"fp8", "int4", "int8"}
ZONE_KEY = "topology.kubernetes.io/zone"
HOST_KEY = "kubernetes.io/hostname"
#: Preferred-affinity weight (Kubernetes' maximum, 100): packing onto a node already running the app outweighs
#: the scheduler's default spreading scores.
PACK_WEIGHT = 100
#: Zones the always-on replicas are spread over when min replicas >= 2: the number the cost counts nodes for
#: (two: zone-failure tolerance), from the cost model itself so the two never disagree.
SPREAD_ZONES = AVAILABILITY_ZONES
#: Where prometheus-adapter runs as its Helm chart installs it (release `prometheus-adapter` in `monitoring`,
#: configuration in ConfigMap `prometheus-adapter`, key `config.yaml`). The rule is rendered as a ConfigMap of its
#: own name beside it, a snippet to merge into that configuration: applying it never replaces the adapter's rules.
ADAPTER_NAMESPACE = "monitoring"
ADAPTER_CONFIGMAP = "llm-sizing-adapter-rules"
#: The adapter configuration the rule is merged into (the Helm chart's ConfigMap), named in the header.
ADAPTER_CHART_CONFIGMAP = "prometheus-adapter"
ADAPTER_CONFIG_KEY = "config.yaml"
#: Annotation of the rule's ConfigMap saying what to do with it.
ADAPTER_MERGE_ANNOTATION = "llm-sizing/merge-into"
#: EC2 capacity reservation ids (On-Demand Capacity Reservations and Capacity Blocks): the CRD's pattern.
CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")

#: Shared by every deployment in the cluster (rendered for `serve` only, never deleted by a teardown).
SHARED_KINDS = ["Namespace", "ConfigMap"]

Purpose = Literal["run", "serve"]


class RenderOptions(BaseModel):
    """Cluster-specific settings of the rendered manifests; the defaults suit the stack's own cluster. The
    container image and every engine setting come from the architecture's `ServingConfig`, not from here."""

    model_config = ConfigDict(extra="forbid")

    namespace: str = "llm-sizing"
    #: Value of the `karpenter.sh/discovery` tag on the cluster's subnets and security groups.
    cluster_name: str = "llm-sizing"
    node_role: str = "KarpenterNodeRole-llm-sizing"
    ami_family: Literal["al2023", "bottlerocket"] = "al2023"
    #: AMI release of the alias (default: the pin in AMI_VERSIONS); `latest` is refused.
    ami_version: str | None = None
    restrict_to: Literal["instance-type", "instance-family"] = "instance-type"
    #: Pre-quantized checkpoints by quantization, e.g. {"int8": "RedHatAI/Meta-Llama-3.1-70B-Instruct-quantized.w8a8"}.
    checkpoints: dict[str, str] = Field(default_factory=dict)
    hf_token_secret: str = "hf-token"
    hf_token_key: str = "token"
    #: Deployment replicas (default: the architecture's minimum; the HPA scales up to its peak).
    replicas: int | None = Field(default=None, ge=1)
    autoscale: bool = True
    autoscale_metric: str = "vllm_num_requests_running"
    service_type: Literal["ClusterIP", "LoadBalancer"] = "LoadBalancer"
    #: Unix time after which the janitor removes the objects; set once per run by the provisioner.
    expires_at: float | None = None
    #: Sizing run: Karpenter expires the nodes after this long whatever happens (the backstop behind
    #: teardown/janitor).
    max_duration_s: int = Field(default=DEFAULT_MAX_DURATION_S, ge=600)
    #: `serve` (production) or `run` (a sizing run's measurement nodes). Unset: `run` when a run deadline
    #: (`expires_at`) is given, which is how the provisioner renders, else `serve`.
    purpose: Purpose | None = None
    #: Availability zones the NodePool may use (default: every zone of the discovered subnets). Name two to
    #: make the spread exactly what the cost counts.
    zones: list[str] | None = None
    #: EC2 capacity reservation or Capacity Block id (`cr-...`) the nodes launch into first (p5/p5e/p6).
    capacity_reservation: str | None = None
    #: Serving: when Drifted/Underutilized disruption is blocked (Karpenter budget cron, UTC, and duration).
    business_hours_schedule: str = BUSINESS_HOURS_SCHEDULE
    business_hours_duration: str = BUSINESS_HOURS_DURATION
    adapter_namespace: str = ADAPTER_NAMESPACE
    adapter_configmap: str = ADAPTER_CONFIGMAP

    def resolved_purpose(self) -> Purpose:
        if self.purpose:
            return self.purpose
        return "run" if self.expires_at is not None else "serve"


def _quantity_gib(gib: float) -> str:
    return f"{math.ceil(gib)}Gi"


def _round_up(x: float, step: int) -> int:
    return int(math.ceil(x / step) * step)


def shm_gib(serving: ServingConfig) -> int:
    """`/dev/shm` for one replica (see SHM_BASE_GIB)."""
    workers = 1 if serving.engine == "neuron" else serving.tensor_parallel
    return SHM_BASE_GIB + SHM_GIB_PER_WORKER * workers


class _Plan:
    """Facts about the architecture that several objects share."""

    def __init__(self, arch: Architecture, run_id: str, candidate_id: str, opts: RenderOptions, cat: Catalog):
        if arch.deployment != "eks":
            raise InvalidInput(
                f"{arch.id}: only EKS architectures have Kubernetes manifests (this one is {arch.deployment})"
            )
        self.arch = arch = arch.resolve(cat)
        assert arch.instance_type and arch.serving and arch.replicas_per_instance and arch.weights_gb
        self.serving = s = arch.serving
        _check_deployable(arch, s, cat)
        self.opts = opts
        self.purpose = opts.resolved_purpose()
        self.inst = cat.instance(arch.instance_type)
        self.acc = cat.accelerator_of(self.inst)
        self.neuron = self.acc.kind == "neuron"
        self.name = L.object_name(run_id, candidate_id, arch.instance_type)
        self.labels = L.run_labels(run_id, candidate_id)
        self.meta_labels = L.run_labels(run_id, candidate_id, opts.expires_at)
        self.annotations = {L.RUN_ID_FULL: run_id, L.CANDIDATE_ID_FULL: candidate_id}
        self.cpu = self.acc.kind == "cpu"
        #: the extended resource a pod asks its devices by (None on a CPU node: the pod asks for cores and memory)
        self.resource: str | None = None if self.cpu else NEURON_RESOURCE if self.neuron else GPU_RESOURCE
        self.taint = CPU_TAINT if self.cpu else NEURON_TAINT if self.neuron else GPU_TAINT
        # Pods ask for TP devices; Neuron's device plugin counts chips, each holding `cores_per_chip` cores.
        self.devices_per_pod = math.ceil(s.tensor_parallel / self.acc.at_lnc(s.lnc).cores_per_chip)
        self.per_node = arch.replicas_per_instance
        self.replicas = opts.replicas or max(1, arch.replicas.min)
        self.peak = max(self.replicas, arch.replicas.peak)
        self.spread = self.replicas >= 2
        self.zones = _zones(opts, self.spread)
        zone_count = len(self.zones) if self.zones else SPREAD_ZONES
        # One spare node above the peak placement: room for a replacement while a node drains.
        self.nodes_max = nodes_for(self.peak, self.per_node, zone_count if self.spread else 1) + 1
        self.ami_version = _ami_version(opts)
        if opts.capacity_reservation is not None and not CAPACITY_RESERVATION_ID.fullmatch(
            opts.capacity_reservation
        ):
            raise InvalidInput(
                f"capacity reservation '{opts.capacity_reservation}' is not an EC2 capacity reservation id",
                [Problem("capacity_reservation", "expected cr- followed by lowercase letters and digits")],
            )
        spec = cat.model(arch.model)
        quant = s.quantization
        self.checkpoint = opts.checkpoints.get(quant)
        if quant == "int8" and not self.checkpoint and not self.neuron:
            raise InvalidInput(
                f"{arch.id}: vLLM cannot quantize to int8 on load; give a pre-quantized checkpoint "
                "(RenderOptions.checkpoints {'int8': 'org/model-w8a8'})",
                [Problem("checkpoints.int8", "required for int8 on GPUs")],
            )
        if quant == "int4" and self.neuron:
            raise InvalidInput(
                f"{arch.id}: vLLM on Neuron does not serve int4",
                [Problem("serving.quantization", "int4 is not served on Neuron")],
            )
        #: What vLLM downloads: a pre-quantized checkpoint, else the served model exactly as named.
        self.hf_model = self.checkpoint or s.model
        from_bf16 = quant in ONLINE_FROM_BF16 and not self.checkpoint
        download_gb = spec.weight_bytes("bf16") / 1e9 if from_bf16 else arch.weights_gb
        # Whole GiB: what each pod requests, so the volume is sized from the same number.
        self.cache_gib = math.ceil(
            download_gb * 1e9 / GIB * CACHE_MARGIN + (NEURON_CACHE_GIB if self.neuron else 0)
        )
        needed = OS_GIB + IMAGE_GIB + self.per_node * self.cache_gib
        self.volume_gib = _round_up(needed / (1 - NODEFS_EVICTION_FRACTION), VOLUME_STEP_GIB)
        self.startup_s = NEURON_STARTUP_S if self.neuron else GPU_STARTUP_S

    def meta(self, name: str, namespaced: bool = True) -> dict[str, Any]:
        m: dict[str, Any] = {"name": name}
        if namespaced:
            m["namespace"] = self.opts.namespace
        m["labels"] = dict(self.meta_labels)
        m["annotations"] = dict(self.annotations)
        return m

    def placement_rule(self) -> str:
        pack = (
            f"{self.per_node} replicas per {self.inst.instance_type} node (each pod requests 1/{self.per_node} of"
            " it; a preferred pod affinity on kubernetes.io/hostname fills a node before another starts)"
            if self.per_node > 1
            else f"one replica per {self.inst.instance_type} node"
        )
        if not self.spread:
            return f"{pack}; a single replica is not spread over zones"
        zones = ", ".join(self.zones) if self.zones else f"at least {SPREAD_ZONES} zones"
        return (
            f"{pack}; {self.replicas}+ replicas spread over {zones} (topology spread on {ZONE_KEY}, maxSkew 1,"
            " DoNotSchedule): nodes = per zone ceil(replicas in zone / replicas per node), as the cost counts them"
        )


def _check_deployable(arch: Architecture, s: ServingConfig, cat: Catalog) -> None:
    """Refuse what `sizing predict` refuses (quantization, engine or TP the hardware or the model's heads do not
    allow), an engine without manifests, and Neuron settings vLLM-Neuron cannot honour: each names its field."""
    # deferred: the hardware configuration costs ~15 ms (-X importtime) of the cold starts that render or read an
    # architecture and simulate nothing
    from sizing.perf.config import HardwareConfig

    try:
        HardwareConfig.create(
            s.model, arch.instance_type or "", s.tensor_parallel, s.quantization, s.engine, cat
        )
    except InvalidInput as exc:
        raise InvalidInput(
            f"{arch.id}: {exc.message}",
            [Problem(f"serving.{p.field}" if p.field else "serving", p.message) for p in exc.problems],
        ) from None
    if s.engine not in RENDERED_ENGINES:
        raise InvalidInput(
            f"{arch.id}: serving.engine '{s.engine}' has no manifests: only {' and '.join(RENDERED_ENGINES)}"
            " servers are rendered (vLLM on GPUs, vLLM on Neuron for inf2/trn); choose a vllm architecture"
            " rather than deploy another engine than the one estimated",
            [Problem("serving.engine", f"'{s.engine}' has no manifests (use {', '.join(RENDERED_ENGINES)})")],
        )
    if s.engine == "neuron":
        for name, fixed in NEURON_FIXED.items():
            if getattr(s, name) != fixed:
                raise InvalidInput(
                    f"{arch.id}: serving.{name} {getattr(s, name)} cannot be deployed on vLLM-Neuron, which"
                    f" always runs with {fixed}",
                    [Problem(f"serving.{name}", f"vLLM-Neuron runs with {fixed}")],
                )


def _zones(opts: RenderOptions, spread: bool) -> list[str] | None:
    if not opts.zones:
        return None
    zones = list(dict.fromkeys(opts.zones))
    if spread and len(zones) < SPREAD_ZONES:
        raise InvalidInput(
            f"zones {', '.join(zones)}: replicas are spread over at least {SPREAD_ZONES} zones",
            [Problem("zones", f"name at least {SPREAD_ZONES} zones (or none: every subnet's zone)")],
        )
    return zones


def _ami_version(opts: RenderOptions) -> str:
    version = opts.ami_version or AMI_VERSIONS[opts.ami_family]
    if version == "latest":
        raise InvalidInput(
            f"{opts.ami_family}@latest drifts every node whenever AWS publishes an AMI: pin a release",
            [Problem("ami_version", f"pin a release, e.g. {AMI_VERSIONS[opts.ami_family]}")],
        )
    return version


def _namespace(p: _Plan) -> dict[str, Any]:
    # Shared by every deployment: the manager label only, as the provisioner creates it, so no teardown
    # (which selects on run labels) ever deletes it.
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": p.opts.namespace, "labels": {L.MANAGED_BY: L.MANAGER}},
    }


def _nodeclass(p: _Plan) -> dict[str, Any]:
    discovery = {"karpenter.sh/discovery": p.opts.cluster_name}
    ebs = {
        "volumeType": "gp3",
        "encrypted": True,
        "deleteOnTermination": True,
        "throughput": GP3_THROUGHPUT_MIBS,
        "iops": GP3_IOPS,
    }
    if p.opts.ami_family == "bottlerocket":
        devices = [
            {
                "deviceName": "/dev/xvda",
                "ebs": {"volumeSize": f"{BOTTLEROCKET_OS_GIB}Gi", "volumeType": "gp3"},
            },
            {
                "deviceName": "/dev/xvdb",
                "rootVolume": True,
                "ebs": {"volumeSize": f"{p.volume_gib}Gi", **ebs},
            },
        ]
    else:
        devices = [
            {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": f"{p.volume_gib}Gi", **ebs}}
        ]
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": f"{p.opts.ami_family}@{p.ami_version}"}],
        "role": p.opts.node_role,
        "subnetSelectorTerms": [{"tags": discovery}],
        "securityGroupSelectorTerms": [{"tags": discovery}],
        "blockDeviceMappings": devices,
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1},
        # Tags reach the EC2 instances and volumes: a leak is traceable to its run from the EC2 console.
        "tags": {
            L.RUN_ID: p.labels[L.RUN_ID],
            L.CANDIDATE_ID: p.labels[L.CANDIDATE_ID],
            L.MANAGED_BY: L.MANAGER,
        },
    }
    if p.opts.capacity_reservation:
        # Karpenter v1.3+ (the CRD in deploy/schemas/ has it): nodes launch into this On-Demand Capacity
        # Reservation or Capacity Block first, labelled karpenter.sh/capacity-type=reserved.
        spec["capacityReservationSelectorTerms"] = [{"id": p.opts.capacity_reservation}]
    return {
        "apiVersion": NODECLASS_API,
        "kind": "EC2NodeClass",
        "metadata": p.meta(p.name, namespaced=False),
        "spec": spec,
    }


def _disruption(p: _Plan) -> dict[str, Any]:
    """Only empty nodes are consolidated. A sizing run's nodes are never disrupted for drift or utilisation
    (the run ends first). Serving nodes: never for Drifted/Underutilized during business hours, one node at a
    time otherwise (an AMI pin bump rolls through the nodes overnight)."""
    reasons = ["Drifted", "Underutilized"]
    if p.purpose == "run":
        budgets: list[dict[str, Any]] = [
            {"nodes": "1", "reasons": ["Empty"]},
            {"nodes": "0", "reasons": reasons},
        ]
    else:
        budgets = [
            {"nodes": "1", "reasons": ["Empty"]},
            {
                "nodes": "0",
                "reasons": reasons,
                "schedule": p.opts.business_hours_schedule,
                "duration": p.opts.business_hours_duration,
            },
            {"nodes": "1", "reasons": reasons},
        ]
    return {"consolidationPolicy": "WhenEmpty", "consolidateAfter": CONSOLIDATE_AFTER, "budgets": budgets}


def _expiry(p: _Plan) -> tuple[str, str]:
    """(expireAfter, terminationGracePeriod) of the NodePool's nodes.

    Sizing run: the run's maximum duration, a bounded backstop should teardown and the janitor both fail; the
    pods' do-not-disrupt annotation holds everything else off until then. Serving: never expire (SERVE_EXPIRE_AFTER)
    and give a draining node long enough for each of its pods to be replaced in turn."""
    if p.purpose == "run":
        return f"{math.ceil(p.opts.max_duration_s / 60)}m", NODE_TERMINATION_GRACE
    grace_s = p.per_node * p.startup_s + SERVE_GRACE_MARGIN_S
    return SERVE_EXPIRE_AFTER, f"{math.ceil(grace_s / 60)}m"


def _nodepool(p: _Plan) -> dict[str, Any]:
    arch = p.arch
    if p.opts.restrict_to == "instance-family":
        # the family's sizes with the devices a pod asks for; a CPU replica runs on all its instance's cores
        if p.cpu:
            size = {
                "key": "karpenter.k8s.aws/instance-cpu",
                "operator": "Gt",
                "values": [str(p.inst.vcpu - 1)],
            }
        else:
            count = "instance-accelerator-count" if p.neuron else "instance-gpu-count"
            size = {
                "key": f"karpenter.k8s.aws/{count}",
                "operator": "Gte",
                "values": [str(p.devices_per_pod)],
            }
        shape = [
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [p.inst.family]},
            size,
        ]
    else:
        shape = [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [p.inst.instance_type]}
        ]
    # With a reservation, Karpenter fills it first and falls back to the capacity type the cost counted.
    capacity = ["reserved", arch.capacity_type] if p.opts.capacity_reservation else [arch.capacity_type]
    zones = [{"key": ZONE_KEY, "operator": "In", "values": p.zones}] if p.zones else []
    expire_after, grace = _expiry(p)
    accel_per_node = p.inst.accelerator_count
    return {
        "apiVersion": KARPENTER_API,
        "kind": "NodePool",
        "metadata": p.meta(p.name, namespaced=False),
        "spec": {
            "template": {
                # Template labels reach NodeClaims and nodes: teardown waits on NodeClaims with these.
                "metadata": {"labels": dict(p.labels)},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": p.name},
                    "requirements": [
                        *shape,
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity},
                        *zones,
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    "taints": [dict(p.taint)],
                    "expireAfter": expire_after,
                    "terminationGracePeriod": grace,
                },
            },
            "limits": {
                "cpu": str(p.nodes_max * p.inst.vcpu),
                "memory": _quantity_gib(p.nodes_max * p.inst.memory_gib),
                **({p.resource: str(p.nodes_max * accel_per_node)} if p.resource else {}),
                "nodes": str(p.nodes_max),
            },
            "disruption": _disruption(p),
        },
    }


def _serving_args(p: _Plan) -> tuple[list[str], list[dict[str, Any]]]:
    """The container's arguments: the checkpoint, the `ServingConfig` (`vllm_args`), host/port and the
    quantization flags; and the Neuron environment."""
    s = p.serving
    args = [f"--model={p.hf_model}", *vllm_args(s), "--host=0.0.0.0", f"--port={SERVING_PORT}"]
    env: list[dict[str, Any]] = []
    if p.neuron:
        if s.quantization in NEURON_QUANT_DTYPE:
            args.append("--quantization=neuron_quant")
            env.append({"name": "NEURON_QUANT_DTYPE", "value": NEURON_QUANT_DTYPE[s.quantization]})
        # Compiled NEFFs go to $VLLM_CACHE_ROOT/neuron/compile_cache (s3): keep them on the cache volume.
        env.append({"name": "VLLM_CACHE_ROOT", "value": "/models/vllm"})
        if s.lnc is not None:
            # trn2 runs at LNC=2 unless told otherwise (the catalog's devices are those logical cores, as the
            # estimate's): a stated LNC is passed on, so `--tensor-parallel-size N` counts the cores it sized for
            # (docs/estimator.md, Neuron SDK "Logical NeuronCore configuration")
            env.append({"name": "NEURON_LOGICAL_NC_CONFIG", "value": str(s.lnc)})
    elif not p.checkpoint:
        args += GPU_QUANT_ARGS[s.quantization]
    return args, env


def _placement(p: _Plan) -> dict[str, Any]:
    """Pod affinity (pack) and topology spread (zones), exactly as the cost counts nodes."""
    select = {"matchLabels": {"app.kubernetes.io/instance": p.name}}
    out: dict[str, Any] = {}
    if p.per_node > 1:
        out["affinity"] = {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": PACK_WEIGHT,
                        "podAffinityTerm": {"labelSelector": select, "topologyKey": HOST_KEY},
                    }
                ]
            }
        }
    if p.spread:
        out["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE_KEY,
                "whenUnsatisfiable": "DoNotSchedule",
                # Counts a zone with no node yet as a domain, so Karpenter launches the second zone's node
                # instead of stacking every replica in the first.
                "minDomains": SPREAD_ZONES,
                "labelSelector": select,
            }
        ]
    return out


def _deployment(p: _Plan) -> dict[str, Any]:
    args, env = _serving_args(p)
    probe = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": PROBE_PERIOD_S}
    cpu_m = int(p.inst.vcpu * 1000 * POD_SHARE_OF_NODE / p.per_node)
    mem_gib = p.inst.memory_gib * POD_SHARE_OF_NODE / p.per_node
    cache = _quantity_gib(p.cache_gib)
    pod_labels = {**p.labels, "app.kubernetes.io/name": "llm-serving", "app.kubernetes.io/instance": p.name}
    device = {p.resource: str(p.devices_per_pod)} if p.resource else {}
    resources = {
        "requests": {
            "cpu": f"{cpu_m}m",
            "memory": f"{math.floor(mem_gib)}Gi",
            "ephemeral-storage": cache,
            **device,
        },
        "limits": {"memory": f"{math.floor(mem_gib)}Gi", **device},
    }
    pod_annotations = {
        **p.annotations,
        # Prometheus' kubernetes-pods scrape job (community chart) reads these: vLLM's /metrics feeds the
        # adapter rule behind the HPA.
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(SERVING_PORT),
        "prometheus.io/path": "/metrics",
    }
    if p.purpose == "run":
        # A measurement must not be interrupted by consolidation or drift; the NodePool's expiry still ends it.
        pod_annotations["karpenter.sh/do-not-disrupt"] = "true"
    if p.checkpoint:
        pod_annotations[CHECKPOINT_QUANT] = p.serving.quantization
    meta = p.meta(p.name)
    meta["annotations"][PLACEMENT] = p.placement_rule()
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": p.replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/instance": p.name}},
            # A surge pod would need one more GPU node; replace one pod at a time instead.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": pod_annotations},
                "spec": {
                    "nodeSelector": {"karpenter.sh/nodepool": p.name},
                    "tolerations": [{"key": p.taint["key"], "operator": "Exists", "effect": "NoSchedule"}],
                    **_placement(p),
                    "terminationGracePeriodSeconds": 60,
                    "containers": [
                        {
                            "name": "vllm",
                            "image": p.serving.image,
                            "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                            "args": args,
                            "ports": [{"name": "http", "containerPort": SERVING_PORT, "protocol": "TCP"}],
                            "env": [
                                {
                                    "name": "HF_TOKEN",
                                    "valueFrom": {
                                        "secretKeyRef": {
                                            "name": p.opts.hf_token_secret,
                                            "key": p.opts.hf_token_key,
                                        }
                                    },
                                },
                                {"name": "HF_HOME", "value": "/models/hf"},
                                *env,
                            ],
                            "resources": resources,
                            "startupProbe": {**probe, "failureThreshold": p.startup_s // PROBE_PERIOD_S},
                            "readinessProbe": {**probe, "failureThreshold": 3},
                            "livenessProbe": {**probe, "failureThreshold": 6},
                            "volumeMounts": [
                                {"name": "model-cache", "mountPath": "/models"},
                                {"name": "dshm", "mountPath": "/dev/shm"},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "model-cache", "emptyDir": {"sizeLimit": cache}},
                        {
                            "name": "dshm",
                            "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_gib(p.serving)}Gi"},
                        },
                    ],
                },
            },
        },
    }


def _service(p: _Plan) -> dict[str, Any]:
    meta = p.meta(p.name)
    if p.opts.service_type == "LoadBalancer":
        # Internal NLB: the Fargate load generator in the VPC reaches it; nothing is exposed publicly.
        meta["annotations"].update(
            {
                "service.beta.kubernetes.io/aws-load-balancer-type": "external",
                "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
                "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
            }
        )
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": p.opts.service_type,
            "selector": {"app.kubernetes.io/instance": p.name},
            "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _pdb(p: _Plan) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": p.meta(p.name),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/instance": p.name}}},
    }


def _quantity(x: float) -> str:
    """A Kubernetes quantity of `x`, to a thousandth: `6`, or `6400m` for 6.4."""
    milli = max(1, round(x * 1000))
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _hpa(p: _Plan) -> dict[str, Any]:
    arch = p.arch
    # the requests in flight per replica the answer was sized at (the operating point: the planner's simulation at
    # peak, headroom kept); a target at the SLO's knee (max_concurrency) scaled out later than the answer sized
    sized = arch.per_replica.in_flight if arch.per_replica else None
    knee = arch.per_replica.max_concurrency if arch.per_replica else None
    per_pod = sized or knee or float(p.serving.max_num_seqs)
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": p.meta(p.name),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": p.name},
            "minReplicas": p.replicas,
            "maxReplicas": p.peak,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": p.opts.autoscale_metric},
                        "target": {"type": "AverageValue", "averageValue": _quantity(per_pod)},
                    },
                }
            ],
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0},
                "scaleDown": {"stabilizationWindowSeconds": SCALE_DOWN_WINDOW_S},
            },
        },
    }


def adapter_rule(metric: str) -> dict[str, Any]:
    """The prometheus-adapter rule exposing vLLM's per-pod gauge (`vllm:num_requests_running`; vLLM names its
    metrics `vllm:<name>`, a colon the custom-metrics API does not take) as the HPA's metric `vllm_<name>`."""
    series = f"vllm:{metric.removeprefix('vllm_')}" if metric.startswith("vllm_") else metric
    return {
        "seriesQuery": f'{series}{{namespace!="",pod!=""}}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
        "name": {"matches": f"^{re.escape(series)}$", "as": metric},
        "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
    }


def adapter_merge_note(opts: RenderOptions) -> str:
    """What to do with the rule's ConfigMap: merge its rules into the adapter's own configuration."""
    return (
        f"merge rules into {opts.adapter_namespace}/{ADAPTER_CHART_CONFIGMAP} {ADAPTER_CONFIG_KEY}"
        " (Helm values rules.custom), then restart prometheus-adapter; the adapter does not read this ConfigMap"
    )


def _adapter_config(p: _Plan) -> dict[str, Any]:
    # The rule as a snippet to merge, in a ConfigMap of its own name: the adapter's configuration (the Helm chart's
    # ConfigMap) is left as it is, with its other rules (docs/manifests.md).
    config = {"rules": [adapter_rule(p.opts.autoscale_metric)]}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": p.opts.adapter_configmap,
            "namespace": p.opts.adapter_namespace,
            "labels": {L.MANAGED_BY: L.MANAGER},
            "annotations": {ADAPTER_MERGE_ANNOTATION: adapter_merge_note(p.opts)},
        },
        "data": {ADAPTER_CONFIG_KEY: yaml.safe_dump(config, sort_keys=False)},
    }


def render(
    architecture: Architecture | dict[str, Any],
    run_id: str,
    candidate_id: str | None = None,
    options: RenderOptions | None = None,
    catalog: Catalog | None = None,
) -> list[dict[str, Any]]:
    """The Kubernetes objects for one candidate, in apply order (namespace and node classes first, autoscaler
    last). Raises InvalidInput naming the field for anything that cannot be deployed as estimated."""
    arch = architecture if isinstance(architecture, Architecture) else Architecture.from_dict(architecture)
    opts = options or RenderOptions()
    p = _Plan(arch, run_id, candidate_id or arch.id, opts, catalog or load_catalog())
    serve = p.purpose == "serve"
    objs = [_namespace(p)] if serve else []
    objs += [_nodeclass(p), _nodepool(p), _service(p), _pdb(p), _deployment(p)]
    if opts.autoscale:
        if serve:
            objs.append(_adapter_config(p))
        objs.append(_hpa(p))
    return objs


def header(objs: list[dict[str, Any]], options: RenderOptions | None = None) -> str:
    """Comment lines for the top of the YAML: what to create before applying (the token Secret is never
    rendered with a value) and what the autoscaler needs."""
    opts = options or RenderOptions()
    dep = next((o for o in objs if o.get("kind") == "Deployment"), None)
    what = dep["metadata"]["annotations"].get(L.CANDIDATE_ID_FULL, "") if dep else ""
    lines = [
        f"Rendered by `sizing manifests` for {what} (purpose: {opts.resolved_purpose()}); see docs/manifests.md.",
        "Before applying, create the Hugging Face token Secret the pods read (never written to these files):",
        f"  kubectl create namespace {opts.namespace}   # or apply the Namespace below first",
        f"  kubectl -n {opts.namespace} create secret generic {opts.hf_token_secret}"
        f" --from-literal={opts.hf_token_key}=hf_...",
    ]
    if any(o.get("kind") == "Namespace" for o in objs):
        lines.append(f"Namespaces: {opts.namespace} is rendered below (the serving objects live there).")
    if any(o.get("kind") == "HorizontalPodAutoscaler" for o in objs):
        lines.append(
            f"The HPA scales on {opts.autoscale_metric} through prometheus-adapter; Prometheus must scrape the"
            " pods' /metrics."
        )
    if any(o.get("kind") == "ConfigMap" and o["metadata"]["name"] == opts.adapter_configmap for o in objs):
        lines += [
            f"The adapter rule is a SNIPPET TO MERGE: ConfigMap {opts.adapter_namespace}/{opts.adapter_configmap}"
            " holds only this deployment's rule and the adapter does not read it;",
            f"  {adapter_merge_note(opts)}.",
            f"  Namespace {opts.adapter_namespace} is where prometheus-adapter runs: it must exist already (not"
            " rendered here); --adapter-namespace names another.",
        ]
    return "".join(f"# {line}\n" for line in lines)


def serving_from_manifests(objs: list[dict[str, Any]]) -> ServingConfig:
    """The `ServingConfig` a rendered Deployment runs, read back from its container: image, the vLLM arguments,
    the quantization (flags, Neuron environment, or a pre-quantized checkpoint's annotation)."""
    dep = next((o for o in objs if o.get("kind") == "Deployment"), None)
    if dep is None:
        raise InvalidInput("the manifests have no Deployment", [Problem("kind", "no Deployment")])
    template = dep["spec"]["template"]
    c = template["spec"]["containers"][0]
    args = [str(a) for a in c.get("args") or []]
    env = {e["name"]: e.get("value") for e in c.get("env") or []}
    neuron = NEURON_RESOURCE in (c.get("resources", {}).get("requests") or {})
    fields: dict[str, Any] = dict(parse_vllm_args(args))
    fields.update(engine="neuron" if neuron else "vllm", image=c["image"])
    fields["quantization"] = _quantization_of(args, env, template["metadata"].get("annotations") or {})
    if env.get("NEURON_LOGICAL_NC_CONFIG"):
        fields["lnc"] = int(env["NEURON_LOGICAL_NC_CONFIG"])
    if neuron:
        for name, fixed in NEURON_FIXED.items():
            fields.setdefault(name, fixed)
    return ServingConfig(**fields)


def _quantization_of(args: list[str], env: dict[str, Any], annotations: dict[str, str]) -> str:
    if "--quantization=neuron_quant" in args:
        by_dtype = {v: k for k, v in NEURON_QUANT_DTYPE.items()}
        return by_dtype[str(env.get("NEURON_QUANT_DTYPE"))]
    by_args = {tuple(v): k for k, v in GPU_QUANT_ARGS.items()}
    for arg in args:
        if (arg,) in by_args:
            return by_args[(arg,)]
    return annotations.get(CHECKPOINT_QUANT, "bf16")


class _Dumper(yaml.SafeDumper):
    """Plain YAML: no `&anchor`/`*alias` even where two objects share a dict."""

    # PyYAML's Dumper hook: no value is ever written as an alias
    def ignore_aliases(self, data: Any) -> bool:  # noqa: ARG002
        return True


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    # Multi-line values (the adapter's config.yaml) as readable `|` blocks rather than escaped one-liners.
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _str)


def to_yaml(objs: list[dict[str, Any]], comment: str = "") -> str:
    """A multi-document YAML stream (what `kubectl apply -f` takes), after optional `# ...` comment lines."""
    return comment + yaml.dump_all(objs, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def to_json(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)
