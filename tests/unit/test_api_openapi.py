"""The OpenAPI document generated from the code: valid, complete, and the same routes API Gateway exposes."""

from __future__ import annotations

import json
from pathlib import Path

from openapi_spec_validator import validate

from sizing.service.api import openapi_json
from sizing.store.schema import load_template

ROOT = Path(__file__).resolve().parents[2]
#: Routes served by the function but kept out of the document (the document itself and its UI).
DOC_ROUTES = {("/openapi.json", "get"), ("/swagger", "get")}


def _document() -> dict:
    return json.loads(openapi_json())


def _operations(doc: dict) -> set[tuple[str, str]]:
    return {(path, method) for path, item in doc["paths"].items() for method in item}


def test_the_document_is_valid_openapi() -> None:
    validate(_document())


def _deployed(function: str | None = "${ApiFunction.Arn}") -> set[tuple[str, str]]:
    """The routes API Gateway forwards (template.yaml), to `function` or, with None, to any function."""
    body = load_template(ROOT / "template.yaml")["Resources"]["SizingApi"]["Properties"]["DefinitionBody"]
    return {
        (path, method)
        for path, item in body["paths"].items()
        for method, operation in item.items()
        if function is None or function in json.dumps(operation["x-amazon-apigateway-integration"]["uri"])
    }


def test_the_document_has_exactly_the_routes_of_the_deployed_api() -> None:
    # given every route API Gateway forwards: the API function's and the Slack bot's (its own functions)
    deployed = _deployed(None)
    # when the document's operations are listed
    documented = _operations(_document())
    # then the code documents each of them, and nothing API Gateway would not forward
    assert documented == deployed - DOC_ROUTES
    # and the Slack routes declare no SigV4: Slack signs them, and they say how
    doc = _document()
    for path in ("/slack/commands", "/slack/interactions"):
        op = doc["paths"][path]["post"]
        assert op["security"] == []
        assert {p["name"] for p in op["parameters"]} == {"X-Slack-Signature", "X-Slack-Request-Timestamp"}
        assert "401" in op["responses"]


def test_every_operation_documents_its_error_body() -> None:
    doc = _document()
    for path, method in _operations(doc) & _deployed():
        responses = doc["paths"][path][method]["responses"]
        schema = responses["422"]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (path, method)
    assert set(doc["components"]["schemas"]["ErrorBody"]["required"]) == {"error", "message"}


def test_the_run_request_shows_a_working_example() -> None:
    from sizing.workload.parse import parse_spec

    doc = _document()
    example = doc["components"]["schemas"]["RunRequest"]["properties"]["spec"]["examples"][0]
    assert parse_spec(example).model == "meta-llama/Llama-3.1-70B-Instruct"
