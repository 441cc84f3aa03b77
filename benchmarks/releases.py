"""Release handling figures: how long the model-release function takes to re-size N watches for one release (the
example workloads, full default constraints), what a redelivery costs (idempotent: no estimates), and one Hub
poll against a local server replaying the recorded answers, in-process on moto; and each function's cold import
in a fresh interpreter.

Fan-out at scale: 10,000 watches (synthetic specs over the example workloads: traffic, prompt lengths and SLOs
varied per watch) match one release; the model-release function lists them and enqueues one job each on moto's
SQS (timed in full), then a sample of the jobs goes through the release fan-out function as Lambda's event
source mapping delivers them (`LocalEventSourceMapping`), timed per watch; the wall time at N concurrent fan-out
functions is projected from both. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/releases.py [--watches 4] [--fanout-watches 10000] [--sample 40]
        [--concurrency 100] [--fanout-only]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import json
import os
import time
from collections.abc import Iterator
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
    # the functions' own log and metric lines (a few per batch of watches, microseconds each) would bury the figures
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_METRICS_DISABLED": "true",
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


#: The issue's target: 10,000 watches re-sized within 10 minutes at 100 concurrent fan-out functions.
FANOUT_WATCHES = 10_000
FANOUT_CONCURRENCY = 100
FANOUT_TARGET_S = 600
#: Jobs timed through the fan-out function (four batches of ten): every example workload several times over,
#: ~2 minutes on a shared core; the other jobs are only enqueued.
FANOUT_SAMPLE = 40


@functools.cache
def _example(k: int) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(EXAMPLES[k].read_text())
    return loaded


def synthetic_spec(i: int) -> dict[str, Any]:
    """Watch i's workload: example i % 4 with its traffic scaled 0.5-2.4x, its prompts 0.75-1.25x and its
    latency SLOs 1-1.5x, so no two neighbouring watches share an estimate."""
    spec = copy.deepcopy(_example(i % len(EXAMPLES)))
    traffic = 0.5 + ((i * 7) % 16) / 8
    prompt = 0.75 + (i % 5) * 0.125
    slack = 1 + (i % 3) * 0.25
    spec["name"] = f"{spec['name']}-{i}"
    if "users" in spec:
        spec["users"]["total"] = max(1, round(spec["users"]["total"] * traffic))
    if "rate" in spec:
        spec["rate"]["peak_rps"] = round(spec["rate"]["peak_rps"] * traffic, 3)
    for key in ("mean", "p95"):
        if key in spec["tokens"]["input"]:
            spec["tokens"]["input"][key] = round(spec["tokens"]["input"][key] * prompt)
    for targets in spec["slo"].values():
        for pct, value in targets.items():
            targets[pct] = round(value * slack, 3)
    return spec


@contextlib.contextmanager
def _moto_sqs_counts_without_scans() -> Iterator[None]:
    """moto's SendMessage reads every queue attribute for each message it takes, and three of them
    (ApproximateNumberOfMessages, ...NotVisible, ...Delayed) walk the whole queue: enqueueing 10,000 jobs would
    take hours of the emulator's own O(n²) work, which SQS does not do. While this is on, those three count
    the stored messages without walking them (all visible, none delayed: true while only sending)."""
    from moto.sqs.models import Queue

    names = (
        "approximate_number_of_messages",
        "approximate_number_of_messages_not_visible",
        "approximate_number_of_messages_delayed",
    )
    saved = {name: getattr(Queue, name) for name in names}
    Queue.approximate_number_of_messages = property(lambda q: len(q._messages))  # type: ignore[method-assign,assignment]
    Queue.approximate_number_of_messages_not_visible = property(lambda _q: 0)  # type: ignore[method-assign,assignment]
    Queue.approximate_number_of_messages_delayed = property(lambda _q: 0)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(Queue, name, value)


@contextlib.contextmanager
def _fanout_stack(n: int) -> Iterator[tuple[Any, str]]:
    """moto with the release functions' table, bus and fan-out queue (with its dead-letter queue), and n
    synthetic watches stored; yields the SQS client and the queue's URL."""
    import boto3
    from moto import mock_aws

    from sizing.catalog import load_catalog
    from sizing.releases import deps
    from sizing.releases.settings import ReleaseSettings
    from sizing.releases.watches import WatchRequest, WatchService
    from sizing.store import SizingStore, create_table

    catalog = load_catalog()
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        events = boto3.client("events", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        events.create_event_bus(Name=BUS)
        table = create_table(ddb, "llm-sizing-bench")
        dlq = sqs.create_queue(QueueName="fanout-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        queue = sqs.create_queue(
            QueueName="fanout",
            Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3})},
        )["QueueUrl"]
        settings = ReleaseSettings(table_name=table, event_bus_name=BUS, release_queue_url=queue)
        deps.configure(settings, dynamodb=ddb, events=events, sqs=sqs)
        watches = WatchService(SizingStore(table, ddb), lambda: catalog)
        t0 = time.perf_counter()
        for start in range(0, n, 1000):
            watches.create_many(
                [
                    WatchRequest(name=f"w{i}", spec=synthetic_spec(i), model_pattern="meta-llama/Llama-4-*")
                    for i in range(start, min(n, start + 1000))
                ]
            )
        print(
            f"fan-out: {n:,} watches stored on moto in {time.perf_counter() - t0:.0f} s (setup, not projected)"
        )
        yield sqs, queue
        deps.configure()


