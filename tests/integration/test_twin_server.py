"""The twin over HTTP on loopback: OpenAI-compatible responses, streams, usage, models, health and metrics."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sizing.base.tokens import synth_text
from sizing.twin import TwinHandle, start_twin

pytestmark = pytest.mark.integration

MODEL = "twin-test-model"


@dataclass
class StandInStepModel:
    """Known timing: `step_s` per step plus 20 µs per prefill token."""

    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    kv_capacity_tokens: int = 200_000
    block_size: int = 16
    step_s: float = 0.005

    def iteration_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return self.step_s + prefill_tokens * 0.00002


@pytest.fixture
def twin() -> Iterator[TwinHandle]:
    handle = start_twin(None, step_model=StandInStepModel(), served_model=MODEL, seed=7)
    yield handle
    handle.stop()


def _post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    return urllib.request.urlopen(req, timeout=10)


def _events(resp: Any) -> list[tuple[float, str]]:
    out = []
    for line in resp:
        line = line.decode().strip()
        if line.startswith("data: "):
            out.append((time.perf_counter(), line[len("data: ") :]))
    return out


def test_a_streamed_chat_answer_has_max_tokens_tokens_then_usage_then_done(twin: TwinHandle) -> None:
    # given a chat request that forces 12 output tokens and asks for usage
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": synth_text(100)}],
        "max_tokens": 12,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    # when it is streamed
    t0 = time.perf_counter()
    events = _events(_post(twin.url + "/v1/chat/completions", body))
    # then the role comes first, 12 content tokens follow, then a finish chunk, the usage and [DONE]
    assert events[-1][1] == "[DONE]"
    chunks = [json.loads(e) for _, e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(content) == 12
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"] == {"prompt_tokens": 110, "completion_tokens": 12, "total_tokens": 122}
    # and the first content token arrives after one prefill step of the 110-token prompt, not at once
    first_content_at = next(t for t, e in events if '"content":"' in e and '"content":""' not in e)
    assert (first_content_at - t0) >= 0.005 + 110 * 0.00002 - 0.001


def test_a_plain_completion_returns_text_and_usage(twin: TwinHandle) -> None:
    resp = json.load(
        _post(twin.url + "/v1/completions", {"model": MODEL, "prompt": "a b c d", "max_tokens": 3})
    )
    assert resp["object"] == "text_completion"
    assert resp["usage"]["prompt_tokens"] == 4
    assert 1 <= resp["usage"]["completion_tokens"] <= 3
    assert resp["choices"][0]["text"]


def test_answer_lengths_without_ignore_eos_vary_but_never_exceed_max_tokens() -> None:
    # given a fast twin (0.2 ms steps) and requests that do not ask for ignore_eos
    with start_twin(None, step_model=StandInStepModel(step_s=0.0002), served_model=MODEL) as fast:
        body = {"model": MODEL, "prompt": "hi", "max_tokens": 400}
        lengths = {
            json.load(_post(fast.url + "/v1/completions", body))["usage"]["completion_tokens"]
            for _ in range(8)
        }
    # then the answers have different lengths, all within max_tokens
    assert len(lengths) > 1
    assert max(lengths) <= 400


def test_an_unknown_model_is_a_404_in_openai_error_form(twin: TwinHandle) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        _post(
            twin.url + "/v1/chat/completions",
            {"model": "other", "messages": [{"role": "user", "content": "x"}]},
        )
    assert err.value.code == 404
    assert "does not exist" in json.load(err.value)["error"]["message"]


def test_models_health_and_metrics(twin: TwinHandle) -> None:
    # given one finished request
    _post(twin.url + "/v1/completions", {"model": MODEL, "prompt": "hello", "max_tokens": 2}).read()
    # then the model is listed, health is 200 and the metrics count it with vLLM's names
    models = json.load(urllib.request.urlopen(twin.url + "/v1/models"))
    assert [m["id"] for m in models["data"]] == [MODEL]
    assert urllib.request.urlopen(twin.url + "/health").status == 200
    text = urllib.request.urlopen(twin.url + "/metrics").read().decode()
    assert f'vllm:num_requests_running{{model_name="{MODEL}"}} 0' in text
    assert f'vllm:time_to_first_token_seconds_count{{model_name="{MODEL}"}} 1' in text
    assert "vllm:num_requests_waiting" in text and "vllm:kv_cache_usage_perc" in text


def test_metrics_parse_as_prometheus_text_with_the_model_name_escaped() -> None:
    # given a twin whose served model name holds a quote and a backslash
    name = 'org/odd"name\\v1'
    with start_twin(None, step_model=StandInStepModel(), served_model=name) as twin:
        _post(twin.url + "/v1/completions", {"model": name, "prompt": "hello", "max_tokens": 2}).read()
        # when Prometheus' own parser reads /metrics
        families = {f.name: f for f in text_string_to_metric_families(_metrics(twin))}
    # then every sample carries the name intact, and the TTFT histogram counts the one request
    samples = [s for f in families.values() for s in f.samples]
    assert samples and all(s.labels["model_name"] == name for s in samples)
    ttft = families["vllm:time_to_first_token_seconds"]
    assert {s.name: s.value for s in ttft.samples if not s.name.endswith("_bucket")}[
        "vllm:time_to_first_token_seconds_count"
    ] == 1
    assert families["vllm:generation_tokens"].type == "counter"


def test_a_request_whose_client_hangs_up_while_queued_leaves_the_queue() -> None:
    # given a twin that runs one sequence at a time, busy with a long answer
    with start_twin(
        None, step_model=StandInStepModel(max_num_seqs=1, step_s=0.01), served_model=MODEL
    ) as twin:
        busy = {"model": MODEL, "prompt": "x", "max_tokens": 300, "ignore_eos": True, "stream": True}
        first = _post(twin.url + "/v1/completions", busy)
        # and a second request queued behind it, whose client then goes away
        body = json.dumps(busy).encode()
        with socket.create_connection(("127.0.0.1", twin.port)) as s:
            s.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                % (len(body), body)
            )
            time.sleep(0.2)
            assert "vllm:num_requests_waiting" + f'{{model_name="{MODEL}"}} 1' in _metrics(twin)
        # then the engine drops it within a second, while the first answer still streams
        time.sleep(1.0)
        assert "vllm:num_requests_waiting" + f'{{model_name="{MODEL}"}} 0' in _metrics(twin)
        assert f'vllm:num_requests_running{{model_name="{MODEL}"}} 1' in _metrics(twin)
        first.close()


def _metrics(twin: TwinHandle) -> str:
    return urllib.request.urlopen(twin.url + "/metrics").read().decode()


def _serving(**changes: Any) -> Any:
    from sizing.catalog import load_catalog
    from sizing.plan.serving import serving_for

    base = serving_for(load_catalog(), "meta-llama/Llama-3.1-8B", "g6e.xlarge", 1, "bf16", "vllm")
    return base.model_copy(update={"model": MODEL, **changes})


def test_the_context_limit_is_the_serving_configs_and_refused_as_vllm_refuses_it() -> None:
    # given a twin serving a config with a 1,000-token context
    with start_twin(None, step_model=StandInStepModel(), serving=_serving(max_model_len=1000)) as twin:
        # when a request's prompt plus max_tokens is longer than the context
        body = {"model": MODEL, "prompt": [7] * 990, "max_tokens": 20}
        with pytest.raises(urllib.error.HTTPError) as err:
            _post(twin.url + "/v1/completions", body)
        # then it is refused with 400, in vLLM's words, before any token is generated
        assert err.value.code == 400
        message = json.load(err.value)["error"]["message"]
        assert "maximum context length is 1000 tokens" in message and "1010 tokens" in message
        # and without max_tokens the answer stops where the context ends
        resp = json.load(_post(twin.url + "/v1/completions", {"model": MODEL, "prompt": [7] * 995}))
        assert resp["usage"]["completion_tokens"] <= 5
        # and the model card states the config
        card = json.load(urllib.request.urlopen(twin.url + "/v1/models"))["data"][0]
        assert card["max_model_len"] == 1000 and card["serving"]["max_model_len"] == 1000
        assert _metrics(twin).count("vllm:request_success_total") >= 1


def test_the_version_says_it_is_a_twin_where_vllm_gives_its_own(twin: TwinHandle) -> None:
    # when a client asks the twin's version, as it asks vLLM's GET /version
    version = json.load(urllib.request.urlopen(twin.url + "/version"))["version"]
    # then the answer names the twin, not an engine build
    assert version.startswith("twin-") and len(version) > len("twin-")
