"""The twin's HTTP front end: a small HTTP/1.1 server on `asyncio.start_server` speaking the OpenAI API.

Routes: `POST /v1/chat/completions` and `POST /v1/completions` (streamed as server-sent events in chunked
transfer encoding, or one JSON body, both with a usage block), `GET /v1/models` (the card states max_model_len,
as vLLM's does, and the twin's whole serving configuration), `GET /version` (`{"version": "twin-<sizing
version>"}`, where vLLM answers its own version), `GET /health`, `GET /metrics` (Prometheus text with vLLM's
metric names). The stdlib server keeps one coroutine and a few buffers per
connection, and tokens are written straight from the engine's step loop without a task switch per token, which
keeps 500+ concurrent streams cheap on one core.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from pydantic import Field, ValidationError

from sizing.base.distributions import TokenDistribution
from sizing.base.errors import SizingError
from sizing.base.strict import Lenient, Strict
from sizing.base.tokens import VOCABULARY, block_hashes, chat_token_pieces, token_pieces
from sizing.twin.engine import TTFT_BUCKETS_S, Engine, Sequence, StepModelLike

#: Answer lengths when the client does not force them (ignore_eos): the chat preset's output distribution
#: (mean 250, p95 700 tokens; sizing.workload.parse.PRESETS["chat"]), capped by max_tokens.
DEFAULT_OUTPUT_MEAN = 250
DEFAULT_OUTPUT_P95 = 700
#: Largest request head we read; vLLM's uvicorn default limit is of the same order (h11: 16 KiB).
MAX_HEAD_BYTES = 64 * 1024
#: Longest a stopping twin waits for its connection handlers to return.
SHUTDOWN_WAIT_S = 2.0
#: How often a waiting request checks whether its client has gone (seconds; a timer per request in flight).
DISCONNECT_POLL_S = 0.5
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
}


class TwinSettings(Strict):
    """What the twin serves and how it draws answer lengths."""

    served_model: str = Field(min_length=1)
    #: other names requests may use (the catalog id when the twin was asked for by an alias, and vice versa)
    aliases: list[str] = Field(default_factory=list)
    seed: int = 0
    output_mean: float = Field(default=DEFAULT_OUTPUT_MEAN, gt=0)
    output_p95: float = Field(default=DEFAULT_OUTPUT_P95, gt=0)
    max_model_len: int | None = Field(default=None, gt=0)
    #: the `sizing.base.serving_config.ServingConfig` served, as a dict (stated on the model card)
    serving: dict[str, Any] | None = None
    #: the model runs this many times faster than real time (`Engine`); clients scale rates and latencies by it
    time_scale: float = Field(default=1.0, ge=1.0)


#: Prefix of the version a twin reports on GET /version: it is our model, not an engine build.
TWIN_VERSION_PREFIX = "twin-"


def twin_version() -> str:
    """`twin-<version of the sizing package>` (`twin-unknown` where the package is not installed, e.g. a Lambda
    layer copied as source)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return TWIN_VERSION_PREFIX + version("llm-sizing")
    except PackageNotFoundError:
        return TWIN_VERSION_PREFIX + "unknown"


class _StreamOptions(Lenient):
    include_usage: bool = False


class _Request(Lenient):
    """The fields of an OpenAI request that change what the twin does. OpenAI clients send many more (sampling
    parameters, user ids...) that do not change timing, so unknown fields are ignored rather than refused."""

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stream: bool = False
    stream_options: _StreamOptions | None = None
    ignore_eos: bool = False
    min_tokens: int = Field(default=0, ge=0)


class _ChatRequest(_Request):
    messages: list[dict[str, Any]] = Field(min_length=1)


class _CompletionRequest(_Request):
    prompt: str | list[str] | list[int]


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _sse(obj: str) -> bytes:
    return _chunk(b"data: " + obj.encode() + b"\n\n")


_DONE = _sse("[DONE]") + b"0\r\n\r\n"


#: Output words after the first, with their leading space, as bytes.
_WORD_BYTES = [(" " + w).encode() for w in VOCABULARY]
_N_WORDS = len(VOCABULARY)


def _word(n: int) -> str:
    """The text of output token n (1-based): words of the vocabulary, one token each by the twin's tokenizer."""
    w = VOCABULARY[(n - 1) % len(VOCABULARY)]
    return w if n == 1 else " " + w


def _text(n: int) -> str:
    return "".join(_word(i) for i in range(1, n + 1))


