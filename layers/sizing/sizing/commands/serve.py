"""`sizing serve [--port 3000]`: the HTTP API on localhost, backed by an embedded AWS (moto, in-process).

The same resolver as the Lambda function answers (`sizing.service.api.resolve`); a tiny adapter turns each
HTTP request into an API Gateway REST proxy event and the answer back. DynamoDB's table is created from
template.yaml's definition, and a stand-in state machine accepts POST /runs, so a newcomer can `curl` every
route with no AWS account.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

DEFAULT_PORT = 3000
LOCAL_HOST = "127.0.0.1"
REGION = "us-east-1"
TABLE = "llm-sizing-local"
#: Stand-in for the sizing state machine on the embedded AWS: starts and stops like the real one, does nothing.
#: (`sizing run` executes the real definition; the API only needs StartExecution/StopExecution to succeed.)
STAND_IN_ASL = {
    "Comment": "local stand-in",
    "StartAt": "Accepted",
    "States": {"Accepted": {"Type": "Pass", "End": True}},
}
LOCAL_ROLE = "arn:aws:iam::123456789012:role/llm-sizing-local"
#: The largest body read from a socket: API Gateway's own payload limit (10 MB); the API refuses far less.
MAX_READ_BYTES = 10 * 1024 * 1024


# --- the adapter: HTTP request → API Gateway REST event → HTTP answer ------------------------------------------
def to_event(
    method: str, target: str, headers: dict[str, list[str]], body: bytes, source_ip: str
) -> dict[str, Any]:
    """An API Gateway REST proxy event for one HTTP request (the fields Powertools reads)."""
    url = urlsplit(target)
    query = parse_qs(url.query, keep_blank_values=True)
    path = unquote(url.path) or "/"
    try:
        text, encoded = body.decode(), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": {k: v[-1] for k, v in headers.items()},
        "multiValueHeaders": headers,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "stage": "local",
            "httpMethod": method,
            "path": path,
            "resourcePath": path,
            "identity": {"sourceIp": source_ip},
        },
        "body": text or None,
        "isBase64Encoded": encoded,
    }


def from_result(result: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    """(status, headers, body) of an API Gateway proxy answer."""
    headers = [(k, str(v)) for k, v in (result.get("headers") or {}).items()]
    for k, values in (result.get("multiValueHeaders") or {}).items():
        headers += [(k, str(v)) for v in values]
    raw = result.get("body") or ""
    body = base64.b64decode(raw) if result.get("isBase64Encoded") else raw.encode()
    return int(result["statusCode"]), headers, body


class _Handler(BaseHTTPRequestHandler):
    server_version = "sizing-serve"
    protocol_version = "HTTP/1.1"
    lock = threading.Lock()  # the resolver keeps the current event on itself: one request at a time

    def _serve(self) -> None:
        from sizing.service.api import resolve
        from sizing.service.observability import metrics

        length = min(int(self.headers.get("Content-Length") or 0), MAX_READ_BYTES)
        body = self.rfile.read(length) if length else b""
        headers: dict[str, list[str]] = {}
        for k, v in self.headers.items():
            headers.setdefault(k, []).append(v)
        event = to_event(self.command, self.path, headers, body, self.client_address[0])
        with self.lock:
            result = resolve(event, None)
            metrics.clear_metrics()  # CloudWatch metrics are the Lambda's business, not the laptop's
        status, out_headers, out_body = from_result(result)
        self.send_response(status)
        for k, v in out_headers:
            if k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(out_body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out_body)

    def __getattr__(self, name: str) -> Any:
        # every method goes to the resolver (it answers 404 for what it does not route), never http.server's 501
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        if not getattr(self.server, "quiet", False):
            super().log_message(format, *args)


# --- the embedded AWS and the server ---------------------------------------------------------------------------
class LocalApi:
    """The API on `host:port` backed by moto's in-process server; `start()` then `stop()` (or use `with`)."""

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        host: str = LOCAL_HOST,
        template: Path | None = None,
        quiet: bool = False,
    ):
        self.host, self.port, self.quiet = host, port, quiet
        self.template = template
        self._moto: Any = None
        self._http: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> LocalApi:
        import boto3
        from moto.server import ThreadedMotoServer

        from sizing.service.api import deps
        from sizing.service.settings import ApiSettings
        from sizing.store import create_table
        from sizing.store.schema import DEFAULT_TEMPLATE

        for key, value in {
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_SERVICE_NAME": "llm-sizing",
            "POWERTOOLS_METRICS_NAMESPACE": "LLMSizing",
        }.items():
            os.environ.setdefault(key, value)
        self._http = ThreadingHTTPServer((self.host, self.port), _Handler)
        self._http.quiet = self.quiet  # type: ignore[attr-defined]
        self.port = self._http.server_address[1]
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the embedded AWS's own request log
        self._moto = ThreadedMotoServer(ip_address=LOCAL_HOST, port=0, verbose=False)
        self._moto.start()
        moto_host, moto_port = self._moto.get_host_and_port()
        endpoint = f"http://{moto_host}:{moto_port}"
        os.environ.setdefault(
            "MOTO_PORT", str(moto_port)
        )  # Task states of moto's Step Functions call back here
        session = boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION
        )
        ddb = session.client("dynamodb", endpoint_url=endpoint)
        sfn = session.client("stepfunctions", endpoint_url=endpoint)
        create_table(ddb, TABLE, self.template or DEFAULT_TEMPLATE)
        arn = sfn.create_state_machine(
            name="llm-sizing-run-local", definition=json.dumps(STAND_IN_ASL), roleArn=LOCAL_ROLE
        )["stateMachineArn"]
        deps.configure(
            ApiSettings(TABLE_NAME=TABLE, STATE_MACHINE_ARN=arn, STAGE="local"), dynamodb=ddb, sfn=sfn
        )
        threading.Thread(target=self._http.serve_forever, name="sizing-serve", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._moto is not None:
            self._moto.stop()

    def __enter__(self) -> LocalApi:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the HTTP API on localhost (embedded AWS, no account needed)")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)"
    )
    p.add_argument("--host", default=LOCAL_HOST, help="address to bind (default 127.0.0.1)")
    p.add_argument("--template", type=Path, default=None, help="template.yaml holding the table definition")
    p.add_argument("--quiet", action="store_true", help="no request log")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    api = LocalApi(args.port, args.host, args.template, args.quiet).start()
    print(
        f"LLM Sizing API on {api.url}  (OpenAPI: {api.url}/openapi.json, Swagger UI: {api.url}/swagger)",
        flush=True,
    )
    print(f"  try: curl {api.url}/catalog/models", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        api.stop()
    return 0
