"""One request record per trace line, in each format the product reads: what a line becomes (`Record`), how the
format of a file is recognised from its first line, and the per-format readers of one line.

Only counts, times, a model id and hashes computed here survive a line: a record never holds prompt or answer
text, nor a session or prefix-group id as given (they are hashed with a key of this process, `hashed`). Data
Capture and Bedrock lines hold prompts and answers; their text is measured (for Data Capture lines without a token
count) and dropped with the line.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, Final, Literal

TraceFormat = Literal["mooncake", "bedrock", "datacapture", "csv"]
FORMATS: Final[tuple[TraceFormat, ...]] = ("mooncake", "bedrock", "datacapture", "csv")

#: Tokens per block of a Mooncake trace's `hash_ids`: each id names one 512-token block of the prompt, ids shared
#: between requests marking their common prefix (the traces of https://github.com/kvcache-ai/Mooncake,
#: FAST25-release/traces; the block size AIPerf and Dynamo's trace tools assume for them by default).
MOONCAKE_BLOCK_TOKENS: Final = 512
#: Characters per token where a Data Capture line carries no token count: OpenAI's rule of thumb for English
#: text ("one token generally corresponds to ~4 characters of text",
#: https://help.openai.com/en/articles/4936856-what-are-tokens-and-how-to-count-them). A stated estimate; the
#: summary counts the requests it was used for.
CHARS_PER_TOKEN: Final = 4.0

#: The key of this process's id hashes: session and prefix-group ids are kept only as keyed hashes, so what the
#: product holds cannot be matched back to a user's ids outside this process.
_HASH_KEY: Final = os.urandom(16)


def hashed(value: str) -> int:
    """A 63-bit keyed hash of an id (a session, a prefix group); 0 stands for no id."""
    if not value:
        return 0
    h = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=8, key=_HASH_KEY).digest()
    return (int.from_bytes(h, "big") >> 1) or 1


class BadField(Exception):
    """A line's `field` cannot be read: `problem` says why, in the user's words (never its value)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class Skip(Exception):
    """A well-formed line that is not a served request (a failed call): counted, not read."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass(slots=True)
class Record:
    """What the product keeps of one request: its arrival (seconds; since the epoch when `absolute`), its prompt
    and answer tokens, the model it went to, hashed session and prefix-group ids (0: none), the ids of its
    prompt's blocks (Mooncake `hash_ids`), tokens a provider read from its prompt cache (Bedrock), and whether
    its counts were estimated from text."""

    t: float
    inp: int
    out: int
    model: str = ""
    session: int = 0
    group: int = 0
    group_tokens: int = 0
    hash_ids: list[int] | None = None
    cache_read: int = -1
    estimated: bool = False


# --- detection ---------------------------------------------------------------------------------------------------
def detect(first_line: bytes) -> TraceFormat | None:
    """The format of a trace from its first non-empty line (None: not one of ours)."""
    text = first_line.strip()
    if text.startswith(b"\xef\xbb\xbf"):
        text = text[3:]
    if not text.startswith(b"{"):
        header = text.decode("utf-8", "replace").lower()
        return "csv" if "input_tokens" in header and "timestamp" in header else None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    if "captureData" in obj:
        return "datacapture"
    if obj.get("schemaType") == "ModelInvocationLog" or ("modelId" in obj and "input" in obj):
        return "bedrock"
    if "input_length" in obj or "hash_ids" in obj:
        return "mooncake"
    return None


# --- helpers -----------------------------------------------------------------------------------------------------
def _count(obj: Any, field: str, *, required: bool = True, minimum: int = 0) -> int:
    """A non-negative whole token count (a float with no fraction is accepted); -1 when absent and optional."""
    if obj is None:
        if required:
            raise BadField(field, "is missing")
        return -1
    if isinstance(obj, bool) or not isinstance(obj, int | float):
        raise BadField(field, "must be a whole number of tokens")
    if isinstance(obj, float) and not obj.is_integer():
        raise BadField(field, "must be a whole number of tokens")
    n = int(obj)
    if n < minimum:
        raise BadField(field, f"must be at least {minimum}")
    return n


def _iso_seconds(value: Any, field: str) -> float:
    """Seconds since the epoch of an RFC 3339 / ISO 8601 time (UTC when it names no zone)."""
    if not isinstance(value, str):
        raise BadField(field, "must be an ISO 8601 time such as 2025-04-01T12:00:00Z")
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise BadField(field, "must be an ISO 8601 time such as 2025-04-01T12:00:00Z") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


# --- Mooncake ----------------------------------------------------------------------------------------------------
_INT: Final = frozenset({int})


def mooncake(obj: Any) -> Record:
    """`{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}`: a Mooncake trace line
    (timestamps in milliseconds since the trace began). The common case (whole numbers in range) is checked with
    type tests only: a million lines are read in seconds."""
    if type(obj) is not dict:
        raise BadField("line", "must be a JSON object")
    ts: Any = obj.get("timestamp")
    if type(ts) not in (int, float) or ts < 0:
        raise BadField("timestamp", "must be milliseconds since the trace began (a number, at least 0)")
    inp = obj.get("input_length")
    if type(inp) is not int or inp < 1:
        inp = _count(inp, "input_length", minimum=1)
    out = obj.get("output_length")
    if type(out) is not int or out < 1:
        out = _count(out, "output_length", minimum=1)
    ids = obj.get("hash_ids")
    if ids is not None and (type(ids) is not list or not set(map(type, ids)) <= _INT):
        raise BadField("hash_ids", "must be a list of whole numbers")
    return Record(ts / 1000.0, inp, out, hash_ids=ids)


# --- Bedrock model-invocation logs ----------------------------------------------------------------------------------
def bedrock(obj: Any) -> Record:
    """A Bedrock model-invocation log record (schemaType ModelInvocationLog): `timestamp` (RFC 3339), `modelId`,
    `input.inputTokenCount`, `output.outputTokenCount`, and `input.cacheReadInputTokenCount` where prompt caching
    read part of the prompt (docs.aws.amazon.com/bedrock/latest/userguide/model-invocation-logging.html). The
    bodies (`inputBodyJson`, `outputBodyJson`) hold the prompt and answer: never read. A record with an
    `errorCode` is a failed call: skipped and counted."""
    if not isinstance(obj, dict):
        raise BadField("line", "must be a JSON object")
    if obj.get("errorCode"):
        raise Skip("failed call (errorCode)")
    model = obj.get("modelId")
    if not isinstance(model, str) or not model:
        raise BadField("modelId", "is missing")
    t = _iso_seconds(obj.get("timestamp"), "timestamp")
    inp = _count(_get(obj, "input", "inputTokenCount"), "input.inputTokenCount")
    out = _count(_get(obj, "output", "outputTokenCount"), "output.outputTokenCount")
    cache_read = _count(
        _get(obj, "input", "cacheReadInputTokenCount"), "input.cacheReadInputTokenCount", required=False
    )
    write = _count(
        _get(obj, "input", "cacheWriteInputTokenCount"), "input.cacheWriteInputTokenCount", required=False
    )
    # inputTokenCount counts what was not read from or written to the prompt cache: the prompt is all three
    prompt = inp + max(cache_read, 0) + max(write, 0)
    if prompt < 1:
        raise BadField("input.inputTokenCount", "must be at least 1")
    if out < 1:
        raise Skip("no output tokens")
    return Record(t, prompt, out, model=model, cache_read=cache_read)


# --- SageMaker Data Capture -----------------------------------------------------------------------------------------
def _payload(side: Any, field: str) -> Any:
    """The captured body of one side (`endpointInput`, `endpointOutput`) decoded: JSON, or JSON lines of a
    server-sent-event stream (a list of their JSON objects), or plain text."""
    if not isinstance(side, dict):
        raise BadField(field, "is missing")
    data = side.get("data")
    if not isinstance(data, str):
        raise BadField(f"{field}.data", "is missing")
    encoding = str(side.get("encoding", "JSON")).upper()
    if encoding == "BASE64":
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise BadField(f"{field}.data", "is not valid base64 (encoding BASE64)") from None
        text = raw.decode("utf-8", "replace")
    else:
        text = data
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    if stripped.startswith("data:"):
        events = []
        for line in stripped.splitlines():
            body = line[5:].strip() if line.startswith("data:") else ""
            if body and body != "[DONE]":
                try:
                    events.append(json.loads(body))
                except ValueError:
                    continue
        return events
    return text


def _text_chars(obj: Any) -> int:
    """Characters of the text a request or answer carries (its strings, as an OpenAI-compatible or TGI body
    holds them): measured, never kept."""
    if isinstance(obj, str):
        return len(obj)
    if isinstance(obj, list):
        return sum(_text_chars(x) for x in obj)
    if isinstance(obj, dict):
        total = 0
        for key in (
            "messages",
            "content",
            "prompt",
            "inputs",
            "text",
            "generated_text",
            "choices",
            "message",
        ):
            if key in obj:
                total += _text_chars(obj[key])
        delta = obj.get("delta")
        if isinstance(delta, dict):
            total += _text_chars(delta.get("content"))
        return total
    return 0


def _usage(body: Any) -> tuple[int, int]:
    """(prompt tokens, answer tokens) an OpenAI-compatible response states in `usage` (the last event of a
    stream), or TGI's `details.generated_tokens`; -1 where it states none."""
    candidates = body if isinstance(body, list) else [body]
    prompt = answer = -1
    for item in reversed(candidates):
        if not isinstance(item, dict):
            continue
        usage = item.get("usage")
        if isinstance(usage, dict):
            p, c = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(p, int) and isinstance(c, int):
                return p, c
        details = item.get("details")
        if isinstance(details, dict) and isinstance(details.get("generated_tokens"), int) and answer < 0:
            answer = details["generated_tokens"]
    return prompt, answer


