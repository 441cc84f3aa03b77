"""Slack's "Measure these N" measures exactly the N architectures its message listed, by id: a SageMaker row is
measured on SageMaker even beside an EKS row of the same hardware, and nothing unlisted takes a listed row's place."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakes.stepfunctions import FakeStepFunctions
from fakes.store import InMemoryStore

from sizing.catalog import load_catalog
from sizing.orchestrate import steps
from sizing.orchestrate.settings import OrchestrationSettings
from sizing.plan.search import estimate
from sizing.service.runs import RunsService
from sizing.slack import blocks
from sizing.workload.parse import parse_spec

ROOT = Path(__file__).resolve().parents[2]
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:llm-sizing-run-test"
#: its top three hold an EKS and a SageMaker row on the same g6e hardware, then another g6e option
RAG = yaml.safe_load((ROOT / "examples" / "rag.yaml").read_text())


class Launches:
    def start(self, task: dict[str, Any]) -> dict[str, Any]:
        return {}


def _button_value(message: blocks.Message) -> blocks.MeasureAction:
    for block in message.blocks:
        for element in getattr(block, "elements", None) or []:
            if getattr(element, "action_id", None) == blocks.MEASURE_ACTION_ID:
                return blocks.MeasureAction.model_validate_json(element.value)
    raise AssertionError("no Measure these button")


@pytest.fixture(scope="module")
def listed() -> tuple[list[str], blocks.MeasureAction, str]:
    result = estimate(parse_spec(RAG)).document()
    message = blocks.estimate_message(result, parse_spec(RAG), RAG)
    shown = [a["id"] for a in result["architectures"][: blocks.TOP_SHOWN]]
    return shown, _button_value(message), json.dumps(message.blocks_json())


def _measured(measure: blocks.MeasureAction) -> list[tuple[str, list[str]]]:
    """What a run started from the button provisions: (architecture id, rows it stands for) per candidate."""
    store, sfn = InMemoryStore(), FakeStepFunctions()
    run = RunsService(store, MACHINE, sfn_client=sfn).create_run(  # type: ignore[arg-type]
        measure.spec, top_k=measure.top_k, architecture_ids=measure.ids, source="slack"
    )
    (execution,) = sfn.running()
    settings = OrchestrationSettings.model_validate(
        {"TABLE_NAME": "llm-sizing-test", "SIZING_BACKEND": "local"}
    )
    svc = steps.Services(settings, store, lambda _d: None, Launches(), load_catalog)
    out = steps.estimate_step(execution.input, svc)
    assert store.get_run(run.run_id).architecture_ids == measure.ids
    return [(c["architecture"]["id"], c["applies_to"]) for c in out["candidates"]]


def test_measure_these_measures_the_listed_ids_sagemaker_included(listed) -> None:
    shown, measure, text = listed
    # given an estimate message listing an EKS and a SageMaker row of the same hardware among its three
    assert any(i.startswith("sagemaker:") for i in shown) and any(i.startswith("eks:") for i in shown)
    assert "Measure these 3" in text
    # when its button starts a run
    measured = _measured(measure)
    # then the run measures exactly the listed ids, in their order, each deployed as itself
    assert [arch for arch, _ in measured] == shown
    assert all(applies[0] == arch for arch, applies in measured)


def test_a_listed_row_that_the_estimate_no_longer_ranks_stops_the_run_naming_it(listed) -> None:
    # given a button whose list names an architecture the estimate no longer ranks
    _, measure, _ = listed
    stale = measure.model_copy(update={"ids": [*(measure.ids or [])[:2], "eks:g6e.xlarge:tp1:int4:tgi:spot"]})
    # when it starts a run; then nothing is measured in its place, and the reason names it
    with pytest.raises(steps.NothingToMeasure, match=re.escape("eks:g6e.xlarge:tp1:int4:tgi:spot")):
        _measured(stale)


def test_bedrock_is_never_on_the_measure_button() -> None:
    # given an estimate whose listed rows include a Bedrock one
    result = estimate(parse_spec(RAG)).document()
    listed = [a for a in result["architectures"] if a["deployment"] != "bedrock"][:2]
    bedrock = {
        "id": "bedrock:meta.llama3-1-8b-instruct-v1:0",
        "model": result["workload"]["model"],
        "deployment": "bedrock",
        "engine": "bedrock",
        "rank": 3,
        "meets_slo": True,
        "cost": {"usd_per_month": 900.0},
    }
    message = blocks.estimate_message({**result, "architectures": [*listed, bedrock]}, parse_spec(RAG), RAG)
    # then the button measures the two that can be provisioned, and says Bedrock is not
    measure = _button_value(message)
    assert measure.ids == [a["id"] for a in listed]
    text = json.dumps(message.blocks_json())
    assert "Measure these 2" in text and "Bedrock is serverless" in text
