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
# Each check reports the CRD's own message, so a problem reads exactly as the API server would word it.

_KARPENTER_SH_ALLOWED = {"karpenter.sh/capacity-type", "karpenter.sh/nodepool"}
#: `karpenter.k8s.aws/*` keys a NodePool may use (the CRD's CEL allow-list).
_KARPENTER_AWS_ALLOWED = {
    "karpenter.k8s.aws/" + k
    for k in [
        "instance-tenancy", "capacity-reservation-type", "capacity-reservation-id",
        "capacity-reservation-interruptible", "ec2nodeclass", "instance-encryption-in-transit-supported",
        "nitro-sandbox", "instance-category", "instance-hypervisor", "instance-family", "instance-generation",
        "instance-local-nvme", "instance-size", "instance-cpu", "instance-cpu-manufacturer",
        "instance-cpu-sustained-clock-speed-mhz", "instance-memory", "instance-ebs-bandwidth",
        "instance-network-bandwidth", "instance-gpu-name", "instance-gpu-manufacturer", "instance-gpu-count",
        "instance-gpu-memory", "instance-accelerator-name", "instance-accelerator-manufacturer",
        "instance-accelerator-count", "instance-capability-flex", "placement-group-id", "placement-group-partition",
    ]
}  # fmt: skip
_AMI_FAMILIES = ["al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025"]
_AMI_FAMILY_NAME = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
    "windows2025": "Windows2025",
}
_RESTRICTED_TAGS = {
    "eks:eks-cluster-name": "eks:eks-cluster-name",
    "karpenter.sh/nodepool": "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim": "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass": "karpenter.k8s.aws/ec2nodeclass",
}

#: Every CEL rule message of the two CRDs and how it is treated here: "checked" (evaluated by the code below),
#: "transition" (compares with the old object: cannot fail on create) or "unused: ..." (about fields we never
#: generate). A test fails when a new CRD brings a rule this table does not name.
CEL_COVERAGE: dict[str, str] = {
    # NodePool
    "'schedule' must be set with 'duration'": "checked",
    "'weight' is not supported on static NodePools": "checked",
    "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes": (
        "transition"
    ),
    "group may not be empty": "checked",
    "kind may not be empty": "checked",
    "name may not be empty": "checked",
    'label "karpenter.sh/nodepool" is restricted': "checked",
    'label "kubernetes.io/hostname" is restricted': "checked",
    'label domain "karpenter.k8s.aws" is restricted': "checked",
    'label domain "karpenter.sh" is restricted': "checked",
    "nodeClassRef.group is immutable": "transition",
    "nodeClassRef.kind is immutable": "transition",
    "only 'limits.nodes' is supported on static NodePools": "checked",
    "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value": "checked",
    "requirements with 'minValues' must have at least that many values specified in the 'values' field": "checked",
    "requirements with operator 'In' must have a value defined": "checked",
    # EC2NodeClass
    "'alias' is improperly formatted, must match the format 'family@version'": "checked",
    "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms": "checked",
    "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms": "checked",
    "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms": "checked",
    "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term": (
        "checked"
    ),
    "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term": "checked",
    "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term": (
        "checked"
    ),
    "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term": (
        "checked"
    ),
    "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']": "checked",
    "'name' and 'id' are mutually exclusive": "unused: we never set a placement group",
    "expected at least one, got none, ['name', 'id']": "unused: we never set a placement group",
    "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set": (
        "unused: we never set connection tracking"
    ),
    "networkInterfaces must include a primary interface with interfaceType='interface'": (
        "unused: we never set network interfaces"
    ),
    "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa "
    "device per network card": "unused: we never set network interfaces",
    "empty tag keys aren't supported": "checked",
    "empty tag keys or values aren't supported": "checked",
    "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']": "checked",
    "expected at least one, got none, ['tags', 'id', 'name']": "checked",
    "expected at least one, got none, ['tags', 'id']": "checked",
    "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', "
    "'windows2022', 'windows2025'": "checked",
    "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias": "checked",
    "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias": "checked",
    "if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias": "checked",
    "if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias": "checked",
    "if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias": "checked",
    "if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias": "checked",
    "instanceProfile cannot be empty": "checked",
    "role cannot be empty": "checked",
    "must have only one blockDeviceMappings with rootVolume": "checked",
    "must specify amiFamily if amiSelectorTerms does not contain an alias": "checked",
    "must specify exactly one of ['role', 'instanceProfile']": "checked",
    "securityGroupSelectorTerms cannot be empty": "checked",
    "subnetSelectorTerms cannot be empty": "checked",
    "snapshotID must be set when volumeInitializationRate is set": "checked",
    "snapshotID or volumeSize must be defined": "checked",
    "tag contains a restricted tag matching eks:eks-cluster-name": "checked",
    "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass": "checked",
    "tag contains a restricted tag matching karpenter.sh/nodeclaim": "checked",
    "tag contains a restricted tag matching karpenter.sh/nodepool": "checked",
    "tag contains a restricted tag matching kubernetes.io/cluster/": "checked",
    "windows families may only specify version 'latest'": "checked",
}


