"""The /sizing grammar: the phrasings people type become valid workload specs; anything else gets a usage reply
that says what was not understood, never an error."""

from __future__ import annotations

from typing import Any

import pytest

from sizing.catalog import load_catalog
from sizing.slack.grammar import parse_command
from sizing.workload.parse import parse_spec

# (message as Slack delivers it, what the spec must say) — paths are dotted into the raw spec.
GOOD: list[tuple[str, dict[str, Any]]] = [
    (
        "10k users llama-3.1-70b ttft<1s e2e<2.5s in=1500 out=200 chat",
        {
            "users.total": 10000,
            "model": "llama-3.1-70b",
            "preset": "chat",
            "slo.ttft_ms.p95": 1000,
            "slo.e2e_s.p95": 2.5,
            "tokens.input.fixed": 1500,
            "tokens.output.fixed": 200,
        },
    ),
    # Slack escapes < > & in slash-command text
    ("10k users llama-3.1-70b ttft&lt;1s e2e&lt;2.5s", {"slo.ttft_ms.p95": 1000, "slo.e2e_s.p95": 2.5}),
    ("10,000 users llama-3.1-70b", {"users.total": 10000, "preset": "chat"}),
    ("llama-3.1-70b for 10000 people", {"users.total": 10000}),
    ("1.5m users llama-3.1-8b", {"users.total": 1500000}),
    (
        "users=2500 model=meta-llama/Llama-3.1-8B-Instruct",
        {"users.total": 2500, "model": "meta-llama/Llama-3.1-8B-Instruct"},
    ),
    ("12 rps llama-3.1-8b rag", {"rate.peak_rps": 12, "preset": "rag"}),
    ("720 rpm llama-3.1-8b", {"rate.peak_rps": 12}),
    ("rps=3.5 llama-3.1-8b batch", {"rate.peak_rps": 3.5, "preset": "batch"}),
    ("500 users llama-3.1-8b code ttft < 300 ms", {"preset": "code-completion", "slo.ttft_ms.p95": 300}),
    ("500 users llama-3.1-8b ttft ≤ 800ms tpot<50ms", {"slo.ttft_ms.p95": 800, "slo.tpot_ms.p95": 50}),
    ("500 users llama-3.1-8b ttft under 1 s", {"slo.ttft_ms.p95": 1000}),
    ("500 users llama-3.1-8b ttft<1s@p99", {"slo.ttft_ms.p99": 1000}),
    ("500 users llama-3.1-8b ttft.p50<400", {"slo.ttft_ms.p50": 400}),
    ("500 users llama-3.1-8b p99 ttft<1s", {"slo.ttft_ms.p99": 1000}),
    ("500 users llama-3.1-8b ttft p90 < 700ms", {"slo.ttft_ms.p90": 700}),
    ("500 users llama-3.1-8b ttft<2", {"slo.ttft_ms.p95": 2000}),  # bare small TTFT: seconds
    ("500 users llama-3.1-8b e2e<2500", {"slo.e2e_s.p95": 2.5}),  # bare large e2e: milliseconds
    ("40 rps llama-3.1-8b batch e2e<5min@p99", {"slo.e2e_s.p99": 300}),
    ("40 rps llama-3.1-8b batch e2e<24h", {"slo.e2e_s.p95": 86400}),
    ("40 rps llama-3.1-8b batch e2e < 2 hours@p99", {"slo.e2e_s.p99": 7200}),
    ("2000 users llama-3.1-70b in 4000/8000 out 300", {"tokens.input.mean": 4000, "tokens.input.p95": 8000}),
    ("2000 users llama-3.1-70b in=1.2k", {"tokens.input.fixed": 1200, "tokens.output.mean": 250}),
    (
        "2000 users llama-3.1-70b eks spot fp8",
        {"constraints.deployments": ["eks"], "constraints.capacity": ["spot"]},
    ),
    ("2000 users llama-3.1-70b bedrock sagemaker", {"constraints.deployments": ["bedrock", "sagemaker"]}),
    (
        "2000 users llama-3.1-70b region=eu-west-1 budget=$20k",
        {"constraints.region": "eu-west-1", "constraints.max_monthly_usd": 20000},
    ),
    ("summarize 300 users llama-3.1-8b", {"preset": "summarization"}),
    ("  10k   users,  llama-3.1-8b ,  chatbot ", {"users.total": 10000, "preset": "chat"}),
    ("10kusers llama-3.1-8b", {"users.total": 10000}),
    ("Llama-3.1-8B 50 users", {"model": "Llama-3.1-8B", "users.total": 50}),
]


def _at(raw: dict[str, Any], path: str) -> Any:
    node: Any = raw
    for part in path.split("."):
        node = node[part]
    return node


@pytest.mark.parametrize(("text", "expected"), GOOD, ids=[t for t, _ in GOOD])
def test_phrasings_become_valid_workload_specs(text: str, expected: dict[str, Any]) -> None:
    # given a message as a person types it
    # when it is parsed
    parsed = parse_command(text)
    # then it is a spec saying what the person meant, and the one spec validator accepts it
    assert parsed.kind == "spec", parsed.problems
    for path, value in expected.items():
        expected_value = pytest.approx(value) if isinstance(value, float | int) else value
        assert _at(parsed.raw_spec, path) == expected_value, path
    spec = parse_spec(parsed.raw_spec)
    load_catalog().model(spec.model)


BAD: list[tuple[str, str]] = [
    ("10k users", "which model"),
    ("llama-3.1-70b", "how much traffic"),
    ("10k users llama-3.1-8b 12 rps", "not both"),
    ("10k users llama-3.1-8b qwen2.5-7b", "two models"),
    ("10k users llama-3.1-8b please make it fast", "`fast`"),
    ("foo bar baz", "did not understand"),
    ("10k users llama-3.1-8b ttft<1s@p42", "percentiles are"),
    ("10k users llama-3.1-8b chat rag", "two use cases"),
    ("x" * 5000, "longer than"),
]


@pytest.mark.parametrize(("text", "hint"), BAD, ids=[t[:40] for t, _ in BAD])
def test_bad_messages_get_a_usage_reply_naming_the_problem(text: str, hint: str) -> None:
    # given a message the grammar cannot turn into a workload
    # when it is parsed
    parsed = parse_command(text)
    # then nothing raises; the reply lists what to fix
    assert parsed.kind == "usage"
    assert any(hint in p for p in parsed.problems), parsed.problems


@pytest.mark.parametrize("text", ["", "help", "HELP", "?", "  usage "])
def test_help_and_an_empty_message_ask_for_help(text: str) -> None:
    assert parse_command(text).kind == "help"


def test_the_message_fills_the_rest_from_the_preset() -> None:
    # given a message that names only traffic, model and one SLO
    parsed = parse_command("300 users llama-3.1-8b rag ttft<2s")
    # when validated
    spec = parse_spec(parsed.raw_spec)
    # then the rag preset supplied token lengths and user behaviour, and the SLO is the one asked for
    assert spec.tokens.input is not None and spec.tokens.input.mean == 4000
    assert spec.users is not None and spec.users.requests_per_active_hour == 20
    assert [(m, p, v) for m, p, v in spec.slo.targets()] == [("ttft_ms", "p95", 2000)]
