"""The sizing run end to end on the embedded default: moto's Step Functions engine executes the real ASL,
handlers run in-process, twins and Locust run as child processes on loopback (short sweeps)."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sizing.orchestrate.launchers import LocalLauncher
from sizing_local.stack import run_local

pytestmark = pytest.mark.integration

#: A small, fast workload: an 8B model on one L40S, so the estimate and the twin are quick.
SPEC: dict[str, Any] = {
    "name": "orchestration-test",
    "model": "llama-3.1-8b",
    "rate": {"peak_rps": 2},
    "traffic": {"profile": "flat"},
    "tokens": {"input": {"fixed": 200}, "output": {"fixed": 20}},
    "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 10}},
    "constraints": {"deployments": ["eks"], "instance_types": ["g6e.xlarge"], "quantizations": ["fp8"]},
}
FAST = {"step_s": 1.5, "warmup_s": 0.5}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def twin_urls(out_dir: Path) -> list[str]:
    """The endpoints the run's load tests were given (each load task's file records its own)."""
    return [json.loads(path.read_text())["endpoint"] for path in Path(out_dir).rglob("task.json")]


def test_sizing_run_measures_ranks_labels_the_twin_simulated_and_leaves_nothing_running(
    tmp_path, capsys, leftover_children
):
    # given the workload as a file and one candidate to measure, run by `sizing run` as `make run` does
    from sizing.cli import main

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    out_dir = tmp_path / "out"
    # when it runs on the embedded default, against a local twin
    level = ["--step-seconds", str(FAST["step_s"]), "--warmup-seconds", str(FAST["warmup_s"])]
    rc = main(["run", str(spec), "--top", "1", "--out", str(out_dir), *level])
    out = capsys.readouterr().out
    result = json.loads((out_dir / "result.json").read_text())
    # then it succeeds with measured figures beside predicted ones
    assert rc == 0, out
    assert result["execution_status"] == "SUCCEEDED" and result["run"]["status"] == "SUCCEEDED"
    measured = [a for a in result["architectures"] if a.get("measured")]
    assert measured, "the measured candidate carries its measurement"
    m = measured[0]["measured"]
    assert m["ttft_ms"]["p95"] > 0 and m["e2e_s"]["p95"] > 0 and m["levels"]
    # (the first level measured the server's tokens and answers; on a busy box a higher level's answers, even its
    # first tokens, can outlast its 1.5 s window: a fresh clone's run read 0 requests at 194 streams, 1,480 tokens/s,
    # and a make test on 3 workers 0 tokens there)
    records = sorted((x["record"] for x in result["measurements"]), key=lambda r: r["step"])
    assert records and records[0]["output_tokens_per_s"] > 0 and records[0]["requests"] > 0
    assert all(r["output_tokens_per_s"] >= 0 for r in records)
    assert result["ranking"] and result["ranking"]["status"] == "SUCCEEDED"
    # and they say a local twin produced them, with the configuration it served and the version it reported
    assert m["origin"] == "twin"
    assert m["serving"] == measured[0]["serving"] and m["serving"]["model"] == "llama-3.1-8b"
    assert m["engine_version"].startswith("twin-")
    # and the prediction beside them is re-simulated at the load level they were taken at
    assert m["predicted_at_level"]["at"] == m["at"] and m["predicted_at_level"]["ttft_ms"]["p95"] > 0
    # and its calibration rows say they were measured on a twin, which calibration refuses
    rows = result["ranking"]["calibration_rows"]
    assert rows and all(r["origin"] == "twin" and result["run"]["run_id"] in r["source"] for r in rows)
    # and the table calls the twin's figures simulated (twin), and nothing on it is called measured
    assert "simulated (twin)" in out and "sim (twin)" in out
    assert "measured" not in out.lower()
    # and nothing it started is still running (a twin served the run, and no twin or load generator is alive;
    # checked by process: a twin's freed port may already serve another test's twin)
    assert twin_urls(out_dir)
    assert leftover_children() == []
    assert not LocalLauncher._children


def test_budget_refusal_states_the_arithmetic(tmp_path):
    result = run_local(SPEC, top_k=1, out_dir=tmp_path, budget_usd=0.01, **FAST)
    assert result.run["status"] == "REFUSED"
    assert "over the budget of $0.01" in result.run["error"]
    assert "g6e.xlarge" in result.run["error"] and "/h x" in result.run["error"]
    assert not result.measurements


def test_an_endpoint_that_never_gets_ready_fails_the_run_with_its_cause(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    result = run_local(
        SPEC, top_k=1, out_dir=tmp_path, endpoint_url=dead, extra_env={"READY_MAX_ATTEMPTS": "2"}, **FAST
    )
    assert result.run["status"] == "FAILED"
    assert "EndpointNeverReady" in result.run["error"] and "not ready after 2 checks" in result.run["error"]


class _Broken(http.server.BaseHTTPRequestHandler):
    """Healthy, but every completion fails: the load test measures nothing."""

    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def do_POST(self) -> None:
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error": "boom"}')

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def broken_endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_failed_load_test_still_tears_down_and_fails_with_its_cause(tmp_path, broken_endpoint):
    result = run_local(SPEC, top_k=1, out_dir=tmp_path, endpoint_url=broken_endpoint, **FAST)
    assert result.execution["status"] == "FAILED"
    assert result.run["status"] == "FAILED"
    # the run says why, as the load task sent it ("no request ... succeeded"), not only that it failed
    assert "LoadTestFailed" in result.run["error"]
    assert f"no request to {broken_endpoint} succeeded during the sweep" in result.run["error"]
    assert not LocalLauncher._children
    # and the sweep stopped at its first level, where not one request was answered, instead of loading on
    (summary,) = [json.loads(p.read_text()) for p in Path(tmp_path).rglob("summary.json")]
    assert summary["stopped_by"] == "no_answer" and len(summary["steps"]) == 1


def test_cancelling_a_run_stops_it_and_tears_down(tmp_path, leftover_children):
    cancelled: dict[str, Any] = {}

    def cancel_when_measuring(run: Any, service: Any) -> None:
        def later() -> None:
            # no deadline of its own: on a loaded machine the load test may start late (a 60 s deadline once
            # expired first); the run's own timeout bounds the wait
            while not ended.is_set():
                if list(Path(tmp_path).rglob("task.json")):  # the load test has started
                    cancelled["run"] = service.cancel_run(run.run_id)
                    return
                time.sleep(0.2)

        threading.Thread(target=later, daemon=True).start()

    ended = threading.Event()
    try:
        result = run_local(
            SPEC, top_k=1, out_dir=tmp_path, on_started=cancel_when_measuring, step_s=20, warmup_s=1
        )
    finally:
        ended.set()
    assert cancelled["run"].status == "CANCELLING"
    assert result.execution["status"] == "ABORTED"
    assert result.run["status"] == "CANCELLED"
    assert twin_urls(result.out_dir)
    assert leftover_children() == []
    assert not LocalLauncher._children


def test_a_run_of_a_traced_workload_replays_the_trace_in_every_load_test_and_records_its_digest(
    tmp_path, leftover_children
):
    from sizing.traces import read_trace, samples

    # given a workload whose traffic is a recorded trace: bursts, two shared 512-token prefixes, short answers, and
    # a TTFT bound tight enough that a replica's capacity (and so the levels' rates) stays low on a shared machine
    trace = samples.write(
        tmp_path / "tuesday.jsonl",
        "mooncake",
        samples.synthetic(400, seed=5, rate=2.0, gaps="bursty", groups=2, prefix_tokens=512, input_mean=700,
                          output_mean=20),
    )  # fmt: skip
    digest = read_trace(str(trace)).digest
    spec = {k: v for k, v in SPEC.items() if k not in ("rate", "tokens")} | {
        "trace": {"path": str(trace)},
        "slo": {"ttft_ms": {"p95": 300}, "e2e_s": {"p95": 10}},
    }
    # when it is run on the embedded default against a local twin (the capacity search is tested with the load
    # task's config, tests/unit/test_traces_run.py, and against a twin by `sizing loadtest --capacity-from`)
    result = run_local(spec, top_k=1, out_dir=tmp_path / "out", **FAST)
    # then the run succeeds
    assert result.run["status"] == "SUCCEEDED", result.run.get("error")
    records = [m["record"] for m in result.measurements]
    levels = records
    # and every level sent the trace in open loop at a rate of its own, and records it
    assert levels and all(set(r["target"]) == {"rate_rps"} for r in records)
    assert all(r["trace_digest"] == digest for r in records)
    assert len({r["target"]["rate_rps"] for r in levels}) == len(levels) > 1
    # and the prompts had the trace's lengths (a 700-token mean), not the load test's default 512
    # (over the levels that answered: on a busy box a twin's fastest level can end with none answered)
    answered = [r for r in levels if r["input_tokens"]]
    assert answered
    sent = sum(r["input_tokens"] * r["requests"] for r in answered) / sum(r["requests"] for r in answered)
    assert 450 < sent < 1000
    # and the measured block says what was sent
    measured = next(a["measured"] for a in result.architectures if a.get("measured"))
    assert measured["trace_digest"] == digest and "recorded trace replayed" in measured["how"]
    assert leftover_children() == []
