"""What rendering one architecture's Kubernetes objects starts from: the cluster's settings and the purpose
(`RenderOptions`), and the facts several objects share (`_Plan`: the node's devices and taint, replicas and their
spread, the node volume, the checkpoint), checked deployable as estimated. `sizing.deploy.nodes` and
`sizing.deploy.pods` build the objects from them; `sizing.deploy.manifests` renders them in apply order."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import Field

from sizing.base.errors import InvalidInput, Problem
from sizing.base.serving_config import ServingConfig
from sizing.base.strict import Strict
from sizing.base.vocabulary import Engine
from sizing.catalog import Catalog
from sizing.deploy import labels as L
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.labels import DEFAULT_MAX_DURATION_S
from sizing.perf.engines import NEURON_MEMORY_FRACTION
from sizing.plan.cost import AVAILABILITY_ZONES, nodes_for

GPU_RESOURCE = "nvidia.com/gpu"
NEURON_RESOURCE = "aws.amazon.com/neuron"
#: The taints the NVIDIA and Neuron device-plugin setups on EKS use, so only accelerator pods land there.
GPU_TAINT = {"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}
NEURON_TAINT = {"key": NEURON_RESOURCE, "value": "true", "effect": "NoSchedule"}
#: A CPU inference node has no device plugin and no accelerator resource: the product's own taint keeps other pods
#: off it (vLLM's CPU backend binds its threads to every core the pod sees), and only the serving pod tolerates it.
CPU_TAINT = {"key": f"{L.PREFIX}/cpu-inference", "value": "true", "effect": "NoSchedule"}


GIB = 2**30


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


#: Model load budgets before the startup probe gives up: GPU images pull + download + compile in minutes to
#: tens of minutes (s4: 11 min for 13 GiB on a homelab); a Neuron compile on a cache miss "may take up to one
#: hour" (s3).
GPU_STARTUP_S = 30 * 60
NEURON_STARTUP_S = 60 * 60


#: Business hours during which serving nodes are never disrupted for Drifted/Underutilized: Karpenter budget
#: cron (UTC; Karpenter schedules have no time zone) and duration: 08:00-18:00 UTC, Monday to Friday.
BUSINESS_HOURS_SCHEDULE = "0 8 * * 1-5"
BUSINESS_HOURS_DURATION = "10h"


#: Pinned EKS-optimized AMI releases (Karpenter `amiSelectorTerms` alias `family@version`). A pin makes node
#: images reproducible; `@latest` would drift every node whenever AWS publishes an AMI. AL2023 v20260818:
#: https://github.com/awslabs/amazon-eks-ami/releases/tag/v20260818 (its NVIDIA and Neuron variants are what
#: Karpenter picks for GPU and Neuron instances); Bottlerocket v1.62.0:
#: https://github.com/bottlerocket-os/bottlerocket/releases/tag/v1.62.0. Bump the pin deliberately: the change
#: drifts the nodes, which the serving budgets replace outside business hours.
AMI_VERSIONS: dict[str, str] = {"al2023": "v20260818", "bottlerocket": "v1.62.0"}


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


#: Quantizations served from a downloaded 16-bit checkpoint (what the cache must hold).
ONLINE_FROM_BF16 = {"fp8", "int4", "int8"}
ZONE_KEY = "topology.kubernetes.io/zone"


#: Zones the always-on replicas are spread over when min replicas >= 2: the number the cost counts nodes for
#: (two: zone-failure tolerance), from the cost model itself so the two never disagree.
SPREAD_ZONES = AVAILABILITY_ZONES
#: Where prometheus-adapter runs as its Helm chart installs it (release `prometheus-adapter` in `monitoring`,
#: configuration in ConfigMap `prometheus-adapter`, key `config.yaml`). The rule is rendered as a ConfigMap of its
#: own name beside it, a snippet to merge into that configuration: applying it never replaces the adapter's rules.
ADAPTER_NAMESPACE = "monitoring"
ADAPTER_CONFIGMAP = "llm-sizing-adapter-rules"


#: EC2 capacity reservation ids (On-Demand Capacity Reservations and Capacity Blocks): the CRD's pattern.
CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")


Purpose = Literal["run", "serve"]


class RenderOptions(Strict):
    """Cluster-specific settings of the rendered manifests; the defaults suit the stack's own cluster. The
    container image and every engine setting come from the architecture's `ServingConfig`, not from here."""

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


class _Plan:
    """Facts about the architecture that several objects share."""

    def __init__(self, arch: DeployTarget, run_id: str, candidate_id: str, opts: RenderOptions, cat: Catalog):
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


def _check_deployable(arch: DeployTarget, s: ServingConfig, cat: Catalog) -> None:
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
