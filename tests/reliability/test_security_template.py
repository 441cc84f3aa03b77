"""Security properties of the deployed stack, checked on template.yaml and on the code that reads the
environment: IAM least privilege (the same checks as cfn-lint rule E9101 in .cfnlint/), IAM auth on every API
route but Slack's two, and secrets only by reference to Secrets Manager."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.scripts import load_script

from sizing.service.api import openapi_json
from sizing.store.schema import find_template, load_template

ROOT = Path(__file__).resolve().parents[2]
RULE_FILE = ROOT / ".cfnlint" / "iam_least_privilege.py"
SLACK_ROUTES = {"/slack/commands", "/slack/interactions"}
#: Environment variable names that would hold a credential if they held a value.
SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|PASSWD|API_KEY|PRIVATE", re.IGNORECASE)
#: ... and the suffixes that say they hold a reference to one (an id or ARN in Secrets Manager).
REFERENCE_SUFFIXES = ("_SECRET", "_SECRET_ID", "_SECRET_ARN", "_SECRET_MAX_AGE_S")


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template(find_template())


@pytest.fixture(scope="module")
def rule() -> ModuleType:
    return load_script(".cfnlint/iam_least_privilege.py", "iam_least_privilege")


# --- IAM least privilege ----------------------------------------------------------------------------------------
def test_every_iam_policy_names_its_actions_and_scopes_its_resources(template, rule, record_figures):
    # given every IAM role and policy, and the Policies of every SAM function and state machine
    resources = template["Resources"]
    # when each statement is checked
    problems = [msg for name, res in resources.items() for _path, msg in rule.policy_problems(name, res)]
    holders = [n for n, r in resources.items() if r["Type"] in (*rule.IAM_TYPES, *rule.SAM_TYPES)]
    record_figures("security.iam", resources_checked=len(holders), problems=len(problems))
    # then none grants a wildcard action, NotAction/NotResource, or an unjustified Resource "*"
    assert problems == []


def test_every_wildcard_resource_in_the_allowlist_has_a_reason(rule):
    for table in (rule.STAR_ACTIONS, rule.MANAGED, rule.SAM_TEMPLATES):
        assert table and all(isinstance(reason, str) and len(reason) > 10 for reason in table.values())
    assert all(":" in action and "*" not in action for action in rule.STAR_ACTIONS)


@pytest.mark.parametrize(
    ("policies", "expected"),
    [
        (["CloudWatchLogsFullAccess"], "managed policy"),
        ([{"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::b/*"}]}], "wildcard action"),
        ([{"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}], "wildcard action"),
        ([{"Statement": [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": "*"}]}], "Resource '*'"),
        ([{"Statement": [{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}]}], "NotAction"),
        ([{"Fn::If": ["C", {"Statement": [{"Effect": "Allow", "Action": "ec2:*", "Resource": "*"}]},
                      {"Ref": "AWS::NoValue"}]}], "wildcard action"),
        ([{"AdministratorAccessPolicy": {}}], "SAM policy template"),
    ],
)  # fmt: skip
def test_the_check_catches_what_it_is_for(rule, policies, expected):
    # given a function with an over-broad policy (a negative control for the check above)
    resource = {"Type": "AWS::Serverless::Function", "Properties": {"Policies": policies}}
    # when / then
    messages = [msg for _path, msg in rule.policy_problems("Broad", resource)]
    assert any(expected in m for m in messages), messages


#: A function granted a wildcard (SAM policy statements, as the stack's functions declare theirs): the smallest
#: template the rule must refuse. (`make lint` runs cfn-lint with the rule on the whole template; here it takes
#: ~2 s instead of ~15 s for the stack's.)
BROAD_GRANT = """\
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Resources:
  Broad:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: python3.12
      Handler: app.handler
      InlineCode: "def handler(event, context): return None"
      Policies:
        - Statement:
            - Effect: Allow
              Action: "s3:*"
              Resource: "*"
