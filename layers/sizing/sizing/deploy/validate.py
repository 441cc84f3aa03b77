"""Offline validation of rendered manifests, before anything reaches a cluster.

- Karpenter `NodePool` and `EC2NodeClass`: the OpenAPI v3 schema of the CRDs shipped in `schemas/` (copied from
  Karpenter's release), made strict (unknown fields are errors, as with server-side field validation `Strict`),
  plus hand-coded equivalents of the CRDs' CEL rules that can apply to what we generate (`x-kubernetes-validations`
  rules on create; transition rules on `oldSelf` cannot apply to a new object).
- Core objects (Deployment, Service, PodDisruptionBudget, HorizontalPodAutoscaler): kubernetes-validate in strict
  mode for every Kubernetes version EKS supports for us (1.31-1.34).

jsonschema and kubernetes-validate are development dependencies (`pip install -e '.[dev]'`), imported on first
use so the Lambda layer can import this package without them."""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import yaml

from sizing.errors import InvalidInput, Problem

SCHEMA_DIR = Path(__file__).parent / "schemas"
CRD_FILES = {
    "NodePool": "karpenter.sh_nodepools.yaml",
    "EC2NodeClass": "karpenter.k8s.aws_ec2nodeclasses.yaml",
}
K8S_VERSIONS = ("1.31", "1.32", "1.33", "1.34")

# --- CRD schemas ------------------------------------------------------------------------------------------


