"""`sizing serve [--port 3000]`: the HTTP API on localhost, backed by an embedded AWS (moto, in-process).

The same resolver as the Lambda function answers (`sizing.service.api.resolve`); a tiny adapter turns each
HTTP request into an API Gateway REST proxy event and the answer back. The embedded AWS holds what
template.yaml declares for a run (table, event bus, the step functions, the real state machine), so
`POST /runs` executes exactly as `sizing run` does: twins (or the endpoint named by `--endpoint` /
`SIZING_ENDPOINT`), measured by real Locust in child processes; a configurable number of runs execute at once
and the others wait QUEUED. `/slack/commands` and `/slack/interactions` are the Slack bot's, verified with a
signing secret printed at start; what the bot posts goes to a local sink (`slack.jsonl` under the runs folder,
and the console).
"""

from __future__ import annotations

import argparse
import base64
import logging
import os
import secrets
import signal
import sys
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from sizing_local import STEP_S, WARMUP_S, add_level_seconds

DEFAULT_PORT = 3000
LOCAL_HOST = "127.0.0.1"
#: The largest body read from a socket: API Gateway's own payload limit (10 MB); the API refuses far less.
MAX_READ_BYTES = 10 * 1024 * 1024
#: Connections the kernel holds for the server before it accepts them. Python's default (5) made 2-3 of 24-48
#: simultaneous clients see "connection reset by peer"; 128 is Linux's historical SOMAXCONN, well above the 64
#: concurrent clients the server is tested with.
LISTEN_BACKLOG = 128
#: Statuses that never carry a body (RFC 9110 sections 15.3.5, 15.4.5): a client reads none, so bytes sent
#: anyway would be read as the start of the next answer on the same connection.
NO_BODY_STATUSES = frozenset({204, 304})
#: The embedded S3 bucket presigned report links point into (a link is served by the embedded AWS's port).
REPORTS_BUCKET = "sizing-reports-local"
#: Environment variable naming the signing secret `sizing serve` checks Slack requests with (one is generated
#: and printed when it is not set).
SIGNING_SECRET_ENV = "SIZING_SLACK_SIGNING_SECRET"


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
        from sizing.base.observability import metrics
        from sizing.service.api import resolve

        length = min(int(self.headers.get("Content-Length") or 0), MAX_READ_BYTES)
        body = self.rfile.read(length) if length else b""
        headers: dict[str, list[str]] = {}
        for k, v in self.headers.items():
            headers.setdefault(k, []).append(v)
        event = to_event(self.command, self.path, headers, body, self.client_address[0])
        result = _slack_route(event) if getattr(self.server, "slack", False) else None
        if result is None:
            with self.lock:
                result = resolve(event, None)
                metrics.clear_metrics()  # CloudWatch metrics are the Lambda's business, not the laptop's
        status, out_headers, out_body = from_result(result)
        bodiless = status in NO_BODY_STATUSES
        self.send_response(status)
        for k, v in out_headers:
            if k.lower() != "content-length" and not (bodiless and k.lower() == "content-type"):
                self.send_header(k, v)
        if not bodiless:
            self.send_header("Content-Length", str(len(out_body)))
        self.end_headers()
        if self.command != "HEAD" and not bodiless:
            self.wfile.write(out_body)

    def __getattr__(self, name: str) -> Any:
        # every method goes to the resolver (it answers 404 for what it does not route), never http.server's 501
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        if not getattr(self.server, "quiet", False):
            super().log_message(format, *args)


def _slack_route(event: dict[str, Any]) -> dict[str, Any] | None:
    from sizing.slack import deps as slack_deps

    return slack_deps.route(event)


