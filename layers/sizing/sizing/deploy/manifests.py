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
from typing import Any

import yaml

from sizing.base.errors import InvalidInput, Problem
from sizing.base.serving_config import ServingConfig, parse_vllm_args
from sizing.catalog import Catalog, load_catalog
from sizing.deploy import labels as L
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.base import as_target
from sizing.deploy.nodes import _nodeclass, _nodepool
from sizing.deploy.pods import (
    CHECKPOINT_QUANT,
    GPU_QUANT_ARGS,
    NEURON_QUANT_DTYPE,
    _adapter_config,
    _deployment,
    _hpa,
    _pdb,
    _service,
    adapter_merge_note,
)
from sizing.deploy.rendering import NEURON_FIXED, NEURON_RESOURCE, RenderOptions, _Plan
from sizing.results import Architecture as Answer

#: Shared by every deployment in the cluster (rendered for `serve` only, never deleted by a teardown).
SHARED_KINDS = ["Namespace", "ConfigMap"]


def _namespace(p: _Plan) -> dict[str, Any]:
    # Shared by every deployment: the manager label only, as the provisioner creates it, so no teardown
    # (which selects on run labels) ever deletes it.
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": p.opts.namespace, "labels": {L.MANAGED_BY: L.MANAGER}},
    }


def render(
    architecture: DeployTarget | Answer | dict[str, Any],
    run_id: str,
    candidate_id: str | None = None,
    options: RenderOptions | None = None,
    catalog: Catalog | None = None,
) -> list[dict[str, Any]]:
    """The Kubernetes objects for one candidate, in apply order (namespace and node classes first, autoscaler
    last). Raises InvalidInput naming the field for anything that cannot be deployed as estimated."""
    arch = as_target(architecture)
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
