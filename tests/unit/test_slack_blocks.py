"""Block Kit messages: every message the bot sends is valid Block Kit by slack_sdk's own models, and shows what a
person needs: the top three architectures with cost and SLO figures, "Measure these", the report link."""

from __future__ import annotations

import json
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from sizing.plan import estimate
from sizing.slack import blocks
from sizing.slack.client import Message
from sizing.slack.grammar import parse_command
from sizing.workload.parse import parse_spec
from sizing.workload.spec import WorkloadSpec

TEXT = "10k users llama-3.1-70b ttft<1s e2e<2.5s in=1500 out=200 chat"


def valid_block_kit(message: Message) -> list[dict[str, Any]]:
    """The message as JSON, re-parsed into slack_sdk's models and serialized again (which validates lengths,
    required fields and element types); must round-trip unchanged."""
    payload = message.blocks_json()
    assert 0 < len(payload) <= 50  # Slack's limit of blocks per message
    for block in payload:
        parsed = Block.parse(block)
        assert parsed is not None, block
        assert parsed.to_dict() == block
    assert message.text  # the notification / screen-reader fallback
    return payload


@pytest.fixture(scope="module")
def sized() -> tuple[dict[str, Any], WorkloadSpec, dict[str, Any]]:
    raw = parse_command(TEXT).raw_spec
    spec = parse_spec(raw)
    return estimate(spec, top=blocks.TOP_SHOWN).document(), spec, raw


def test_the_estimate_shows_the_top_three_with_cost_slo_figures_a_measure_button_and_the_report(
    sized: tuple[dict[str, Any], WorkloadSpec, dict[str, Any]],
) -> None:
    # given an estimate for the workload of the issue
    result, spec, raw = sized
    # when it becomes a message
    message = blocks.estimate_message(result, spec, raw, user="U1", report_url="https://reports.example/r/1")
    payload = valid_block_kit(message)
    text = json.dumps(payload, ensure_ascii=False)
    # then three architectures are shown, each with a monthly cost and the SLO percentiles' figures
    sections = [b for b in payload if b["type"] == "section" and b.get("fields")]
    assert len(sections) == 3
    for section, arch in zip(sections, result["architectures"], strict=True):
        cost, latency = (f["text"] for f in section["fields"])
        assert f"${arch['cost']['usd_per_month']:,.0f}" in cost
        assert "TTFT p95" in latency and "e2e p95" in latency
        assert arch["instance_type"] in section["text"]["text"]
    # and the button carries the spec, so "Measure these" measures exactly this workload
    actions = next(b for b in payload if b["type"] == "actions")
    button = next(e for e in actions["elements"] if e.get("action_id") == blocks.MEASURE_ACTION_ID)
    assert blocks.MeasureAction.model_validate_json(button["value"]).spec == raw
    assert button["confirm"]["title"]["text"]  # money is spent only after a confirmation
    assert any(e.get("url") == "https://reports.example/r/1" for e in actions["elements"])
    assert "TTFT p95 ≤ 1 s" in text and "e2e p95 ≤ 2.5 s" in text


def test_an_infeasible_workload_says_what_to_relax_and_offers_no_measurement() -> None:
    # given an SLO no hardware can meet
    raw = parse_command("10k users llama-3.1-70b ttft<30ms").raw_spec
    spec = parse_spec(raw)
    result = estimate(spec, top=blocks.TOP_SHOWN).document()
    # when it becomes a message
    payload = valid_block_kit(blocks.estimate_message(result, spec, raw))
    # then it says which SLO to relax, and there is nothing to measure
    text = json.dumps(payload, ensure_ascii=False)
    assert "relax TTFT p95" in text
    assert blocks.MEASURE_ACTION_ID not in text


def test_bedrock_architectures_are_named_by_their_model_and_priced_per_token() -> None:
    # given a small model where Bedrock ranks first, its US cross-Region profile allowed
    raw = parse_command("500 users llama-3.1-8b").raw_spec
    raw.setdefault("constraints", {})["data_residency"] = "geography"
    spec = parse_spec(raw)
    result = estimate(spec, top=blocks.TOP_SHOWN).document()
    bedrock = [a for a in result["architectures"] if a["deployment"] == "bedrock"]
    assert bedrock, "the catalog offers Llama-3.1-8B on Bedrock"
    # when shown
    section = blocks.architecture_section(bedrock[0], {})
    # then the title names Bedrock and its model id, and the section is valid Block Kit
    assert "Bedrock" in section.text.text and "per token" in section.text.text  # type: ignore[union-attr]
    assert Block.parse(section.to_dict()) is not None


