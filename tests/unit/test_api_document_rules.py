"""The OpenAPI document says what the API refuses: a spec the document allows is one the API accepts, and the
cross-field rules the validators apply (users or rate, a preset or tokens and slo, at least one SLO and
percentile, a known model, no server file) are in the document. Undeclared methods answer 405 with Allow."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from sizing.service.api import openapi_json, resolve

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
        ("an slo without any objective", _with(EXAMPLE, ("slo",), {"ttft_ms": None})),
        ("an objective without any percentile", _with(EXAMPLE, ("slo", "e2e_s"), {})),
        ("a token length of no shape", _with(EXAMPLE, ("tokens", "input"), {"p95": 3500})),
        ("a file on the server", _with(EXAMPLE, ("tokens", "samples_file"), "/etc/passwd")),
        ("a trace file on the server", _with(EXAMPLE, ("trace",), {"path": "/etc/passwd"})),
        ("a model nobody knows", _with(EXAMPLE, ("model",), "acme/unknown-7b")),
    ],
)
def test_a_spec_the_api_refuses_is_one_the_document_refuses(case: str, spec: dict[str, Any]) -> None:
    # given a spec the API answers 422 for; when the document's schema checks it; then it is refused there too
    assert spec_errors(spec) != [], case


def test_a_trace_on_s3_stands_in_for_users_rate_and_tokens() -> None:
    # given a spec whose peak and lengths come from a trace on S3, and the same with a rate to scale it to
    spec = {"model": "llama-3.1-8b", "trace": {"path": "s3://bucket/logs/"}, "slo": {"e2e_s": {"p95": 9}}}
    # when the document checks them, then both are allowed, and with users and rate together it still refuses
    assert spec_errors(spec) == []
    assert spec_errors({**spec, "rate": {"peak_rps": 5}}) == []
    assert spec_errors({**spec, "rate": {"peak_rps": 5}, "users": {"total": 100}}) != []


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


def test_a_204_documents_no_body() -> None:
    assert "content" not in DOC["paths"]["/watches/{watch_id}"]["delete"]["responses"]["204"]
