"""Handing the estimate to the worker: an asynchronous Lambda invoke carrying the job, and a friendly answer when
the invoke fails."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from sizing.base.errors import Unavailable
from sizing.slack.bot import EstimateJob, LambdaInvoker

JOB = EstimateJob(
    raw_spec={"model": "llama-3.1-8b", "preset": "chat", "users": {"total": 500}},
    response_url="https://hooks.slack.com/commands/T0001/1/abc",
    channel="C1",
    user="U1",
)


def test_the_worker_is_invoked_asynchronously_with_the_job() -> None:
    # given a Lambda client that expects one asynchronous invoke of the worker with the job as its event
    client = boto3.client("lambda", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_response(
            "invoke",
            {"StatusCode": 202},
            {
                "FunctionName": "llm-sizing-slack-worker-dev",
                "InvocationType": "Event",
                "Payload": JOB.model_dump_json().encode(),
            },
        )
        # when the job is handed off
        LambdaInvoker("llm-sizing-slack-worker-dev", client=client)(JOB)
        # then exactly that invoke was made, and the payload is what the worker's handler validates
        stub.assert_no_pending_responses()
    assert EstimateJob.model_validate(json.loads(JOB.model_dump_json())) == JOB


def test_a_failed_invoke_is_a_retryable_unavailable() -> None:
    # given Lambda throttling the worker
    client = boto3.client("lambda", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_client_error("invoke", service_error_code="TooManyRequestsException", http_status_code=429)
        # when the job is handed off, then the command can tell the person to try again
        with pytest.raises(Unavailable, match="try again"):
            LambdaInvoker("llm-sizing-slack-worker-dev", client=client)(JOB)