def _estimate(chars: int) -> int:
    return max(1, round(chars / CHARS_PER_TOKEN))


def datacapture(obj: Any) -> Record:
    """A SageMaker Data Capture line: `captureData.endpointInput` / `endpointOutput` (`data`, `encoding` JSON or
    BASE64) and `eventMetadata.inferenceTime`
    (docs.aws.amazon.com/sagemaker/latest/dg/model-monitor-data-capture.html). Token counts come from the
    response's `usage` (prompt_tokens, completion_tokens) where the server is OpenAI-compatible, the output's
    from TGI's `details.generated_tokens`; otherwise from the text's length at CHARS_PER_TOKEN characters a token,
    a stated estimate (`estimated`). The text is measured, never kept."""
    if not isinstance(obj, dict):
        raise BadField("line", "must be a JSON object")
    t = _iso_seconds(_get(obj, "eventMetadata", "inferenceTime"), "eventMetadata.inferenceTime")
    capture = obj.get("captureData")
    if not isinstance(capture, dict):
        raise BadField("captureData", "is missing")
    request = _payload(capture.get("endpointInput"), "captureData.endpointInput")
    response = _payload(capture.get("endpointOutput"), "captureData.endpointOutput")
    prompt, answer = _usage(response)
    estimated = False
    if prompt < 0:
        prompt = _estimate(_text_chars(request))
        estimated = True
    if answer < 0:
        answer = _estimate(_text_chars(response))
        estimated = True
    model = request.get("model") if isinstance(request, dict) else None
    return Record(
        t, max(1, prompt), max(1, answer), model=model if isinstance(model, str) else "", estimated=estimated
    )


