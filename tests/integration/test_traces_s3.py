"""A trace on S3 (deployed): read from the object or every object under a prefix, gzip or plain; an unreadable
object is refused naming its URI (a 4xx, never a 5xx)."""

from __future__ import annotations

import gzip

import boto3
import pytest
from moto import mock_aws

from sizing.base.errors import InvalidInput
from sizing.traces import read_trace, samples

pytestmark = pytest.mark.integration


@mock_aws
def test_a_trace_is_read_from_an_s3_object_or_prefix_and_a_missing_one_is_named():
    # given Bedrock logs delivered gzipped under a prefix, as Bedrock writes them
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="trace-logs")
    reqs = list(samples.synthetic(60, seed=3))
    for part in range(2):
        body = "".join(samples.bedrock_line(r) + "\n" for r in reqs[part * 30 : (part + 1) * 30])
        s3.put_object(
            Bucket="trace-logs",
            Key=f"bedrock/2026/03/03/part-{part}.json.gz",
            Body=gzip.compress(body.encode()),
        )
    # when the prefix is read, then every request of both objects is there
    trace = read_trace("s3://trace-logs/bedrock/2026/", s3_client=s3)
    assert trace.n == 60 and trace.format == "bedrock"
    # when an object that does not exist is read, then the refusal names its URI
    with pytest.raises(InvalidInput, match=r"s3://trace-logs/bedrock/missing\.json"):
        read_trace("s3://trace-logs/bedrock/missing.json", s3_client=s3)
