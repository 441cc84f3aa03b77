"""Offline validation of rendered manifests, before anything reaches a cluster.

- Karpenter `NodePool` and `EC2NodeClass`: the OpenAPI v3 schema of the CRDs shipped in `schemas/` (copied from
  Karpenter's release), made strict (unknown fields are errors, as with server-side field validation `Strict`),
  plus the CRDs' own CEL rules (`x-kubernetes-validations`) evaluated as the API server does on create.
- Core objects (Deployment, Service, PodDisruptionBudget, HorizontalPodAutoscaler): kubernetes-validate in strict
  mode for every Kubernetes version EKS supports for us (1.31-1.34).

CEL library: cel-python 0.5.0 (pure Python, 85 KB wheel, 1.1 MB with lark, google-re2 and pendulum; import 0.15-0.19
s + 0.3 s to build its parser) over common-expression-language 0.10.0 (Rust, 1.8 MB wheel plus its CLI's typer, rich
and pygments, import 0.3 s, ~25x faster), which on these rules' shapes returns an error where CEL's `all` must be
false and counts a string's size in bytes. cel-python is a runtime dependency, imported on first validation;
jsonschema and kubernetes-validate are development dependencies (`pip install -e '.[dev]'`), imported on first use
so the Lambda layer can import this package without them."""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sizing.base.errors import InvalidInput, Problem

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

    return {api: jsonschema.Draft202012Validator(_strict(schema)) for api, schema in _versions(kind).items()}


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


# --- CEL rules, evaluated by cel-python -------------------------------------------------------------------
# Each `x-kubernetes-validations` rule of the CRD version the object names runs with `self` bound to its node, as
# the API server runs it on create: a property's rules only when the property is present (after the schema's
# defaults are applied), an `items` / `additionalProperties` schema's rules once per element, nothing below a value
# of the wrong type (the schema reports that), and no transition rule (one that reads `oldSelf` compares with the
# stored object, which a new object does not have). A failure reads as the API server words it: the rule's
# `messageExpression`, else its `message`, else "failed rule: <rule>"; an evaluation error as
# "<error> evaluating rule: <message or rule>".
# https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation-rules

#: CEL macros: expanded by the parser, so no function provides them. https://github.com/google/cel-spec
CEL_MACROS = frozenset({"has", "all", "exists", "exists_one", "filter", "map"})

_TRANSITION = re.compile(r"\boldSelf\b")


@dataclass(frozen=True)
class CelRule:
    """One `x-kubernetes-validations` entry and where it is declared (a schema path, `[]` for items/values)."""

    kind: str
    api_version: str
    at: str
    rule: str
    message: str | None = None
    message_expression: str | None = None
    field_path: str | None = None

    @property
    def transition(self) -> bool:
        return bool(_TRANSITION.search(self.rule))


