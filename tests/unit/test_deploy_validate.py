"""Rendered manifests validate against Karpenter's CRDs (schema + CEL rules) and Kubernetes 1.31-1.34."""

from __future__ import annotations

import copy
import re
from typing import Any

import kubernetes_validate
import pytest
from support.examples import EXAMPLES, example_estimate

from sizing.base.errors import InvalidInput
from sizing.deploy import validate as checks
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.manifests import render
from sizing.deploy.rendering import RENDERED_ENGINES, RenderOptions

#: Representative architectures, used whatever the planner emits: GPU TP1 several per instance, GPU TP8,
#: inf2, trn2, spot, int4 and a fractional Neuron chip.
REPRESENTATIVE = [
    ("eks:g5.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B", {"peak": 7, "min": 2}),
    ("eks:p5.48xlarge:tp8:bf16:vllm:on-demand", "meta-llama/Llama-3.1-405B", {"peak": 1, "min": 1}),
    ("eks:p4d.24xlarge:tp8:bf16:vllm:spot", "meta-llama/Llama-3.1-70B", {"peak": 3, "min": 1}),
    ("eks:inf2.48xlarge:tp24:bf16:neuron:on-demand", "meta-llama/Llama-3.1-70B", {"peak": 2, "min": 1}),
    ("eks:inf2.xlarge:tp1:bf16:neuron:on-demand", "meta-llama/Llama-3.1-8B", {"peak": 4, "min": 0}),
    ("eks:trn2.48xlarge:tp64:fp8:neuron:on-demand", "meta-llama/Llama-3.1-70B", {"peak": 3, "min": 2}),
    ("eks:g6e.48xlarge:tp2:int4:vllm:spot", "meta-llama/Llama-3.1-70B", {"peak": 9, "min": 3}),
]


def planner_architectures() -> list[dict[str, Any]]:
    """Every EKS architecture the planner proposes for the example workloads."""
    out = []
    for path in EXAMPLES:
        result = example_estimate(path.stem)
        out += [a for a in result["architectures"] if a.get("deployment") == "eks"]
    return out


@pytest.mark.parametrize(("arch_id", "model", "replicas"), REPRESENTATIVE, ids=[r[0] for r in REPRESENTATIVE])
@pytest.mark.parametrize("ami", ["al2023", "bottlerocket"])
def test_representative_architectures_validate(
    arch_id: str, model: str, replicas: dict[str, int], ami: str
) -> None:
    arch = DeployTarget.from_id(arch_id, model, replicas=replicas)
    # a sizing run's objects (the provisioner sets a deadline) and a production deployment's
    run = render(arch, "run-1", options=RenderOptions(ami_family=ami, expires_at=1_900_000_000))
    serve = render(arch, "run-1", options=RenderOptions(ami_family=ami))
    assert checks.problems(run) == []
    assert checks.problems(serve) == []


def test_a_capacity_reservation_and_named_zones_validate() -> None:
    arch = DeployTarget.from_id(
        "eks:p5.48xlarge:tp4:fp8:vllm:on-demand", "meta-llama/Llama-3.1-70B", replicas={"peak": 5, "min": 2}
    )
    opts = RenderOptions(capacity_reservation="cr-0123456789abcdef0", zones=["us-east-1a", "us-east-1b"])
    assert checks.problems(render(arch, "run-1", options=opts)) == []


def test_every_architecture_the_example_workloads_produce_validates() -> None:
    # given the planner's EKS architectures for every example workload
    archs = planner_architectures()
    assert archs, "the example workloads produce EKS architectures"
    # when each is rendered, then every manifest is valid
    for raw in archs:
        opts = RenderOptions(checkpoints={"int8": "org/pre-quantized-w8a8"})
        if raw.get("engine") not in RENDERED_ENGINES:
            # an engine without manifests is refused, naming it, rather than deployed on another engine
            with pytest.raises(InvalidInput) as info:
                render(raw, "run-examples", raw["id"], opts)
            assert "serving.engine" in [p.field for p in info.value.problems], raw["id"]
            continue
        objs = render(raw, "run-examples", raw["id"], opts)
        assert checks.problems(objs) == [], raw["id"]


