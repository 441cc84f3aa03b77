"""Measure one streamed request: TTFT at the first content token, gaps between content chunks, end-to-end time,
tokens in and out (from the usage block when the server sends one, else counted), and the kind of failure.

Three targets: OpenAI-compatible HTTP (chat or completions, SSE), Bedrock ConverseStream and SageMaker
InvokeEndpointWithResponseStream (payload parts holding SSE or JSON lines from vLLM, TGI or LMI containers).
The boto3 clients are passed in; nothing here creates one.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from sizing.loadtest.http import Connection, HttpError, ProtocolError
from sizing.loadtest.metrics import RequestRecord

Clock = Callable[[], float]


class TokenTimer:
    """Collects content-chunk arrival times for one request and turns them into a RequestRecord."""

    def __init__(self, clock: Clock = time.perf_counter) -> None:
        self.clock = clock
        self.wall0 = time.time()
        self.t0 = clock()
        self.first: float | None = None
        self.last: float | None = None
        self.itl: list[float] = []
        self.chunks = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.error: str | None = None
        self.response_id: str | None = None

    def content(self, at: float) -> None:
        if self.first is None:
            self.first = at
        else:
            assert self.last is not None
            self.itl.append(at - self.last)
        self.last = at
        self.chunks += 1

    def usage(self, prompt: Any, completion: Any) -> None:
        if isinstance(prompt, int):
            self.input_tokens = prompt
        if isinstance(completion, int):
            self.output_tokens = completion

    def record(self, expected_input: int | None = None) -> RequestRecord:
        end = self.clock()
        error = self.error
        if error is None and self.first is None:
            error = "empty_response"
        return RequestRecord(
            start=self.wall0,
            end=self.wall0 + (end - self.t0),
            ttft_s=None if self.first is None else self.first - self.t0,
            itl_s=self.itl,
            input_tokens=self.input_tokens if self.input_tokens is not None else expected_input,
            output_tokens=self.output_tokens if self.output_tokens is not None else (self.chunks or None),
            error=error,
            response_id=self.response_id,
        )


def _content_of(obj: dict[str, Any]) -> str:
    """Text of one streamed JSON object: OpenAI chat delta or completion text, or TGI/LMI `token.text`."""
    text = ""
    for ch in obj.get("choices") or ():
        delta = ch.get("delta")
        if isinstance(delta, dict):
            text += delta.get("content") or delta.get("reasoning_content") or ""
        text += ch.get("text") or ""
    token = obj.get("token")
    if isinstance(token, dict) and not token.get("special"):
        text += token.get("text") or ""
    return text


def _usage_of(obj: dict[str, Any], timer: TokenTimer) -> None:
    u = obj.get("usage")
    if isinstance(u, dict):
        timer.usage(u.get("prompt_tokens"), u.get("completion_tokens"))
    details = obj.get("details")
    if isinstance(details, dict) and isinstance(details.get("generated_tokens"), int):  # TGI final event
        timer.usage(None, details["generated_tokens"])


#: A plain token chunk (vLLM, TGI, SGLang, this project's twin: compact JSON) holds one of these followed by a
#: non-empty string. Recognising it without parsing saves ~20 µs a token (json.loads of a 200-byte chunk here),
#: which a single-threaded load generator would otherwise add to the tokens of every other stream in a batch.
_TOKEN_MARKERS = (b'"content":"', b'"text":"')
#: Chunks that carry more than a token (usage, error, TGI details, special tokens) are always parsed in full.
_NEEDS_PARSE = re.compile(rb'"usage"|"error"|"details"|"special":true')


def _plain_token(line: bytes) -> bool:
    for marker in _TOKEN_MARKERS:
        i = line.find(marker)
        if i >= 0:
            j = i + len(marker)
            if line[j : j + 1] in (b'"', b""):
                return False
            break
    else:
        return False
    return _NEEDS_PARSE.search(line) is None


def feed_line(line: bytes, at: float, timer: TokenTimer) -> None:
    """One line of an SSE or JSON-lines stream."""
    line = line.strip()
    if line.startswith(b"data:"):
        line = line[5:].strip()
    if not line or line[:1] != b"{":  # blank, comments, [DONE]
        return
    if timer.response_id is not None and _plain_token(line):
        timer.content(at)
        return
    try:
        obj = json.loads(line)
    except ValueError:
        timer.error = "protocol"
        return
    if timer.response_id is None and isinstance(obj.get("id"), str):
        timer.response_id = obj["id"]
    if "error" in obj and not obj.get("choices"):
        timer.error = "stream_error"
        return
    if _content_of(obj):
        timer.content(at)
    _usage_of(obj, timer)


def _error_kind(exc: BaseException) -> str:
    if isinstance(exc, HttpError):
        return f"http_{exc.status}"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timeout"
    if isinstance(exc, ProtocolError):
        return "protocol"
    return "connection"


def measure_openai(
    conn: Connection, path: str, payload: dict[str, Any], *, expected_input: int | None = None,
    headers: dict[str, str] | None = None,
) -> RequestRecord:  # fmt: skip
    """POST an OpenAI request with `stream: true` and measure it from the stream."""
    body = json.dumps(payload).encode()
    timer = TokenTimer(conn.clock)
    try:
        for at, line in conn.post_lines(path, body, headers):
            feed_line(line, at, timer)
    except (OSError, HttpError, ProtocolError) as exc:
        timer.error = _error_kind(exc)
    return timer.record(expected_input)


def _aws_error_kind(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if code:
            return f"aws_{code}"
    return "connection"


def measure_bedrock(
    client: Any, model_id: str, prompt: str, max_tokens: int, *, expected_input: int | None = None,
    clock: Clock = time.perf_counter,
) -> RequestRecord:  # fmt: skip
    """One Bedrock ConverseStream call: contentBlockDelta text events are the tokens; metadata.usage the counts."""
    timer = TokenTimer(clock)
    try:
        resp = client.converse_stream(
            modelId=model_id,
            messages=[{"role": "user", "content": [{"text": prompt}]}],
            inferenceConfig={"maxTokens": max_tokens},
        )
        for event in resp["stream"]:
            at = clock()
            delta = event.get("contentBlockDelta")
            if delta and delta.get("delta", {}).get("text"):
                timer.content(at)
            meta = event.get("metadata")
            if meta and isinstance(meta.get("usage"), dict):
                timer.usage(meta["usage"].get("inputTokens"), meta["usage"].get("outputTokens"))
            for key in ("internalServerException", "modelStreamErrorException", "throttlingException",
                        "validationException", "serviceUnavailableException"):  # fmt: skip
                if key in event:
                    timer.error = f"aws_{key[0].upper()}{key[1:]}"
    except Exception as exc:  # botocore raises ClientError/EventStreamError/connection errors; kind recorded
        timer.error = _aws_error_kind(exc)
    return timer.record(expected_input)


def measure_sagemaker(
    client: Any, endpoint_name: str, body: dict[str, Any], *, expected_input: int | None = None,
    clock: Clock = time.perf_counter, inference_component: str | None = None,
) -> RequestRecord:  # fmt: skip
    """One InvokeEndpointWithResponseStream call. Payload parts may split lines anywhere, so bytes are buffered
    and every complete line is parsed as SSE or JSON lines."""
    timer = TokenTimer(clock)
    kwargs: dict[str, Any] = {
        "EndpointName": endpoint_name,
        "Body": json.dumps(body).encode(),
        "ContentType": "application/json",
    }
    if inference_component:
        kwargs["InferenceComponentName"] = inference_component
    try:
        resp = client.invoke_endpoint_with_response_stream(**kwargs)
        pending = b""
        events: Iterable[dict[str, Any]] = resp["Body"]
        for event in events:
            at = clock()
            part = event.get("PayloadPart")
            if part is not None:
                pending += part.get("Bytes", b"")
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    feed_line(line, at, timer)
            for key in ("ModelStreamError", "InternalStreamFailure"):
                if key in event:
                    timer.error = f"aws_{key}"
        if pending:
            feed_line(pending, clock(), timer)
    except Exception as exc:  # botocore raises ClientError/EventStreamError/connection errors; kind recorded
        timer.error = _aws_error_kind(exc)
    return timer.record(expected_input)