def _strict(schema: Any) -> Any:
    """Forbid fields a schema does not declare (Kubernetes prunes them silently; we want to hear about it)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@functools.cache
def _crd_validators(kind: str) -> dict[str, Any]:
    """Validators by apiVersion for one CRD kind."""
    import jsonschema

    crd = yaml.safe_load((SCHEMA_DIR / CRD_FILES[kind]).read_text())
    group = crd["spec"]["group"]
    out: dict[str, Any] = {}
    for version in crd["spec"]["versions"]:
        schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
        out[f"{group}/{version['name']}"] = jsonschema.Draft202012Validator(schema)
    return out


def _where(obj: dict[str, Any]) -> str:
    return f"{obj.get('kind', '?')}/{obj.get('metadata', {}).get('name', '?')}"


def crd_problems(obj: dict[str, Any]) -> list[Problem]:
    kind, api = obj.get("kind", ""), obj.get("apiVersion", "")
    validators = _crd_validators(kind)
    if api not in validators:
        return [Problem(f"{_where(obj)}.apiVersion", f"{api} is not served (known: {', '.join(validators)})")]
    out = []
    for err in sorted(validators[api].iter_errors(obj), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(p) for p in err.absolute_path)
        out.append(Problem(f"{_where(obj)}.{path}" if path else _where(obj), err.message))
    return out + cel_problems(obj)


# --- CEL rules, hand-coded --------------------------------------------------------------------------------

_KARPENTER_SH_ALLOWED = {"karpenter.sh/capacity-type", "karpenter.sh/nodepool"}
#: `karpenter.k8s.aws/*` keys a NodePool may use (the CRD's CEL allow-list).
_KARPENTER_AWS_ALLOWED = {
    "karpenter.k8s.aws/" + k
    for k in [
        "instance-tenancy",
        "capacity-reservation-type",
        "capacity-reservation-id",
        "capacity-reservation-interruptible",
        "ec2nodeclass",
        "instance-encryption-in-transit-supported",
        "nitro-sandbox",
        "instance-category",
        "instance-hypervisor",
        "instance-family",
        "instance-generation",
        "instance-local-nvme",
        "instance-size",
        "instance-cpu",
        "instance-cpu-manufacturer",
        "instance-cpu-sustained-clock-speed-mhz",
        "instance-memory",
        "instance-ebs-bandwidth",
        "instance-network-bandwidth",
        "instance-gpu-name",
        "instance-gpu-manufacturer",
        "instance-gpu-count",
        "instance-gpu-memory",
        "instance-accelerator-name",
        "instance-accelerator-manufacturer",
        "instance-accelerator-count",
        "instance-capability-flex",
        "placement-group-id",
        "placement-group-partition",
    ]
}
_AMI_FAMILIES = {"al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025"}
_AMI_FAMILY_FOR_ALIAS = {"al2": "AL2", "al2023": "AL2023", "bottlerocket": "Bottlerocket"}


def _domain(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else key


def _restricted_key(key: str, for_requirement: bool) -> str | None:
    if key == "karpenter.sh/nodepool" and not for_requirement:
        return 'label "karpenter.sh/nodepool" is restricted'
    if key == "kubernetes.io/hostname":
        return 'label "kubernetes.io/hostname" is restricted'
    if key not in _KARPENTER_SH_ALLOWED and _domain(key).endswith("karpenter.sh"):
        return 'label domain "karpenter.sh" is restricted'
    if key not in _KARPENTER_AWS_ALLOWED and _domain(key).endswith("karpenter.k8s.aws"):
        return 'label domain "karpenter.k8s.aws" is restricted'
    return None


def _nodepool_cel(spec: dict[str, Any], where: str) -> list[Problem]:
    out: list[Problem] = []
    tmpl = spec.get("template", {})
    for key in (tmpl.get("metadata") or {}).get("labels") or {}:
        if msg := _restricted_key(key, for_requirement=False):
            out.append(Problem(f"{where}.spec.template.metadata.labels.{key}", msg))
    tspec = tmpl.get("spec") or {}
    for i, req in enumerate(tspec.get("requirements") or []):
        at = f"{where}.spec.template.spec.requirements.{i}"
        key, op, values = req.get("key", ""), req.get("operator"), req.get("values") or []
        if key == "karpenter.sh/nodepool":
            out.append(Problem(at, 'label "karpenter.sh/nodepool" is restricted'))
        elif msg := _restricted_key(key, for_requirement=True):
            out.append(Problem(at, msg))
        if op == "In" and not values:
            out.append(Problem(at, "requirements with operator 'In' must have a value defined"))
        if op in {"Gt", "Lt", "Gte", "Lte"} and (
            len(values) != 1 or not re.fullmatch(r"\d+", str(values[0]))
        ):
            out.append(Problem(at, f"requirements operator '{op}' must have a single positive integer value"))
        if op == "In" and "minValues" in req and len(values) < req["minValues"]:
            out.append(Problem(at, "requirements with 'minValues' must have at least that many values"))
    ref = tspec.get("nodeClassRef") or {}
    for f in ("group", "kind", "name"):
        if ref.get(f) == "":
            out.append(Problem(f"{where}.spec.template.spec.nodeClassRef.{f}", f"{f} may not be empty"))
    for i, b in enumerate((spec.get("disruption") or {}).get("budgets") or []):
        if ("schedule" in b) != ("duration" in b):
            out.append(
                Problem(f"{where}.spec.disruption.budgets.{i}", "'schedule' must be set with 'duration'")
            )
    if "replicas" in spec:
        limits = spec.get("limits") or {}
        if limits and set(limits) != {"nodes"}:
            out.append(
                Problem(f"{where}.spec.limits", "only 'limits.nodes' is supported on static NodePools")
            )
        if "weight" in spec:
            out.append(Problem(f"{where}.spec.weight", "'weight' is not supported on static NodePools"))
    return out


def _terms_problems(terms: list[dict[str, Any]], at: str, allowed: tuple[str, ...]) -> list[Problem]:
    out = []
    if not terms:
        out.append(Problem(at, "cannot be empty"))
    for i, t in enumerate(terms):
        if not any(k in t for k in allowed):
            out.append(Problem(f"{at}.{i}", f"expected at least one, got none, {list(allowed)}"))
        if "id" in t and len(t) > 1:
            out.append(Problem(f"{at}.{i}", "'id' is mutually exclusive with other fields"))
        for k, v in (t.get("tags") or {}).items():
            if k == "" or v == "":
                out.append(Problem(f"{at}.{i}.tags", "empty tag keys or values aren't supported"))
    return out


def _nodeclass_cel(spec: dict[str, Any], where: str) -> list[Problem]:
    out: list[Problem] = []
    s = f"{where}.spec"
    amis = spec.get("amiSelectorTerms") or []
    out += _terms_problems(amis, f"{s}.amiSelectorTerms", ("tags", "id", "name", "alias", "ssmParameter"))
    aliases = [t["alias"] for t in amis if "alias" in t]
    if aliases and len(amis) != 1:
        out.append(
            Problem(f"{s}.amiSelectorTerms", "'alias' is mutually exclusive with other amiSelectorTerms")
        )
    for t in amis:
        if "alias" in t and len(t) > 1:
            out.append(Problem(f"{s}.amiSelectorTerms", "'alias' cannot be combined with other fields"))
    for alias in aliases:
        if not re.fullmatch(r"[a-zA-Z0-9]+@.+", alias):
            out.append(Problem(f"{s}.amiSelectorTerms", "'alias' must match the format 'family@version'"))
            continue
        family, version = alias.split("@", 1)
        if family not in _AMI_FAMILIES:
            out.append(Problem(f"{s}.amiSelectorTerms", f"family '{family}' is not supported"))
        if family.startswith("windows") and version != "latest":
            out.append(Problem(f"{s}.amiSelectorTerms", "windows families may only specify version 'latest'"))
        wanted = _AMI_FAMILY_FOR_ALIAS.get(family)
        if "amiFamily" in spec and wanted and spec["amiFamily"] not in {wanted, "Custom"}:
            out.append(Problem(f"{s}.amiFamily", f"must be '{wanted}' or 'Custom' with a {family} alias"))
    if ("role" in spec) == ("instanceProfile" in spec):
        out.append(Problem(s, "must specify exactly one of ['role', 'instanceProfile']"))
    for f in ("role", "instanceProfile"):
        if spec.get(f) == "":
            out.append(Problem(f"{s}.{f}", f"{f} cannot be empty"))
    out += _terms_problems(spec.get("subnetSelectorTerms") or [], f"{s}.subnetSelectorTerms", ("tags", "id"))
    out += _terms_problems(
        spec.get("securityGroupSelectorTerms") or [],
        f"{s}.securityGroupSelectorTerms",
        ("tags", "id", "name"),
    )
    bdm = spec.get("blockDeviceMappings") or []
    if sum(1 for b in bdm if b.get("rootVolume")) > 1:
        out.append(
            Problem(f"{s}.blockDeviceMappings", "must have only one blockDeviceMappings with rootVolume")
        )
    for i, b in enumerate(bdm):
        ebs = b.get("ebs")
        if ebs is not None and "snapshotID" not in ebs and "volumeSize" not in ebs:
            out.append(
                Problem(f"{s}.blockDeviceMappings.{i}.ebs", "snapshotID or volumeSize must be defined")
            )
    for k, v in (spec.get("tags") or {}).items():
        if k == "":
            out.append(Problem(f"{s}.tags", "empty tag keys aren't supported"))
        if (
            k == "eks:eks-cluster-name"
            or k.startswith("kubernetes.io/cluster")
            or k == "karpenter.sh/nodepool"
        ):
            out.append(Problem(f"{s}.tags.{k}", "tag contains a restricted key"))
        del v
    return out


def cel_problems(obj: dict[str, Any]) -> list[Problem]:
    """The CRDs' CEL rules that apply on create, evaluated by hand for NodePool and EC2NodeClass."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "NodePool":
        return _nodepool_cel(spec, _where(obj))
    if obj.get("kind") == "EC2NodeClass":
        return _nodeclass_cel(spec, _where(obj))
    return []


