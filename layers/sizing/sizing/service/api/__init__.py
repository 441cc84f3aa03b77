"""The HTTP API: one Powertools REST resolver with a Router per resource group, request/response validation
from the pydantic models in `sizing.service.api.models`, and the domain-error mapping of `errors`.

The Lambda function (`functions/api/app.py`) and `sizing serve` both call `resolve(event, context)`, so the API
served locally is the deployed one.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.utilities.typing import LambdaContext

from sizing.base.errors import InvalidInput, MethodNotAllowed, PayloadTooLarge, Problem
from sizing.catalog import load_catalog
from sizing.catalog.regions import AWS_REGIONS
from sizing.releases.watches import PATTERN_MAX, PATTERN_RE
from sizing.service.api import deps, errors
from sizing.service.api.models import EXAMPLE_SPEC
from sizing.service.api.routers import calibration, catalog, estimates, runs, watches
from sizing.workload.spec import LARGEST_STORED_NUMBER, SMALLEST_STORED_NUMBER, WorkloadSpec, timezone_names

if TYPE_CHECKING:
    from sizing.catalog import Catalog

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
app.include_router(calibration.router)
errors.register(app)


@app.get("/openapi.json", include_in_schema=False)
def openapi_document() -> dict[str, Any]:
    """The document of the server answering: the deployed API's (IAM/SigV4), or, under `sizing serve` (stage
    `local`), one that declares no authentication, since the local server checks none."""
    doc = app.get_openapi_schema(**_served_info()).model_dump(mode="json", by_alias=True, exclude_none=True)
    return with_slack_routes(with_spec_schema(doc, catalog=deps.catalog()))


#: The local document's description: what differs from the deployed API.
LOCAL_DESCRIPTION = (
    "What to run an LLM workload on, and what it will cost: estimates, measured runs, catalog. Served by"
    " `sizing serve` on an embedded AWS: no authentication (the deployed API requires AWS SigV4 / IAM)."
)
#: Name prefix of the workload spec's parts in the document (the result has models of the same names).
SPEC_SCHEMA_PREFIX = "Spec"
#: Hours of a custom traffic profile (one weight each).
HOURS = 24


def with_spec_schema(doc: dict[str, Any], catalog: Catalog | None = None) -> dict[str, Any]:
    """The workload spec in full, generated from `sizing.workload.spec.WorkloadSpec` (descriptions, bounds,
    choices), in place of the free-form object the routes declare (they validate through `parse_spec`, which
    applies presets first). `tokens` and `slo` are not required in the document: a `preset` fills them.
    `model` lists the names of `catalog` (the served document's: the shipped models and those released)."""
    schema = WorkloadSpec.model_json_schema(
        ref_template=f"#/components/schemas/{SPEC_SCHEMA_PREFIX}{{model}}"
    )
    defs = schema.pop("$defs", {})
    # the API never reads a file on the server (`_server_file` refuses it), so its spec has no samples_file
    defs.get("Tokens", {}).get("properties", {}).pop("samples_file", None)
    schema["required"] = [r for r in schema.get("required", []) if r not in ("tokens", "slo")]
    schema["examples"] = [EXAMPLE_SPEC]
    components = doc.setdefault("components", {}).setdefault("schemas", {})
    for name, sub in defs.items():
        components[f"{SPEC_SCHEMA_PREFIX}{name}"] = sub
    _cross_field_rules(schema, components, catalog)
    components["WorkloadSpec"] = schema
    for operation in (op for path in doc.get("paths", {}).values() for op in path.values()):
        no_content = operation.get("responses", {}).get("204")
        if isinstance(no_content, dict):
            no_content.pop("content", None)  # a 204 has no body (RFC 9110 section 15.3.5)
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


def _non_null(prop: dict[str, Any]) -> dict[str, Any]:
    """The schema of an optional property without its `null` choice."""
    choices = [c for c in prop.get("anyOf", [prop]) if c.get("type") != "null"]
    return choices[0] if len(choices) == 1 else {"anyOf": choices}


def _given(props: dict[str, Any], *names: str) -> dict[str, Any]:
    """A rule "these properties are present and not null"."""
    return {"required": list(names), "properties": {n: _non_null(props[n]) for n in names}}


def _form(props: dict[str, Any], given: tuple[str, ...], absent: tuple[str, ...]) -> dict[str, Any]:
    """A rule "these properties are present and not null, and those absent or null"."""
    rule = _given(props, *given)
    rule["properties"].update({n: {"type": "null"} for n in absent if n in props})
    return rule


def _storable_numbers(node: Any) -> None:
    """Every number of the spec within what DynamoDB stores (runs and watches keep their spec; `parse_spec`
    applies the same bounds on every route): 0, or a magnitude from SMALLEST_STORED_NUMBER to
    LARGEST_STORED_NUMBER."""
    if isinstance(node, list):
        for item in node:
            _storable_numbers(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") in ("number", "integer"):
        if node.get("exclusiveMinimum") == 0 and "minimum" not in node and node.get("type") == "number":
            node["minimum"] = SMALLEST_STORED_NUMBER
        elif node.get("minimum") == 0 and node.get("type") == "number":
            node["not"] = {"exclusiveMinimum": 0, "exclusiveMaximum": SMALLEST_STORED_NUMBER}
        if "maximum" not in node and "exclusiveMaximum" not in node:
            node["maximum"] = LARGEST_STORED_NUMBER
    for key, value in node.items():
        if key not in ("enum", "examples", "default", "const", "not"):
            _storable_numbers(value)


def model_names(catalog: Catalog | None = None) -> list[str]:
    """Every name `model` is accepted under: the catalog's ids, their aliases and unambiguous short names
    (GET /catalog/models lists the models); the shipped catalog's when `catalog` is not given."""
    cat = catalog or load_catalog()
    names = set(cat._alias) | {name for m in cat.models.values() for name in (m.id, *m.aliases)}
    shorts: dict[str, set[str]] = {}
    for alias, model_id in cat._alias.items():
        shorts.setdefault(alias.split("/")[-1], set()).add(model_id)
    names |= {short for short, ids in shorts.items() if len(ids) == 1}
    return sorted(names)


def _cross_field_rules(
    spec: dict[str, Any], components: dict[str, Any], catalog: Catalog | None = None
) -> None:
    """What the validators check across fields, said in the document, so that every spec it allows is one the
    API accepts: either `users` or `rate` (not both, not neither); `tokens` and `slo` unless a `preset` fills
    them; at least one SLO and one percentile in each; tokens.input and tokens.output unless a trace or a preset gives
    them; `model` one the catalog
    knows; a token length given as fixed, mean with p95, or lognormal mean with sigma; a watch's `model_pattern`
    is org/name with wildcards in the name, its budget storable."""
    props = spec["properties"]
    # a trace gives the peak itself (its busiest hour) and the lengths: with one, users and rate may both be left
    # out, and tokens too
    trace_alone = {
        "allOf": [_given(props, "trace"), {"not": {"anyOf": [_given(props, "users"), _given(props, "rate")]}}]
    }
    spec["oneOf"] = [_given(props, "users"), _given(props, "rate"), trace_alone]
    spec["anyOf"] = [
        _given(props, "preset"),
        {"required": ["tokens", "slo"]},
        {**_given(props, "trace"), "required": ["trace", "slo"]},
    ]
    # the API reads no file on its server: a trace is an S3 object or prefix
    trace = components.get(f"{SPEC_SCHEMA_PREFIX}TraceSpec", {}).get("properties", {})
    if "path" in trace:
        trace["path"] = {**trace["path"], "pattern": "^s3://"}
    slo = components.get(f"{SPEC_SCHEMA_PREFIX}SLO", {})
    slo_props = slo.get("properties", {})
    slo["anyOf"] = [_given(slo_props, n) for n in ("ttft_ms", "tpot_ms", "e2e_s") if n in slo_props]
    props["model"]["enum"] = model_names(catalog)
    # the API's tokens are input and output (it reads no samples file)
    tokens = components.get(f"{SPEC_SCHEMA_PREFIX}Tokens", {})
    for name in ("input", "output"):
        if name in tokens.get("properties", {}):
            tokens["properties"][name] = {
                **_non_null(tokens["properties"][name]),
                "description": tokens["properties"][name].get("description", ""),
            }
    # both lengths, unless a trace gives them or a preset fills them (the spec's own rule, `WorkloadSpec`): a trace
    # with tokens.input alone is a spec the API accepts, so the document must allow it too
    spec.setdefault("allOf", []).append(
        {
            "anyOf": [
                _given(props, "trace"),
                _given(props, "preset"),
                {"properties": {"tokens": {"required": ["input", "output"]}}},
            ]
        }
    )
    shape = components.get(f"{SPEC_SCHEMA_PREFIX}TokenSpec", {})
    if shape.get("properties"):
        # one form at a time, the others' fields absent or null: "give either fixed, or mean with p95, or dist:
        # lognormal with mean and sigma" (dist may be left out when sigma is given)
        shape.pop("anyOf", None)
        shape["oneOf"] = [
            _form(shape["properties"], ("fixed",), ("mean", "p95", "sigma", "dist")),
            _form(shape["properties"], ("mean", "p95"), ("fixed", "sigma", "dist")),
            _form(shape["properties"], ("mean", "sigma"), ("fixed", "p95")),
        ]
    region = components.get(f"{SPEC_SCHEMA_PREFIX}Constraints", {}).get("properties", {}).get("region")
    if region is not None:
        region["enum"] = sorted(AWS_REGIONS)
    traffic = components.get(f"{SPEC_SCHEMA_PREFIX}Traffic", {}).get("properties", {})
    if "timezone" in traffic:
        traffic["timezone"]["enum"] = sorted(timezone_names())
    for choice in traffic.get("profile", {}).get("anyOf", []):
        if choice.get("type") == "array":  # 24 hourly weights, at least one above 0
            choice.update(minItems=HOURS, maxItems=HOURS, contains={"type": "number", "exclusiveMinimum": 0})
    for name, sub in components.items():
        if name.startswith(SPEC_SCHEMA_PREFIX):
            _storable_numbers(sub)
    _storable_numbers(spec)
    bounds = components.get(f"{SPEC_SCHEMA_PREFIX}PercentileBounds", {})
    bounds["anyOf"] = [_given(bounds["properties"], n) for n in bounds.get("properties", {})]
    pattern = components.get("WatchRequest", {}).get("properties", {}).get("model_pattern")
    if pattern is not None:
        pattern.update(pattern=PATTERN_RE.pattern, maxLength=PATTERN_MAX)
    # a watch is stored: its budget within what DynamoDB stores (the body check refuses smaller magnitudes)
    budget = components.get("WatchRequest", {}).get("properties", {}).get("budget_usd", {})
    for choice in budget.get("anyOf", []):
        if choice.get("type") == "number":
            choice["minimum"] = SMALLEST_STORED_NUMBER


def _openapi_info() -> dict[str, Any]:
    return {
        "title": TITLE,
        "version": VERSION,
        "description": "What to run an LLM workload on, and what it will cost: estimates, measured runs, catalog."
        " Calls are signed with AWS SigV4 (IAM) unless the stage says otherwise.",
        "security_schemes": {
            # the OpenAPI security scheme as its JSON (Powertools validates it into its APIKey model): importing
            # that model at import time cost ~0.15-0.35 s of the handler's cold import (python -X importtime)
            "sigv4": {
                "type": "apiKey",
                "name": "Authorization",
                "in": "header",
                "description": "AWS Signature Version 4 (x-amazon-apigateway-authtype: awsSigv4)",
            }
        },
        "security": [{"sigv4": []}],
    }


def _served_info() -> dict[str, Any]:
    """The document's header as this server answers: the deployed API's (IAM/SigV4), or under `sizing serve`
    (stage `local`) one without security, since the local server checks none. /openapi.json and /swagger both
    use it, so the two never disagree."""
    info = _openapi_info()
    if deps.settings().stage == "local":
        info = {k: v for k, v in info.items() if k not in ("security", "security_schemes")}
        info["description"] = LOCAL_DESCRIPTION
    return info


#: The Slack bot's routes on the same API (served by its own functions, `functions/slack/`): Slack signs each request
#: (X-Slack-Signature, an HMAC-SHA256 of `v0:{timestamp}:{body}` with the app's signing secret,
#: api.slack.com/authentication/verifying-requests-from-slack), so they need no SigV4 and declare no security.
SLACK_HEADERS = [
    {
        "name": "X-Slack-Signature",
        "in": "header",
        "required": True,
        "description": "v0=<hex HMAC-SHA256 of v0:{timestamp}:{raw body} with the Slack app's signing secret>",
        "schema": {"type": "string"},
    },
    {
        "name": "X-Slack-Request-Timestamp",
        "in": "header",
        "required": True,
        "description": "Unix time of the request; one more than five minutes old is refused (replay)",
        "schema": {"type": "string"},
    },
]
_SLACK_REFUSED = {
    "description": "not from Slack (bad or missing signature, stale timestamp): nothing started",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"],
            }
        }
    },
}
_SLACK_MESSAGE = {
    "description": "the acknowledgement: an ephemeral Block Kit message (JSON), or an empty body",
    "content": {"application/json": {"schema": {"type": "object"}}},
}
SLACK_PATHS: dict[str, Any] = {
    "/slack/commands": {
        "post": {
            "tags": ["slack"],
            "summary": "The /sizing slash command",
            "description": "Slack's slash command request (form-encoded). Parses `/sizing ...`, answers an ephemeral"
            " acknowledgement within Slack's three seconds, and posts the estimate (top three architectures,"
            " 'Measure these', a report link) to the response_url. `/sizing help` answers the grammar.",
            "operationId": "slack_command",
            "security": [],
            "parameters": SLACK_HEADERS,
            "requestBody": {
                "required": True,
                "content": {
                    "application/x-www-form-urlencoded": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                k: {"type": "string"}
                                for k in (
                                    "command",
                                    "text",
                                    "user_id",
                                    "channel_id",
                                    "team_id",
                                    "response_url",
                                    "trigger_id",
                                )
                            },
                            "required": ["command", "text", "response_url"],
                        }
                    }
                },
            },
            "responses": {"200": _SLACK_MESSAGE, "401": _SLACK_REFUSED},
        }
    },
    "/slack/interactions": {
        "post": {
            "tags": ["slack"],
            "summary": "Block Kit interactions ('Measure these')",
            "description": "Slack's interaction request (form-encoded `payload`, a JSON block_actions document)."
            " 'Measure these' starts one measured run of the estimate's top architectures, once per click; other"
            " interactions are acknowledged and ignored.",
            "operationId": "slack_interaction",
            "security": [],
            "parameters": SLACK_HEADERS,
            "requestBody": {
                "required": True,
                "content": {
                    "application/x-www-form-urlencoded": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                "payload": {"type": "string", "description": "JSON block_actions"}
                            },
                            "required": ["payload"],
                        }
                    }
                },
            },
            "responses": {
                "200": _SLACK_MESSAGE,
                "400": {**_SLACK_REFUSED, "description": "the button carries no workload"},
                "401": _SLACK_REFUSED,
            },
        }
    },
}


