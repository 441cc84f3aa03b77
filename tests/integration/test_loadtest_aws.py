"""On Fargate the load test hands its results back: files to S3 (moto), the summary to the task token."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
from botocore.stub import Stubber
from moto import mock_aws

from sizing.loadtest.aws import report_to_aws


def _results(tmp: Path) -> Path:
    summary = {"endpoint": "http://10.0.0.5:8000", "model": "m", "mode": "concurrency", "stopped_by": "plan",
               "steps": [{"step": 0, "target": {"concurrency": 4}}], "sla_search": None}  # fmt: skip
    (tmp / "summary.json").write_text(json.dumps(summary))
    (tmp / "steps.jsonl").write_text(json.dumps(summary["steps"][0]) + "\n")
    (tmp / "steps.csv").write_text("step,target\n0,concurrency=4\n")
    return tmp


@mock_aws
def test_results_go_to_s3_and_the_summary_completes_the_task_token(tmp_path: Path) -> None:
    # given a finished load test and a bucket
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="runs")
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    stubber = Stubber(sfn)
    expected = {"endpoint": "http://10.0.0.5:8000", "model": "m", "mode": "concurrency", "stopped_by": "plan",
                "steps": [{"step": 0, "target": {"concurrency": 4}}], "sla_search": None,
                "results_uri": "s3://runs/run-1/cand-a"}  # fmt: skip
    stubber.add_response("send_task_success", {}, {"taskToken": "token-1", "output": json.dumps(expected)})
    # when it reports back
    with stubber:
        report_to_aws(
            _results(tmp_path), "s3://runs/run-1/cand-a", "token-1", {"s3": s3, "stepfunctions": sfn}
        )
    # then the three files are in S3 under the prefix and the state machine got the steps
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="runs")["Contents"])
    assert keys == ["run-1/cand-a/steps.csv", "run-1/cand-a/steps.jsonl", "run-1/cand-a/summary.json"]
    stubber.assert_no_pending_responses()
