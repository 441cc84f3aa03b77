"""The engine's objects: the Deployment (vLLM's container arguments from the architecture's
`ServingConfig`, shared memory, probes, placement on the nodes), its Service, PodDisruptionBudget and
HorizontalPodAutoscaler, and the prometheus-adapter rule the autoscaler's metric needs."""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from sizing.base.serving_config import ServingConfig, vllm_args
from sizing.deploy import labels as L
from sizing.deploy.rendering import SPREAD_ZONES, ZONE_KEY, RenderOptions, _Plan, _quantity_gib

#: vLLM's OpenAI server port (its default); it serves Prometheus metrics on `/metrics` of the same port.
SERVING_PORT = 8000
SERVICE_PORT = 80


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


PROBE_PERIOD_S = 10


#: HPA: scale up at once, scale down only after 10 minutes of lower load (a GPU pod takes minutes to start).
SCALE_DOWN_WINDOW_S = 600


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
    # a CPU without bf16 arithmetic: the bf16 checkpoint cast up at load (docs/engine.md, "fp32 where the CPU has no
    # bf16")
    "fp32": ["--dtype=float32"],
}
#: On Neuron, vLLM quantizes weights at load time with `neuron_quant` and NEURON_QUANT_DTYPE.
NEURON_QUANT_DTYPE = {"fp8": "f8e4m3fn", "int8": "s8"}


#: Pod annotation naming the quantization of a pre-quantized checkpoint (no vLLM flag states it then).
CHECKPOINT_QUANT = f"{L.PREFIX}/checkpoint-quantization"
#: Deployment annotation stating how replicas land on nodes and zones (the rule the cost counts).
PLACEMENT = f"{L.PREFIX}/placement"


HOST_KEY = "kubernetes.io/hostname"
#: Preferred-affinity weight (Kubernetes' maximum, 100): packing onto a node already running the app outweighs
#: the scheduler's default spreading scores.
PACK_WEIGHT = 100


#: The adapter configuration the rule is merged into (the Helm chart's ConfigMap), named in the header.
ADAPTER_CHART_CONFIGMAP = "prometheus-adapter"
ADAPTER_CONFIG_KEY = "config.yaml"
#: Annotation of the rule's ConfigMap saying what to do with it.
ADAPTER_MERGE_ANNOTATION = "llm-sizing/merge-into"


def shm_gib(serving: ServingConfig) -> int:
    """`/dev/shm` for one replica (see SHM_BASE_GIB)."""
    workers = 1 if serving.engine == "neuron" else serving.tensor_parallel
    return SHM_BASE_GIB + SHM_GIB_PER_WORKER * workers


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