def _measure_enqueue(release: Any, sqs: Any, queue: str, n: int) -> float:
    """The model-release function listing the n watches and enqueueing their jobs; its seconds."""
    import math

    from sizing.releases.fanout import SQS_BATCH_MAX

    event = json.loads((ROOT / "events" / "model_release_inline.json").read_text())
    t0 = time.perf_counter()
    with _moto_sqs_counts_without_scans():
        outcome = release.lambda_handler(event, CONTEXT)
    enqueue_s = time.perf_counter() - t0
    depth = int(
        sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])[
            "Attributes"
        ]["ApproximateNumberOfMessages"]
    )
    print(
        f"fan-out: release function listed and enqueued {outcome['enqueued']:,} jobs in {enqueue_s:.1f} s"
        f" on moto ({depth:,} on the queue, {math.ceil(n / SQS_BATCH_MAX):,} SendMessageBatch calls)"
    )
    return enqueue_s


def _measure_fanout(fanout: Any, sqs: Any, queue: str, sample: int) -> tuple[float, list[str]]:
    """About `sample` jobs through the fan-out function as the event source mapping delivers them; the
    function's seconds per watch, and the bodies of the jobs it took."""
    import math

    from sizing.releases.fanout import SQS_BATCH_MAX, LocalEventSourceMapping

    bodies: list[str] = []
    invoked: list[float] = []

    def handler(batch: dict[str, Any], context: Any) -> dict[str, Any]:
        bodies.extend(r["body"] for r in batch["Records"])
        started = time.perf_counter()
        answer: dict[str, Any] = fanout.lambda_handler(batch, context)
        invoked.append(time.perf_counter() - started)
        return answer

    mapping = LocalEventSourceMapping(sqs, queue, handler)
    t0 = time.perf_counter()
    report = mapping.drain(CONTEXT, max_batches=math.ceil(sample / SQS_BATCH_MAX))
    sample_s = time.perf_counter() - t0
    done = report.succeeded
    # the function's own time: receiving and deleting are the event source mapping's, outside the function
    # (moto's receive and delete walk the whole 10,000-message queue; SQS's do not)
    per_watch = sum(invoked) / max(done, 1)
    print(
        f"fan-out: {done} sampled jobs re-sized by the fan-out function in {sum(invoked):.1f} s of function"
        f" time: {per_watch:.2f} s per watch (two estimates, compare, notify; {report.failed_attempts}"
        f" failed; moto's receive/delete added {sample_s - sum(invoked):.1f} s)"
    )
    return per_watch, bodies


def _print_projection(n: int, concurrency: int, enqueue_s: float, per_watch: float) -> None:
    """The wall time for n watches at `concurrency` fan-out functions, from the timed enqueue and sample."""
    import math

    from sizing.releases.fanout import SQS_BATCH_MAX

    per_batch = per_watch * SQS_BATCH_MAX
    rounds = math.ceil(n / (concurrency * SQS_BATCH_MAX))
    # the fan-out functions start on the first jobs while the rest are still being enqueued: the wall
    # time is the longer of the two pipelines (and the last job enqueued still takes one batch)
    consume_s = rounds * per_batch
    projected = max(enqueue_s + per_batch, consume_s)
    verdict = "meets" if projected <= FANOUT_TARGET_S else "misses"
    print(
        f"fan-out: projected wall time for {n:,} watches at {concurrency} concurrent fan-out functions:"
        f" {projected:.0f} s = max(enqueue {enqueue_s:.0f} s + one batch, {rounds} rounds of a"
        f" {per_batch:.0f} s batch = {consume_s:.0f} s) ({verdict} the {FANOUT_TARGET_S // 60}-minute"
        " target; one local core stands for a Lambda's vCPU at 2,048 MB, enqueue timed on moto)"
    )


def _measure_redelivery(fanout: Any, sqs: Any, bodies: list[str]) -> None:
    """The sampled jobs delivered again: the idempotency records answer, nothing is estimated twice."""
    from sizing.releases.fanout import SQS_BATCH_MAX, LocalEventSourceMapping

    again = sqs.create_queue(QueueName="fanout-redelivered")["QueueUrl"]
    for start in range(0, len(bodies), SQS_BATCH_MAX):
        entries = [
            {"Id": str(k), "MessageBody": b} for k, b in enumerate(bodies[start : start + SQS_BATCH_MAX])
        ]
        sqs.send_message_batch(QueueUrl=again, Entries=entries)
    t0 = time.perf_counter()
    redelivered = LocalEventSourceMapping(sqs, again, fanout.lambda_handler).drain(CONTEXT)
    again_s = time.perf_counter() - t0
    print(
        f"fan-out: the {redelivered.succeeded} sampled jobs redelivered: {again_s * 1000 / max(len(bodies), 1):.0f} ms"
        " per job (idempotent: no estimate, run or message twice)"
    )


