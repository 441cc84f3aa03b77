"""Concurrent requests, bounded and on loopback only. Several API "containers" (processes, each with its own
resolver, as Lambda runs them) share one embedded AWS (moto's server): parallel POST /runs with the same and with
different Idempotency-Keys start exactly one execution per key, lose no run and duplicate none; parallel
POST /estimates all answer, identically for identical input. And `sizing serve` holds a burst of mixed requests
from many client threads."""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from support.endpoints import refusing_endpoint

pytestmark = pytest.mark.integration

#: API containers running at once (Lambda would run one request per container; 4 keeps 2 cores busy).
CONTAINERS = 4
#: Keys every container sends at the same moment (a client retrying on several connections).
SHARED_KEYS = 10
#: Keys sent once each, spread over the containers.
DISTINCT_KEYS = 40
#: A client retries a 409 (request with this key still in progress) this often, this far apart.
RETRIES_ON_CONFLICT = 20
RETRY_PAUSE_S = 0.2
#: Parallel POST /estimates per container (each a full estimate of a small workload).
ESTIMATES_PER_CONTAINER = 3
#: `sizing serve` burst: client threads and requests in all.
SERVE_THREADS = 16
SERVE_REQUESTS = 160

SPEC: dict[str, Any] = {
    "name": "concurrency",
    "model": "llama-3.1-8b",
    "rate": {"peak_rps": 2},
    "traffic": {"profile": "flat"},
    "tokens": {"input": {"fixed": 200}, "output": {"fixed": 20}},
    "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 10}},
    "constraints": {"deployments": ["eks"], "instance_types": ["g6e.xlarge"], "quantizations": ["fp8"]},
}
STAND_IN_ASL = json.dumps({"StartAt": "Accepted", "States": {"Accepted": {"Type": "Pass", "End": True}}})
TABLE = "llm-sizing-concurrency"
ROLE = "arn:aws:iam::123456789012:role/llm-sizing-concurrency"


@dataclass
class SharedAws:
    endpoint: str
    state_machine_arn: str

    def clients(self) -> tuple[Any, Any]:
        import boto3

        session = boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
        )
        return (
            session.client("dynamodb", endpoint_url=self.endpoint),
            session.client("stepfunctions", endpoint_url=self.endpoint),
        )


@pytest.fixture(scope="module")
def shared_aws() -> Iterator[SharedAws]:
    from sizing.store import create_table
    from sizing_local.stack import moto_server

    server = moto_server()
    server.start()
    try:
        host, port = server.get_host_and_port()
        aws = SharedAws(f"http://{host}:{port}", "")
        ddb, sfn = aws.clients()
        create_table(ddb, TABLE)
        aws.state_machine_arn = sfn.create_state_machine(
            name="llm-sizing-run-concurrency", definition=STAND_IN_ASL, roleArn=ROLE
        )["stateMachineArn"]
        yield aws
    finally:
        server.stop()


