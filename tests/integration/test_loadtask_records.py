"""The load generator's task records what it measured: every stored step, the sweep's config and the summary
carry the serving configuration and the engine version the server reported, so a figure belongs to a
configuration."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer

from sizing.orchestrate.loadtask import LoadTask, execute, server_facts
from sizing.twin import start_twin

pytestmark = pytest.mark.integration

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@dataclass
class StandInStepModel:
    """Known timing: 10 ms per step plus 20 µs per prefill token."""

    max_num_seqs: int = 8
    max_num_batched_tokens: int = 2048
    kv_capacity_tokens: int = 200_000
    block_size: int = 16

    def iteration_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return 0.01 + prefill_tokens * 0.00002


@dataclass
class Recorder:
    """Stands in for Step Functions and the table: keeps what the task sent and stored."""

    sent: list[tuple[str, Any]] = field(default_factory=list)
    stored: list[dict[str, Any]] = field(default_factory=list)

    def send_task_success(self, taskToken: str, output: str) -> None:  # boto3's argument names
        self.sent.append(("success", json.loads(output)))

    def send_task_failure(self, taskToken: str, error: str, cause: str) -> None:
        self.sent.append(("failure", cause))

    def send_task_heartbeat(self, taskToken: str) -> None:
        pass

    def put_measurement(self, run_id: str, candidate_id: str, record: dict[str, Any]) -> None:
        self.stored.append(record)


def _serving() -> dict[str, Any]:
    from sizing.catalog import load_catalog
    from sizing.plan.serving import serving_for

    s = serving_for(load_catalog(), MODEL, "g6e.xlarge", 1, "bf16", "vllm").model_copy(
        update={"max_num_seqs": 8}
    )
    return s.model_dump(mode="json")


def test_every_stored_step_names_the_serving_config_and_the_servers_version(tmp_path: Path) -> None:
    # given a twin and a load task for it that carries the architecture's serving config
    serving = _serving()
    with start_twin(None, step_model=StandInStepModel(), served_model=MODEL) as twin:
        task = LoadTask(
            task_token="token", run_id="run1", candidate_id="c1", endpoint=twin.url, model=MODEL, levels=[2],
            input_tokens={"fixed": 64}, output_tokens={"fixed": 8}, step_s=1.0, warmup_s=0.2, workers=0,
            table_name="t", heartbeat_s=60, out_dir=str(tmp_path), serving=serving,
        )  # fmt: skip
        recorder = Recorder()
        # when the task runs
        summary = execute(task, recorder, recorder)
    # then it succeeded and every stored step says which configuration and which server version it measured
    assert recorder.sent and recorder.sent[0][0] == "success", recorder.sent
    assert recorder.stored and all(r["requests"] > 0 for r in recorder.stored)
    assert all(r["serving"] == serving for r in recorder.stored)
    assert all(r["engine_version"].startswith("twin-") for r in recorder.stored)
    assert summary["engine_version"].startswith("twin-")
    # and so does the sweep's own config, beside its results
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["serving"] == serving and config["engine_version"] == summary["engine_version"]


VLLM_METRICS = """# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0",kv_cache_size_tokens="524288"} 1.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 0.0
"""


def test_the_server_facts_are_what_vllm_reports_and_none_where_it_says_nothing(
    httpserver: HTTPServer,
) -> None:
    # given a server answering GET /version, /v1/models and /metrics as vLLM does
    httpserver.expect_request("/version").respond_with_json({"version": "0.32.0"})
    httpserver.expect_request("/v1/models").respond_with_json(
        {"data": [{"id": "tiny-llama", "max_model_len": 4096}]}
    )
    httpserver.expect_request("/metrics").respond_with_data(VLLM_METRICS)
    # then what it runs is read from it: version, model, context, KV capacity, block size, prefix caching
    facts = server_facts(httpserver.url_for("/").rstrip("/"))
    assert facts is not None
    assert (facts.engine, facts.version, facts.served_models, facts.max_model_len) == (
        "vllm", "0.32.0", ["tiny-llama"], 4096,
    )  # fmt: skip
    assert (facts.kv_cache_tokens, facts.block_size, facts.prefix_caching) == (524288, 128, True)
    # and the scheduler limits it does not expose are said to be unknown, not assumed
    assert facts.max_num_seqs is None and any("scheduler limits" in n for n in facts.notes)
    # and a server without /version has no version; one that is not OpenAI-compatible, or a managed endpoint,
    # gives no facts at all
    httpserver.clear()
    httpserver.expect_request("/v1/models").respond_with_json({"data": [{"id": "x"}]})
    bare = server_facts(httpserver.url_for("/").rstrip("/"))
    assert bare is not None and bare.version is None and bare.kv_cache_tokens is None
    httpserver.clear()
    httpserver.expect_request("/v1/models").respond_with_data("not here", status=404)
    assert server_facts(httpserver.url_for("/").rstrip("/")) is None
    assert server_facts("bedrock://us-east-1") is None
