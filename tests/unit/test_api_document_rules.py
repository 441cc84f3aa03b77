"""The OpenAPI document says what the API refuses: a spec the document allows is one the API accepts, and the
rules the validators apply (users or rate, a preset or tokens and slo, at least one SLO and percentile, a known
model, no server file, one form of token length, IANA time zones, AWS Regions, 24 hourly weights, numbers DynamoDB
stores) are in the document, each as a case of both sides. Undeclared methods answer 405 with Allow."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from sizing.base.errors import InvalidInput, NotFound
from sizing.catalog import load_catalog
from sizing.service.api import openapi_json, resolve
from sizing.workload.derived import build_model
from sizing.workload.parse import parse_spec
from sizing.workload.spec import MIN_PEAK_RPS

ROOT = Path(__file__).resolve().parents[2]
DOC = json.loads(openapi_json())


def spec_errors(spec: Any) -> list[str]:
    """What the document's WorkloadSpec schema says is wrong with `spec` (empty: the document allows it)."""
    schema = {"$ref": "#/components/schemas/WorkloadSpec", "components": DOC["components"]}
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(spec)]


EXAMPLE = yaml.safe_load((ROOT / "examples" / "chatbot.yaml").read_text())


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "examples").glob("*.yaml")))
def test_every_example_spec_is_allowed_by_the_document(name: str) -> None:
    assert spec_errors(yaml.safe_load((ROOT / "examples" / name).read_text())) == []


def _without(spec: dict[str, Any], *path: str) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


def _with(spec: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("case", "spec"),
    [
        ("users and rate", _with(EXAMPLE, ("rate",), {"peak_rps": 5})),
        ("neither users nor rate", _without(EXAMPLE, "users")),
        ("no tokens and no preset", _without(EXAMPLE, "tokens")),
        ("a prompt length without an answer's, no trace or preset", _without(EXAMPLE, "tokens", "output")),
        ("an slo without any objective", _with(EXAMPLE, ("slo",), {"ttft_ms": None})),
        ("an objective without any percentile", _with(EXAMPLE, ("slo", "e2e_s"), {})),
        ("a token length of no shape", _with(EXAMPLE, ("tokens", "input"), {"p95": 3500})),
        ("a file on the server", _with(EXAMPLE, ("tokens", "samples_file"), "/etc/passwd")),
        ("a trace file on the server", _with(EXAMPLE, ("trace",), {"path": "/etc/passwd"})),
        ("a model nobody knows", _with(EXAMPLE, ("model",), "acme/unknown-7b")),
        ("a time zone that is not IANA's", _with(EXAMPLE, ("traffic", "timezone"), "__main__")),
        ("a time zone in the wrong case", _with(EXAMPLE, ("traffic", "timezone"), "europe/berlin")),
        ("a Region AWS does not have", _with(EXAMPLE, ("constraints", "region"), "mars-north-1")),
        ("a token length fixed and with a mean", _with(EXAMPLE, ("tokens", "input"), {"fixed": 5, "mean": 3})),
        ("a lognormal without sigma", _with(EXAMPLE, ("tokens", "input"), {"dist": "lognormal", "mean": 9, "p95": 20})),
        ("a p95 and a sigma", _with(EXAMPLE, ("tokens", "output"), {"mean": 90, "p95": 160, "sigma": 0.5})),
        ("a fixed length and a sigma", _with(EXAMPLE, ("tokens", "output"), {"fixed": 90, "sigma": 0.5})),
        ("23 hourly weights", _with(EXAMPLE, ("traffic", "profile"), [1] * 23)),
        ("24 hourly weights of 0", _with(EXAMPLE, ("traffic", "profile"), [0] * 24)),
        ("a weight too small to store", _with(EXAMPLE, ("traffic", "profile"), [5e-324] + [1] * 23)),
        ("a fraction too small to store", _with(EXAMPLE, ("users", "peak_active_fraction"), 5e-324)),
        ("a bound too large to store", _with(EXAMPLE, ("slo", "e2e_s"), {"p95": 1e200})),
        ("a budget too small to store", _with(EXAMPLE, ("constraints", "max_monthly_usd"), 1e-200)),
        ("a context cap past any model's", _with(EXAMPLE, ("constraints", "max_context_tokens"), 10**60)),
    ],
)  # fmt: skip
def test_a_spec_the_api_refuses_is_one_the_document_refuses(case: str, spec: dict[str, Any]) -> None:
    # given a spec the API answers 422 for (the validator every route shares, then the catalog's lookup)
    # a file on the server (samples or a trace) is refused by the API before parse_spec
    if "samples_file" not in spec.get("tokens", {}) and "trace" not in spec:
        with pytest.raises((InvalidInput, NotFound)):
            load_catalog().model(parse_spec(spec).model)
    # when the document's schema checks it; then it is refused there too
    assert spec_errors(spec) != [], case


