"""Sample traces in every format the product reads, generated here (never downloaded): the test fixtures, the
benchmark's million-request trace, and a way to try `sizing workload --trace` without one's own logs.

`synthetic` draws the requests (arrivals with Poisson, constant or bursty gaps; lognormal lengths; prompts that
start with one of a few shared prefixes; optional multi-turn sessions); `write` puts them in a format. Deterministic
for a seed.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import numpy as np

from sizing.traces.formats import MOONCAKE_BLOCK_TOKENS, TraceFormat

Gaps = Literal["poisson", "constant", "bursty"]
#: Where an absolute-time sample starts: a Tuesday, 00:00 UTC.
SAMPLE_START: Final = dt.datetime(2026, 3, 3, tzinfo=dt.UTC)
#: A bursty sample's bursts: every BURST_PERIOD_S seconds the rate jumps to BURST_FACTOR x the base for
#: BURST_S seconds, the base lowered so the mean stays the one asked for.
BURST_PERIOD_S: Final = 60.0
BURST_S: Final = 5.0
BURST_FACTOR: Final = 8.0


@dataclass(frozen=True)
class Request:
    t: float
    inp: int
    out: int
    hash_ids: tuple[int, ...]
    session: str
    group: str
    model: str
    prompt: str


def arrivals(n: int, rate: float, gaps: Gaps, rng: np.random.Generator) -> np.ndarray:
    """`n` arrival times (s) at mean `rate`: Poisson, constant gaps, or Poisson with periodic bursts."""
    if gaps == "constant":
        return np.arange(n, dtype=np.float64) / rate
    if gaps == "poisson":
        return np.cumsum(rng.exponential(1.0 / rate, n))
    # a piecewise-constant rate: high for BURST_S of each BURST_PERIOD_S, low otherwise, mean `rate`
    high_share = BURST_S / BURST_PERIOD_S
    base = rate / (1 - high_share + high_share * BURST_FACTOR)
    # time change: draw unit-rate Poisson arrivals in "work" units, map through the cumulative rate
    work = np.cumsum(rng.exponential(1.0, n))
    per_period = base * ((BURST_PERIOD_S - BURST_S) + BURST_S * BURST_FACTOR)
    periods, rest = np.divmod(work, per_period)
    burst_work = base * BURST_FACTOR * BURST_S
    inside = np.where(rest < burst_work, rest / (base * BURST_FACTOR), BURST_S + (rest - burst_work) / base)
    return periods * BURST_PERIOD_S + inside


def synthetic(
    n: int,
    *,
    seed: int = 0,
    rate: float = 2.0,
    gaps: Gaps = "poisson",
    input_mean: float = 1500.0,
    output_mean: float = 250.0,
    groups: int = 4,
    prefix_tokens: int = 1024,
    sessions: int = 0,
    models: tuple[str, ...] = ("meta.llama3-1-8b-instruct-v1:0",),
    canary: str = "",
) -> Iterator[Request]:
    """`n` requests. Each prompt starts with one of `groups` shared prefixes of `prefix_tokens` (0 groups: none);
    with `sessions`, requests belong to that many conversations, a turn's prompt holding the one before. `canary`
    is put in every prompt's text (the privacy test looks for it in what the product writes)."""
    rng = np.random.default_rng(seed)
    t = arrivals(n, rate, gaps, rng)
    sigma = 0.6
    inp = np.maximum(
        prefix_tokens + 16 if groups else 1,
        np.rint(rng.lognormal(np.log(input_mean) - sigma**2 / 2, sigma, n)),
    ).astype(int)
    out = np.maximum(1, np.rint(rng.lognormal(np.log(output_mean) - sigma**2 / 2, sigma, n))).astype(int)
    group = rng.integers(0, max(groups, 1), n)
    model = rng.integers(0, len(models), n)
    session_of = rng.integers(0, sessions, n) if sessions else np.zeros(n, dtype=int)
    next_unique = 1 << 40
    history: dict[int, tuple[int, ...]] = {}
    for i in range(n):
        blocks = -(-int(inp[i]) // MOONCAKE_BLOCK_TOKENS)
        ids: list[int] = []
        if sessions and int(session_of[i]) in history:
            ids = list(history[int(session_of[i])])[:blocks]
        elif groups:
            ids = [int(group[i]) * 1000 + j for j in range(prefix_tokens // MOONCAKE_BLOCK_TOKENS)][:blocks]
        while len(ids) < blocks:
            ids.append(next_unique)
            next_unique += 1
        if sessions:
            history[int(session_of[i])] = tuple(ids)
        yield Request(
            t=float(t[i]),
            inp=int(inp[i]),
            out=int(out[i]),
            hash_ids=tuple(ids),
            session=f"conversation-{int(session_of[i])}" if sessions else "",
            group=f"system-prompt-{int(group[i])}" if groups else "",
            model=models[int(model[i])],
            prompt=f"{canary} Please help with request {i}.",
        )


def _iso(t: float) -> str:
    return (SAMPLE_START + dt.timedelta(seconds=t)).isoformat().replace("+00:00", "Z")


def mooncake_line(r: Request) -> str:
    return json.dumps(
        {
            "timestamp": round(r.t * 1000),
            "input_length": r.inp,
            "output_length": r.out,
            "hash_ids": list(r.hash_ids),
        }
    )


def bedrock_line(r: Request) -> str:
    """A model-invocation log record as Bedrock writes one for a Converse call (its bodies hold the text)."""
    return json.dumps(
        {
            "schemaType": "ModelInvocationLog",
            "schemaVersion": "1.0",
            "timestamp": _iso(r.t),
            "accountId": "123456789012",
            "identity": {"arn": "arn:aws:sts::123456789012:assumed-role/app/session"},
            "region": "us-east-1",
            "requestId": f"00000000-0000-0000-0000-{round(r.t * 1000):012d}",
            "operation": "Converse",
            "modelId": r.model,
            "input": {
                "inputContentType": "application/json",
                "inputBodyJson": {"messages": [{"role": "user", "content": [{"text": r.prompt}]}]},
                "inputTokenCount": r.inp,
            },
            "output": {
                "outputContentType": "application/json",
                "outputBodyJson": {
                    "output": {
                        "message": {"role": "assistant", "content": [{"text": f"answer: {r.prompt}"}]}
                    },
                    "stopReason": "end_turn",
                    "usage": {"inputTokens": r.inp, "outputTokens": r.out, "totalTokens": r.inp + r.out},
                },
                "outputTokenCount": r.out,
            },
        }
    )


def datacapture_line(r: Request, *, usage: bool = True) -> str:
    """A Data Capture line of an OpenAI-compatible endpoint (request JSON, response base64 as SageMaker captures
    it when it cannot tell the content type); `usage=False` leaves the token counts out of the response."""
    request = {"model": r.model, "messages": [{"role": "user", "content": r.prompt}], "max_tokens": r.out}
    response: dict[str, object] = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "x" * (4 * r.out)}}],
    }
    if usage:
        response["usage"] = {
            "prompt_tokens": r.inp,
            "completion_tokens": r.out,
            "total_tokens": r.inp + r.out,
        }
    else:
        request["messages"] = [{"role": "user", "content": r.prompt + " " + "y" * (4 * r.inp)}]
    return json.dumps(
        {
            "captureData": {
                "endpointInput": {
                    "observedContentType": "application/json",
                    "mode": "INPUT",
                    "data": json.dumps(request),
                    "encoding": "JSON",
                },
                "endpointOutput": {
                    "observedContentType": "application/json",
                    "mode": "OUTPUT",
                    "data": base64.b64encode(json.dumps(response).encode()).decode(),
                    "encoding": "BASE64",
                },
            },
            "eventMetadata": {"eventId": f"event-{round(r.t * 1000)}", "inferenceTime": _iso(r.t)},
            "eventVersion": "0",
        }
    )


def write(path: str | Path, fmt: TraceFormat, requests: Iterator[Request]) -> Path:
    """Write `requests` as a trace in `fmt`; returns the path."""
    p = Path(path)
    with p.open("w", newline="") as fh:
        if fmt == "csv":
            w = csv.writer(fh)
            w.writerow(["timestamp", "input_tokens", "output_tokens", "session_id", "prefix_group"])
            for r in requests:
                w.writerow([_iso(r.t), r.inp, r.out, r.session, r.group])
            return p
        line = {"mooncake": mooncake_line, "bedrock": bedrock_line, "datacapture": datacapture_line}[fmt]
        for r in requests:
            fh.write(line(r) + "\n")
    return p