class _Server(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True
    allow_reuse_address = True


# --- the embedded AWS and the server ---------------------------------------------------------------------------
class LocalApi:
    """The API on `host:port` backed by the embedded AWS of `sizing_local.stack.LocalRuns`; `start()`
    then `stop()` (or use `with`). Runs' results, reports and Slack messages go under `out_dir`."""

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        host: str = LOCAL_HOST,
        template: Path | None = None,
        quiet: bool = False,
        *,
        out_dir: Path | None = None,
        max_runs: int | None = None,
        endpoint_url: str | None = None,
        step_s: float = STEP_S,
        warmup_s: float = WARMUP_S,
        signing_secret: str | None = None,
    ):
        from sizing_local.stack import DEFAULT_MAX_ACTIVE_RUNS

        self.host, self.port, self.quiet = host, port, quiet
        self.template = template
        self.out_dir = out_dir or Path(f"runs/serve-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}")
        self.max_runs = max_runs or DEFAULT_MAX_ACTIVE_RUNS
        self.endpoint_url = endpoint_url or os.environ.get("SIZING_ENDPOINT") or None
        self.step_s = step_s
        self.warmup_s = warmup_s
        self.signing_secret = signing_secret or os.environ.get(SIGNING_SECRET_ENV) or secrets.token_hex(16)
        self.runs: Any = None
        self._http: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def slack_sink(self) -> Path:
        """The file the local Slack sink appends the bot's messages to (JSON lines)."""
        return self.out_dir / "slack.jsonl"

    def start(self) -> LocalApi:
        from sizing.service.api import deps
        from sizing.service.settings import ApiSettings
        from sizing_local.stack import TABLE, LocalRuns

        self._http = _Server((self.host, self.port), _Handler)
        self._http.quiet = self.quiet  # type: ignore[attr-defined]
        self._http.slack = True  # type: ignore[attr-defined]
        self.port = self._http.server_address[1]
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the embedded AWS's own request log
        try:
            self.runs = LocalRuns(
                out_dir=self.out_dir,
                endpoint_url=self.endpoint_url,
                step_s=self.step_s,
                warmup_s=self.warmup_s,
                max_active=self.max_runs,
                template_path=self.template,
            ).start()
        except BaseException:
            self._http.server_close()
            raise
        runs = self.runs
        # reports bucket on the embedded S3, so `GET /runs/{id}/report?presign=true` answers a link as deployed
        runs.session.client("s3", endpoint_url=runs.endpoint).create_bucket(Bucket=REPORTS_BUCKET)
        deps.configure(
            ApiSettings(
                table_name=TABLE,
                state_machine_arn=runs.stack.state_machine_arn,
                stage="local",
                report_bucket=REPORTS_BUCKET,
            ),
            dynamodb=runs.ddb,
            sfn=runs.sfn,
            runs=runs.service,
            progress=runs.progress,
        )
        self._configure_slack()
        runs.on_finished = self._notify_slack
        threading.Thread(target=self._http.serve_forever, name="sizing-serve", daemon=True).start()
        return self

    def _configure_slack(self) -> None:
        from sizing.slack import deps as slack_deps
        from sizing.slack.secrets import StaticSecrets
        from sizing.slack.settings import SlackSettings
        from sizing.slack.sink import LOCAL_BOT_TOKEN, LocalSlackSink
        from sizing_local.stack import TABLE

        runs = self.runs
        slack_deps.configure(
            SlackSettings(
                table_name=TABLE,
                secret_id="local",
                state_machine_arn=runs.stack.state_machine_arn,
                report_base_url=self.url,
            ),
            dynamodb=runs.ddb,
            sfn=runs.sfn,
            invoker=slack_deps.background_invoker(),
            runs=runs.service,
            secrets=StaticSecrets(self.signing_secret, LOCAL_BOT_TOKEN),
            poster=LocalSlackSink(self.slack_sink, console=None if self.quiet else sys.stdout),
        )

    @staticmethod
    def _notify_slack(run_id: str, status: str) -> None:
        """A run ended: the Slack notifier posts its measured ranking (or why it ended) in the thread it came from,
        as the deployed stack's EventBridge rule has it do (nothing for a run that did not come from Slack)."""
        from sizing.slack import deps as slack_deps

        slack_deps.bot().run_completed({"run_id": run_id, "status": status})

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self.runs is not None:
            self.runs.stop()
            self.runs = None

    def __enter__(self) -> LocalApi:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="serve the HTTP API on localhost (embedded AWS, no account needed)")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)"
    )
    p.add_argument("--host", default=LOCAL_HOST, help="address to bind (default 127.0.0.1)")
    p.add_argument("--template", type=Path, default=None, help="template.yaml holding the table definition")
    p.add_argument("--quiet", action="store_true", help="no request log")
    p.add_argument(
        "--max-runs",
        type=int,
        default=None,
        help="runs executed at once; the others wait QUEUED (default 1: load tests share this machine)",
    )
    p.add_argument(
        "--endpoint",
        default=None,
        help="measure this OpenAI-compatible URL instead of local twins (default: $SIZING_ENDPOINT)",
    )
    add_level_seconds(p)
    p.add_argument("--out", type=Path, default=None, help="runs folder (default runs/serve-<time>)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sizing.base.errors import InvalidInput, Problem

    if args.max_runs is not None and args.max_runs < 1:
        raise InvalidInput("--max-runs must be at least 1", [Problem("max-runs", f"{args.max_runs}")])
    api = LocalApi(
        args.port,
        args.host,
        args.template,
        args.quiet,
        out_dir=args.out,
        max_runs=args.max_runs,
        endpoint_url=args.endpoint,
        step_s=args.step_seconds,
        warmup_s=args.warmup_seconds,
    ).start()
    print(
        f"LLM Sizing API on {api.url}  (OpenAPI: {api.url}/openapi.json, Swagger UI: {api.url}/swagger)",
        flush=True,
    )
    print(f"  try: curl {api.url}/catalog/models", flush=True)
    measured = api.endpoint_url or "local twins (simulated)"
    print(f"  runs: POST {api.url}/runs executes on the embedded AWS, measuring {measured};", flush=True)
    print(f"        {api.max_runs} at a time (--max-runs), results under {api.out_dir}/", flush=True)
    print(f"  slack: POST {api.url}/slack/commands, signing secret {api.signing_secret}", flush=True)
    print(f"         (${SIGNING_SECRET_ENV} sets it); messages go to {api.slack_sink}", flush=True)

    def on_term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)  # `kill` ends runs and their children as Ctrl-C does
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        api.stop()
    return 0