def fanout_figures(n: int, sample: int, concurrency: int) -> None:
    from sizing.lambdas import load_function

    release = load_function("functions/model_release/")
    fanout = load_function("functions/release_fanout/")
    with _fanout_stack(n) as (sqs, queue):
        enqueue_s = _measure_enqueue(release, sqs, queue, n)
        per_watch, bodies = _measure_fanout(fanout, sqs, queue, sample)
        _print_projection(n, concurrency, enqueue_s, per_watch)
        _measure_redelivery(fanout, sqs, bodies)


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--watches", type=int, default=len(EXAMPLES), help="watches matching the release")
    parser.add_argument(
        "--fanout-watches", type=int, default=FANOUT_WATCHES, help="watches of the fan-out run"
    )
    parser.add_argument("--sample", type=int, default=FANOUT_SAMPLE, help="fan-out jobs timed")
    parser.add_argument(
        "--concurrency", type=int, default=FANOUT_CONCURRENCY, help="fan-out functions at once"
    )
    parser.add_argument("--fanout-only", action="store_true", help="only the fan-out figures")
    return parser.parse_args()


@contextlib.contextmanager
def _release_stack(n: int) -> Iterator[tuple[Any, Any, Any, Any]]:
    """moto with the release functions' table and bus, and n watches over the example workloads; yields the
    DynamoDB and EventBridge clients, the store and the watch service."""
    import boto3
    from moto import mock_aws

    from sizing.releases import deps
    from sizing.releases.catalog import ModelRegistry
    from sizing.releases.settings import ReleaseSettings
    from sizing.releases.watches import WatchRequest, WatchService
    from sizing.store import SizingStore, create_table

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        events = boto3.client("events", region_name=REGION)
        events.create_event_bus(Name=BUS)
        table = create_table(ddb, "llm-sizing-bench")
        deps.configure(ReleaseSettings(table_name=table, event_bus_name=BUS), dynamodb=ddb, events=events)
        store = SizingStore(table, ddb)
        watches = WatchService(store, ModelRegistry(table, ddb).catalog)
        for i in range(n):
            spec = yaml.safe_load(EXAMPLES[i % len(EXAMPLES)].read_text())
            watches.create(WatchRequest(name=f"w{i}", spec=spec, model_pattern="meta-llama/Llama-4-*"))
        yield ddb, events, store, watches
        deps.configure()


def _measure_release(handler: Any, n: int) -> None:
    """The model-release function re-sizing the n watches for one release, then the same release again."""
    event = json.loads((ROOT / "events" / "model_release_inline.json").read_text())
    t0 = time.perf_counter()
    outcome = handler.lambda_handler(event, CONTEXT)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    handler.lambda_handler(event, CONTEXT)
    again = time.perf_counter() - t0
    print(f"release re-sizing {n} watches: {first:.2f} s ({first / max(n, 1):.2f} s per watch)")
    print(f"redelivery of the same release (idempotent, no estimates): {again * 1000:.0f} ms")
    for w in outcome["watches"]:
        print(f"  {w['headline'] or w['error']}")


def _replayed_hub(server: Any) -> None:
    """The recorded Hub answers: meta-llama's model list, one config, one gated model."""
    server.expect_request("/api/models").respond_with_json(
        json.loads((FIXTURES / "models_author_meta-llama.json").read_text())
    )
    server.expect_request("/meta-llama/Llama-4-Scout-17B-16E/resolve/main/config.json").respond_with_json(
        json.loads((FIXTURES / "meta-llama--Llama-4-Scout-17B-16E.config.json").read_text())
    )
    server.expect_request("/meta-llama/Llama-4-Maverick-17B-128E/resolve/main/config.json").respond_with_data(
        "gated", status=403
    )


def _measure_poll(ddb: Any, events: Any, store: Any, watches: Any) -> None:
    """One poll: a watch older than the recorded releases, the Hub replayed on loopback."""
    from pytest_httpserver import HTTPServer

    from sizing.releases import deps
    from sizing.releases.hub import HubClient
    from sizing.store import Watch

    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    try:
        _replayed_hub(server)
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


def main() -> None:
    args = _args()
    os.environ.update(ENV)
    if args.fanout_only:
        fanout_figures(args.fanout_watches, args.sample, args.concurrency)
        return
    for function in ("model_release", "release_fanout", "release_poller"):
        print(f"{function} cold import: {cold_import_s(function):.2f} s (median of {COLD_RUNS})")
    handler = _handler()
    with _release_stack(args.watches) as (ddb, events, store, watches):
        _measure_release(handler, args.watches)
        _measure_poll(ddb, events, store, watches)
    fanout_figures(args.fanout_watches, args.sample, args.concurrency)


if __name__ == "__main__":
    main()
