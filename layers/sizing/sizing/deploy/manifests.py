"""Kubernetes objects that run one architecture on EKS: Karpenter NodePool + EC2NodeClass, and vLLM's
OpenAI server as a Deployment with its Service, PodDisruptionBudget and HorizontalPodAutoscaler.

Autoscaler: **HPA v2** on a per-pod serving metric (running requests), not KEDA. HPA is a core API, so it is
validated offline by kubernetes-validate like the Deployment, it needs no extra operator or CRD in the
measurement cluster (only a custom-metrics adapter exposing vLLM's Prometheus metric, which a cluster without one
simply ignores — the Deployment still runs its fixed replicas), and a sizing run never needs KEDA's
scale-to-zero: the load test decides the load, and teardown removes everything afterwards.

Every object carries the run and candidate labels of `sizing.deploy.labels`; teardown and the janitor select
on exactly those. Nothing that changes between two applies of the same candidate (such as a deadline) is put in
a pod or node template, so re-applying never restarts pods nor replaces GPU nodes."""

from __future__ import annotations

import json
import math
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from sizing.catalog import Catalog, load_catalog
from sizing.deploy import labels as L
from sizing.deploy.architecture import Architecture
from sizing.errors import InvalidInput

KARPENTER_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"

GPU_RESOURCE = "nvidia.com/gpu"
NEURON_RESOURCE = "aws.amazon.com/neuron"
#: The taints the NVIDIA and Neuron device-plugin setups on EKS use, so only accelerator pods land there.
GPU_TAINT = {"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}
NEURON_TAINT = {"key": NEURON_RESOURCE, "value": "true", "effect": "NoSchedule"}

#: vLLM's OpenAI server port (its default).
SERVING_PORT = 8000
SERVICE_PORT = 80
GIB = 2**30
#: vLLM needs shared memory for tensor-parallel workers; 2 GiB as in vLLM's Kubernetes deployment example.
SHM_GIB = 2
#: Share of a node's vCPUs and memory the serving pods request; the rest is left for the kubelet, system
#: reservations and DaemonSets (device plugin, CNI, kube-proxy, CSI), which together take well under 20%.
POD_SHARE_OF_NODE = 0.8
#: Root volume: Karpenter's default AL2023 root volume (20 GiB) for the OS and kubelet, plus the vLLM image
#: (28.6 GB unpacked and ~12 GB compressed during the pull, notes/serving-facts.md s4) rounded to 45 GiB, plus
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
#: from gp3 at its baseline took 48 s for an 8B model against 7.5 s from io2 (notes/serving-facts.md s4).
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
#: Bound on how long Karpenter waits for pods (do-not-disrupt included) when a node expires or is deleted.
NODE_TERMINATION_GRACE = "10m"
#: HPA: scale up at once, scale down only after 10 minutes of lower load (a GPU pod takes minutes to start).
SCALE_DOWN_WINDOW_S = 600
#: A sizing run's resources live at most this long unless told otherwise (the janitor's deadline).
DEFAULT_MAX_DURATION_S = 4 * 3600

#: Arguments per quantization when the model's own (unquantized) checkpoint is served: vLLM quantizes fp8
#: dynamically and int4 in flight with bitsandbytes. int8 has no in-flight path in vLLM: it needs a
#: pre-quantized (W8A8) checkpoint given in `RenderOptions.checkpoints`.
GPU_QUANT_ARGS: dict[str, list[str]] = {
    "bf16": ["--dtype=bfloat16"],
    "fp8": ["--quantization=fp8"],
    "int4": ["--quantization=bitsandbytes"],
}
#: On Neuron, vLLM quantizes weights at load time with `neuron_quant` and NEURON_QUANT_DTYPE.
NEURON_QUANT_DTYPE = {"fp8": "f8e4m3fn", "int8": "s8"}
#: Logical NeuronCores per trn2 chip at the runtime's default LNC=2 (notes/serving-facts.md s3).
TRN2_LOGICAL_CORES_PER_CHIP = 4
#: Engines whose own server we render; the planner's other engines (trtllm, tgi, sglang) are measured on vLLM
#: and the Deployment says so in an annotation.
RENDERED_ENGINES = {"vllm", "neuron"}
ENGINE_NOTE = f"{L.PREFIX}/engine-note"
#: Quantizations served from a downloaded 16-bit checkpoint (what the cache must hold).
ONLINE_FROM_BF16 = {"fp8", "int4", "int8"}

ORDER = [
    "EC2NodeClass",
    "NodePool",
    "Service",
    "PodDisruptionBudget",
    "Deployment",
    "HorizontalPodAutoscaler",
]


class RenderOptions(BaseModel):
    """Cluster-specific settings of the rendered manifests; the defaults suit the stack's own cluster."""

    model_config = ConfigDict(extra="forbid")

    namespace: str = "llm-sizing"
    #: Value of the `karpenter.sh/discovery` tag on the cluster's subnets and security groups.
    cluster_name: str = "llm-sizing"
    node_role: str = "KarpenterNodeRole-llm-sizing"
    ami_family: Literal["al2023", "bottlerocket"] = "al2023"
    ami_version: str = "latest"
    restrict_to: Literal["instance-type", "instance-family"] = "instance-type"
    gpu_image: str = "vllm/vllm-openai:v0.11.0"
    neuron_image: str = (
        "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py310-sdk2.25.0-ubuntu22.04"
    )
    #: Hugging Face repo to serve (default: the catalog id of the architecture's model).
    hf_model: str | None = None
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
    #: Karpenter expires the nodes after this long whatever happens (the backstop behind teardown/janitor).
    max_duration_s: int = Field(default=DEFAULT_MAX_DURATION_S, ge=600)


def _quantity_gib(gib: float) -> str:
    return f"{math.ceil(gib)}Gi"


def _round_up(x: float, step: int) -> int:
    return int(math.ceil(x / step) * step)


class _Plan:
    """Facts about the architecture that several objects share."""

    def __init__(self, arch: Architecture, run_id: str, candidate_id: str, opts: RenderOptions, cat: Catalog):
        if arch.deployment != "eks":
            raise InvalidInput(
                f"{arch.id}: only EKS architectures have Kubernetes manifests (this one is {arch.deployment})"
            )
        #: The model as the caller named it (e.g. an -Instruct alias): what is served and requested by name.
        self.requested_model = arch.model
        self.arch = arch = arch.resolve(cat)
        assert arch.instance_type and arch.serving and arch.replicas_per_instance and arch.weights_gb
        assert arch.serving.max_num_seqs and arch.serving.gpu_memory_utilization
        self.opts = opts
        self.inst = cat.instance(arch.instance_type)
        self.acc = cat.accelerator_of(self.inst)
        self.neuron = self.acc.kind == "neuron"
        self.name = L.object_name(run_id, candidate_id, arch.instance_type)
        self.labels = L.run_labels(run_id, candidate_id)
        self.meta_labels = L.run_labels(run_id, candidate_id, opts.expires_at)
        self.annotations = {L.RUN_ID_FULL: run_id, L.CANDIDATE_ID_FULL: candidate_id}
        self.resource = NEURON_RESOURCE if self.neuron else GPU_RESOURCE
        self.taint = NEURON_TAINT if self.neuron else GPU_TAINT
        # Pods ask for TP devices; Neuron's device plugin counts chips, each holding `cores_per_chip` cores.
        self.devices_per_pod = math.ceil(arch.tensor_parallel / self.acc.cores_per_chip)
        self.per_node = arch.replicas_per_instance
        self.nodes_max = arch.node_count(headroom=1)
        self.replicas = opts.replicas or max(1, arch.replicas.min)
        spec = cat.model(arch.model)
        quant = arch.quantization
        self.checkpoint = opts.checkpoints.get(quant)
        if quant == "int8" and not self.checkpoint and not self.neuron:
            raise InvalidInput(
                f"{arch.id}: vLLM cannot quantize to int8 on load; give a pre-quantized checkpoint "
                "(RenderOptions.checkpoints {'int8': 'org/model-w8a8'})"
            )
        if quant == "int4" and self.neuron:
            raise InvalidInput(f"{arch.id}: vLLM on Neuron does not serve int4")
        self.hf_model = self.checkpoint or opts.hf_model or self.requested_model
        self.engine_note = (
            {ENGINE_NOTE: f"planned for {arch.engine}; served by vLLM (no {arch.engine} server is rendered)"}
            if arch.engine not in RENDERED_ENGINES
            else {}
        )
        from_bf16 = quant in ONLINE_FROM_BF16 and not self.checkpoint
        download_gb = spec.weight_bytes("bf16") / 1e9 if from_bf16 else arch.weights_gb
        # Whole GiB: what each pod requests, so the volume is sized from the same number.
        self.cache_gib = math.ceil(
            download_gb * 1e9 / GIB * CACHE_MARGIN + (NEURON_CACHE_GIB if self.neuron else 0)
        )
        needed = OS_GIB + IMAGE_GIB + self.per_node * self.cache_gib
        self.volume_gib = _round_up(needed / (1 - NODEFS_EVICTION_FRACTION), VOLUME_STEP_GIB)

    def meta(self, name: str, namespaced: bool = True) -> dict[str, Any]:
        m: dict[str, Any] = {"name": name}
        if namespaced:
            m["namespace"] = self.opts.namespace
        m["labels"] = dict(self.meta_labels)
        m["annotations"] = dict(self.annotations)
        return m


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
    return {
        "apiVersion": NODECLASS_API,
        "kind": "EC2NodeClass",
        "metadata": p.meta(p.name, namespaced=False),
        "spec": {
            "amiSelectorTerms": [{"alias": f"{p.opts.ami_family}@{p.opts.ami_version}"}],
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
        },
    }


def _nodepool(p: _Plan) -> dict[str, Any]:
    arch = p.arch
    if p.opts.restrict_to == "instance-family":
        count_key = (
            "karpenter.k8s.aws/instance-accelerator-count"
            if p.neuron
            else "karpenter.k8s.aws/instance-gpu-count"
        )
        shape = [
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [p.inst.family]},
            {"key": count_key, "operator": "Gte", "values": [str(p.devices_per_pod)]},
        ]
    else:
        shape = [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [p.inst.instance_type]}
        ]
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
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": [arch.capacity_type],
                        },
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    "taints": [dict(p.taint)],
                    "expireAfter": f"{math.ceil(p.opts.max_duration_s / 60)}m",
                    "terminationGracePeriod": NODE_TERMINATION_GRACE,
                },
            },
            "limits": {
                "cpu": str(p.nodes_max * p.inst.vcpu),
                "memory": _quantity_gib(p.nodes_max * p.inst.memory_gib),
                p.resource: str(p.nodes_max * accel_per_node),
                "nodes": str(p.nodes_max),
            },
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": CONSOLIDATE_AFTER,
                "budgets": [
                    {"nodes": "1", "reasons": ["Empty"]},
                    {"nodes": "0", "reasons": ["Drifted", "Underutilized"]},
                ],
            },
        },
    }


