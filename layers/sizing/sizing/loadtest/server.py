"""What an OpenAI-compatible server says about itself, and what its own metrics saw over a load level.

A measurement belongs to what was measured: the engine's version, the model it serves and its context, the KV
capacity it really has (vLLM reports it in tokens), its block size and whether it caches prefixes -- read from
the server, not assumed from the estimate. vLLM exposes these on plain HTTP (`GET /version`, `GET /v1/models`,
`GET /metrics`: `vllm:cache_config_info`); a local twin answers the same routes with its own figures.

Over a level, two scrapes of `/metrics` give the server's own view of the same window: its request count, its
mean TTFT, inter-token latency, time per output token, e2e and queueing time (histogram sums over counts), the
tokens it generated, and the prefix-cache hit share. The load generator's figures are checked against these
(`tests/engine`), and a level whose prompts hit a cache they did not ask for is flagged.

Plain `urllib`: under the load-test process's gevent patching the sockets are cooperative, so a scrape does not
stall the users.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from sizing.base.errors import InvalidInput, Problem
from sizing.base.serving_config import ServerFacts
from sizing.base.strict import Strict

#: How long one probe of a route waits: a healthy server answers these in milliseconds.
PROBE_TIMEOUT_S = 5.0
#: Most of a JSON route's body read (vLLM's /v1/models is under 1 KiB a model).
MAX_JSON_BYTES = 256 * 1024
#: Most of /metrics read (vLLM's is ~60 KiB with its histograms' buckets).
MAX_METRICS_BYTES = 4 * 1024 * 1024
#: Longest version string recorded (vLLM's are like "0.32.0"; a longer answer is not a version).
MAX_VERSION_CHARS = 100
MS_PER_S = 1000.0

#: vLLM's histograms whose sum / count is a per-request mean, as (metric name, field of ServerWindow, scale).
HISTOGRAM_MEANS: tuple[tuple[str, str, float], ...] = (
    ("vllm:time_to_first_token_seconds", "ttft_ms", MS_PER_S),
    ("vllm:inter_token_latency_seconds", "itl_ms", MS_PER_S),
    ("vllm:request_time_per_output_token_seconds", "tpot_ms", MS_PER_S),
    ("vllm:e2e_request_latency_seconds", "e2e_s", 1.0),
    ("vllm:request_queue_time_seconds", "queue_ms", MS_PER_S),
    ("vllm:request_prefill_time_seconds", "prefill_ms", MS_PER_S),
)
#: vLLM's histogram of tokens per engine step: its count is the steps the engine ran, its sum their tokens.
STEP_TOKENS = "vllm:iteration_tokens_total"
#: CPU seconds of the process that serves /metrics: vLLM's API server, whose engine core and model run in other
#: processes [prometheus_client's process collector, which vLLM's /metrics includes].
FRONTEND_CPU = "process_cpu_seconds_total"
#: Counters read per window (summed over their label sets).
COUNTERS = (
    "vllm:generation_tokens_total",
    "vllm:prompt_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:num_preemptions_total",
    # the process that answers /metrics (vLLM's API server: HTTP, tokenisation, detokenisation, streaming), in
    # CPU seconds [prometheus_client's process collector]
    FRONTEND_CPU,
    # a twin's: seconds its steps ended after their modelled time (a busy machine starves it)
    "twin:step_lag_seconds_total",
)
#: A twin whose steps ran behind its model by more than this share of a level's window served slower than the
#: model: its figures are the machine's, not the model's (on two busy cores a time-scaled twin fell seconds
#: behind and read a quarter of the estimate's capacity). 2%: well above the ~1 ms timer overshoot a step of
#: tens of ms makes up by itself (`sizing.twin.engine.MAX_CATCH_UP_S`).
TWIN_LAG_SHARE = 0.02
#: A level's prefix-cache hit share above this, when its prompts share no prefix, is a cache the load did not
#: ask for (prompts repeated from an earlier run, or another client on the server): flagged on the level. The
#: chat template's header is the same in every request and a block that holds only it can hit; with vLLM's
#: 16-128 token blocks a prompt of a few hundred tokens has at most that one block in common (under 5%).
UNEXPECTED_HIT_SHARE = 0.05


class ServerWindow(Strict):
    """The server's own figures over one level (deltas of its /metrics between two scrapes). Means only: a
    histogram's buckets are too coarse for percentiles worth comparing."""

    seconds: float
    requests: int | None = Field(default=None, description="requests the server finished in the window")
    ttft_ms: float | None = None
    itl_ms: float | None = None
    tpot_ms: float | None = None
    e2e_s: float | None = None
    queue_ms: float | None = None
    generation_tokens: int | None = None
    prompt_tokens: int | None = None
    output_tokens_per_s: float | None = None
    prefix_cache_queries: int | None = None
    prefix_cache_hits: int | None = None
    prefix_cache_hit_share: float | None = Field(
        default=None, description="prompt tokens served from the prefix cache / prompt tokens looked up"
    )
    preemptions: int | None = None
    twin_lag_share: float | None = Field(
        default=None,
        description="a local twin's: the share of the window its steps ran behind its model (a busy machine)",
    )
    prefill_ms: float | None = Field(
        default=None,
        description="from a request's scheduling to its first token, mean (vLLM's prefill time: its own prompt "
        "steps, and the step already planned when the engine plans a step ahead)",
    )
    frontend_cpu_share: float | None = Field(
        default=None,
        description="CPU seconds the server's API process spent per second of the window (HTTP, tokenisation, "
        "streaming); on a CPU server whose API process shares the model's cores, time the model did not get",
    )
    frontend_cpu_ms_per_request: float | None = Field(
        default=None, description="the API process's CPU time over the window per request the server finished"
    )
    steps: int | None = Field(default=None, description="engine steps in the window")
    tokens_per_step: float | None = Field(
        default=None, description="prompt and output tokens per engine step"
    )