@dataclass(frozen=True, slots=True)
class _Answer:
    """What every reply to one completion request repeats: its id, model, prompt size and how it ends."""

    chat: bool
    req: _Request
    prompt: int
    rid: str
    created: int
    model: str
    #: the prompt's full KV blocks by content, for the engine's prefix cache (empty when it caches none)
    hashes: tuple[int, ...] = ()

    @property
    def usage_wanted(self) -> bool:
        return self.req.stream_options is not None and self.req.stream_options.include_usage

    def usage(self, n: int) -> dict[str, int]:
        return {"prompt_tokens": self.prompt, "completion_tokens": n, "total_tokens": self.prompt + n}

    def reason(self, n: int) -> str:
        cap = self.req.max_completion_tokens or self.req.max_tokens
        return "length" if cap is not None and n >= cap else "stop"

    def chunk_head(self) -> str:
        """A streamed chunk's JSON up to its choices (closed by `]}`)."""
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return (
            f'{{"id":"{self.rid}","object":"{kind}","created":{self.created},"model":{json.dumps(self.model)},'
            '"choices":['
        )

    def choice(self, content: str | None, finish: str | None) -> str:
        """One streamed choice: a delta (chat) or text (completions), with its finish reason or null."""
        fin = "null" if finish is None else f'"{finish}"'
        if self.chat:
            delta = "{}" if content is None else f'{{"content":"{content}"}}'
            return f'{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{fin}}}'
        return f'{{"index":0,"text":"{content or ""}","logprobs":null,"finish_reason":{fin}}}'

    def body(self, n: int) -> dict[str, Any]:
        """The whole (not streamed) reply for an answer of n tokens."""
        text = _text(n)
        choice: dict[str, Any]
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None}
        else:
            choice = {"index": 0, "text": text, "logprobs": None}
        choice["finish_reason"] = self.reason(n)
        return {
            "id": self.rid,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage(n),
        }


