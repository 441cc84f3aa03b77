"""What a server's /metrics say over a level: vLLM's histograms and counters read as per-window means and shares."""

from __future__ import annotations

import pytest

from sizing.loadtest.server import (
    EndpointUnreachable,
    ServerFacts,
    describe_server,
    kv_format,
    parse_metrics,
    resolve_served_model,
    serving_differences,
    window,
)


def _text(ttft_sum: float, ttft_n: int, gen: int, queries: int, hits: int) -> str:
    return f"""# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1",model_name="m"}} {ttft_n}
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="m"}} {ttft_n}
vllm:time_to_first_token_seconds_count{{engine="0",model_name="m"}} {ttft_n}
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="m"}} {ttft_sum}
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_count{{engine="0",model_name="m"}} {ttft_n}
vllm:e2e_request_latency_seconds_sum{{engine="0",model_name="m"}} {ttft_sum * 10}
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{{engine="0",model_name="m"}} {gen}
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {queries}
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {hits}
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="128",enable_prefix_caching="True",kv_cache_size_tokens="524288"}} 1.0
"""


def test_a_window_is_the_difference_of_two_scrapes_as_means_and_shares():
    # GIVEN two scrapes 10 s apart: 20 more requests with 1.0 s more TTFT, 2,000 more tokens, 400 of 1,000
    # prompt tokens looked up found in the prefix cache
    before = parse_metrics(_text(0.5, 10, 1000, 5000, 100), at=100.0)
    after = parse_metrics(_text(1.5, 30, 3000, 6000, 500), at=110.0)
    # WHEN the window is read
    w = window(before, after)
    # THEN it holds the window's own figures, not the server's lifetime ones
    assert w.requests == 20
    assert w.ttft_ms == pytest.approx(50.0)
    assert w.e2e_s == pytest.approx(0.5)
    assert w.generation_tokens == 2000 and w.output_tokens_per_s == pytest.approx(200.0)
    assert w.prefix_cache_hit_share == pytest.approx(0.4)
    # AND the info gauge's labels are kept for the server's facts
    assert after.info["vllm:cache_config_info"]["kv_cache_size_tokens"] == "524288"


def _steps_text(steps: int, tokens: int, prefill_sum: float, prefill_n: int) -> str:
    return f"""# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_bucket{{engine="0",le="+Inf",model_name="m"}} {steps}
vllm:iteration_tokens_total_count{{engine="0",model_name="m"}} {steps}
vllm:iteration_tokens_total_sum{{engine="0",model_name="m"}} {tokens}
# TYPE vllm:request_prefill_time_seconds histogram
vllm:request_prefill_time_seconds_count{{engine="0",model_name="m"}} {prefill_n}
vllm:request_prefill_time_seconds_sum{{engine="0",model_name="m"}} {prefill_sum}
"""


def test_a_window_counts_the_engines_steps_and_the_time_from_scheduling_to_the_first_token():
    # GIVEN two scrapes: 250 more engine steps carrying 20,000 more tokens, and 10 more requests whose time from
    # being scheduled to their first token adds up to 1.2 s more
    before = parse_metrics(_steps_text(1000, 50000, 3.0, 40), at=0.0)
    after = parse_metrics(_steps_text(1250, 70000, 4.2, 50), at=10.0)
    # WHEN the window is read
    w = window(before, after)
    # THEN it states the steps the engine ran, their tokens, and the mean prefill time (what a step planned ahead
    # adds to a new request shows there)
    assert w.steps == 250 and w.tokens_per_step == pytest.approx(80.0)
    assert w.prefill_ms == pytest.approx(120.0)


def test_a_window_states_the_api_servers_cpu_per_second_and_per_request():
    # GIVEN two scrapes 10 s apart of a server whose API process spent 3.0 more CPU seconds while it finished 200
    # more requests (prometheus_client's process collector, which vLLM's /metrics carries)
    def text(cpu: float, n: int) -> str:
        return (
            "# TYPE process_cpu_seconds_total counter\n"
            f"process_cpu_seconds_total {cpu}\n"
            "# TYPE vllm:e2e_request_latency_seconds histogram\n"
            f'vllm:e2e_request_latency_seconds_count{{engine="0",model_name="m"}} {n}\n'
            f'vllm:e2e_request_latency_seconds_sum{{engine="0",model_name="m"}} {n * 0.5}\n'
        )

    # WHEN the window is read
    w = window(parse_metrics(text(12.0, 100), at=0.0), parse_metrics(text(15.0, 300), at=10.0))
    # THEN it states the share of a core the API process took and its CPU time per request
    assert w.frontend_cpu_share == pytest.approx(0.3)
    assert w.frontend_cpu_ms_per_request == pytest.approx(15.0)