# --- API containers (child processes, warm across the module's tests, as Lambda keeps its containers) -------
def _container(aws: SharedAws, inbox: Any, ready: Any, out: Any) -> None:
    """Configure the resolver against the shared AWS; then, for each batch of jobs, wait until every container
    has its batch, send the jobs at once with the others, and report the answers. `None` ends the container."""
    import os

    os.environ.update({"POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_METRICS_DISABLED": "true",
                       "POWERTOOLS_LOG_LEVEL": "CRITICAL"})  # fmt: skip
    from sizing.service.api import deps, resolve
    from sizing.service.settings import ApiSettings
    from sizing_local.serve import to_event

    ddb, sfn = aws.clients()
    deps.configure(
        ApiSettings(TABLE_NAME=TABLE, STATE_MACHINE_ARN=aws.state_machine_arn, STAGE="test"),
        dynamodb=ddb,
        sfn=sfn,
    )

    def call(job: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": ["application/json"]}
        if job.get("key"):
            headers["Idempotency-Key"] = [job["key"]]
        method = job.get("method", "POST")
        body = json.dumps(job["body"]).encode() if method == "POST" else b""
        answer = resolve(to_event(method, job["path"], headers, body, "127.0.0.1"), None)
        return {"status": int(answer["statusCode"]), "body": json.loads(answer["body"] or "null")}

    while (jobs := inbox.get()) is not None:
        ready.wait()
        answers = []
        for job in jobs:
            first = call(job)
            final, retries = first, 0
            while final["status"] == 409 and retries < RETRIES_ON_CONFLICT:
                time.sleep(RETRY_PAUSE_S)
                final, retries = call(job), retries + 1
            answers.append({**job, "first": first["status"], "status": final["status"], "body": final["body"],
                            "retries": retries})  # fmt: skip
        out.put(answers)


class Containers:
    """CONTAINERS API containers started once for the module (each start imports the whole API: ~2 s of CPU)."""

    def __init__(self, aws: SharedAws) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.inboxes = [ctx.Queue() for _ in range(CONTAINERS)]
        self.ready = ctx.Barrier(CONTAINERS + 1)
        self.out = ctx.Queue()
        self.procs = [
            ctx.Process(target=_container, args=(aws, q, self.ready, self.out)) for q in self.inboxes
        ]
        for proc in self.procs:
            proc.start()

    def fire(self, per_container: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """Every container's jobs (containers past the list's end get none), sent at the same moment."""
        assert len(per_container) <= CONTAINERS
        for i, inbox in enumerate(self.inboxes):
            inbox.put(per_container[i] if i < len(per_container) else [])
        self.ready.wait(timeout=120)
        answers: list[dict[str, Any]] = []
        for _ in self.inboxes:
            answers += self.out.get(timeout=300)
        return answers

    def stop(self) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        for proc in self.procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.kill()


@pytest.fixture(scope="module")
def containers(shared_aws: SharedAws) -> Iterator[Containers]:
    pool = Containers(shared_aws)
    try:
        yield pool
    finally:
        pool.stop()


def test_parallel_runs_start_one_execution_per_key_and_lose_none(shared_aws, containers, record_figures):
    # given CONTAINERS API containers; every one sends each shared key, and a share of the distinct keys
    shared = [f"shared-{i}" for i in range(SHARED_KEYS)]
    distinct = [f"distinct-{i}" for i in range(DISTINCT_KEYS)]
    per_container = [
        [{"path": "/runs", "key": k, "body": {"spec": SPEC}} for k in shared]
        + [{"path": "/runs", "key": k, "body": {"spec": SPEC}} for k in distinct[c::CONTAINERS]]
        for c in range(CONTAINERS)
    ]
    ddb, sfn = shared_aws.clients()
    from sizing.store import SizingStore

    store = SizingStore(TABLE, client=ddb)
    before = {r.run_id for r in _all_runs(store)}
    # when they all fire at once
    answers = containers.fire(per_container)
    # then every request got a 202 in the end (409 "in progress" only on first tries, and retried)
    assert len(answers) == CONTAINERS * SHARED_KEYS + DISTINCT_KEYS
    assert Counter(a["status"] for a in answers) == {202: len(answers)}, Counter(a["status"] for a in answers)
    assert {a["first"] for a in answers} <= {202, 409}
    # and each key answers one run id, everywhere
    by_key: dict[str, set[str]] = defaultdict(set)
    for a in answers:
        by_key[a["key"]].add(a["body"]["run_id"])
    assert all(len(ids) == 1 for ids in by_key.values()), {k: v for k, v in by_key.items() if len(v) > 1}
    # and the store and the state machine hold exactly one run and one execution per key: none lost, none twice
    new_runs = {r.run_id for r in _all_runs(store)} - before
    answered = {next(iter(ids)) for ids in by_key.values()}
    assert new_runs == answered and len(answered) == SHARED_KEYS + DISTINCT_KEYS
    executions = _all_executions(sfn, shared_aws.state_machine_arn)
    assert Counter(e["name"] for e in executions if e["name"] in answered) == Counter(answered)
    record_figures(
        "concurrency.runs",
        requests=len(answers),
        containers=CONTAINERS,
        keys=len(by_key),
        conflicts_retried=sum(a["first"] == 409 for a in answers),
        runs_stored=len(new_runs),
        executions=len([e for e in executions if e["name"] in answered]),
        lost=len(answered - new_runs),
        duplicated=len(new_runs) - len(answered),
    )


@pytest.mark.slow
def test_parallel_estimates_all_answer_and_agree(containers, record_figures):
    # given the same workload estimated by every container at once, several times
    per_container = [
        [{"path": "/estimates", "body": SPEC}] * ESTIMATES_PER_CONTAINER for _ in range(CONTAINERS)
    ]
    # when
    answers = containers.fire(per_container)
    # then every one is a 200 with the same ranking
    assert [a["status"] for a in answers] == [200] * (CONTAINERS * ESTIMATES_PER_CONTAINER)
    rankings = {json.dumps([x["id"] for x in a["body"]["architectures"]]) for a in answers}
    assert len(rankings) == 1
    record_figures("concurrency.estimates", requests=len(answers), containers=CONTAINERS, lost=0)


#: Cancellations of one run sent by each container at once.
CANCELS_PER_CONTAINER = 5


def test_parallel_cancellations_of_one_run_agree(shared_aws, containers, record_figures):
    # given a run that is RUNNING (started through the API on the shared AWS)
    started = containers.fire([[{"path": "/runs", "key": "to-cancel", "body": {"spec": SPEC}}]])
    run_id = started[0]["body"]["run_id"]
    job = {"method": "POST", "path": f"/runs/{run_id}/cancel", "body": None}
    # when every container cancels it several times at once
    answers = containers.fire([[job] * CANCELS_PER_CONTAINER for _ in range(CONTAINERS)])
    # then each answer is an accepted cancellation or a conflict with the finished run; never a 5xx
    statuses = Counter(a["first"] for a in answers)
    assert set(statuses) <= {202, 409}, statuses
    ddb, _sfn = shared_aws.clients()
    from sizing.store import SizingStore

    final = SizingStore(TABLE, client=ddb).get_run(run_id)
    # and the run ends in one state, CANCELLING (its execution stopped; teardown follows) or CANCELLED
    assert final.status in ("CANCELLING", "CANCELLED"), final.status
    record_figures("concurrency.cancels", requests=len(answers), containers=CONTAINERS,
                   accepted=statuses.get(202, 0), conflicts=statuses.get(409, 0), final=final.status)  # fmt: skip


def _all_runs(store: Any) -> list[Any]:
    runs, token = [], None
    while True:
        page, token = store.list_runs(limit=100, token=token)
        runs += page
        if not token:
            return runs


def _all_executions(sfn: Any, arn: str) -> list[dict[str, Any]]:
    out, kwargs = [], {"stateMachineArn": arn, "maxResults": 1000}
    while True:
        page = sfn.list_executions(**kwargs)
        out += page["executions"]
        if not page.get("nextToken"):
            return out
        kwargs["nextToken"] = page["nextToken"]


# --- `sizing serve` under a burst -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    import os

    from sizing_local.serve import LocalApi

    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    # the burst's runs measure an endpoint that refuses every connection: the test is about the API's answers,
    # and runs that started twins and load generators behind them would only spend the cores the other tests need
    with refusing_endpoint() as refused:
        api = LocalApi(
            port=0, quiet=True, out_dir=tmp_path_factory.mktemp("served"), endpoint_url=refused
        ).start()
        try:
            yield api
        finally:
            api.stop()
            from sizing.service.api import deps

            deps.configure()


def _request(
    url: str, method: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def test_sizing_serve_holds_a_burst_of_mixed_requests(served, record_figures):
    # given many client threads on loopback, each sending a mix: catalog reads, bad input, runs (a few keys
    # shared by all threads), run reads
    base = served.url
    lock = threading.Lock()
    run_ids: dict[str, set[str]] = defaultdict(set)

    def one(i: int) -> int:
        kind = i % 4
        if kind == 0:
            status, _ = _request(f"{base}/catalog/models", "GET")
        elif kind == 1:
            status, _ = _request(f"{base}/estimates", "POST", {"model": "nope"})
            assert status == 422
            return 200
        else:
            key = f"burst-{i % 8}"
            status, body = _request(f"{base}/runs", "POST", {"spec": SPEC}, {"Idempotency-Key": key})
            if status == 202:
                with lock:
                    run_ids[key].add(body["run_id"])
                got, run = _request(f"{base}/runs/{body['run_id']}", "GET")
                assert got == 200 and run["run_id"] == body["run_id"]
        return status

    # when
    with ThreadPoolExecutor(SERVE_THREADS) as pool:
        statuses = list(pool.map(one, range(SERVE_REQUESTS)))
    # then everything was answered, nothing failed on our side, and each key holds one run
    assert len(statuses) == SERVE_REQUESTS
    assert all(s < 500 for s in statuses), Counter(statuses)
    assert all(len(ids) == 1 for ids in run_ids.values()), run_ids
    record_figures(
        "concurrency.serve",
        requests=SERVE_REQUESTS,
        threads=SERVE_THREADS,
        server_errors=sum(s >= 500 for s in statuses),
        keys=len(run_ids),
        duplicated=sum(len(ids) - 1 for ids in run_ids.values()),
    )