def _objs() -> dict[str, dict[str, Any]]:
    arch = DeployTarget.from_id("eks:g6e.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    return {o["kind"]: o for o in render(arch, "run-1")}


def test_an_unknown_nodepool_field_is_reported_with_its_path() -> None:
    pool = _objs()["NodePool"]
    pool["spec"]["disruption"]["consolidateAfterr"] = "1m"
    found = checks.problems([pool])
    assert len(found) == 1
    assert found[0].field.endswith("spec.disruption")
    assert "consolidateAfterr" in found[0].message


def test_a_restricted_label_breaks_the_nodepools_cel_rule() -> None:
    pool = _objs()["NodePool"]
    pool["spec"]["template"]["metadata"]["labels"]["karpenter.sh/custom"] = "x"
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "kubernetes.io/hostname", "operator": "In", "values": []}
    )
    messages = [p.message for p in checks.problems([pool])]
    assert 'label domain "karpenter.sh" is restricted' in messages
    assert 'label "kubernetes.io/hostname" is restricted' in messages
    assert "requirements with operator 'In' must have a value defined" in messages


def test_nodeclass_cel_rules_catch_a_bad_alias_two_roots_and_two_identities() -> None:
    nc = copy.deepcopy(_objs()["EC2NodeClass"])
    nc["spec"]["amiSelectorTerms"] = [{"alias": "ubuntu@latest"}]
    nc["spec"]["instanceProfile"] = "profile"
    root = nc["spec"]["blockDeviceMappings"][0]
    nc["spec"]["blockDeviceMappings"].append(copy.deepcopy(root) | {"deviceName": "/dev/xvdc"})
    messages = " | ".join(p.message for p in checks.problems([nc]))
    assert "family is not supported, must be one of the following" in messages
    assert "exactly one of ['role', 'instanceProfile']" in messages
    assert "only one blockDeviceMappings with rootVolume" in messages


def test_a_bad_core_object_fails_for_every_kubernetes_version() -> None:
    dep = _objs()["Deployment"]
    dep["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    found = checks.problems([dep])
    assert len(found) == len(checks.K8S_VERSIONS)
    assert "imagePullPolicyy" in found[0].message
    # and kubernetes-validate's own entry point agrees
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, "1.34", strict=True)
    kubernetes_validate.validate(_objs()["Deployment"], "1.34", strict=True)
    with pytest.raises(InvalidInput, match="problem"):
        checks.validate([dep])


def test_every_cel_rule_of_the_shipped_crds_compiles_and_only_transition_rules_are_skipped() -> None:
    # given every `x-kubernetes-validations` rule in the two CRDs we ship
    rules = checks.crd_cel_rules("NodePool") + checks.crd_cel_rules("EC2NodeClass")
    assert {r.kind for r in rules} == {"NodePool", "EC2NodeClass"}
    # when each is compiled by the CEL library
    for rule in rules:
        checks.cel_program(rule.rule)
        if rule.message_expression:
            checks.cel_program(rule.message_expression)
    # then none fails, and the only rules a new object skips are the three that compare with the stored one
    skipped = [r for r in rules if r.transition]
    assert [r.message for r in skipped] == [
        "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes",
        "nodeClassRef.group is immutable",
        "nodeClassRef.kind is immutable",
    ]
    assert all("oldSelf" in r.rule for r in skipped)
    assert all("oldSelf" not in r.rule for r in rules if not r.transition)


