"""cfn-lint rule E9101: IAM least privilege. No wildcard action, no NotAction/NotResource; Resource "*" only for
actions AWS cannot scope; managed policies and SAM policy templates only from the allow-list. The allow-list,
with a reason for each entry, is iam_wildcard_allowlist.json (also read by tests/reliability/
test_security_template.py).

cfn-lint 1.x validates SAM templates without expanding them, so the rule reads IAM roles and policies and the
`Policies` of SAM functions and state machines. Enabled by .cfnlintrc (`append_rules: [.cfnlint]`), so
`cfn-lint template.yaml` (make lint) applies it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cfnlint.rules import CloudFormationLintRule, RuleMatch

ALLOWLIST = json.loads((Path(__file__).parent / "iam_wildcard_allowlist.json").read_text())
STAR_ACTIONS: dict[str, str] = ALLOWLIST["resource_star_actions"]
MANAGED: dict[str, str] = ALLOWLIST["managed_policies"]
SAM_TEMPLATES: dict[str, str] = ALLOWLIST["sam_policy_templates"]
IAM_TYPES = ["AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"]
SAM_TYPES = ["AWS::Serverless::Function", "AWS::Serverless::StateMachine"]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _branches(node: Any, path: list[Any]) -> Iterator[tuple[Any, list[Any]]]:
    """`node` itself, or both branches of an Fn::If (recursively)."""
    if isinstance(node, dict) and isinstance(node.get("Fn::If"), list) and len(node["Fn::If"]) == 3:
        for i in (1, 2):
            yield from _branches(node["Fn::If"][i], [*path, "Fn::If", i])
    else:
        yield node, path


def statements(doc: Any, path: list[Any]) -> Iterator[tuple[dict[str, Any], list[Any]]]:
    for node, at in _branches(doc, path):
        if not isinstance(node, dict):
            continue
        for i, st in enumerate(as_list(node.get("Statement", []))):
            for leaf, leaf_at in _branches(st, [*at, "Statement", i]):
                if isinstance(leaf, dict) and "Effect" in leaf:
                    yield leaf, leaf_at


def managed_name(arn: Any) -> str:
    text = json.dumps(arn) if not isinstance(arn, str) else arn
    return text.rstrip('"}').rsplit("/", 1)[-1]


def statement_problems(st: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, message) for each way a statement grants more than it names."""
    out: list[tuple[str, str]] = []
    if st.get("Effect") != "Allow":
        return out
    for key in ("NotAction", "NotResource"):
        if key in st:
            out.append((key, f"{key} grants everything it does not name"))
    actions = [a for a in as_list(st.get("Action", [])) if isinstance(a, str)]
    out += [("Action", f"wildcard action {a!r}: name the actions") for a in actions if "*" in a]
    if "*" in as_list(st.get("Resource", [])):
        unjustified = [a for a in actions if a not in STAR_ACTIONS]
        if unjustified:
            out.append(("Resource", f"Resource '*' for {unjustified}: scope them to ARNs or justify them"))
    return out


Problem = tuple[list[Any], str]
Doc = tuple[Any, list[Any]]


def _sam_policies(name: str, props: dict[str, Any], base: list[Any]) -> tuple[list[Problem], list[Doc]]:
    """A SAM function's or state machine's `Policies`: managed policy names and SAM policy templates checked
    against the allow-list, and the inline policy documents (with their paths) to check statement by statement."""
    problems: list[Problem] = []
    docs: list[Doc] = []
    for i, pol in enumerate(as_list(props.get("Policies") or [])):
        for node, at in _branches(pol, [*base, "Policies", i]):
            if isinstance(node, str):
                if managed_name(node) not in MANAGED:
                    problems.append((at, f"{name}: managed policy {node!r} is not in the allow-list"))
            elif isinstance(node, dict) and "Statement" in node:
                docs.append((node, at))
            elif isinstance(node, dict) and len(node) == 1 and "Ref" not in node:
                template = next(iter(node))
                if template not in SAM_TEMPLATES:
                    problems.append((at, f"{name}: SAM policy template {template} is not in the allow-list"))
    return problems, docs


def _iam_policies(name: str, props: dict[str, Any], base: list[Any]) -> tuple[list[Problem], list[Doc]]:
    """An IAM role's or policy's managed policy ARNs checked against the allow-list, and its policy documents
    (inline `Policies` and its own `PolicyDocument`, with their paths)."""
    docs: list[Doc] = [
        (pol.get("PolicyDocument"), [*base, "Policies", i, "PolicyDocument"])
        for i, pol in enumerate(as_list(props.get("Policies") or []))
        if isinstance(pol, dict)
    ]
    if "PolicyDocument" in props:
        docs.append((props["PolicyDocument"], [*base, "PolicyDocument"]))
    problems: list[Problem] = [
        ([*base, "ManagedPolicyArns", i], f"{name}: managed policy {arn!r} is not in the allow-list")
        for i, arn in enumerate(as_list(props.get("ManagedPolicyArns") or []))
        if managed_name(arn) not in MANAGED
    ]
    return problems, docs


def policy_problems(name: str, resource: dict[str, Any]) -> Iterator[Problem]:
    """(path, message) for every problem in one resource's IAM policies."""
    props = resource.get("Properties", {}) or {}
    base = ["Resources", name, "Properties"]
    read = _sam_policies if resource.get("Type") in SAM_TYPES else _iam_policies
    problems, docs = read(name, props, base)
    yield from problems
    for doc, at in docs:
        for st, st_at in statements(doc, at):
            for key, message in statement_problems(st):
                yield [*st_at, key], f"{name}: {message}"


class IamLeastPrivilege(CloudFormationLintRule):
    id = "E9101"
    shortdesc = "IAM statements name their actions and, where AWS allows it, their resources"
    description = (
        "No '*' or 'service:*' action, no NotAction/NotResource, Resource '*' only for actions that take no"
        " resource ARN, managed policies and SAM policy templates only from .cfnlint/iam_wildcard_allowlist.json"
    )
    source_url = "https://docs.aws.amazon.com/IAM/latest/UserGuide/best-practices.html#grant-least-privilege"
    tags = ["iam", "security"]  # noqa: RUF012 (cfn-lint reads this class attribute)

    def match(self, cfn: Any) -> list[RuleMatch]:
        resources = {**cfn.get_resources(IAM_TYPES), **cfn.get_resources(SAM_TYPES)}
        return [
            RuleMatch(path, msg)
            for name, res in resources.items()
            for path, msg in policy_problems(name, res)
        ]
