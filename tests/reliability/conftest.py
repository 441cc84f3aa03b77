"""Fixtures of the reliability suite: the API function's resolver in-process on moto (a table from
template.yaml, a stand-in state machine), called with API Gateway REST events, raw bytes in, raw bytes out."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sizing.service.api import deps, resolve
from sizing.service.settings import ApiSettings
from sizing.store import SizingStore, create_table
from sizing_local.serve import from_result, to_event

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/llm-sizing-reliability"
#: The API only starts and stops executions: one Pass state is enough to accept POST /runs.
STAND_IN_ASL = json.dumps({"StartAt": "Accepted", "States": {"Accepted": {"Type": "Pass", "End": True}}})
#: A small workload the catalog estimates in well under a second (an 8B model, fixed tokens).
SMALL_SPEC: dict[str, Any] = {
    "name": "reliability",
    "model": "llama-3.1-8b",
    "rate": {"peak_rps": 2},
    "traffic": {"profile": "flat"},
    "tokens": {"input": {"fixed": 200}, "output": {"fixed": 20}},
    "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 10}},
    "constraints": {"deployments": ["eks"], "instance_types": ["g6e.xlarge"], "quantizations": ["fp8"]},
}


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class InProcessApi:
    """The deployed resolver on moto. `call` speaks bytes like API Gateway does; `table_items` counts what the
    table holds (to see that a refused request wrote nothing)."""

    ddb: Any
    sfn: Any
    table: str
    state_machine_arn: str

    def call(
        self, method: str, path: str, body: bytes | str | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        raw = body.encode() if isinstance(body, str) else (body or b"")
        multi = {k: [v] for k, v in (headers or {}).items()}
        result = resolve(to_event(method, path, multi, raw, "127.0.0.1"), None)
        status, pairs, out = from_result(result)
        return Answer(status, dict(pairs), out)

    def post_json(self, path: str, payload: Any, headers: dict[str, str] | None = None) -> Answer:
        return self.call(
            "POST", path, json.dumps(payload), {"Content-Type": "application/json", **(headers or {})}
        )

    def table_items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": self.table}
        while True:
            page = self.ddb.scan(**kwargs)
            items += page["Items"]
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def executions(self) -> list[dict[str, Any]]:
        return list(self.sfn.list_executions(stateMachineArn=self.state_machine_arn)["executions"])

    @property
    def store(self) -> SizingStore:
        return SizingStore(self.table, client=self.ddb)


@pytest.fixture(scope="module")
def api() -> Iterator[InProcessApi]:
    """One embedded AWS per test module (starting one costs about half a second); tests compare the table before
    and after, so they do not depend on each other."""
    with pytest.MonkeyPatch.context() as mp, mock_aws():
        mp.setenv("AWS_DEFAULT_REGION", REGION)
        mp.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        mp.setenv("POWERTOOLS_METRICS_DISABLED", "true")
        ddb = boto3.client("dynamodb", region_name=REGION)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        arn = sfn.create_state_machine(name="llm-sizing-run-rel", definition=STAND_IN_ASL, roleArn=ROLE)[
            "stateMachineArn"
        ]
        table = create_table(ddb, "llm-sizing-reliability")
        deps.configure(
            ApiSettings(TABLE_NAME=table, STATE_MACHINE_ARN=arn, STAGE="test"), dynamodb=ddb, sfn=sfn
        )
        try:
            yield InProcessApi(ddb, sfn, table, arn)
        finally:
            deps.configure()


@pytest.fixture
def small_spec() -> Callable[..., dict[str, Any]]:
    def make(**changes: Any) -> dict[str, Any]:
        return {**json.loads(json.dumps(SMALL_SPEC)), **changes}

    return make


class Figures:
    """Counts the suite keeps for `benchmarks/reliability.py`: inputs fuzzed, faults injected, requests held, what
    was lost. `add` sums, `put` records one observation; written as JSON to $RELIABILITY_FIGURES at the end of the
    session when that is set (the benchmark sets it), and otherwise kept in memory only."""

    def __init__(self) -> None:
        self.sums: dict[str, Counter[str]] = defaultdict(Counter)
        self.observations: list[dict[str, Any]] = []

    def add(self, name: str, **increments: int) -> None:
        self.sums[name].update(increments)

    def put(self, name: str, **values: Any) -> None:
        self.observations.append({"name": name, **values})

    def as_dict(self) -> dict[str, Any]:
        return {"sums": {k: dict(v) for k, v in self.sums.items()}, "observations": self.observations}


@pytest.fixture(scope="session")
def figures() -> Iterator[Figures]:
    import os

    collected = Figures()
    yield collected
    path = os.environ.get("RELIABILITY_FIGURES")
    if path:
        with open(path, "w") as out:
            json.dump(collected.as_dict(), out, indent=2, default=str)


@pytest.fixture
def record_figures(figures: Figures) -> Callable[..., None]:
    """One observation (a name and its figures) for the benchmark."""
    return figures.put
