"""The trace-reading parts of template.yaml: the stack reads request traces only from the buckets its
TraceBuckets parameter names, with GetObject and ListBucket alone, and grants that to exactly what reads a trace
(the API's estimate, the run's estimate and collect steps, a watch's re-sizing, the load generator that
replays it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
#: What reads a workload's trace: the API (POST /estimates), the run's estimate and collect steps (each builds the
#: workload model), the re-sizing of a saved watch on a release, and the load generator (it replays the trace).
READERS = {"ApiFunction", "StepEstimateFunction", "StepCollectFunction", "ReleaseFanoutFunction"}


class _CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short-form tags kept as {"Tag": value}."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {suffix: value}


_CfnLoader.add_multi_constructor("!", _tag)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return dict(yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader))


def test_traces_are_read_only_from_the_named_buckets_and_only_read(template: dict[str, Any]) -> None:
    # GIVEN the trace-reading policy
    policy = template["Resources"]["TraceReadPolicy"]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    # THEN it exists only where buckets are named, and allows reading objects and listing those buckets alone
    assert policy["Condition"] == "HasTraceBuckets"
    assert template["Parameters"]["TraceBuckets"]["Default"] == ""
    assert sorted(st["Action"] for st in statements) == ["s3:GetObject", "s3:ListBucket"]
    for st in statements:
        assert "TraceBuckets" in str(st["Resource"]) and "*" not in str(st["Resource"]).replace("/*", "")


def test_what_reads_a_trace_holds_the_policy_and_nothing_else_does(template: dict[str, Any]) -> None:
    # GIVEN the template's functions and the load generator's role
    resources = template["Resources"]
    holders = {
        name
        for name, res in resources.items()
        if res["Type"] == "AWS::Serverless::Function"
        and "TraceReadPolicy" in str(res["Properties"].get("Policies"))
    }
    # THEN exactly the readers hold it (when buckets are named), and the load generator's task role is attached
    assert holders == READERS
    assert resources["TraceReadPolicy"]["Properties"]["Roles"] == [{"Ref": "LoadTestTaskRole"}]