class TwinServer:
    """One twin: an engine and the HTTP server in front of it. Create and run it inside an event loop."""

    def __init__(self, step_model: StepModelLike, settings: TwinSettings) -> None:
        self.settings = settings
        self.step_model = step_model
        self.engine: Engine | None = None
        self._server: asyncio.Server | None = None
        self._rng = np.random.default_rng(settings.seed)
        self._lengths = TokenDistribution.from_mean_p95(settings.output_mean, settings.output_p95)
        self._connections: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self.started = int(time.time())

    async def start(self, host: str, port: int) -> int:
        """Listen and return the bound port (useful with port 0)."""
        self.engine = Engine(self.step_model, self.settings.time_scale)
        self.engine.start()
        # backlog: a load test opens hundreds of connections at once
        self._server = await asyncio.start_server(
            self._handle, host, port, backlog=4096, limit=MAX_HEAD_BYTES
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop accepting, end every request and connection, let the handlers return, stop the engine."""
        if self._server is not None:
            self._server.close()
        if self.engine is not None:
            self.engine.abort_all()
        for w in list(self._connections):
            w.close()
        handlers = [t for t in self._handlers if not t.done()]
        if handlers:
            await asyncio.wait(handlers, timeout=SHUTDOWN_WAIT_S)
        if self.engine is not None:
            await self.engine.stop()

    # --- HTTP ---------------------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                try:
                    method, target, _version = lines[0].split(" ", 2)
                except ValueError:
                    return
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                keep_alive = headers.get("connection", "").lower() != "close"
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    self._reply(writer, 411, {"message": "send a Content-Length body"}, keep_alive=False)
                    return
                if (
                    headers.get("expect", "").lower() == "100-continue"
                ):  # curl does this for bodies over 1 KiB
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                await self._route(method, target.split("?", 1)[0], body, reader, writer, keep_alive)
                await writer.drain()
                if not keep_alive or writer.is_closing():
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._connections.discard(writer)
            if task is not None:
                self._handlers.discard(task)
            writer.close()

    def _reply(
        self, writer: asyncio.StreamWriter, status: int, obj: Any, *, keep_alive: bool = True, ctype: str = ""
    ) -> None:
        body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            f"content-type: {ctype or 'application/json'}\r\ncontent-length: {len(body)}\r\n"
            f"connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        )
        writer.write(head.encode() + body)

    def _error(self, writer: asyncio.StreamWriter, status: int, message: str, keep_alive: bool) -> None:
        kind = "NotFoundError" if status == 404 else "BadRequestError"
        err = {"object": "error", "message": message, "type": kind, "param": None, "code": status}
        self._reply(writer, status, {"error": err, **err}, keep_alive=keep_alive)

    async def _route(
        self, method: str, path: str, body: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        keep_alive: bool,
    ) -> None:  # fmt: skip
        if path == "/health" and method == "GET":
            self._reply(writer, 200, b"", keep_alive=keep_alive)
        elif path == "/v1/models" and method == "GET":
            self._reply(writer, 200, self._models(), keep_alive=keep_alive)
        elif path == "/version" and method == "GET":
            self._reply(writer, 200, {"version": twin_version()}, keep_alive=keep_alive)
        elif path == "/metrics" and method == "GET":
            self._reply(writer, 200, self.metrics_text().encode(), keep_alive=keep_alive, ctype="text/plain")
        elif path in ("/v1/chat/completions", "/v1/completions"):
            if method != "POST":
                self._error(writer, 405, f"use POST for {path}", keep_alive)
                return
            await self._completion(path == "/v1/chat/completions", body, reader, writer, keep_alive)
        else:
            self._error(writer, 404, f"no route {method} {path}", keep_alive)

    def _models(self) -> dict[str, Any]:
        card: dict[str, Any] = {
            "id": self.settings.served_model,
            "object": "model",
            "created": self.started,
            "owned_by": "sizing-twin",
        }
        if self.settings.max_model_len:
            card["max_model_len"] = self.settings.max_model_len
        if self.settings.serving:
            card["serving"] = self.settings.serving
        return {"object": "list", "data": [card]}

    # --- completions --------------------------------------------------------------------------------------
    def _parse(self, chat: bool, body: bytes) -> tuple[_Request, list[Any]]:
        """The request and its prompt's tokens (`sizing.base.tokens`' rule; token ids as given)."""
        raw = json.loads(body or b"{}")
        req: _Request
        if chat:
            req = _ChatRequest.model_validate(raw)
            return req, chat_token_pieces(req.messages)
        req = _CompletionRequest.model_validate(raw)
        p = req.prompt
        if isinstance(p, str):
            return req, token_pieces(p)
        if p and isinstance(p[0], int):
            return req, list(p)
        return req, [piece for x in p for piece in token_pieces(str(x))]

    async def _until_done(
        self, seq: Sequence, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Wait for the answer; if the client hangs up first (a load test lowering its level does), drop the
        request from the engine as vLLM does, rather than when its next token finds the socket closed."""
        assert seq.done is not None and self.engine is not None
        while not seq.done.done():
            try:
                await asyncio.wait_for(asyncio.shield(seq.done), DISCONNECT_POLL_S)
            except TimeoutError:
                if reader.at_eof() or writer.is_closing():  # the client closed (FIN) or reset the connection
                    self.engine.abort(seq)

    def output_length(self, req: _Request) -> int:
        """max_tokens when ignore_eos, else a seeded draw from the answer-length distribution capped by it."""
        cap = req.max_completion_tokens or req.max_tokens
        if req.ignore_eos and cap:
            return cap
        drawn = int(self._lengths.sample(self._rng, 1)[0])
        drawn = max(drawn, req.min_tokens, 1)
        return min(drawn, cap) if cap else drawn

    async def _completion(
        self,
        chat: bool,
        body: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        keep_alive: bool,
    ) -> None:
        """Answer one completion request: refuse it, stream it, or reply with the whole answer."""
        assert self.engine is not None
        admitted = self._admit(chat, body, writer, keep_alive)
        if admitted is None:
            return
        answer, n_out = admitted
        if answer.req.stream:
            await self._stream(answer, n_out, reader, writer, keep_alive)
        else:
            await self._whole(answer, n_out, reader, writer, keep_alive)

    def _admit(
        self, chat: bool, body: bytes, writer: asyncio.StreamWriter, keep_alive: bool
    ) -> tuple[_Answer, int] | None:
        """The request's answer and its length in tokens, or None once an error reply has been written (a body
        that is not a request, a model not served, a prompt that does not fit the context)."""
        try:
            req, tokens = self._parse(chat, body)
        except (ValidationError, ValueError) as exc:
            self._error(writer, 400, f"invalid request: {exc}", keep_alive)
            return None
        prompt = len(tokens)
        if req.model != self.settings.served_model and req.model not in self.settings.aliases:
            self._error(writer, 404, f"The model `{req.model}` does not exist.", keep_alive)
            return None
        n_out = self.output_length(req)
        limit = self.settings.max_model_len
        if limit:
            # as vLLM: the prompt plus the tokens asked for (max_tokens; without it, at least one) must fit the
            # context; an answer drawn without max_tokens stops where the context ends
            cap = req.max_completion_tokens or req.max_tokens
            asked = cap if cap is not None else 1
            if prompt + asked > limit:
                self._error(
                    writer, 400, f"This model's maximum context length is {limit} tokens. However, you requested "
                    f"{prompt + asked} tokens ({prompt} in the messages, {asked} in the completion): prompt + "
                    f"max_tokens exceeds max_model_len {limit}", keep_alive,
                )  # fmt: skip
                return None
            n_out = min(n_out, limit - prompt)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        # the prompt's full blocks by content, as the engine's prefix cache keys them
        engine = self.engine
        hashes = (
            block_hashes(tokens, engine.block_size) if engine is not None and engine.prefix_caching else ()
        )
        answer = _Answer(chat, req, prompt, rid, int(time.time()), self.settings.served_model, hashes)
        return answer, n_out

    async def _stream(
        self,
        answer: _Answer,
        n_out: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        keep_alive: bool,
    ) -> None:
        """Stream the answer as server-sent events, one chunk per token written from the engine's step loop."""
        assert self.engine is not None
        seq: Sequence | None = None
        chat = answer.chat
        head, tail = answer.chunk_head(), "]}"
        usage_wanted = answer.usage_wanted
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\nconnection: "
            + (b"keep-alive" if keep_alive else b"close")
            + b"\r\n\r\n"
        )
        if chat:  # like vLLM, the role arrives at once, before any content
            role = (
                '{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}'
            )
            writer.write(_sse(head + role + tail))

        # the per-token bytes around the word, built once per request (the hot path of a busy twin)
        token_pre, token_post = (
            ("data: " + head + answer.choice("\0", None) + tail + "\n\n").encode().split(b"\0")
        )
        first_word = VOCABULARY[0].encode()

        def sink(n: int, finished: bool) -> None:
            if writer.is_closing():
                if seq is not None and self.engine is not None:
                    self.engine.abort(seq)
                return
            data = b"".join((token_pre, _WORD_BYTES[(n - 1) % _N_WORDS] if n > 1 else first_word, token_post))
            out = b"%x\r\n%s\r\n" % (len(data), data)
            if finished:
                out += _sse(head + answer.choice(None if chat else "", answer.reason(n)) + tail)
                if usage_wanted:
                    out += _sse(head + '],"usage":' + json.dumps(answer.usage(n)) + "}")
                out += _DONE
            writer.write(out)

        try:
            seq = self.engine.submit(answer.prompt, n_out, sink, answer.hashes)
        except SizingError as exc:
            writer.write(_sse(json.dumps({"error": {"message": str(exc), "code": 400}})) + _DONE)
            return
        await self._until_done(seq, reader, writer)

    async def _whole(
        self,
        answer: _Answer,
        n_out: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        keep_alive: bool,
    ) -> None:
        """Wait for the whole answer and reply with it as one JSON body."""
        assert self.engine is not None
        seq: Sequence | None = None

        # the engine's token callback is (tokens, finished); this one only watches the connection
        def quiet(n: int, finished: bool) -> None:  # noqa: ARG001
            if writer.is_closing() and seq is not None and self.engine is not None:
                self.engine.abort(seq)

        try:
            seq = self.engine.submit(answer.prompt, n_out, quiet, answer.hashes)
        except SizingError as exc:
            self._error(writer, 400, str(exc), keep_alive)
            return
        await self._until_done(seq, reader, writer)
        self._reply(writer, 200, answer.body(seq.generated), keep_alive=keep_alive)

    # --- metrics ------------------------------------------------------------------------------------------
    def metrics_text(self) -> str:
        """Prometheus exposition text with vLLM's metric names, written by `prometheus_client` (escaping and
        format are its own)."""
        e = self.engine
        assert e is not None
        model = self.settings.served_model
        s = e.stats
        labels = ["model_name"]

        def gauge(name: str, help_: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, help_, labels=labels)
            family.add_metric([model], value)
            return family

        def counter(name: str, help_: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, help_, labels=labels)  # exposed as `{name}_total`
            family.add_metric([model], value)
            return family

        ttft = HistogramMetricFamily(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels=labels
        )
        buckets = [
            (str(edge), float(n)) for edge, n in zip(TTFT_BUCKETS_S, s.ttft_bucket_counts, strict=True)
        ]
        ttft.add_metric([model], [*buckets, ("+Inf", float(s.ttft_count))], s.ttft_sum)
        families = [
            gauge(
                "vllm:num_requests_running", "Number of requests in model execution batches.", len(e.running)
            ),
            gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", len(e.waiting)),
            gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", e.kv_usage),
            gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage (older name).", e.kv_usage),
            counter("vllm:num_preemptions", "Cumulative number of preemptions.", s.preemptions),
            counter("vllm:prompt_tokens", "Number of prefill tokens processed.", s.prompt_tokens),
            counter("vllm:generation_tokens", "Number of generation tokens.", s.generation_tokens),
            counter("vllm:request_success", "Count of successfully processed requests.", s.requests_finished),
            counter("twin:step_lag_seconds", "Seconds steps ended after their modelled time.", s.lag_sum_s),
            gauge("twin:step_lag_seconds_max", "Largest lag of one step behind the model.", s.lag_max_s),
            counter(
                "vllm:prefix_cache_queries",
                "Prompt tokens looked up in the prefix cache.",
                s.prefix_cache_queries,
            ),
            counter(
                "vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache.", s.prefix_cache_hits
            ),
            counter("twin:steps", "Engine steps run.", s.steps),
            ttft,
        ]
        return generate_latest(_Families(families)).decode()


class _Families:
    """A one-shot collector of already built metric families, for `generate_latest`."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families
