"""Reports in S3: a run's page and exports are stored under its id, read back, and shared by presigned link;
run ids cannot reach outside their own folder."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws

from sizing.base.errors import InvalidInput, NotFound
from sizing.report.storage import DEFAULT_PRESIGN_S, ReportStore

BUCKET = "llm-sizing-reports-test"
RESULT = {
    "workload": {"name": "w", "model": "m", "slo": {"ttft_ms": {"p95": 800.0}}},
    "architectures": [],
    "rejected": [{"id": "g4dn.xlarge:fp8", "kind": "unsupported", "reason": "no fp8"}],
    "infeasible": {"message": "nothing fits"},
}


@pytest.fixture
def store():
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1", config=Config(signature_version="s3v4"))
        s3.create_bucket(Bucket=BUCKET)
        yield ReportStore(BUCKET, client=s3)


def test_a_published_report_is_stored_with_its_exports_and_reads_back(store: ReportStore) -> None:
    # when
    keys = store.publish("run-42", RESULT)
    # then
    assert keys == [
        f"reports/run-42/{n}" for n in ("report.html", "architectures.csv", "rejected.csv", "result.json")
    ]
    page = store.get("run-42")
    assert page.startswith("<!DOCTYPE html>") and "nothing fits" in page
    assert json.loads(store.get("run-42", "result.json")) == RESULT
    head = store.client.head_object(Bucket=BUCKET, Key="reports/run-42/report.html")
    assert head["ContentType"] == "text/html; charset=utf-8"


def test_a_missing_report_is_not_found(store: ReportStore) -> None:
    # when / then
    with pytest.raises(NotFound):
        store.get("run-without-report")


def test_a_presigned_link_points_at_the_report_and_expires(store: ReportStore) -> None:
    # given
    store.publish("run-42", RESULT, html="<!DOCTYPE html><p>hi</p>")
    # when
    url = store.presigned_url("run-42")
    # then
    parsed = urlparse(url)
    query = parse_qs(parsed.query)
    assert parsed.path.endswith("/reports/run-42/report.html")
    assert query["X-Amz-Expires"] == [str(DEFAULT_PRESIGN_S)]
    assert query["response-content-type"] == ["text/html; charset=utf-8"]


@pytest.mark.parametrize("run_id", ["../other", "a/b", "", "..", "run id"])
def test_run_ids_cannot_escape_their_folder(store: ReportStore, run_id: str) -> None:
    # when / then
    with pytest.raises(InvalidInput):
        store.put(run_id, "report.html", "x")


def test_links_cannot_outlive_what_s3_allows(store: ReportStore) -> None:
    # when / then
    with pytest.raises(InvalidInput):
        store.presigned_url("run-42", expires_s=8 * 24 * 3600)