"""


@pytest.mark.integration
def test_cfn_lint_applies_the_rule(tmp_path):
    # given a template whose function is granted a wildcard
    bad = tmp_path / "template.yaml"
    bad.write_text(BROAD_GRANT)
    # when cfn-lint runs as `make lint` does (from the repository root, reading .cfnlintrc)
    out = subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), str(bad)], cwd=ROOT, capture_output=True, text=True
    )
    # then the rule reports both the wildcard action and the unscoped resource
    assert out.returncode != 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "E9101 Broad: wildcard action 's3:*'" in out.stdout, out.stdout[-2000:]
    assert "E9101 Broad: Resource '*'" in out.stdout, out.stdout[-2000:]


# --- IAM auth on every route but Slack's --------------------------------------------------------------------------
def _security_options(value: Any) -> list[list[dict[str, Any]]]:
    """The security requirement of a route under every value of its Fn::If."""
    if isinstance(value, dict) and "Fn::If" in value:
        return [opt for branch in value["Fn::If"][1:] for opt in _security_options(branch)]
    return [value]


def test_every_route_requires_iam_except_slacks_signed_two(template):
    paths = template["Resources"]["SizingApi"]["Properties"]["DefinitionBody"]["paths"]
    assert not [p for p in paths if "{proxy+}" in p], "a catch-all route would bypass the per-route auth"
    for path, methods in paths.items():
        for method, op in methods.items():
            assert method != "x-amazon-apigateway-any-method", path
            options = _security_options(op.get("security"))
            if path in SLACK_ROUTES:
                assert options == [[]], (
                    f"{method.upper()} {path} is Slack's: no IAM, Slack's signature instead"
                )
            else:
                assert options and all({"sigv4": []} in opt for opt in options), f"{method.upper()} {path}"


def test_every_route_the_api_serves_is_declared_in_the_template_with_its_auth(template):
    # a route the resolver serves but API Gateway does not declare could only be reached through a catch-all;
    # one declared for the wrong function would skip it: the two lists match, method by method
    declared = {
        (path, method)
        for path, methods in template["Resources"]["SizingApi"]["Properties"]["DefinitionBody"][
            "paths"
        ].items()
        for method in methods
    }
    served = {
        (path, method) for path, methods in json.loads(openapi_json())["paths"].items() for method in methods
    }
    assert served <= declared, served - declared


# --- secrets: only from Secrets Manager ---------------------------------------------------------------------------
def _secret_refs(template: dict[str, Any]) -> set[str]:
    resources = template["Resources"]
    params = template.get("Parameters", {})
    refs = {n for n, r in resources.items() if r["Type"] == "AWS::SecretsManager::Secret"}
    return refs | {n for n in params if n.endswith("SecretArn")}


def _refs_only_secrets(value: Any, allowed: set[str]) -> bool:
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"] in allowed or value["Ref"] == "AWS::NoValue"
        if "Fn::If" in value:
            return all(_refs_only_secrets(v, allowed) for v in value["Fn::If"][1:])
    return False


def test_credential_environment_variables_hold_only_references_to_secrets_manager(template):
    allowed = _secret_refs(template)
    functions = {n: r for n, r in template["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}
    glob = template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
    checked = 0
    for name, fn in [("Globals", {"Properties": {"Environment": {"Variables": glob}}}), *functions.items()]:
        variables = fn["Properties"].get("Environment", {}).get("Variables", {})
        for var, value in variables.items():
            if SECRET_NAME.search(var):
                checked += 1
                assert var.endswith(REFERENCE_SUFFIXES), f"{name}.{var} looks like it holds a credential"
                if not var.endswith("_MAX_AGE_S"):
                    assert _refs_only_secrets(value, allowed), (
                        f"{name}.{var}={value!r} is not a secret reference"
                    )
    assert checked >= 2, "the Slack and Hugging Face secrets are passed by reference"


def _aliases_in_code() -> set[str]:
    """Every environment variable the code reads: pydantic Field aliases and os.environ / getenv calls."""
    names: set[str] = set()
    for path in [*(ROOT / "layers" / "sizing" / "sizing").rglob("*.py"), *(ROOT / "functions").rglob("*.py")]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "alias" and isinstance(node.value, ast.Constant):
                names.add(str(node.value.value))
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                func = ast.unparse(node.func)
                if func in ("os.environ.get", "os.getenv", "environ.get"):
                    names.add(str(node.args[0].value))
            is_environ = isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ"
            if is_environ and isinstance(node.slice, ast.Constant):  # type: ignore[attr-defined]
                names.add(str(node.slice.value))  # type: ignore[attr-defined]
    return names


def test_the_code_reads_credentials_only_by_reference(template):
    # given every environment variable the code reads
    names = {n for n in _aliases_in_code() if n.isupper() and SECRET_NAME.search(n)}
    # then each credential-looking one is a reference into Secrets Manager (the value is fetched there, cached)
    # (AWS_SECRET_ACCESS_KEY is the Lambda runtime's own and only set by the embedded default's fake AWS)
    offenders = {n for n in names if not n.endswith(REFERENCE_SUFFIXES) and n != "AWS_SECRET_ACCESS_KEY"}
    assert offenders == set()