def _serving_args(p: _Plan) -> tuple[list[str], list[dict[str, Any]]]:
    arch, s = p.arch, p.arch.serving
    assert s is not None
    args = [
        f"--model={p.hf_model}",
        f"--served-model-name={p.requested_model}",
        "--host=0.0.0.0",
        f"--port={SERVING_PORT}",
        f"--tensor-parallel-size={arch.tensor_parallel}",
        f"--max-model-len={s.max_model_len}",
        f"--max-num-seqs={s.max_num_seqs}",
    ]
    if s.max_num_batched_tokens:
        args.append(f"--max-num-batched-tokens={s.max_num_batched_tokens}")
    env: list[dict[str, Any]] = []
    if p.neuron:
        if arch.quantization in NEURON_QUANT_DTYPE:
            args.append("--quantization=neuron_quant")
            env.append({"name": "NEURON_QUANT_DTYPE", "value": NEURON_QUANT_DTYPE[arch.quantization]})
        # Compiled NEFFs go to $VLLM_CACHE_ROOT/neuron/compile_cache (s3): keep them on the cache volume.
        env.append({"name": "VLLM_CACHE_ROOT", "value": "/models/vllm"})
        if p.acc.cores_per_chip > TRN2_LOGICAL_CORES_PER_CHIP:
            # The catalog counts trn2's 8 physical NeuronCores per chip; the runtime pairs them by default
            # (LNC=2, s3). LNC=1 makes `--tensor-parallel-size N` mean the N cores the planner sized for.
            env.append({"name": "NEURON_LOGICAL_NC_CONFIG", "value": "1"})
    else:
        args.append(f"--gpu-memory-utilization={s.gpu_memory_utilization}")
        if not p.checkpoint:
            args += GPU_QUANT_ARGS[arch.quantization]
    return args, env