def test_every_function_the_crd_rules_call_is_provided() -> None:
    # given the functions called in every rule of the shipped CRDs (`f(` and `.f(`)
    rules = checks.crd_cel_rules("NodePool") + checks.crd_cel_rules("EC2NodeClass")
    called = {name for r in rules for name in re.findall(r"([A-Za-z_]\w*)\s*\(", r.rule)}
    # then each is a CEL macro, a standard function of the library, or one of Kubernetes' extensions we provide
    from celpy.evaluation import base_functions

    provided = set(base_functions) | set(checks.CEL_EXTENSIONS) | checks.CEL_MACROS
    assert called - provided == set()
    assert set(checks.CEL_EXTENSIONS) <= called, "an extension no rule calls"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda nc: nc["spec"].update(amiSelectorTerms=[{"tags": {"a": "b"}}]),
            "must specify amiFamily if amiSelectorTerms does not contain an alias",
        ),
        (
            lambda nc: nc["spec"].update(amiFamily="Bottlerocket"),
            "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",
        ),
        (
            lambda nc: nc["spec"].update(amiSelectorTerms=[{"alias": "windows2022@v1"}]),
            "windows families may only specify version 'latest'",
        ),
        (
            lambda nc: nc["spec"]["tags"].update({"karpenter.sh/nodeclaim": "x"}),
            "tag contains a restricted tag matching karpenter.sh/nodeclaim",
        ),
        (
            lambda nc: nc["spec"]["tags"].update({"kubernetes.io/cluster/prod": "owned"}),
            "tag contains a restricted tag matching kubernetes.io/cluster/",
        ),
        (lambda nc: nc["spec"].update(subnetSelectorTerms=[]), "subnetSelectorTerms cannot be empty"),
        (
            lambda nc: nc["spec"].update(securityGroupSelectorTerms=[{"tags": {"k": ""}}]),
            "empty tag keys or values aren't supported",
        ),
        (
            lambda nc: nc["spec"]["blockDeviceMappings"][0]["ebs"].update(volumeInitializationRate=100),
            "snapshotID must be set when volumeInitializationRate is set",
        ),
        (lambda nc: nc["spec"].update(role=""), "role cannot be empty"),
        # rules about fields the renderer never sets run too
        (
            lambda nc: nc["spec"].update(connectionTracking={}),
            "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",
        ),
        (
            lambda nc: nc["spec"].update(placementGroupSelector={"name": "pg", "id": "pg-0123456789abcdef0"}),
            "'name' and 'id' are mutually exclusive",
        ),
    ],
)
def test_nodeclass_rules_report_the_crds_own_message(mutate: Any, message: str) -> None:
    # given a valid node class, when one rule is broken, then the CRD's message for it is reported
    nc = copy.deepcopy(_objs()["EC2NodeClass"])
    mutate(nc)
    assert message in [p.message for p in checks.cel_problems(nc)]
    assert message in checks.crd_cel_messages("EC2NodeClass")


def test_nodepool_rules_report_the_crds_own_message() -> None:
    pool = copy.deepcopy(_objs()["NodePool"])
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["1", "2"]}
    )
    pool["spec"]["disruption"]["budgets"].append({"nodes": "1", "schedule": "@daily"})
    pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] = ""
    messages = [p.message for p in checks.cel_problems(pool)]
    assert (
        "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"
        in messages
    )
    assert "'schedule' must be set with 'duration'" in messages
    assert "name may not be empty" in messages
    assert set(messages) <= checks.crd_cel_messages("NodePool")


def _serve(replicas: dict[str, int]) -> dict[str, dict[str, Any]]:
    arch = DeployTarget.from_id(
        "eks:g6e.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B", replicas=replicas
    )
    return {o["kind"]: o for o in render(arch, "run-1")}


def test_replicas_that_should_spread_but_do_not_are_reported() -> None:
    # given two replicas whose zone spread was removed, sharing nodes without the packing preference
    objs = _serve({"peak": 4, "min": 2})
    pod = objs["Deployment"]["spec"]["template"]["spec"]
    del pod["topologySpreadConstraints"]
    del pod["affinity"]
    objs["NodePool"]["spec"]["template"]["spec"]["requirements"].append(
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}
    )
    # when
    messages = [p.message for p in checks.cross_problems(list(objs.values()))]
    # then each placement rule says what is missing
    assert checks.RULES["placement.spread"] in messages
    assert checks.RULES["placement.pack"] in messages
    assert checks.RULES["placement.zones"] in messages


def test_an_hpa_metric_no_adapter_rule_serves_is_reported() -> None:
    objs = _serve({"peak": 4, "min": 1})
    objs["HorizontalPodAutoscaler"]["spec"]["metrics"][0]["pods"]["metric"]["name"] = (
        "vllm_num_requests_waiting"
    )
    found = checks.cross_problems(list(objs.values()))
    assert [p.message for p in found] == [f"{checks.RULES['adapter.metric']} (vllm_num_requests_waiting)"]
    objs["ConfigMap"]["data"]["config.yaml"] = "rules: []"
    assert checks.RULES["adapter.rules"] in [p.message for p in checks.cross_problems(list(objs.values()))]


