"""Measuring one streamed request: TTFT at the first content token, gaps, tokens, errors. OpenAI-compatible
streams are read from a loopback server with exactly known timing; Bedrock and SageMaker streams come from
botocore's Stubber with real event-stream bodies. Tolerances allow for a busy shared machine (15 ms); the
measurement error itself is what benchmarks/loadgen.py reports."""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.eventstream import EventStream
from botocore.parsers import EventStreamJSONParser
from botocore.stub import Stubber

from sizing.loadtest.http import Connection
from sizing.loadtest.streams import TokenTimer, feed_line, measure_bedrock, measure_openai, measure_sagemaker

# --- a loopback server with known timing ---------------------------------------------------------------------
FIRST_TOKEN_S = 0.080
GAP_S = 0.020
TOKENS = 6
TOLERANCE_S = 0.015
#: How far a kernel receive stamp may read before the send it follows: the conversion of its wall-clock time to
#: the monotonic clock is exact to a few microseconds, not to zero.
CLOCK_CONVERSION_S = 0.0001


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _sse(obj: Any) -> bytes:
    return _chunk(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n")


def _serve(sock: socket.socket, status: int) -> None:
    conn, _ = sock.accept()
    with conn:
        conn.recv(65536)
        t0 = time.perf_counter()
        if status != 200:
            body = b'{"error": "busy"}'
            conn.sendall(b"HTTP/1.1 %d Busy\r\ncontent-length: %d\r\n\r\n%s" % (status, len(body), body))
            return
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        conn.sendall(_sse(role))  # at once, like vLLM: not a token
        for i in range(TOKENS):
            due = t0 + FIRST_TOKEN_S + i * GAP_S
            time.sleep(max(0.0, due - time.perf_counter()))
            data = _sse({"choices": [{"index": 0, "delta": {"content": f" w{i}"}}]})
            conn.sendall(data[:7])  # split one event across two TCP writes
            conn.sendall(data[7:])
        usage = {
            "choices": [],
            "usage": {"prompt_tokens": 42, "completion_tokens": TOKENS, "total_tokens": 48},
        }
        conn.sendall(_sse(usage) + _sse(b"[DONE]") + b"0\r\n\r\n")


@pytest.fixture
def server() -> Iterator[tuple[str, Any]]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    threads: list[threading.Thread] = []

    def start(status: int = 200) -> None:
        t = threading.Thread(target=_serve, args=(sock, status), daemon=True)
        t.start()
        threads.append(t)

    yield f"http://127.0.0.1:{sock.getsockname()[1]}", start
    for t in threads:
        t.join(2)
    sock.close()


def test_ttft_is_the_first_content_token_and_gaps_are_measured_to_the_millisecond(server: Any) -> None:
    url, start = server
    start()
    # when one streamed chat request is measured
    rec = measure_openai(Connection(url), "/v1/chat/completions", {"model": "m", "stream": True})
    # then TTFT is the first content token's time (not the headers, not the empty role chunk)
    assert rec.error is None
    assert rec.ttft_s == pytest.approx(FIRST_TOKEN_S, abs=TOLERANCE_S)
    assert len(rec.itl_s) == TOKENS - 1
    assert all(g == pytest.approx(GAP_S, abs=TOLERANCE_S) for g in rec.itl_s)
    # and the token counts come from the usage block
    assert (rec.input_tokens, rec.output_tokens) == (42, TOKENS)
    assert rec.e2e_s == pytest.approx(FIRST_TOKEN_S + (TOKENS - 1) * GAP_S, abs=TOLERANCE_S)


def test_an_http_error_is_recorded_by_its_status(server: Any) -> None:
    url, start = server
    start(429)
    rec = measure_openai(Connection(url), "/v1/chat/completions", {"model": "m"})
    assert rec.error == "http_429" and rec.ttft_s is None


def test_a_refused_connection_is_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connections are refused
        rec = measure_openai(Connection(f"http://127.0.0.1:{port}", timeout_s=2), "/v1/completions", {})
    assert rec.error == "connection"


# --- Bedrock and SageMaker through botocore's Stubber ---------------------------------------------------------
def encode_event(event_type: str, payload: bytes, content_type: str = "application/json") -> bytes:
    """One message in the AWS event-stream binary format (prelude, headers, payload, CRCs)."""
    headers = b""
    for k, v in ((":event-type", event_type), (":content-type", content_type), (":message-type", "event")):
        kb, vb = k.encode(), v.encode()
        headers += struct.pack("!B", len(kb)) + kb + b"\x07" + struct.pack("!H", len(vb)) + vb
    prelude = struct.pack("!II", 12 + len(headers) + len(payload) + 4, len(headers))
    prelude += struct.pack("!I", zlib.crc32(prelude))
    message = prelude + headers + payload
    return message + struct.pack("!I", zlib.crc32(message))


class _TimedBody:
    """A raw HTTP body that delivers each event-stream message after a known delay."""

    def __init__(self, messages: list[tuple[float, bytes]]) -> None:
        self.messages = messages

    def stream(self) -> Iterator[bytes]:
        for delay, message in self.messages:
            time.sleep(delay)
            yield message

    def close(self) -> None:
        return None


class StubbedEventStream(dict):  # type: ignore[type-arg]
    """Stubber validates a response against the output shape, which wants a dict for the event-stream member;
    this passes as an empty one, then (armed) iterates the real botocore EventStream."""

    def __init__(self, stream: EventStream) -> None:
        super().__init__()
        self.stream = stream
        self.armed = False

    def __iter__(self) -> Iterator[Any]:
        return iter(self.stream) if self.armed else iter(())


def _client(service: str) -> Any:
    return boto3.client(
        service, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
    )


def _stub(client: Any, operation: str, method: str, member: str, parser: Any, messages: list) -> Stubber:
    shape = client.meta.service_model.operation_model(operation).output_shape.members[member]
    body = StubbedEventStream(EventStream(_TimedBody(messages), shape, parser, operation))
    stubber = Stubber(client)
    stubber.add_response(method, {member: body})
    body.armed = True
    return stubber


def test_bedrock_converse_stream_ttft_is_the_first_text_delta_and_usage_comes_from_metadata() -> None:
    # given a ConverseStream answer whose first text arrives 60 ms in and the next 25 ms later
    client = _client("bedrock-runtime")
    events = [
        (0.0, encode_event("messageStart", b'{"role": "assistant"}')),
        (0.06, encode_event("contentBlockDelta", b'{"delta": {"text": "Hello"}, "contentBlockIndex": 0}')),
        (0.025, encode_event("contentBlockDelta", b'{"delta": {"text": " world"}, "contentBlockIndex": 0}')),
        (0.0, encode_event("contentBlockStop", b'{"contentBlockIndex": 0}')),
        (0.0, encode_event("messageStop", b'{"stopReason": "max_tokens"}')),
        (0.0, encode_event("metadata", b'{"usage": {"inputTokens": 17, "outputTokens": 2, "totalTokens": 19},'
                                       b' "metrics": {"latencyMs": 90}}')),
    ]  # fmt: skip
    with _stub(client, "ConverseStream", "converse_stream", "stream", EventStreamJSONParser(), events[:1]):
        measure_bedrock(
            client, "meta.llama3-1-8b-instruct-v1:0", "hi", 2
        )  # warm the client (loads its model)
    with _stub(client, "ConverseStream", "converse_stream", "stream", EventStreamJSONParser(), events):
        # when it is measured
        rec = measure_bedrock(client, "meta.llama3-1-8b-instruct-v1:0", "hi", 2)
    # then
    assert rec.error is None
    assert rec.ttft_s == pytest.approx(0.06, abs=TOLERANCE_S)
    assert rec.itl_s == [pytest.approx(0.025, abs=TOLERANCE_S)]
    assert (rec.input_tokens, rec.output_tokens) == (17, 2)


def test_bedrock_throttling_is_an_error_of_its_own_kind() -> None:
    client = _client("bedrock-runtime")
    stubber = Stubber(client)
    stubber.add_client_error(
        "converse_stream", service_error_code="ThrottlingException", http_status_code=429
    )
    with stubber:
        rec = measure_bedrock(client, "m", "hi", 2)
    assert rec.error == "aws_ThrottlingException"


def test_sagemaker_payload_parts_split_mid_line_are_reassembled_into_tokens() -> None:
    # given a vLLM container streaming SSE through InvokeEndpointWithResponseStream, lines split across parts
    client = _client("sagemaker-runtime")
    line1 = b'data: {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}\n\n'
    line2 = b'data: {"choices": [{"index": 0, "delta": {"content": " you"}}]}\n\n'
    usage = (
        b'data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}\n\ndata: [DONE]\n\n'
    )

    def part(data: bytes) -> bytes:
        return encode_event("PayloadPart", data, "application/octet-stream")

    events = [(0.05, part(line1[:20])), (0.0, part(line1[20:])), (0.03, part(line2)), (0.0, part(usage))]
    op, method = "InvokeEndpointWithResponseStream", "invoke_endpoint_with_response_stream"
    with _stub(client, op, method, "Body", EventStreamJSONParser(), events[-1:]):
        measure_sagemaker(client, "my-endpoint", {"messages": []})  # warm the client (loads its model)
    with _stub(client, "InvokeEndpointWithResponseStream", "invoke_endpoint_with_response_stream", "Body",
               EventStreamJSONParser(), events):  # fmt: skip
        rec = measure_sagemaker(client, "my-endpoint", {"messages": []})
    assert rec.error is None
    assert rec.ttft_s == pytest.approx(0.05, abs=TOLERANCE_S)
    assert rec.itl_s == [pytest.approx(0.03, abs=TOLERANCE_S)]
    assert (rec.input_tokens, rec.output_tokens) == (9, 2)


STREAM_LINES = [
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}',
    b'data: {"choices":[{"index":0,"delta":{"content":" the"},"finish_reason":null}]}',
    b'data: {"choices": [{"index": 0, "delta": {"content": " spaced"}}]}',
    b'data: {"choices":[{"index":0,"text":" completion","finish_reason":null}]}',
    b'data: {"choices":[{"index":0,"text":"","finish_reason":"length"}]}',
    b'data:{"token":{"id":5,"text":" tgi","logprob":-0.1,"special":false},"generated_text":null}',
    b'data:{"token":{"id":2,"text":"</s>","logprob":0.0,"special":true},"generated_text":null}',
    b'{"token":{"id":7,"text":" lmi"}}',
    b'data: {"choices":[{"index":0,"delta":{"content":"{\\"content\\":\\"x\\"}"}}]}',
    b'data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":6}}',
    b": keep-alive comment",
    b"data: [DONE]",
]