def with_slack_routes(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with the Slack bot's routes, which other functions serve on the same API."""
    doc.setdefault("paths", {}).update(json.loads(json.dumps(SLACK_PATHS)))
    tags = doc.setdefault("tags", [])
    if isinstance(tags, list) and not any(isinstance(t, dict) and t.get("name") == "slack" for t in tags):
        tags.append({"name": "slack", "description": "the Slack bot: Slack-signed requests, not SigV4"})
    return doc


def openapi_json() -> str:
    """The deployed API's OpenAPI document as JSON text (GET /openapi.json serves it, or its local variant)."""
    doc = app.get_openapi_schema(**_openapi_info()).model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps(with_slack_routes(with_spec_schema(doc)), indent=2)


SWAGGER_PATH = "/swagger"
_swagger_lock = threading.Lock()
_swagger_on: list[bool] = []


def _enable_swagger() -> None:
    """Swagger UI, registered when first asked for: `enable_swagger` imports Powertools' OpenAPI models, ~0.2 s
    of the handler's cold import (python -X importtime) that no other route needs."""
    with _swagger_lock:
        if not _swagger_on:
            app.enable_swagger(path=SWAGGER_PATH, **_served_info())
            _swagger_on.append(True)


def resolve(event: dict[str, Any], context: LambdaContext | Any) -> dict[str, Any]:
    """Answer one API Gateway REST event. Bodies past MAX_BODY_BYTES are refused before any parsing."""
    if not _swagger_on and str(event.get("path") or "").rstrip("/").endswith(SWAGGER_PATH):
        _enable_swagger()
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
    not_allowed = _method_not_allowed(event)
    if not_allowed is not None:
        return not_allowed
    return app.resolve(_as_json(event), context)


def _method_not_allowed(event: dict[str, Any]) -> dict[str, Any] | None:
    """405 with `Allow` for a method a known path does not declare (TRACE /runs), as HTTP says (RFC 9110
    section 15.5.6); an unknown path stays a 404 from the resolver."""
    method = str(event.get("httpMethod") or "").upper()
    path = str(event.get("path") or "")
    allowed = sorted({r.method for r in app._static_routes + app._dynamic_routes if r.rule.match(path)})
    # Slack's routes are in the document but answered beside the resolver (signed by Slack): their methods too
    allowed = allowed or sorted(m.upper() for m in SLACK_PATHS.get(path.rstrip("/"), {}))
    if not allowed or method in allowed:
        return None
    answer = errors.sizing_error(
        MethodNotAllowed(
            f"{path} does not answer {method[:16]}; it answers {', '.join(allowed)}",
            details={"allowed": allowed},
            code="method_not_allowed",
        )
    )
    return {
        "statusCode": answer.status_code,
        "headers": {"Content-Type": "application/json", "Allow": ", ".join(allowed)},
        "body": answer.body,
        "isBase64Encoded": False,
    }


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
        trace = spec.get("trace") if isinstance(spec, dict) else None
        path = trace.get("path") if isinstance(trace, dict) else None
        if isinstance(path, str) and not path.startswith("s3://"):
            return Problem(
                f"{prefix}trace.path",
                "names a file on the server, which the API does not read: give the trace's s3:// URI",
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
