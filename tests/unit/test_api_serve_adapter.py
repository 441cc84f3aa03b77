"""The tiny HTTP ↔ API Gateway adapter of `sizing serve`: requests become REST proxy events the resolver reads."""

from __future__ import annotations

import base64

from sizing_local.serve import from_result, to_event


def test_a_request_becomes_a_rest_proxy_event() -> None:
    # when
    event = to_event(
        "GET",
        "/runs?limit=5&model=meta-llama%2FLlama-3.1-8B&status=RUNNING",
        {"Accept": ["application/json"]},
        b"",
        "127.0.0.1",
    )
    # then
    assert event["httpMethod"] == "GET" and event["path"] == "/runs"
    assert event["queryStringParameters"] == {
        "limit": "5",
        "model": "meta-llama/Llama-3.1-8B",
        "status": "RUNNING",
    }
    assert event["headers"] == {"Accept": "application/json"}
    assert event["body"] is None and event["isBase64Encoded"] is False
    assert event["requestContext"]["identity"]["sourceIp"] == "127.0.0.1"


def test_an_encoded_question_mark_in_a_run_id_stays_in_the_path() -> None:
    # given a run id holding "?" and a non-ASCII letter, percent-encoded in the request target as a client sends it
    # when the request becomes an event
    event = to_event("GET", "/runs/%3Fr%C3%85", {}, b"", "127.0.0.1")
    # then the path holds the decoded id (API Gateway's GET /runs/{run_id}), not a list request with a query
    assert event["path"] == "/runs/?r\u00c5"
    assert event["queryStringParameters"] is None


def test_a_binary_body_travels_base64_encoded() -> None:
    event = to_event("POST", "/estimates", {}, b"\xff\xfe", "127.0.0.1")
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == b"\xff\xfe"


def test_an_answer_becomes_status_headers_and_body() -> None:
    status, headers, body = from_result(
        {
            "statusCode": 202,
            "multiValueHeaders": {"Content-Type": ["application/json"], "Location": ["/runs/abc"]},
            "body": '{"run_id": "abc"}',
            "isBase64Encoded": False,
        }
    )
    assert status == 202
    assert ("Location", "/runs/abc") in headers
    assert body == b'{"run_id": "abc"}'