def test_plain_token_chunks_count_the_same_without_parsing_as_with() -> None:
    # given every kind of chunk the supported servers send
    fast, full = TokenTimer(), TokenTimer()
    fast.response_id = "known"  # an answer id is known: plain token chunks skip the JSON parser
    # when both read the same stream
    for i, line in enumerate(STREAM_LINES):
        feed_line(line, float(i), fast)
        feed_line(line, float(i), full)
    # then they agree on every token and count
    assert (fast.chunks, fast.first, fast.itl, fast.input_tokens, fast.output_tokens, fast.error) == (
        full.chunks, full.first, full.itl, full.input_tokens, full.output_tokens, full.error,
    )  # fmt: skip
    assert full.chunks == 6 and (full.input_tokens, full.output_tokens) == (12, 6)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kernel receive stamps are Linux's")
def test_a_token_read_late_is_timed_when_it_arrived_not_when_it_was_read() -> None:
    # given a loopback server that sends a token at a known moment, and a reader that only gets to it 200 ms later
    # (as the last of hundreds of streams whose tokens landed together waits for the one thread to read it)
    late_s = 0.200
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    sent: list[float] = []

    def serve() -> None:
        conn, _ = sock.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + _sse({"n": 0}))
            time.sleep(0.05)
            sent.append(time.perf_counter())
            conn.sendall(_sse({"n": 1}) + _sse(b"[DONE]") + b"0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    conn = Connection(f"http://127.0.0.1:{sock.getsockname()[1]}")
    lines = conn.post_lines("/v1/completions", b"{}")
    next(lines)
    time.sleep(0.05 + late_s)
    # when the second token is read
    at, line = next(lines)
    list(lines)
    thread.join(2)
    sock.close()
    # then its time is when its bytes arrived (the kernel's stamp), not when the reader got to them
    assert conn.kernel_stamps and b'"n": 1' in line
    # (a kernel stamp is wall-clock time converted to the monotonic clock with an offset read beside it: the two
    # clocks agree to microseconds, and a stamp seen 6 us "before" its send was that rounding, not a late read)
    assert -CLOCK_CONVERSION_S <= at - sent[0] < TOLERANCE_S, (
        f"{(at - sent[0]) * 1000:.3f} ms after it was sent"
    )