# --- CSV ---------------------------------------------------------------------------------------------------------
CSV_COLUMNS: Final = {
    "timestamp": "ISO 8601 time, or seconds (since the epoch or the trace's start)",
    "timestamp_ms": "milliseconds instead of timestamp",
    "input_tokens": "prompt tokens",
    "output_tokens": "answer tokens",
    "session_id": "optional: requests of one conversation (each turn's prompt holds the ones before)",
    "prefix_group": "optional: requests whose prompts start with the same prefix (a system prompt, a document)",
    "prefix_tokens": "optional: tokens of that shared prefix (without it: the group's shortest prompt)",
}


def csv_row(row: dict[str, str]) -> tuple[Record, bool]:
    """One CSV row (header: CSV_COLUMNS); and whether its time is absolute (an ISO time, or seconds large enough
    to be since the epoch)."""
    absolute = False
    if row.get("timestamp_ms") not in (None, ""):
        t = _number(row["timestamp_ms"], "timestamp_ms") / 1000.0
    else:
        raw = (row.get("timestamp") or "").strip()
        if not raw:
            raise BadField("timestamp", "is missing")
        try:
            t = float(raw)
        except ValueError:
            t = _iso_seconds(raw, "timestamp")
            absolute = True
        else:
            if t < 0:
                raise BadField("timestamp", "must not be negative")
            absolute = t >= EPOCH_SECONDS_FROM
    inp = _int(row.get("input_tokens"), "input_tokens")
    out = _int(row.get("output_tokens"), "output_tokens")
    group_raw = row.get("prefix_group") or row.get("prefix_group_id") or ""
    prefix = row.get("prefix_tokens")
    return (
        Record(
            t,
            inp,
            out,
            session=hashed(row.get("session_id") or ""),
            group=hashed(group_raw),
            group_tokens=_int(prefix, "prefix_tokens", minimum=0) if prefix not in (None, "") else -1,
        ),
        absolute,
    )


#: Seconds that must be since the epoch, not since a trace's start: 2001-09-09 (1e9 s). No recorded trace runs
#: for 31 years, and no sizing trace predates it.
EPOCH_SECONDS_FROM: Final = 1e9


def _number(raw: Any, field: str) -> float:
    try:
        x = float(raw)
    except (TypeError, ValueError):
        raise BadField(field, "must be a number") from None
    if x != x or x < 0:
        raise BadField(field, "must be a number, at least 0")
    return x


def _int(raw: Any, field: str, minimum: int = 1) -> int:
    if raw is None or str(raw).strip() == "":
        raise BadField(field, "is missing")
    try:
        x = float(raw)
    except ValueError:
        raise BadField(field, "must be a whole number of tokens") from None
    if not x.is_integer():
        raise BadField(field, "must be a whole number of tokens")
    if x < minimum:
        raise BadField(field, f"must be at least {minimum}")
    return int(x)


JSON_READERS: Final = {"mooncake": mooncake, "bedrock": bedrock, "datacapture": datacapture}
