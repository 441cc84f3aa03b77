"""Normalising the free-text reference measurements, and the shipped calibration profile."""

from __future__ import annotations

import csv

import pytest

from sizing.perf.calibration import load_profiles, profile_for
from sizing.perf.calrows import CalRow, add_rows, read_rows
from sizing.perf.reference import DEFAULT_REFERENCE, parse_row, parse_rows

BASE = {
    "row_id": "T1",
    "source": "org/repo:bench.md@abc (table)",
    "engine": "vLLM (OpenAI server)",
    "engine_version_if_known": "",
    "model": "meta-llama/Meta-Llama-3-8B-Instruct",
    "dtype_quantization": "bf16",
    "hardware": "2x H100 80GB",
    "tensor_parallel": "2",
    "input_tokens": "1500 (+/-150)",
    "output_tokens": "250 (+/-20)",
    "concurrency_or_request_rate": "concurrency=16 (llmperf)",
    "ttft_ms_mean": "120",
    "ttft_ms_p50": "",
    "ttft_ms_p99": "",
    "tpot_ms_mean_or_itl": "20",
    "e2e_s_mean": "",
    "output_tokens_per_s_total": "800",
    "requests_per_s": "",
    "tpot_ms_p50": "",
    "tpot_ms_p99": "",
    "e2e_s_p50": "",
    "quality": "A (vendor)",
    "notes": "",
}


def test_a_typical_row_is_read():
    row = parse_row(BASE)
    assert isinstance(row, CalRow)
    assert (row.engine, row.accelerator, row.tp, row.model) == ("vllm", "h100", 2, "meta-llama/Llama-3.1-8B")
    assert (row.input_tokens, row.output_tokens, row.load, row.load_value) == (1500, 250, "closed", 16)
    assert row.study == "org/repo" and row.weight == 1.0


def test_replicas_split_load_and_throughput():
    row = parse_row(
        {
            **BASE,
            "tensor_parallel": "8 per replica x 3 replicas",
            "hardware": "inf2.48xlarge",
            "engine": "vLLM (optimum-neuron)",
            "concurrency_or_request_rate": "constant rate 3.0 req/sec",
            "output_tokens_per_s_total": "900",
        }
    )
    assert isinstance(row, CalRow)
    assert (row.engine, row.accelerator, row.tp, row.replicas) == ("neuron", "inferentia2", 8, 3)
    assert row.load == "open" and row.load_value == pytest.approx(1.0)
    assert row.output_tokens_per_s == pytest.approx(300)


def test_unusable_rows_say_why():
    assert "not modelled" in str(parse_row({**BASE, "engine": "QServe (omniserve)"}))
    assert parse_row(BASE, {"exclude": "exclude me"}) == "exclude me"
    assert "not published" in str(parse_row({**BASE, "input_tokens": "not published"}))


def test_every_reference_row_is_kept_or_excluded_with_a_reason():
    rows, excluded = parse_rows(DEFAULT_REFERENCE)
    with DEFAULT_REFERENCE.open() as fh:
        total = sum(1 for _ in csv.DictReader(fh))
    assert len(rows) + len(excluded) == total
    assert all(reason for _, reason in excluded)
    assert len(rows) > 200


def test_own_load_test_rows_join_in_the_same_format(tmp_path):
    path = tmp_path / "ours.csv"
    row = parse_row(BASE)
    assert isinstance(row, CalRow)
    ours = row.model_copy(update={"row_id": "L1", "origin": "loadtest", "study": "local-loadtest"})
    assert add_rows([ours], path) == 1
    assert add_rows([ours.model_dump()], path) == 1
    back = read_rows(path)
    assert [r.row_id for r in back] == ["L1", "L1"] and back[0].origin == "loadtest"


def test_the_shipped_profile_has_a_version_and_names_its_fallbacks():
    data = load_profiles()
    assert data["version"] != "none" and data["date"]
    exact = profile_for("h100", "vllm")
    assert exact.version == data["version"]
    # an accelerator without measurements borrows from a named relative or the global prior
    t4 = profile_for("t4", "vllm")
    assert "t4" in t4.basis and ("relative" in t4.basis or "global" in t4.basis)


def test_load_test_rows_may_name_the_load_by_its_knob():
    row = parse_row(BASE)
    assert isinstance(row, CalRow)
    data = {**row.model_dump(), "load": "concurrency", "origin": "loadtest"}
    assert CalRow.model_validate(data).load == "closed"
    assert CalRow.model_validate({**data, "load": "rate"}).load == "open"


@pytest.mark.parametrize(
    ("raw_engine", "hardware", "engine", "build"),
    [
        (
            "Neuron (transformers-neuronx)",
            "inf2.48xlarge (12x Inferentia2)",
            "neuron",
            "transformers-neuronx",
        ),
        ("Triton + DJL/transformers-neuronx", "trn1.32xlarge", "neuron", "transformers-neuronx"),
        ("TGI (neuron)", "inf2.48xlarge", "neuron", "tgi"),
        ("vLLM (optimum-neuron)", "inf2.48xlarge", "neuron", ""),
        ("TGI (HF LLM DLC on SageMaker)", "1x A10G 24GB", "tgi", ""),
    ],
)
def test_engine_builds_measured_apart_from_the_deployed_one_are_named(raw_engine, hardware, engine, build):
    # GIVEN a row measured with a build of an engine the product does not deploy (or with the one it does)
    row = parse_row(
        {**BASE, "engine": raw_engine, "hardware": hardware, "tensor_parallel": "8", "ttft_ms_mean": "300"}
    )
    # THEN the row keeps the engine and names the build, so it calibrates its own profile
    assert isinstance(row, CalRow)
    assert (row.engine, row.build) == (engine, build)


