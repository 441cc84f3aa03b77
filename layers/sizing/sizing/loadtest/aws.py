"""Hand a finished load test back to AWS (Fargate): results to S3, the summary to the waiting state machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULT_FILES = ("steps.jsonl", "steps.csv", "summary.json")


def report_to_aws(
    out_dir: Path, upload: str | None, task_token: str | None, clients: dict[str, Any] | None = None
) -> None:
    """On Fargate: copy the results to `s3://bucket/prefix/` and complete the state machine's task token with
    the summary (its steps). boto3 is imported here, after Locust, never at module level."""
    import boto3

    clients = clients or {}
    summary = json.loads((out_dir / "summary.json").read_text())
    if upload:
        bucket, _, prefix = upload.removeprefix("s3://").partition("/")
        s3 = clients.get("s3") or boto3.client("s3")
        for name in RESULT_FILES:
            s3.upload_file(str(out_dir / name), bucket, f"{prefix.rstrip('/')}/{name}".lstrip("/"))
        summary["results_uri"] = upload
    if task_token:
        sfn = clients.get("stepfunctions") or boto3.client("stepfunctions")
        output = {k: summary[k] for k in ("endpoint", "model", "mode", "stopped_by", "steps", "sla_search")}
        output["results_uri"] = summary.get("results_uri")
        sfn.send_task_success(taskToken=task_token, output=json.dumps(output))