def crd_cel_messages(kind: str) -> set[str]:
    """Every `x-kubernetes-validations` message in a shipped CRD (all versions)."""
    crd = yaml.safe_load((SCHEMA_DIR / CRD_FILES[kind]).read_text())
    out: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            out.update(v["message"] for v in node.get("x-kubernetes-validations") or [])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(crd["spec"]["versions"])
    return out


def _domain(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else key


def _label_key_problems(key: str, at: str) -> list[Problem]:
    out = []
    if key not in _KARPENTER_SH_ALLOWED and _domain(key).endswith("karpenter.sh"):
        out.append(Problem(at, 'label domain "karpenter.sh" is restricted'))
    if key == "karpenter.sh/nodepool":
        out.append(Problem(at, 'label "karpenter.sh/nodepool" is restricted'))
    if key == "kubernetes.io/hostname":
        out.append(Problem(at, 'label "kubernetes.io/hostname" is restricted'))
    if key not in _KARPENTER_AWS_ALLOWED and _domain(key).endswith("karpenter.k8s.aws"):
        out.append(Problem(at, 'label domain "karpenter.k8s.aws" is restricted'))
    return out


def _nodepool_cel(spec: dict[str, Any], where: str) -> list[Problem]:
    out: list[Problem] = []
    tmpl = spec.get("template", {})
    for key in (tmpl.get("metadata") or {}).get("labels") or {}:
        out += _label_key_problems(key, f"{where}.spec.template.metadata.labels.{key}")
    tspec = tmpl.get("spec") or {}
    for i, req in enumerate(tspec.get("requirements") or []):
        at = f"{where}.spec.template.spec.requirements.{i}"
        key, op, values = req.get("key", ""), req.get("operator"), req.get("values") or []
        out += _label_key_problems(key, f"{at}.key")
        if op == "In" and not values:
            out.append(Problem(at, "requirements with operator 'In' must have a value defined"))
        if op in {"Gt", "Lt", "Gte", "Lte"} and (
            len(values) != 1 or not re.fullmatch(r"\d+", str(values[0]))
        ):
            out.append(
                Problem(
                    at,
                    "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
                )
            )
        if op == "In" and "minValues" in req and len(values) < req["minValues"]:
            out.append(
                Problem(
                    at,
                    "requirements with 'minValues' must have at least that many values specified in the 'values' field",
                )
            )
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


def _tags_problems(terms: list[dict[str, Any]], at: str) -> list[Problem]:
    return [
        Problem(f"{at}.{i}.tags", "empty tag keys or values aren't supported")
        for i, t in enumerate(terms)
        if any(k == "" or v == "" for k, v in (t.get("tags") or {}).items())
    ]


def _ami_problems(spec: dict[str, Any], s: str) -> list[Problem]:
    out: list[Problem] = []
    at = f"{s}.amiSelectorTerms"
    terms = spec.get("amiSelectorTerms") or []
    if any(not any(k in t for k in ("tags", "id", "name", "alias", "ssmParameter")) for t in terms):
        out.append(
            Problem(at, "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']")
        )
    if any("id" in t and any(k in t for k in ("alias", "tags", "name", "owner")) for t in terms):
        out.append(
            Problem(
                at,
                "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
            )
        )
    if any("alias" in t and any(k in t for k in ("id", "tags", "name", "owner")) for t in terms):
        out.append(
            Problem(
                at,
                "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
            )
        )
    aliases = [t["alias"] for t in terms if "alias" in t]
    if aliases and len(terms) != 1:
        out.append(
            Problem(
                at,
                "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
            )
        )
    if not aliases and "amiFamily" not in spec:
        out.append(Problem(s, "must specify amiFamily if amiSelectorTerms does not contain an alias"))
    out += _tags_problems(terms, at)
    for alias in aliases:
        if not re.fullmatch(r"[a-zA-Z0-9]+@.+", alias):
            out.append(Problem(at, "'alias' is improperly formatted, must match the format 'family@version'"))
            continue
        family, version = alias.split("@", 1)
        if family not in _AMI_FAMILIES:
            out.append(
                Problem(
                    at,
                    "family is not supported, must be one of the following: "
                    + ", ".join(f"'{f}'" for f in _AMI_FAMILIES),
                )
            )
        if family.startswith("windows") and version != "latest":
            out.append(Problem(at, "windows families may only specify version 'latest'"))
        name = _AMI_FAMILY_NAME.get(family)
        if name and "amiFamily" in spec and spec["amiFamily"] not in {name, "Custom"}:
            a_or_an = "an" if name[0] in "A" else "a"
            out.append(
                Problem(
                    f"{s}.amiFamily",
                    f"if set, amiFamily must be '{name}' or 'Custom' when using {a_or_an} {name} alias",
                )
            )
    return out


def _nodeclass_cel(spec: dict[str, Any], where: str) -> list[Problem]:
    s = f"{where}.spec"
    out = _ami_problems(spec, s)
    if ("role" in spec) == ("instanceProfile" in spec):
        out.append(Problem(s, "must specify exactly one of ['role', 'instanceProfile']"))
    if spec.get("role") == "":
        out.append(Problem(f"{s}.role", "role cannot be empty"))
    if spec.get("instanceProfile") == "":
        out.append(Problem(f"{s}.instanceProfile", "instanceProfile cannot be empty"))
    subnets = spec.get("subnetSelectorTerms") or []
    at = f"{s}.subnetSelectorTerms"
    if not subnets:
        out.append(Problem(at, "subnetSelectorTerms cannot be empty"))
    if any(not any(k in t for k in ("tags", "id")) for t in subnets):
        out.append(Problem(at, "expected at least one, got none, ['tags', 'id']"))
    if subnets and all("id" in t and "tags" in t for t in subnets):
        out.append(
            Problem(
                at,
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",
            )
        )
    out += _tags_problems(subnets, at)
    groups = spec.get("securityGroupSelectorTerms") or []
    at = f"{s}.securityGroupSelectorTerms"
    if not groups:
        out.append(Problem(at, "securityGroupSelectorTerms cannot be empty"))
    if any(not any(k in t for k in ("tags", "id", "name")) for t in groups):
        out.append(Problem(at, "expected at least one, got none, ['tags', 'id', 'name']"))
    if groups and all("id" in t and ("tags" in t or "name" in t) for t in groups):
        out.append(
            Problem(
                at,
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group "
                "selector term",
            )
        )
    if groups and all("name" in t and ("tags" in t or "id" in t) for t in groups):
        out.append(
            Problem(
                at,
                "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group "
                "selector term",
            )
        )
    out += _tags_problems(groups, at)
    reservations = spec.get("capacityReservationSelectorTerms") or []
    at = f"{s}.capacityReservationSelectorTerms"
    if any(not any(k in t for k in ("tags", "id", "instanceMatchCriteria")) for t in reservations):
        out.append(Problem(at, "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"))
    if reservations and all(
        "id" in t and any(k in t for k in ("tags", "ownerID", "instanceMatchCriteria")) for t in reservations
    ):
        out.append(
            Problem(
                at,
                "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation "
                "selector term",
            )
        )
    out += _tags_problems(reservations, at)
    bdm = spec.get("blockDeviceMappings") or []
    if sum(1 for b in bdm if b.get("rootVolume")) > 1:
        out.append(
            Problem(f"{s}.blockDeviceMappings", "must have only one blockDeviceMappings with rootVolume")
        )
    for i, b in enumerate(bdm):
        ebs = b.get("ebs")
        if ebs is None:
            continue
        if "snapshotID" not in ebs and "volumeSize" not in ebs:
            out.append(
                Problem(f"{s}.blockDeviceMappings.{i}.ebs", "snapshotID or volumeSize must be defined")
            )
        if "volumeInitializationRate" in ebs and not ebs.get("snapshotID"):
            out.append(
                Problem(
                    f"{s}.blockDeviceMappings.{i}.ebs",
                    "snapshotID must be set when volumeInitializationRate is set",
                )
            )
    for k in spec.get("tags") or {}:
        if k == "":
            out.append(Problem(f"{s}.tags", "empty tag keys aren't supported"))
        if k in _RESTRICTED_TAGS:
            out.append(
                Problem(f"{s}.tags.{k}", f"tag contains a restricted tag matching {_RESTRICTED_TAGS[k]}")
            )
        if k.startswith("kubernetes.io/cluster"):
            out.append(
                Problem(f"{s}.tags.{k}", "tag contains a restricted tag matching kubernetes.io/cluster/")
            )
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


# --- rules across objects ---------------------------------------------------------------------------------
# What the renderer promises beyond any one schema: placement as the cost counts it, and an autoscaler metric
# some rendered adapter rule serves. Each rule below is named in `RULES` and reported by `checked`.

RULES = {
    "placement.spread": "min replicas >= 2 spread over zones (topology.kubernetes.io/zone, maxSkew 1, DoNotSchedule)",
    "placement.zones": "the NodePool's zone requirement, if any, allows at least 2 zones",
    "placement.pack": "replicas sharing a node prefer its hostname (preferred pod affinity on the same app)",
    "adapter.rules": "the prometheus-adapter config.yaml parses and each rule has seriesQuery, metricsQuery, name.as",
    "adapter.metric": "every HPA Pods metric is the name.as of a rendered adapter rule",
    "namespace": "namespaced objects are in the rendered Namespace",
}  # fmt: skip

_ZONE = "topology.kubernetes.io/zone"


def _pod_spec(dep: dict[str, Any]) -> dict[str, Any]:
    return ((dep.get("spec") or {}).get("template") or {}).get("spec") or {}


def _app(dep: dict[str, Any]) -> str | None:
    return (((dep.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}).get(
        "app.kubernetes.io/instance"
    )


def _spread_problems(dep: dict[str, Any]) -> list[Problem]:
    if int((dep.get("spec") or {}).get("replicas") or 1) < 2:
        return []
    ok = any(
        c.get("topologyKey") == _ZONE
        and c.get("maxSkew") == 1
        and c.get("whenUnsatisfiable") == "DoNotSchedule"
        for c in _pod_spec(dep).get("topologySpreadConstraints") or []
    )
    if ok:
        return []
    return [Problem(f"{_where(dep)}.spec.template.spec.topologySpreadConstraints", RULES["placement.spread"])]


def _pack_problems(dep: dict[str, Any], per_node: int) -> list[Problem]:
    if per_node <= 1:
        return []
    terms = ((_pod_spec(dep).get("affinity") or {}).get("podAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    ) or []
    app = _app(dep)
    ok = any(
        (t.get("podAffinityTerm") or {}).get("topologyKey") == "kubernetes.io/hostname"
        and ((t.get("podAffinityTerm") or {}).get("labelSelector") or {})
        .get("matchLabels", {})
        .get("app.kubernetes.io/instance")
        == app
        for t in terms
    )
    return [] if ok else [Problem(f"{_where(dep)}.spec.template.spec.affinity", RULES["placement.pack"])]


def _zone_problems(pool: dict[str, Any], spread: bool) -> list[Problem]:
    if not spread:
        return []
    reqs = (((pool.get("spec") or {}).get("template") or {}).get("spec") or {}).get("requirements") or []
    out = []
    for i, r in enumerate(reqs):
        if r.get("key") == _ZONE and r.get("operator") == "In" and len(set(r.get("values") or [])) < 2:
            out.append(
                Problem(f"{_where(pool)}.spec.template.spec.requirements.{i}", RULES["placement.zones"])
            )
    return out


def _adapter_metrics(objs: list[dict[str, Any]]) -> tuple[set[str], list[Problem], bool]:
    """Metric names the rendered prometheus-adapter rules serve, problems with them, whether any was rendered."""
    names: set[str] = set()
    out: list[Problem] = []
    found = False
    for cm in objs:
        if cm.get("kind") != "ConfigMap" or "config.yaml" not in (cm.get("data") or {}):
            continue
        found = True
        at = f"{_where(cm)}.data.config.yaml"
        try:
            config = yaml.safe_load(cm["data"]["config.yaml"]) or {}
        except yaml.YAMLError as exc:
            out.append(Problem(at, f"not YAML: {exc}"))
            continue
        rules = config.get("rules") if isinstance(config, dict) else None
        if not isinstance(rules, list) or not rules:
            out.append(Problem(at, RULES["adapter.rules"]))
            continue
        for i, rule in enumerate(rules):
            name = (rule.get("name") or {}).get("as") if isinstance(rule, dict) else None
            if not (isinstance(rule, dict) and rule.get("seriesQuery") and rule.get("metricsQuery") and name):
                out.append(Problem(f"{at}.rules.{i}", RULES["adapter.rules"]))
                continue
            names.add(str(name))
    return names, out, found


def _pods_per_node(pool: dict[str, Any], requests: dict[str, Any]) -> int:
    """Pods of these accelerator requests one node of the pool holds (from its limits per node)."""
    limits = (pool.get("spec") or {}).get("limits") or {}
    nodes = int(limits.get("nodes") or 0)
    for resource in ("nvidia.com/gpu", "aws.amazon.com/neuron"):
        if nodes and resource in limits and resource in requests:
            return int(limits[resource]) // nodes // max(1, int(requests[resource]))
    return 1


def cross_problems(objs: list[dict[str, Any]]) -> list[Problem]:
    """The rules of `RULES` over a set of rendered objects (each applies only when its objects are present)."""
    out: list[Problem] = []
    pools = [o for o in objs if o.get("kind") == "NodePool"]
    for dep in (o for o in objs if o.get("kind") == "Deployment"):
        out += _spread_problems(dep)
        spread = int((dep.get("spec") or {}).get("replicas") or 1) >= 2
        requests = ((_pod_spec(dep).get("containers") or [{}])[0].get("resources") or {}).get(
            "requests"
        ) or {}
        for pool in pools:
            out += _zone_problems(pool, spread)
            out += _pack_problems(dep, _pods_per_node(pool, requests))
    served, found_problems, rendered = _adapter_metrics(objs)
    out += found_problems
    if rendered:
        for hpa in (o for o in objs if o.get("kind") == "HorizontalPodAutoscaler"):
            for i, m in enumerate((hpa.get("spec") or {}).get("metrics") or []):
                name = (
                    ((m.get("pods") or {}).get("metric") or {}).get("name")
                    if m.get("type") == "Pods"
                    else None
                )
                if name and name not in served:
                    out.append(
                        Problem(f"{_where(hpa)}.spec.metrics.{i}", f"{RULES['adapter.metric']} ({name})")
                    )
    namespaces = {o["metadata"]["name"] for o in objs if o.get("kind") == "Namespace"}
    if namespaces:
        for o in objs:
            ns = (o.get("metadata") or {}).get("namespace")
            if ns and ns not in namespaces and o.get("kind") != "ConfigMap":
                out.append(Problem(f"{_where(o)}.metadata.namespace", f"{RULES['namespace']} ({ns})"))
    return out


def problems(objs: list[dict[str, Any]], versions: tuple[str, ...] = K8S_VERSIONS) -> list[Problem]:
    """Everything wrong with a set of manifests (empty when they are valid)."""
    out: list[Problem] = []
    for obj in objs:
        if obj.get("kind") in CRD_FILES:
            out += crd_problems(obj)
        else:
            out += core_problems(obj, versions)
    return out + cross_problems(objs)


def checked(objs: list[dict[str, Any]], versions: tuple[str, ...] = K8S_VERSIONS) -> list[str]:
    """One line per object saying what `problems` checks it against, then the rules across objects."""
    lines = []
    cel = {
        kind: sum(1 for m in crd_cel_messages(kind) if CEL_COVERAGE.get(m) == "checked") for kind in CRD_FILES
    }
    for obj in objs:
        kind = obj.get("kind", "")
        if kind in CRD_FILES:
            lines.append(
                f"{_where(obj)}: CRD schema {obj.get('apiVersion')} (schemas/{CRD_FILES[kind]}, strict: unknown"
                f" fields are errors) + {cel[kind]} CEL rules"
            )
        else:
            lines.append(
                f"{_where(obj)}: kubernetes-validate strict {obj.get('apiVersion')} {kind}, Kubernetes"
                f" {', '.join(versions)}"
            )
    lines += [f"rule {name}: {text}" for name, text in RULES.items()]
    return lines


def validate(objs: list[dict[str, Any]], versions: tuple[str, ...] = K8S_VERSIONS) -> None:
    """Raise InvalidInput naming every problem, or return quietly."""
    found = problems(objs, versions)
    if found:
        raise InvalidInput(f"{len(found)} problem(s) in the manifests", found)