@pytest.mark.parametrize(
    ("raw_engine", "version", "engine", "build"),
    [
        # vLLM V0 (before 0.8, 2024 and earlier); a row that states no version counts as the current one
        ("vLLM (OpenAI server)", "vllm/vllm-openai:v0.4.3", "vllm", "v0"),
        ("vLLM (OpenAI server)", "0.6.2", "vllm", "v0"),
        (
            "vLLM (OpenAI server)",
            "vLLM main at CI build 9513 (~late 2024; exact version not on page)",
            "vllm",
            "v0",
        ),
        ("vLLM (OpenAI server)", "not stated (Aug 2024)", "vllm", "v0"),
        ("vLLM (OpenAI server)", "djl-inference:0.29.0-lmi11.0.0-cu124; FMBench 2.0.20", "vllm", "v0"),
        ("vLLM (OpenAI server)", "0.11.0", "vllm", ""),
        ("vLLM (OpenAI server)", "v0.23.0 (V1 engine)", "vllm", ""),
        ("vLLM (OpenAI server)", "vLLM V1 engine (image version not stated; Feb 2025)", "vllm", ""),
        ("vLLM (OpenAI server)", "", "vllm", ""),
        # TGI before 3.0 on a GPU (its scheduler prefills alone and defers new prompts)
        ("TGI", "ghcr.io/huggingface/text-generation-inference:2.0.4", "tgi", "v2"),
        ("TGI", "TGI ~1.x (2023, not stated)", "tgi", "v2"),
        ("TGI", "latest (mid-June 2024, ~2.0.x)", "tgi", "v2"),
        ("TGI", "3.0.1", "tgi", ""),
        ("TGI", "", "tgi", ""),
    ],
)
def test_rows_of_an_engines_earlier_generation_are_named(raw_engine, version, engine, build):
    # GIVEN a row and the engine version its source states
    row = parse_row({**BASE, "engine": raw_engine, "engine_version_if_known": version})
    # THEN rows of an earlier generation calibrate apart from the current build the product deploys
    assert isinstance(row, CalRow)
    assert (row.engine, row.build) == (engine, build)


def test_llmperf_rows_keep_the_clients_token_count_and_its_per_token_latency():
    # GIVEN an llmperf row: the server generated 150 of the model's tokens, the client counted 177.4 Llama-2 tokens
    row = parse_row(
        {
            **BASE,
            "input_tokens": "550 (Llama-2-tokenizer count)",
            "output_tokens": "150 max_tokens (client-counted mean 177.4 Llama-2 tokens)",
        }
    )
    # THEN the request is 150 model tokens, and the row says its TPOT is llmperf's e2e / client-counted tokens
    assert isinstance(row, CalRow)
    assert row.output_tokens == 150
    assert row.client_output_tokens == pytest.approx(177.4)
    assert row.tpot_stat == "e2e_per_token"
    # AND a row counted with the model's own tokenizer has no client count
    plain = parse_row(BASE)
    assert isinstance(plain, CalRow)
    assert (plain.client_output_tokens, plain.tpot_stat) == (None, "mean")


def test_rows_append_to_a_file_written_before_the_build_column(tmp_path):
    # GIVEN a load-test rows file written by an earlier version (no `build` column)
    ours = parse_row(BASE)
    assert isinstance(ours, CalRow)
    path = tmp_path / "own.csv"
    old_columns = [c for c in ours.model_dump() if c != "build"]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=old_columns, extrasaction="ignore")
        w.writeheader()
        w.writerow({k: ("" if v is None else v) for k, v in ours.model_dump().items()})
    # WHEN another row is appended
    add_rows([ours.model_copy(update={"row_id": "T2"})], path)
    # THEN both read back, in the file's own columns
    assert [r.row_id for r in read_rows(path)] == ["T1", "T2"]


@pytest.mark.parametrize(
    ("load", "start"),
    [
        ("concurrency=8 (genai-perf)", "together"),
        ("max-concurrency=32, request-rate inf (closed loop)", "together"),
        ("max-concurrency=2 (vllm bench serve, sonnet, 50 prompts)", "together"),
        ("concurrency=16 (llmperf)", "waves"),
        ("concurrency=25", "spread"),
    ],
)
def test_how_the_client_starts_its_users_is_named(load, start):
    # GIVEN a closed-loop row and the client that drove it
    row = parse_row({**BASE, "concurrency_or_request_rate": load})
    # THEN rows of clients that issue every user's first request at once are simulated that way, llmperf's in
    # waves that wait for their last request, and other clients' users spread
    assert isinstance(row, CalRow)
    assert (row.load, row.start) == ("closed", start)