def test_a_trace_on_s3_stands_in_for_users_rate_and_tokens() -> None:
    # given a spec whose peak and lengths come from a trace on S3, and the same with a rate to scale it to
    spec = {"model": "llama-3.1-8b", "trace": {"path": "s3://bucket/logs/"}, "slo": {"e2e_s": {"p95": 9}}}
    # when the document checks them, then both are allowed, and with users and rate together it still refuses
    assert spec_errors(spec) == []
    assert spec_errors({**spec, "rate": {"peak_rps": 5}}) == []
    assert spec_errors({**spec, "rate": {"peak_rps": 5}, "users": {"total": 100}}) != []


@pytest.mark.parametrize(
    ("case", "spec"),
    [
        ("an IANA time zone", _with(EXAMPLE, ("traffic", "timezone"), "Asia/Kolkata")),
        ("a lognormal given by sigma alone", _with(EXAMPLE, ("tokens", "output"), {"mean": 90, "sigma": 0.5})),
        ("the other forms' fields null", _with(EXAMPLE, ("tokens", "output"), {"fixed": 90, "mean": None})),
        ("hourly weights with zeros", _with(EXAMPLE, ("traffic", "profile"), [0] * 23 + [1])),
        ("a number DynamoDB just stores", _with(EXAMPLE, ("users", "peak_active_fraction"), 1e-130)),
        ("users who send (almost) nothing", _with(EXAMPLE, ("users",), {"total": 1, "peak_active_fraction": 1e-9})),
        ("a trace, and a prompt length alone", {"model": "llama-3.1-8b", "trace": {"path": "s3://b/logs/"},
                                                 "slo": {"e2e_s": {"p95": 9}}, "tokens": {"input": {"fixed": 1}}}),
        ("a preset, and a prompt length alone", {"model": "llama-3.1-8b", "preset": "chat", "users": {"total": 100},
                                                  "tokens": {"input": {"fixed": 300}}}),
    ],
)  # fmt: skip
def test_a_spec_the_document_allows_is_one_the_api_accepts(case: str, spec: dict[str, Any]) -> None:
    # given a spec the document allows; when the API's validator reads it; then it is accepted
    assert spec_errors(spec) == [], case
    parse_spec(spec)


def test_users_below_the_smallest_load_are_sized_at_that_load_and_told_so() -> None:
    # given users who together send one request in ~114 years at peak (a load the document cannot refuse: it is a
    # product of three fields)
    spec = parse_spec(
        _with(
            EXAMPLE, ("users",), {"total": 1, "peak_active_fraction": 1e-3, "requests_per_active_hour": 1e-3}
        )
    )
    # when the workload is modelled
    model = build_model(spec)
    # then it is sized at the smallest load, as a rate, and the notes say why
    assert model.peak_rps == MIN_PEAK_RPS and model.think_time_s is None
    assert any("below the smallest load sized" in n for n in model.notes)


def test_a_watch_budget_the_store_cannot_hold_is_refused_by_the_document() -> None:
    schema = {"$ref": "#/components/schemas/WatchRequest", "components": DOC["components"]}
    body = {"name": "w", "spec": EXAMPLE, "model_pattern": "meta-llama/Llama-4-*", "budget_usd": 5e-324}
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(body))


def test_a_preset_stands_in_for_tokens_and_slo() -> None:
    spec = {"model": "llama-3.1-8b", "preset": "chat", "users": {"total": 100}}
    assert spec_errors(spec) == []


def test_an_undeclared_method_on_a_known_path_is_405_with_allow() -> None:
    # given TRACE on /runs (which answers GET and POST) and on an unknown path
    event: dict[str, Any] = {
        "httpMethod": "TRACE",
        "path": "/runs",
        "headers": {},
        "requestContext": {},
        "body": None,
    }
    # when each is resolved
    known = resolve(event, None)
    unknown = resolve({**event, "path": "/nothing-here"}, None)
    # then the known path says which methods it answers, and the unknown one is still 404
    assert known["statusCode"] == 405 and known["headers"]["Allow"] == "GET, POST"
    assert json.loads(known["body"])["error"] == "method_not_allowed"
    assert unknown["statusCode"] == 404


def test_an_undeclared_method_on_a_slack_route_is_405_too() -> None:
    # given TRACE on Slack's command route (in the document, answered beside the resolver)
    event: dict[str, Any] = {
        "httpMethod": "TRACE",
        "path": "/slack/commands",
        "headers": {},
        "requestContext": {},
        "body": None,
    }
    # when it is resolved; then it answers 405 naming POST, as the document's other paths do
    answer = resolve(event, None)
    assert answer["statusCode"] == 405 and answer["headers"]["Allow"] == "POST"


def test_a_204_documents_no_body() -> None:
    assert "content" not in DOC["paths"]["/watches/{watch_id}"]["delete"]["responses"]["204"]