@functools.cache
def _crd(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = yaml.safe_load((SCHEMA_DIR / CRD_FILES[kind]).read_text())
    return schema


def _versions(kind: str) -> dict[str, dict[str, Any]]:
    crd = _crd(kind)
    return {
        f"{crd['spec']['group']}/{v['name']}": v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"]
    }


def crd_cel_rules(kind: str) -> list[CelRule]:
    """Every `x-kubernetes-validations` rule in a shipped CRD (all versions)."""
    out: list[CelRule] = []

    def walk(api: str, node: Any, at: str) -> None:
        if not isinstance(node, dict):
            return
        for r in node.get("x-kubernetes-validations") or []:
            out.append(
                CelRule(
                    kind, api, at, r["rule"], r.get("message"), r.get("messageExpression"), r.get("fieldPath")
                )
            )
        for name, sub in (node.get("properties") or {}).items():
            walk(api, sub, f"{at}.{name}" if at else name)
        for key in ("items", "additionalProperties"):
            walk(api, node.get(key), f"{at}[]")

    for api, schema in _versions(kind).items():
        walk(api, schema, "")
    return out


def crd_cel_messages(kind: str) -> set[str]:
    """Every `x-kubernetes-validations` message in a shipped CRD (all versions)."""
    return {r.message for r in crd_cel_rules(kind) if r.message}


@functools.cache
def _cel_env() -> Any:
    import celpy

    return celpy.Environment()


def _find(text: Any, pattern: Any) -> Any:
    """Kubernetes' `<string>.find(<regex>)`: the first match, or "" (RE2, as Kubernetes uses)."""
    import re2
    from celpy import celtypes

    match = re2.search(str(pattern), str(text))
    return celtypes.StringType(match.group(0) if match else "")


def _split(text: Any, sep: Any, limit: Any = -1) -> Any:
    """Kubernetes' `<string>.split(<string>[, <int>])`, Go's strings.SplitN: at most `limit` parts, 0 none, < 0 all."""
    from celpy import celtypes

    s, d, n = str(text), str(sep), int(limit)
    if n == 0:
        return celtypes.ListType([])
    parts = list(s) if d == "" else s.split(d, n - 1 if n > 0 else -1)
    if d == "" and 0 < n < len(parts):
        parts = [*parts[: n - 1], "".join(parts[n - 1 :])]
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


#: Kubernetes' CEL extension functions the CRDs call that cel-python lacks (it passes the receiver of `x.f(y)` first):
#: https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-regex-library and the strings library it links.
CEL_EXTENSIONS: dict[str, Any] = {"find": _find, "split": _split}


class CelCompileError(ValueError):
    """A rule cel-python cannot parse."""


@functools.cache
def cel_program(expr: str) -> Any:
    """One rule compiled by cel-python, with Kubernetes' extension functions (cached: compiling takes ~7 ms)."""
    import celpy

    env = _cel_env()
    try:
        ast = env.compile(expr)
    except celpy.CELParseError as exc:
        raise CelCompileError(f"{expr}: {exc}") from exc
    return env.program(ast, functions=CEL_EXTENSIONS)


def _cel_eval(expr: str, self_: Any) -> Any:
    """The rule's value with `self` bound to `self_` (a CEL value); raises celpy.CELEvalError when it fails."""
    import celpy

    result = cel_program(expr).evaluate({"self": self_})
    if isinstance(result, celpy.CELEvalError):
        raise result
    return result


def _message(rule: dict[str, Any], self_: Any) -> str:
    """The API server's wording: `messageExpression` (unless it fails or is blank), `message`, "failed rule: ..."."""
    if rule.get("messageExpression"):
        try:
            text = _cel_eval(rule["messageExpression"], self_)
        except Exception:  # Kubernetes falls back to `message` when messageExpression fails
            text = None
        if isinstance(text, str) and text.strip() and "\n" not in text:
            return str(text)
    return str(rule["message"]).strip() if rule.get("message") else f"failed rule: {rule['rule'].strip()}"


def _eval_error(exc: Exception) -> str:
    """celpy's error as a sentence: the Python error under it where there is one (celpy words a failed int() as
    "return error for overflow"), else its message."""
    args = exc.args
    if len(args) > 2 and args[2]:
        return re.sub(r"StringType\(('[^']*')\)", r"\1", str(args[2][0]))
    return str(args[0]) if args else str(exc)


@functools.lru_cache(maxsize=8192)
def _verdict(rule: tuple[str, str | None, str | None], value_json: str) -> tuple[str, bool] | None:
    """None when the rule holds for the value, else the API server's message and whether the rule evaluated (an
    error is reported at the rule's node, a failure at its `fieldPath`). Cached: CEL is deterministic, and
    the objects rendered for different architectures share most of their nodes (evaluating takes ~1.5 ms a rule)."""
    import celpy

    expr, message, message_expression = rule
    self_ = celpy.json_to_cel(json.loads(value_json))
    try:
        ok = _cel_eval(expr, self_)
    except CelCompileError as exc:
        return f"the CRD's rule does not compile: {exc}", False
    except celpy.CELEvalError as exc:
        # Kubernetes: "<error> evaluating rule: <message, or the rule>"
        return f"{_eval_error(exc)} evaluating rule: {str(message or expr).strip()}", False
    if isinstance(ok, celpy.celtypes.BoolType) and bool(ok):
        return None
    return _message({"rule": expr, "message": message, "messageExpression": message_expression}, self_), True


def _rule_problem(rule: dict[str, Any], value: Any, at: str) -> Problem | None:
    key = (rule["rule"], rule.get("message"), rule.get("messageExpression"))
    verdict = _verdict(key, json.dumps(value, sort_keys=True, default=str))
    if verdict is None:
        return None
    text, evaluated = verdict
    # `fieldPath` (`.a.b`, `['k']`) points below the rule's node
    below = re.sub(r"\['([^']*)'\]", r".\1", rule.get("fieldPath") or "") if evaluated else ""
    return Problem(at + below, text)


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _typed(schema: dict[str, Any], value: Any) -> bool:
    """Whether `value` has the schema's type (CEL does not run on a value the schema already refuses)."""
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, int | str) and not isinstance(value, bool)
    types = _TYPES.get(schema.get("type", ""))
    if types is None:
        return True
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _defaulted(schema: dict[str, Any], value: Any) -> Any:
    """`value` with the schema's defaults filled in, as the API server defaults an object before validating it."""
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = {}
        for k, v in value.items():
            sub = props.get(k, extra if isinstance(extra, dict) else {})
            out[k] = _defaulted(sub, v)
        for k, sub in props.items():
            if k not in out and "default" in sub:
                out[k] = _defaulted(sub, copy.deepcopy(sub["default"]))
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_defaulted(schema["items"], v) for v in value]
    return value


def _cel_walk(schema: dict[str, Any], value: Any, at: str, out: list[Problem]) -> None:
    if not _typed(schema, value):
        return
    rules = [r for r in schema.get("x-kubernetes-validations") or [] if not _TRANSITION.search(r["rule"])]
    out += filter(None, (_rule_problem(rule, value, at) for rule in rules))
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k, extra if isinstance(extra, dict) and k not in props else None)
            if sub is not None:
                _cel_walk(sub, v, f"{at}.{k}", out)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            _cel_walk(schema["items"], v, f"{at}.{i}", out)


def schema_cel_problems(schema: dict[str, Any], value: Any, where: str) -> list[Problem]:
    """The `x-kubernetes-validations` rules of a structural schema that fail on `value` when it is created."""
    out: list[Problem] = []
    _cel_walk(schema, _defaulted(schema, value), where, out)
    return out


def cel_problems(obj: dict[str, Any]) -> list[Problem]:
    """The CRD's CEL rules that apply on create, evaluated against the object (nothing for an unserved version)."""
    kind = obj.get("kind", "")
    schema = _versions(kind).get(obj.get("apiVersion", "")) if kind in CRD_FILES else None
    return [] if schema is None else schema_cel_problems(schema, obj, _where(obj))


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
    rules = {kind: crd_cel_rules(kind) for kind in CRD_FILES}
    for obj in objs:
        kind = obj.get("kind", "")
        if kind in CRD_FILES:
            mine = [r for r in rules[kind] if r.api_version == obj.get("apiVersion")]
            transition = sum(1 for r in mine if r.transition)
            lines.append(
                f"{_where(obj)}: CRD schema {obj.get('apiVersion')} (schemas/{CRD_FILES[kind]}, strict: unknown"
                f" fields are errors) + its {len(mine) - transition} CEL rules evaluated by cel-python"
                f" ({transition} transition rules on oldSelf skipped: they compare with a stored object)"
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