@dataclass
class MetricsSnapshot:
    """Sums of the counters and histogram sums/counts one scrape read, by sample name."""

    at: float
    values: dict[str, float] = field(default_factory=dict)
    info: dict[str, dict[str, str]] = field(default_factory=dict)


class EndpointUnreachable(Exception):
    """The endpoint does not answer as an OpenAI-compatible server."""


def _get(url: str, limit: int, timeout_s: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return bytes(resp.read(limit))


def _json(url: str, timeout_s: float) -> Any:
    try:
        return json.loads(_get(url, MAX_JSON_BYTES, timeout_s) or b"null")
    except (urllib.error.URLError, OSError, ValueError):
        return None


def parse_metrics(text: str, at: float | None = None) -> MetricsSnapshot:
    """The samples this module reads from Prometheus exposition text (prometheus_client's own parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = set(COUNTERS) | {
        f"{m}{suffix}"
        for m in (*(h for h, _, _ in HISTOGRAM_MEANS), STEP_TOKENS)
        for suffix in ("_sum", "_count")
    }
    snap = MetricsSnapshot(at=time.time() if at is None else at)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted:
                snap.values[sample.name] = snap.values.get(sample.name, 0.0) + float(sample.value)
            elif sample.name.endswith("_info"):
                snap.info[sample.name] = dict(sample.labels)
    return snap


def scrape(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> MetricsSnapshot | None:
    """The server's /metrics now; None when it has none (Bedrock, SageMaker, a proxy)."""
    if not endpoint.startswith(("http://", "https://")):
        return None
    try:
        text = _get(endpoint.rstrip("/") + "/metrics", MAX_METRICS_BYTES, timeout_s).decode(
            "utf-8", "replace"
        )
        return parse_metrics(text)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _delta(before: MetricsSnapshot, after: MetricsSnapshot, name: str) -> float | None:
    if name not in after.values or name not in before.values:
        return None
    return after.values[name] - before.values[name]


def window(before: MetricsSnapshot, after: MetricsSnapshot) -> ServerWindow:
    """The server's figures between two scrapes (a counter that went down -- the server restarted -- gives
    None rather than a negative figure)."""
    seconds = max(after.at - before.at, 1e-9)
    out: dict[str, Any] = {"seconds": round(seconds, 3)}
    for metric, key, scale in HISTOGRAM_MEANS:
        n, total = _delta(before, after, metric + "_count"), _delta(before, after, metric + "_sum")
        if n is not None and total is not None and n > 0 and total >= 0:
            out[key] = round(total / n * scale, 3)
            if key == "e2e_s":
                out["requests"] = round(n)
    counts = {name: _delta(before, after, name) for name in COUNTERS}
    counts = {k: (None if v is None or v < 0 else round(v)) for k, v in counts.items()}
    out["generation_tokens"] = counts["vllm:generation_tokens_total"]
    out["prompt_tokens"] = counts["vllm:prompt_tokens_total"]
    out["prefix_cache_queries"] = counts["vllm:prefix_cache_queries_total"]
    out["prefix_cache_hits"] = counts["vllm:prefix_cache_hits_total"]
    out["preemptions"] = counts["vllm:num_preemptions_total"]
    lag = _delta(before, after, "twin:step_lag_seconds_total")
    if lag is not None and lag >= 0:
        out["twin_lag_share"] = round(lag / seconds, 4)
    steps, step_tokens = (
        _delta(before, after, STEP_TOKENS + "_count"),
        _delta(before, after, STEP_TOKENS + "_sum"),
    )
    if steps is not None and steps > 0 and step_tokens is not None and step_tokens >= 0:
        out["steps"] = round(steps)
        out["tokens_per_step"] = round(step_tokens / steps, 2)
    cpu = _delta(before, after, FRONTEND_CPU)
    if cpu is not None and cpu >= 0:
        out["frontend_cpu_share"] = round(cpu / seconds, 4)
        if out.get("requests"):
            out["frontend_cpu_ms_per_request"] = round(cpu / out["requests"] * MS_PER_S, 3)
    if out["generation_tokens"] is not None:
        out["output_tokens_per_s"] = round(out["generation_tokens"] / seconds, 2)
    q, h = out["prefix_cache_queries"], out["prefix_cache_hits"]
    if q:
        out["prefix_cache_hit_share"] = round((h or 0) / q, 4)
    return ServerWindow(**out)


def _int(labels: dict[str, str], key: str) -> int | None:
    try:
        return int(float(labels[key]))
    except (KeyError, ValueError):
        return None


#: A KV element's width in bytes -> the type a server keeps K and V in (`kv_format`). With vLLM's
#: `kv_cache_dtype=auto` that is the type the model is served in.
KV_FORMATS = {4: "fp32", 2: "bf16", 1: "fp8"}


def kv_format(facts: ServerFacts, kv_bytes_per_token_at_one_byte: float) -> str | None:
    """The type the server keeps K and V in, from its cache's bytes over its tokens and the model's KV bytes a
    token at one byte an element (`ModelSpec.kv_bytes_per_token(1.0)`); None where the server does not say or the
    width is none of `KV_FORMATS`."""
    if not facts.kv_cache_bytes or not facts.kv_cache_tokens or kv_bytes_per_token_at_one_byte <= 0:
        return None
    width = facts.kv_cache_bytes / facts.kv_cache_tokens / kv_bytes_per_token_at_one_byte
    near = round(width)
    return KV_FORMATS.get(near) if abs(width - near) < 0.05 * near else None


def probe(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> ServerFacts:
    """What the server at `endpoint` runs. Raises EndpointUnreachable when it answers neither /v1/models nor
    /health (down, or not an OpenAI-compatible server)."""
    base = endpoint.rstrip("/")
    models = _json(base + "/v1/models", timeout_s)
    data = models.get("data") if isinstance(models, dict) else None
    if not isinstance(data, list):
        raise EndpointUnreachable(
            f"{endpoint} does not answer GET /v1/models as an OpenAI-compatible server"
            " (is it running, and is this its base URL?)"
        )
    served = [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
    facts: dict[str, Any] = {"endpoint": base, "served_models": [m["id"] for m in served]}
    lens = {m.get("max_model_len") for m in served if isinstance(m.get("max_model_len"), int)}
    facts["max_model_len"] = lens.pop() if len(lens) == 1 else None
    ver = _json(base + "/version", timeout_s)
    v = ver.get("version") if isinstance(ver, dict) else None
    facts["version"] = v if isinstance(v, str) and 0 < len(v) <= MAX_VERSION_CHARS else None
    snap = scrape(base, timeout_s)
    notes: list[str] = []
    if snap is not None:
        cache = snap.info.get("vllm:cache_config_info", {})
        if cache:
            facts["engine"] = "vllm"
            facts["kv_cache_tokens"] = _int(cache, "kv_cache_size_tokens")
            facts["kv_cache_bytes"] = _int(cache, "kv_cache_memory_bytes")
            facts["block_size"] = _int(cache, "block_size")
            if cache.get("enable_prefix_caching") in ("True", "False"):
                facts["prefix_caching"] = cache["enable_prefix_caching"] == "True"
            facts["kv_cache_dtype"] = cache.get("cache_dtype")
        sched = snap.info.get("vllm:scheduler_config_info", {})
        facts["max_num_seqs"] = _int(sched, "max_num_seqs")
        facts["max_num_batched_tokens"] = _int(sched, "max_num_batched_tokens")
        if not sched:
            notes.append(
                "the server does not expose its scheduler limits (max_num_seqs, max_num_batched_tokens)"
            )
    else:
        notes.append("no /metrics: KV capacity, block size and prefix caching unknown")
    if isinstance(facts["version"], str) and facts["version"].startswith("twin-"):
        facts["engine"] = "twin"
    return ServerFacts(**facts, notes=notes)


def resolve_served_model(facts: ServerFacts, wanted: str | None, prefer: str | None = None) -> str:
    """The model name to send: `wanted` when the server serves it; when `wanted` is not given, `prefer` (the
    workload's model) if the server serves it, else the server's only model. Raises EndpointUnreachable naming
    both when the server serves another model."""
    if wanted and (wanted in facts.served_models or not facts.served_models):
        return wanted
    if not wanted and prefer and prefer in facts.served_models:
        return prefer
    if not wanted and len(facts.served_models) == 1:
        return facts.served_models[0]
    served = ", ".join(facts.served_models) or "no model"
    if not wanted:
        raise EndpointUnreachable(
            f"{facts.endpoint} serves {served}: name the one to measure with --served-model NAME"
        )
    raise EndpointUnreachable(
        f"{facts.endpoint} serves {served}, not {wanted}: name the served model with --served-model NAME"
    )


def describe_server(facts: ServerFacts) -> str:
    """One line of what the server runs: `server: vllm 0.32.0, tiny-llama, max_model_len 4096, KV 524,288 tokens
    (block 128), prefix caching on`."""
    parts = [" ".join(x for x in (facts.engine or "server", facts.version) if x)]
    parts.append(", ".join(facts.served_models) or "no model listed")
    if facts.max_model_len:
        parts.append(f"max_model_len {facts.max_model_len}")
    if facts.kv_cache_tokens:
        block = f" (block {facts.block_size})" if facts.block_size else ""
        parts.append(f"KV {facts.kv_cache_tokens:,} tokens{block}")
    if facts.prefix_caching is not None:
        parts.append(f"prefix caching {'on' if facts.prefix_caching else 'off'}")
    return "server: " + ", ".join(parts)


def serving_differences(
    serving: dict[str, Any] | None,
    facts: ServerFacts | dict[str, Any] | None,
    kv_shape: tuple[float, float] | None = None,
) -> list[str]:
    """Where what the server reports differs from the serving configuration the estimate assumed (a
    `sizing.base.serving_config.ServingConfig` as a dict), in words: `max_model_len: the server runs 4096, the estimate
    assumed 512`. With `kv_shape` (the model's KV bytes a token at one byte an element, and the element's bytes the
    estimate assumed: `sizing.perf.memory.kv_dtype_bytes`), the type the server keeps K and V in too (`kv_format`: a
    bf16 model served in fp32 keeps fp32). Empty when they agree or either side does not say."""
    if not serving or not facts:
        return []
    f = facts if isinstance(facts, ServerFacts) else ServerFacts.model_validate(facts)
    out = []
    pairs: list[tuple[str, Any, Any]] = [
        ("max_model_len", f.max_model_len, serving.get("max_model_len")),
        ("enable_prefix_caching", f.prefix_caching, serving.get("enable_prefix_caching")),
        ("max_num_seqs", f.max_num_seqs, serving.get("max_num_seqs")),
        ("max_num_batched_tokens", f.max_num_batched_tokens, serving.get("max_num_batched_tokens")),
    ]
    image = str(serving.get("image") or "")
    tag = image.rsplit(":", 1)[-1].lstrip("v") if ":" in image else None
    if f.engine == "vllm" and f.version and tag and tag[:1].isdigit():
        pairs.append(("engine version", f.version, tag))
    if kv_shape is not None:
        at_one_byte, assumed_bytes = kv_shape
        pairs.append(("KV cache type", kv_format(f, at_one_byte), KV_FORMATS.get(round(assumed_bytes))))
    for name, real, assumed in pairs:
        if real is not None and assumed is not None and real != assumed:
            out.append(f"{name}: the server runs {real}, the estimate assumed {assumed}")
    return out


def served_model(
    endpoint: str, wanted: str | None, prefer: str | None = None
) -> tuple[str, ServerFacts | None]:
    """The model name to send to `endpoint` (`resolve_served_model`), checked against what an http(s) server
    serves, and that server's facts (None for Bedrock and SageMaker, which are told the model). A server that is
    down or not OpenAI-compatible, or serves another model, is an InvalidInput of one line naming the endpoint."""
    if not endpoint.startswith(("http://", "https://")):
        if not wanted:
            raise InvalidInput(
                "--model: give the model id to call on a Bedrock or SageMaker endpoint",
                [Problem("model", "")],
            )
        return wanted, None
    try:
        facts = probe(endpoint)
        return resolve_served_model(facts, wanted, prefer), facts
    except EndpointUnreachable as exc:
        raise InvalidInput(str(exc), [Problem("endpoint", endpoint)]) from None