def test_a_server_that_restarted_between_scrapes_gives_no_figure_rather_than_a_negative_one():
    before = parse_metrics(_text(5.0, 100, 9000, 5000, 100), at=0.0)
    after = parse_metrics(_text(0.1, 2, 50, 10, 0), at=5.0)
    w = window(before, after)
    assert w.requests is None and w.ttft_ms is None and w.generation_tokens is None
    assert w.prefix_cache_hit_share is None


def test_the_served_model_is_named_or_taken_from_a_server_with_one_and_a_mismatch_names_both():
    one = ServerFacts(endpoint="http://127.0.0.1:8000", served_models=["tiny-llama"])
    assert resolve_served_model(one, None) == "tiny-llama"
    assert resolve_served_model(one, "tiny-llama") == "tiny-llama"
    with pytest.raises(EndpointUnreachable, match=r"serves tiny-llama, not llama-3\.1-8b"):
        resolve_served_model(one, "llama-3.1-8b")
    two = ServerFacts(endpoint="http://127.0.0.1:8000", served_models=["a", "b"])
    with pytest.raises(EndpointUnreachable, match="serves a, b: name the one"):
        resolve_served_model(two, None)


def test_the_servers_facts_read_as_one_line():
    facts = ServerFacts(
        endpoint="http://127.0.0.1:8000", engine="vllm", version="0.32.0", served_models=["tiny-llama"],
        max_model_len=4096, kv_cache_tokens=524288, block_size=128, prefix_caching=True,
    )  # fmt: skip
    assert describe_server(facts) == (
        "server: vllm 0.32.0, tiny-llama, max_model_len 4096, KV 524,288 tokens (block 128), prefix caching on"
    )


def test_what_the_server_runs_is_compared_with_what_the_estimate_assumed():
    # GIVEN the estimate's serving configuration and a vLLM server that runs another context, version and cache
    serving = {"model": "m", "image": "vllm/vllm-openai:v0.11.0", "max_model_len": 512, "max_num_seqs": 128,
               "enable_prefix_caching": False}  # fmt: skip
    facts = ServerFacts(
        endpoint="http://127.0.0.1:8765", engine="vllm", version="0.32.0", max_model_len=4096, prefix_caching=True,
    )  # fmt: skip
    # WHEN they are compared
    said = serving_differences(serving, facts)
    # THEN each difference is named, in words; what the server does not expose is not called a difference
    assert said == [
        "max_model_len: the server runs 4096, the estimate assumed 512",
        "enable_prefix_caching: the server runs True, the estimate assumed False",
        "engine version: the server runs 0.32.0, the estimate assumed 0.11.0",
    ]
    assert serving_differences(serving, None) == []


#: tiny-llama's K and V a token at one byte an element: 2 x 8 layers x 4 KV heads x 64
TINY_KV_AT_ONE_BYTE = 2 * 8 * 4 * 64


@pytest.mark.parametrize(("tokens", "served"), [(262_144, "fp32"), (524_288, "bf16"), (1_048_576, "fp8")])
def test_the_kv_caches_bytes_over_its_tokens_say_the_type_the_server_keeps_it_in(tokens: int, served: str):
    # GIVEN a server whose 4 GiB KV cache holds `tokens` of tiny-llama
    facts = ServerFacts(endpoint="http://127.0.0.1:8765", kv_cache_tokens=tokens, kv_cache_bytes=4 * 2**30)
    # THEN the width of an element says the type
    assert kv_format(facts, TINY_KV_AT_ONE_BYTE) == served


def test_a_server_that_does_not_state_its_cache_bytes_or_an_odd_width_says_no_type():
    assert kv_format(ServerFacts(endpoint="x", kv_cache_tokens=524_288), TINY_KV_AT_ONE_BYTE) is None
    odd = ServerFacts(endpoint="x", kv_cache_tokens=400_000, kv_cache_bytes=4 * 2**30)
    assert kv_format(odd, TINY_KV_AT_ONE_BYTE) is None


def test_a_server_running_the_model_in_fp32_differs_from_a_bf16_estimate_by_name():
    # GIVEN a bf16 estimate and a server that keeps its KV cache in fp32 (a CPU without bf16 arithmetic)
    serving = {"model": "m", "quantization": "bf16", "kv_cache_dtype": "auto"}
    facts = ServerFacts(endpoint="x", engine="vllm", kv_cache_tokens=262_144, kv_cache_bytes=4 * 2**30)
    # WHEN compared with the model's KV bytes a token
    said = serving_differences(serving, facts, (TINY_KV_AT_ONE_BYTE, 2.0))
    # THEN the type is named; an fp32 estimate of the same server agrees
    assert said == ["KV cache type: the server runs fp32, the estimate assumed bf16"]
    assert serving_differences({**serving, "quantization": "fp32"}, facts, (TINY_KV_AT_ONE_BYTE, 4.0)) == []
