"""Release handling figures: how long the model-release function takes to re-size N watches for one release (the
example workloads, full default constraints), what a redelivery costs (idempotent: no estimates), and one Hub
poll against a local server replaying the recorded answers, in-process on moto; and each function's cold import
in a fresh interpreter. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/releases.py [--watches 4]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
FIXTURES = ROOT / "tests" / "fixtures" / "hf"
BUS = "llm-sizing-bench"
REGION = "us-east-1"
ENV = {
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_SERVICE_NAME": "llm-sizing",
    "POWERTOOLS_METRICS_NAMESPACE": "LLMSizing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
}
#: Lambda context stand-in (the handler's logger reads these fields).
CONTEXT = SimpleNamespace(
    function_name="llm-sizing-model-release-bench",
    function_version="$LATEST",
    memory_limit_in_mb=2048,
    invoked_function_arn=f"arn:aws:lambda:{REGION}:123456789012:function:bench",
    aws_request_id="bench",
    get_remaining_time_in_millis=lambda: 600_000,
)


def _handler() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "model_release_app", ROOT / "functions/model_release/app.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Cold imports measured per function (fresh interpreters); the median is reported.
COLD_RUNS = 3
IMPORT_SNIPPET = """
import importlib.util, time
t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(time.perf_counter() - t0)
"""


def cold_import_s(function: str) -> float:
    import statistics
    import subprocess
    import sys

    env = {**os.environ, **ENV, "TABLE_NAME": "bench", "EVENT_BUS_NAME": BUS}
    code = IMPORT_SNIPPET.format(path=str(ROOT / "functions" / function / "app.py"))
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(COLD_RUNS)
    ]
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--watches", type=int, default=len(EXAMPLES), help="watches matching the release")
    args = parser.parse_args()
    os.environ.update(ENV)
    for function in ("model_release", "release_poller"):
        print(f"{function} cold import: {cold_import_s(function):.2f} s (median of {COLD_RUNS})")

    import boto3
    from moto import mock_aws
    from pytest_httpserver import HTTPServer

    from sizing.releases import deps
    from sizing.releases.catalog import ModelRegistry
    from sizing.releases.hub import HubClient
    from sizing.releases.settings import ReleaseSettings
    from sizing.releases.watches import WatchRequest, WatchService
    from sizing.store import SizingStore, Watch, create_table

    handler = _handler()
    event = json.loads((ROOT / "events" / "model_release_inline.json").read_text())
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        events = boto3.client("events", region_name=REGION)
        events.create_event_bus(Name=BUS)
        table = create_table(ddb, "llm-sizing-bench")
        deps.configure(ReleaseSettings(TABLE_NAME=table, EVENT_BUS_NAME=BUS), dynamodb=ddb, events=events)
        store = SizingStore(table, ddb)
        watches = WatchService(store, ModelRegistry(table, ddb).catalog)
        for i in range(args.watches):
            spec = yaml.safe_load(EXAMPLES[i % len(EXAMPLES)].read_text())
            watches.create(WatchRequest(name=f"w{i}", spec=spec, model_pattern="meta-llama/Llama-4-*"))

        t0 = time.perf_counter()
        outcome = handler.lambda_handler(event, CONTEXT)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        handler.lambda_handler(event, CONTEXT)
        again = time.perf_counter() - t0
        print(
            f"release re-sizing {args.watches} watches: {first:.2f} s ({first / max(args.watches, 1):.2f} s per watch)"
        )
        print(f"redelivery of the same release (idempotent, no estimates): {again * 1000:.0f} ms")
        for w in outcome["watches"]:
            print(f"  {w['headline'] or w['error']}")

        # one poll: a watch older than the recorded releases, the Hub replayed on loopback
        server = HTTPServer(host="127.0.0.1", port=0)
        server.start()
        try:
            server.expect_request("/api/models").respond_with_json(
                json.loads((FIXTURES / "models_author_meta-llama.json").read_text())
            )
            server.expect_request(
                "/meta-llama/Llama-4-Scout-17B-16E/resolve/main/config.json"
            ).respond_with_json(
                json.loads((FIXTURES / "meta-llama--Llama-4-Scout-17B-16E.config.json").read_text())
            )
            server.expect_request(
                "/meta-llama/Llama-4-Maverick-17B-128E/resolve/main/config.json"
            ).respond_with_data("gated", status=403)
            first_watch = next(iter(watches.all()))
            stored: Watch = store.get_watch(first_watch.watch_id)
            store.put_watch(stored.model_copy(update={"created_at": "2025-03-01T00:00:00.000000Z"}))
            deps.configure(
                deps.settings(), dynamodb=ddb, events=events, hub=HubClient(server.url_for("/").rstrip("/"))
            )
            t0 = time.perf_counter()
            report = deps.run_poll()
            poll_s = time.perf_counter() - t0
        finally:
            server.stop()
        print(
            f"one poll ({len(report.orgs)} org, {report.listed} models listed, {len(report.emitted)} emitted,"
            f" {len(report.unavailable)} unavailable): {poll_s * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