# --- core objects -----------------------------------------------------------------------------------------


@functools.cache
def _core_validator(kind: str, api_version: str, version: str) -> Any:
    """kubernetes-validate's strict schema for one kind and version, compiled once per process.

    `kubernetes_validate.validate` re-reads its large definitions file on every call (~9 ms); this builds the
    same validator (same files, same Draft 2020-12 registry) once. None when the kind is not in that version."""
    import jsonschema
    import referencing
    from kubernetes_validate import utils

    schema_version = [v for v in utils.all_versions() if utils.major_minor(v) <= utils.major_minor(version)][
        -1
    ]
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    folder = f"kubernetes-json-schema/v{schema_version}-local-strict"
    try:
        schema = utils.schema_contents(f"{folder}/{kind.lower()}-{api}.json", version)
    except FileNotFoundError:
        return None
    definitions = utils.schema_contents(f"{folder}/_definitions.json", version)
    registry = referencing.Resource.from_contents(definitions) @ (
        referencing.Resource.from_contents(schema) @ referencing.Registry()
    )
    return jsonschema.Draft202012Validator(schema, registry=registry)


def core_problems(obj: dict[str, Any], versions: tuple[str, ...] = K8S_VERSIONS) -> list[Problem]:
    """kubernetes-validate `--strict` for each version (unknown fields are errors)."""
    out = []
    for v in versions:
        validator = _core_validator(obj.get("kind", ""), obj.get("apiVersion", ""), v)
        if validator is None:
            out.append(
                Problem(_where(obj), f"{obj.get('apiVersion')} {obj.get('kind')} is not in Kubernetes {v}")
            )
            continue
        for err in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path)):
            path = ".".join(str(p) for p in err.absolute_path)
            out.append(Problem(f"{_where(obj)}.{path} (Kubernetes {v})", err.message))
    return out


def problems(objs: list[dict[str, Any]], versions: tuple[str, ...] = K8S_VERSIONS) -> list[Problem]:
    """Everything wrong with a set of manifests (empty when they are valid)."""
    out: list[Problem] = []
    for obj in objs:
        if obj.get("kind") in CRD_FILES:
            out += crd_problems(obj)
        else:
            out += core_problems(obj, versions)
    return out


def validate(objs: list[dict[str, Any]], versions: tuple[str, ...] = K8S_VERSIONS) -> None:
    """Raise InvalidInput naming every problem, or return quietly."""
    found = problems(objs, versions)
    if found:
        raise InvalidInput(f"{len(found)} problem(s) in the manifests", found)
