"""The HTTP API: one Powertools REST resolver with a Router per resource group, request/response validation
from the pydantic models in `sizing.api_models`, and the domain-error mapping of `errors`.

The Lambda function (`functions/api/app.py`) and `sizing serve` both call `resolve(event, context)`, so the API
served locally is the deployed one.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn
from aws_lambda_powertools.utilities.typing import LambdaContext

from sizing.errors import InvalidInput, Problem
from sizing.service.api import errors
from sizing.service.api.routers import catalog, estimates, runs, watches
from sizing.service.errors import PayloadTooLarge

TITLE = "LLM Sizing API"
VERSION = "1.0.0"
#: Largest request body accepted: a workload spec is a few KB; 256 KiB leaves room for 24-hour profiles and long
#: names while refusing junk early (API Gateway itself accepts up to 10 MB).
MAX_BODY_BYTES = 256 * 1024

app = APIGatewayRestResolver(enable_validation=True)
app.include_router(estimates.router)
app.include_router(runs.router)
app.include_router(catalog.router)
app.include_router(watches.router)
errors.register(app)


@app.get("/openapi.json", include_in_schema=False)
def openapi_document() -> dict[str, Any]:
    """The document of the server answering: the deployed API's (IAM/SigV4), or, under `sizing serve` (stage
    `local`), one that declares no authentication, since the local server checks none."""
    from sizing.service.api import deps

    local = deps.settings().stage == "local"
    info = _openapi_info()
    if local:
        info = {k: v for k, v in info.items() if k not in ("security", "security_schemes")}
        info["description"] = LOCAL_DESCRIPTION
    doc = app.get_openapi_schema(**info).model_dump(mode="json", by_alias=True, exclude_none=True)
    return with_spec_schema(doc)


#: The local document's description: what differs from the deployed API.
LOCAL_DESCRIPTION = (
    "What to run an LLM workload on, and what it will cost: estimates, measured runs, catalog. Served by"
    " `sizing serve` on an embedded AWS: no authentication (the deployed API requires AWS SigV4 / IAM)."
)
#: Name prefix of the workload spec's parts in the document (the result has models of the same names).
SPEC_SCHEMA_PREFIX = "Spec"


def with_spec_schema(doc: dict[str, Any]) -> dict[str, Any]:
    """The workload spec in full, generated from `sizing.workload.WorkloadSpec` (descriptions, bounds,
    choices), in place of the free-form object the routes declare (they validate through `parse_spec`, which
    applies presets first). `tokens` and `slo` are not required in the document: a `preset` fills them."""
    from sizing.api_models import EXAMPLE_SPEC
    from sizing.workload import WorkloadSpec

    schema = WorkloadSpec.model_json_schema(
        ref_template=f"#/components/schemas/{SPEC_SCHEMA_PREFIX}{{model}}"
    )
    defs = schema.pop("$defs", {})
    schema["required"] = [r for r in schema.get("required", []) if r not in ("tokens", "slo")]
    schema["examples"] = [EXAMPLE_SPEC]
    components = doc.setdefault("components", {}).setdefault("schemas", {})
    for name, sub in defs.items():
        components[f"{SPEC_SCHEMA_PREFIX}{name}"] = sub
    components["WorkloadSpec"] = schema
    ref = {"$ref": "#/components/schemas/WorkloadSpec"}
    body = doc.get("paths", {}).get("/estimates", {}).get("post", {}).get("requestBody")
    if body:
        body["content"]["application/json"]["schema"] = ref
    for model in ("RunRequest", "WatchRequest"):
        props = components.get(model, {}).get("properties", {})
        if "spec" in props:
            props["spec"] = {
                **ref,
                "description": props["spec"].get("description", ""),
                "examples": props["spec"].get("examples", [EXAMPLE_SPEC]),
            }
    return doc


def _openapi_info() -> dict[str, Any]:
    return {
        "title": TITLE,
        "version": VERSION,
        "description": "What to run an LLM workload on, and what it will cost: estimates, measured runs, catalog."
        " Calls are signed with AWS SigV4 (IAM) unless the stage says otherwise.",
        "security_schemes": {
            "sigv4": APIKey(
                name="Authorization",
                in_=APIKeyIn.header,
                description="AWS Signature Version 4 (x-amazon-apigateway-authtype: awsSigv4)",
            )
        },
        "security": [{"sigv4": []}],
    }


def openapi_json() -> str:
    """The deployed API's OpenAPI document as JSON text (GET /openapi.json serves it, or its local variant)."""
    doc = app.get_openapi_schema(**_openapi_info()).model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps(with_spec_schema(doc), indent=2)


