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


def test_the_document_has_exactly_the_routes_of_the_deployed_api() -> None:
    # given the routes API Gateway forwards to the API function (template.yaml; other functions, such as the
    # Slack bot's, serve routes of their own on the same API)
    body = load_template(ROOT / "template.yaml")["Resources"]["SizingApi"]["Properties"]["DefinitionBody"]
    deployed = {
        (path, method)
        for path, item in body["paths"].items()
        for method, operation in item.items()
        if "${ApiFunction.Arn}" in json.dumps(operation["x-amazon-apigateway-integration"]["uri"])
    }
    # then the code documents each of them, and nothing API Gateway would not forward
    assert _operations(_document()) == deployed - DOC_ROUTES


def test_every_operation_documents_its_error_body() -> None:
    doc = _document()
    for path, method in _operations(doc):
        responses = doc["paths"][path][method]["responses"]
        schema = responses["422"]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (path, method)
    assert set(doc["components"]["schemas"]["ErrorBody"]["required"]) == {"error", "message"}


def test_the_run_request_shows_a_working_example() -> None:
    from sizing.workload import parse_spec

    doc = _document()
    example = doc["components"]["schemas"]["RunRequest"]["properties"]["spec"]["examples"][0]
    assert parse_spec(example).model == "meta-llama/Llama-3.1-70B-Instruct"