def test_measured_figures_win_over_predicted_ones() -> None:
    # given an architecture of a finished run, measured
    arch = {
        "rank": 1,
        "id": "eks:g6e.12xlarge:tp4:fp8:vllm:on-demand",
        "model": "meta-llama/Llama-3.1-70B-Instruct",
        "deployment": "eks",
        "instance_type": "g6e.12xlarge",
        "instances": {"peak": 2},
        "tensor_parallel": 4,
        "quantization": "fp8",
        "engine": "vllm",
        "capacity_type": "on-demand",
        "predicted": {"ttft_ms": {"p95": 300.0}},
        "measured": {"ttft_ms": {"p95": 412.0}, "when": "2026-11-30T12:00:00Z"},
        "meets_slo": True,
        "cost": {"usd_per_month": 20000.0},
    }
    # when the run's ranking is shown
    payload = valid_block_kit(
        blocks.measured_message("run1", [arch], None, "https://api.example/runs/run1/report")
    )
    text = json.dumps(payload, ensure_ascii=False)
    # then the measured TTFT is the one shown, labelled as measured, with the report link and the run id
    assert "_measured_: TTFT p95 412 ms" in text
    assert "300 ms" not in text
    assert "https://api.example/runs/run1/report" in text and "run1" in text


def _run_arch(origin: str) -> dict[str, Any]:
    """An architecture of a finished run: its figures, where they came from, and the prediction at that level."""
    return {
        "rank": 1,
        "id": "eks:g6e.xlarge:tp1:fp8:vllm:on-demand",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "deployment": "eks",
        "instance_type": "g6e.xlarge",
        "instances": {"peak": 1},
        "tensor_parallel": 1,
        "quantization": "fp8",
        "engine": "vllm",
        "predicted": {"ttft_ms": {"p95": 300.0}},
        "measured": {
            "ttft_ms": {"p95": 412.0},
            "origin": origin,
            "at": {"concurrency": 8},
            "predicted_at_level": {"ttft_ms": {"p95": 398.0}, "at": {"concurrency": 8}},
        },
        "meets_slo": True,
        "cost": {"usd_per_month": 2000.0},
    }


def test_a_twins_figures_are_called_simulated_never_measured() -> None:
    # given a run whose candidate was load-tested on a local twin (our own model's pace)
    message = blocks.measured_message("run2", [_run_arch("twin")], None, None)
    payload = valid_block_kit(message)
    text = json.dumps(payload, ensure_ascii=False) + message.text
    # then its figures, the header and the notification text say simulated (twin), and nothing says measured
    assert "_simulated (twin)_: TTFT p95 412 ms" in text
    assert "Simulated ranking (twin)" in text and "simulated (twin)" in message.text
    assert "measured" not in text.lower()
    # and beside them is the prediction at the same load level
    assert "_predicted at the same load_: TTFT p95 398 ms" in text


def test_an_endpoints_figures_are_measured_beside_the_prediction_at_their_level() -> None:
    message = blocks.measured_message("run3", [_run_arch("endpoint")], None, None)
    text = json.dumps(valid_block_kit(message), ensure_ascii=False)
    assert "Measured ranking" in text and "_measured_: TTFT p95 412 ms" in text
    assert "_predicted at the same load_: TTFT p95 398 ms" in text and "twin" not in text


@pytest.mark.parametrize(
    "message",
    [
        blocks.help_message(),
        blocks.usage_message(["which model? name one, e.g. `llama-3.1-70b`"], text="10k users"),
        blocks.usage_message(["I did not understand `<script>`"], text="x" * 4000 + " <&>"),
        blocks.working_message("10,000 users · `llama`"),
        blocks.run_started_message("abc", 3, "U1"),
        blocks.run_ended_message("abc", "REFUSED", "estimated cost $12,000 exceeds the budget $5,000"),
        blocks.notice_message("Already measuring these: run abc."),
    ],
    ids=["help", "usage", "usage-long", "working", "started", "refused", "notice"],
)
def test_every_other_message_is_valid_block_kit(message: Message) -> None:
    valid_block_kit(message)


def test_a_run_started_message_says_how_to_cancel_the_run() -> None:
    # given a run started from Slack; when its start is announced; then the message names the run's cancel route
    text = json.dumps(blocks.run_started_message("abc123", 3, "U1").blocks_json())
    assert "POST /runs/abc123/cancel" in text


def test_help_shows_the_grammar_with_examples() -> None:
    text = json.dumps(blocks.help_message().blocks_json())
    assert "/sizing 10k users llama-3.1-70b ttft<1s e2e<2.5s in=1500 out=200 chat" in text
    for preset in ("chat", "rag", "summarization", "code-completion", "batch"):
        assert preset in text


def test_text_from_a_person_cannot_inject_mentions_or_links() -> None:
    # given a usage reply quoting a message with Slack control characters
    payload = blocks.usage_message(["bad"], text="<!channel> <https://evil.example|click>").blocks_json()
    # then they are escaped, not interpreted
    quoted = payload[0]["text"]["text"]
    assert "<!channel>" not in quoted and "&lt;!channel&gt;" in quoted