def _deployment(p: _Plan) -> dict[str, Any]:
    args, env = _serving_args(p)
    probe = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": PROBE_PERIOD_S}
    startup_s = NEURON_STARTUP_S if p.neuron else GPU_STARTUP_S
    cpu_m = int(p.inst.vcpu * 1000 * POD_SHARE_OF_NODE / p.per_node)
    mem_gib = p.inst.memory_gib * POD_SHARE_OF_NODE / p.per_node
    cache = _quantity_gib(p.cache_gib)
    pod_labels = {**p.labels, "app.kubernetes.io/name": "llm-serving", "app.kubernetes.io/instance": p.name}
    resources = {
        "requests": {
            "cpu": f"{cpu_m}m",
            "memory": f"{math.floor(mem_gib)}Gi",
            "ephemeral-storage": cache,
            p.resource: str(p.devices_per_pod),
        },
        "limits": {"memory": f"{math.floor(mem_gib)}Gi", p.resource: str(p.devices_per_pod)},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": p.meta(p.name),
        "spec": {
            "replicas": p.replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/instance": p.name}},
            # A surge pod would need one more GPU node; replace one pod at a time instead.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {"karpenter.sh/do-not-disrupt": "true", **p.annotations, **p.engine_note},
                },
                "spec": {
                    "nodeSelector": {"karpenter.sh/nodepool": p.name},
                    "tolerations": [{"key": p.taint["key"], "operator": "Exists", "effect": "NoSchedule"}],
                    "terminationGracePeriodSeconds": 60,
                    "containers": [
                        {
                            "name": "vllm",
                            "image": p.opts.neuron_image if p.neuron else p.opts.gpu_image,
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
                            "startupProbe": {**probe, "failureThreshold": startup_s // PROBE_PERIOD_S},
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
                        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{SHM_GIB}Gi"}},
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


def _hpa(p: _Plan) -> dict[str, Any]:
    arch = p.arch
    assert arch.serving is not None
    per_pod = (arch.per_replica.max_concurrency if arch.per_replica else None) or arch.serving.max_num_seqs
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": p.meta(p.name),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": p.name},
            "minReplicas": p.replicas,
            "maxReplicas": max(p.replicas, arch.replicas.peak),
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": p.opts.autoscale_metric},
                        # The concurrency a replica holds within the SLO (the planner's figure).
                        "target": {"type": "AverageValue", "averageValue": str(max(1, math.floor(per_pod)))},
                    },
                }
            ],
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0},
                "scaleDown": {"stabilizationWindowSeconds": SCALE_DOWN_WINDOW_S},
            },
        },
    }


def render(
    architecture: Architecture | dict[str, Any],
    run_id: str,
    candidate_id: str | None = None,
    options: RenderOptions | None = None,
    catalog: Catalog | None = None,
) -> list[dict[str, Any]]:
    """The Kubernetes objects for one candidate, in apply order (node classes first, autoscaler last)."""
    arch = architecture if isinstance(architecture, Architecture) else Architecture.from_dict(architecture)
    opts = options or RenderOptions()
    p = _Plan(arch, run_id, candidate_id or arch.id, opts, catalog or load_catalog())
    objs = [_nodeclass(p), _nodepool(p), _service(p), _pdb(p), _deployment(p)]
    if opts.autoscale:
        objs.append(_hpa(p))
    return objs


class _Dumper(yaml.SafeDumper):
    """Plain YAML: no `&anchor`/`*alias` even where two objects share a dict."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(objs: list[dict[str, Any]]) -> str:
    """A multi-document YAML stream (what `kubectl apply -f` takes)."""
    return yaml.dump_all(objs, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def to_json(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)