def test_capacity_reservation_terms_report_the_crds_own_messages() -> None:
    nc = copy.deepcopy(_objs()["EC2NodeClass"])
    nc["spec"]["capacityReservationSelectorTerms"] = [{"id": "cr-1", "ownerID": "123456789012"}]
    assert (
        "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"
        in [p.message for p in checks.cel_problems(nc)]
    )
    nc["spec"]["capacityReservationSelectorTerms"] = [{"ownerID": "123456789012"}]
    assert "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']" in [
        p.message for p in checks.cel_problems(nc)
    ]


def test_checked_names_each_object_its_schema_and_the_rules() -> None:
    objs = list(_serve({"peak": 4, "min": 2}).values())
    lines = checks.checked(objs)
    assert len(lines) == len(objs) + len(checks.RULES)
    assert any(line.startswith("NodePool/") and "karpenter.sh_nodepools.yaml" in line for line in lines)
    assert any(
        line.startswith("Namespace/llm-sizing: kubernetes-validate strict v1 Namespace") for line in lines
    )


def test_checked_says_how_many_cel_rules_run_and_which_are_skipped() -> None:
    # given a rendered node pool and node class
    objs = _objs()
    # when asked what they are checked against
    lines = checks.checked([objs["NodePool"], objs["EC2NodeClass"]])
    # then each names its CRD's rule count, with the NodePool's three transition rules skipped
    assert "+ its 17 CEL rules evaluated by cel-python (3 transition rules on oldSelf skipped" in lines[0]
    assert "+ its 44 CEL rules evaluated by cel-python (0 transition rules" in lines[1]


def test_a_rule_that_cannot_be_evaluated_is_reported_as_the_api_server_words_it() -> None:
    # given a requirement whose Gt value is not a number (the CRD's rule calls int() on it)
    pool = copy.deepcopy(_objs()["NodePool"])
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["many"]}
    )
    # when validated
    found = [p for p in checks.problems([pool]) if "Gt" in p.message]
    # then the evaluation error names the rule's message, at the requirements list
    assert len(found) == 1
    assert found[0].field.endswith(".spec.template.spec.requirements")
    assert found[0].message.endswith(
        " evaluating rule: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer"
        " value"
    )
    assert "'many'" in found[0].message


#: A structural schema with one rule of each kind Kubernetes distinguishes.
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "x-kubernetes-validations": [
                {"rule": "self.size() > 1"},
                {
                    "rule": "self.startsWith('a')",
                    "messageExpression": "'name ' + self + ' must start with a'",
                },
                {"rule": "self == oldSelf", "message": "name is immutable"},
            ],
        },
        "ports": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}},
                "x-kubernetes-validations": [
                    {"rule": "self.port < 1024 || self.protocol == 'UDP'", "message": "high ports are UDP"}
                ],
            },
        },
        "labels": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(k, k.split('/').size() <= 2)",
                    "message": "one prefix",
                    "fieldPath": ".keys",
                }
            ],
        },
    },
    "x-kubernetes-validations": [{"rule": "has(self.name)", "message": "name is required"}],
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # a present property runs its rules; the transition rule does not run on create
        (
            {"name": "b"},
            [("x.name", "failed rule: self.size() > 1"), ("x.name", "name b must start with a")],
        ),
        # an absent property runs none; the root's rule runs on the whole object
        ({"ports": []}, [("x", "name is required")]),
        # an items rule runs per element, with the schema's default filled in first
        (
            {"name": "ab", "ports": [{"port": 80}, {"port": 8080}, {"port": 9090, "protocol": "UDP"}]},
            [("x.ports.1", "high ports are UDP")],
        ),
        # fieldPath reports below the rule's node
        ({"name": "ab", "labels": {"a/b/c": "x"}}, [("x.labels.keys", "one prefix")]),
        # a value of the wrong type is the schema's to report: no rule runs below it
        ({"name": 5}, []),
    ],
)
def test_rules_run_where_and_how_kubernetes_runs_them(
    value: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    # given an object against a schema with rules, when its rules are evaluated
    found = checks.schema_cel_problems(_SCHEMA, value, "x")
    # then the failures are those the API server reports on create, at the same paths
    assert [(p.field, p.message) for p in found] == expected