app.enable_swagger(path="/swagger", **_openapi_info())


def resolve(event: dict[str, Any], context: LambdaContext | Any) -> dict[str, Any]:
    """Answer one API Gateway REST event. Bodies past MAX_BODY_BYTES are refused before any parsing."""
    body = event.get("body") or ""
    if len(body) > MAX_BODY_BYTES:
        too_large = PayloadTooLarge(
            f"the request body is {len(body):,} bytes; at most {MAX_BODY_BYTES:,} are accepted",
            code="payload_too_large",
        )
        answer = errors.sizing_error(too_large)
        return {
            "statusCode": answer.status_code,
            "headers": {"Content-Type": "application/json"},
            "body": answer.body,
            "isBase64Encoded": False,
        }
    problem = _body_problem(event)
    if problem:
        message = problem.message if problem.field == "body" else f"{problem.field} {problem.message}"
        answer = errors.sizing_error(InvalidInput(message, [problem]))
        return {
            "statusCode": answer.status_code,
            "headers": {"Content-Type": "application/json"},
            "body": answer.body,
            "isBase64Encoded": False,
        }
    return app.resolve(_as_json(event), context)


def _body_problem(event: dict[str, Any]) -> Problem | None:
    """Why a body that parses as JSON text still cannot be read, for what Python's json module raises on instead
    of reporting (each was a 500): bytes that are not UTF-8, nesting past the parser's recursion limit, an integer
    past CPython's digit limit, and a lone surrogate (a valid JSON escape but not Unicode: nothing downstream can
    encode it); or a spec naming a file on the server. Malformed JSON is left to the resolver's validation."""
    body = event.get("body")
    if not body:
        return None
    try:
        text = base64.b64decode(body).decode() if event.get("isBase64Encoded") else body
        data = json.loads(text)
        json.dumps(data, ensure_ascii=False).encode()
    except json.JSONDecodeError:
        return None
    except (UnicodeError, binascii.Error):
        return Problem("body", "the request body is not UTF-8 text (or holds a lone surrogate)")
    except RecursionError:
        return Problem("body", "the request body is nested too deeply")
    except ValueError:
        return Problem("body", "the request body holds a number too long to read")
    return _server_file(data)


def _server_file(data: Any) -> Problem | None:
    """`tokens.samples_file` names a file to read: right for the CLI on one's own machine, but over HTTP it made
    the server open any path a caller named (which files exist, what their first row holds; /dev/zero read for
    ever). Specs arrive as the body (POST /estimates) or its `spec` (POST /runs, POST /watches)."""
    for prefix, spec in (("", data), ("spec.", data.get("spec") if isinstance(data, dict) else None)):
        tokens = spec.get("tokens") if isinstance(spec, dict) else None
        if isinstance(tokens, dict) and "samples_file" in tokens:
            return Problem(
                f"{prefix}tokens.samples_file",
                "names a file on the server, which the API does not read: give tokens.input and tokens.output",
            )
    return None


def _as_json(event: dict[str, Any]) -> dict[str, Any]:
    """The API speaks JSON only: a body sent with another content type (`curl -d` says form-urlencoded) is
    read as JSON, so it is validated (or refused) as JSON rather than parsed as a form."""
    if not event.get("body"):
        return event
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != "content-type"}
    multi = {k: v for k, v in (event.get("multiValueHeaders") or {}).items() if k.lower() != "content-type"}
    headers["Content-Type"] = "application/json"
    multi["Content-Type"] = ["application/json"]
    return {**event, "headers": headers, "multiValueHeaders": multi}
