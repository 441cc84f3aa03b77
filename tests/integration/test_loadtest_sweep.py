"""The harness in its own process against a twin on loopback: concurrency steps, Poisson rates, SLA search,
distributed workers and the `sizing loadtest` command. Every run is bounded in time (max_total_s)."""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sizing.base.tokens import CHAT_OVERHEAD_ONE_MESSAGE
from sizing.loadtest import run_sweep
from sizing.twin import TwinHandle, start_twin

pytestmark = pytest.mark.integration

MODEL = "twin-loadtest-model"
#: Bound on any one sweep in these tests.
MAX_TOTAL_S = 30


@dataclass
class StandInStepModel:
    """Known timing: 15 ms per step plus 50 µs per prefill token; at most `max_num_seqs` run at once."""

    max_num_seqs: int = 64
    max_num_batched_tokens: int = 4096
    kv_capacity_tokens: int = 1_000_000
    block_size: int = 16

    def iteration_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return 0.015 + prefill_tokens * 0.00005


@pytest.fixture
def twin() -> Iterator[TwinHandle]:
    handle = start_twin(None, step_model=StandInStepModel(), served_model=MODEL)
    yield handle
    handle.stop()


def test_a_concurrency_sweep_writes_one_record_per_step_with_the_metric_distributions(
    twin: TwinHandle, tmp_path: Path
) -> None:
    # given a twin whose first token takes one prefill step and every later token one 15 ms step
    prompt = 300
    expected_ttft_ms = StandInStepModel().iteration_time(prompt, 0, 0) * 1000
    # when two concurrency steps are measured
    steps = run_sweep(
        twin.url, MODEL, [1, 4], out_dir=tmp_path, input_tokens=prompt, output_tokens=20, duration_s=3,
        warmup_s=1, max_total_s=MAX_TOTAL_S, quiet=True,
    )  # fmt: skip
    # then each step is one record with the contract's keys
    lines = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [x["target"] for x in lines] == [{"concurrency": 1}, {"concurrency": 4}]
    for key in ("step", "duration_s", "requests", "errors", "ttft_ms", "tpot_ms", "itl_ms", "e2e_s",
                "input_tokens", "output_tokens", "requests_per_s", "output_tokens_per_s"):  # fmt: skip
        assert key in lines[0]
    assert set(lines[0]["ttft_ms"]) >= {"mean", "p50", "p95", "p99"}
    # and at concurrency 1 the harness measures the twin's known timing
    one = steps[0]
    assert one.errors == {} and one.requests >= 6  # about 3 s / 0.32 s per answer
    assert one.ttft_ms.p50 == pytest.approx(expected_ttft_ms, abs=15)
    assert one.tpot_ms.p50 == pytest.approx(15, abs=3)
    assert one.output_tokens == 20 and one.input_tokens == prompt
    # and four users get about four times the throughput
    assert steps[1].requests_per_s > 2.5 * one.requests_per_s
    # and the summary and the CSV are written too
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert len(summary["steps"]) == 2 and summary["stopped_by"] == "plan"
    rows = list(csv.DictReader((tmp_path / "steps.csv").open()))
    assert [r["target"] for r in rows] == ["concurrency=1", "concurrency=4"]


@pytest.mark.slow
def test_poisson_rate_steps_arrive_at_about_the_requested_rate(twin: TwinHandle, tmp_path: Path) -> None:
    steps = run_sweep(
        twin.url, MODEL, [8], mode="rate", out_dir=tmp_path, input_tokens=50, output_tokens=5, duration_s=4,
        warmup_s=1, max_total_s=MAX_TOTAL_S, quiet=True,
    )  # fmt: skip
    # 8 req/s for 4 s: 32 arrivals expected; a Poisson count stays within ~3 sigma (±17)
    assert steps[0].target == {"rate_rps": 8}
    assert 15 <= steps[0].requests <= 49
    assert steps[0].errors == {}


@pytest.mark.slow
def test_the_sla_search_finds_the_largest_batch_before_requests_queue(tmp_path: Path) -> None:
    # given a twin that runs at most 4 sequences at once, answers of 40 steps of 15 ms: up to 4 streams a first
    # token comes within ~2 steps; a fifth user waits for one of the four to finish (0.6 s answers, so ~150 ms
    # on average even when the users are spread out), so a TTFT p95 limit of 100 ms holds up to 4 and no further
    with start_twin(None, step_model=StandInStepModel(max_num_seqs=4), served_model=MODEL) as small:
        steps = run_sweep(
            small.url, MODEL, [1], out_dir=tmp_path, input_tokens=50, output_tokens=40, duration_s=3, warmup_s=1,
            slo=[("ttft_ms", "p95", 100)], sla_search=True, max_total_s=90, quiet=True,
        )  # fmt: skip
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["sla_search"]["max_passing_level"] == 4
    assert [s.target["concurrency"] for s in steps][:4] == [1, 2, 4, 8]


@pytest.mark.slow
def test_distributed_workers_report_every_request_to_the_master(twin: TwinHandle, tmp_path: Path) -> None:
    steps = run_sweep(
        twin.url, MODEL, [4], out_dir=tmp_path, input_tokens=50, output_tokens=10, duration_s=3, warmup_s=1,
        workers=2, max_total_s=MAX_TOTAL_S, quiet=True,
    )  # fmt: skip
    assert steps[0].requests >= 20 and steps[0].errors == {}
    assert steps[0].ttft_ms.p50 is not None and steps[0].ttft_ms.p50 < 100


def test_the_command_line_runs_a_step_and_prints_a_table(twin: TwinHandle, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    proc = subprocess.run(
        [sys.executable, "-m", "sizing.cli", "loadtest", "--endpoint", twin.url, "--model", MODEL, "--concurrency",
         "2", "--input-tokens", "100", "--output-tokens", "8", "--duration", "2", "--warmup", "1", "--max-total",
         str(MAX_TOTAL_S), "--slo", "ttft_ms.p95=1000", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "concurrency=2" in proc.stdout and "meets SLO" in proc.stdout
    assert (out / "steps.jsonl").exists() and (out / "steps.csv").exists()
    step = json.loads((out / "steps.jsonl").read_text().splitlines()[0])
    assert step["meets_slo"] is True
    assert step["input_tokens"] == 100 and CHAT_OVERHEAD_ONE_MESSAGE < 100


@pytest.mark.slow
def test_a_workload_sweep_runs_its_users_with_think_time_and_checks_its_slo(
    twin: TwinHandle, tmp_path: Path
) -> None:
    # given a workload whose users send one request every 4 s (the e2e SLO of 2 s leaves 2 s of thinking)
    spec = tmp_path / "workload.yaml"
    spec.write_text(
        "name: bench\nmodel: meta-llama/Llama-3.1-8B-Instruct\n"
        "users: {total: 20, peak_active_fraction: 0.5, requests_per_active_hour: 900}\n"
        "tokens: {input: {fixed: 80}, output: {fixed: 6}}\n"
        "slo: {ttft_ms: {p95: 1000}, e2e_s: {p95: 2}}\n"
    )
    out = tmp_path / "out"
    # when 4 of its users are run against the twin
    proc = subprocess.run(
        [sys.executable, "-m", "sizing.cli", "loadtest", "--endpoint", twin.url, "--model", MODEL, "--workload",
         str(spec), "--users", "4", "--duration", "4", "--warmup", "1", "--max-total", str(MAX_TOTAL_S), "--json",
         "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (step,) = json.loads(proc.stdout)
    # then the step is described by its users and think time, and their pace is one request per cycle each
    assert step["target"]["users"] == 4 and step["target"]["think_time_s"] > 1
    assert 0.8 <= step["requests_per_s"] <= 4.0
    assert step["input_tokens"] == 80 and step["output_tokens"] == 6
    assert step["meets_slo"] is True


def test_a_stalled_endpoint_gives_timeouts_not_a_hang(tmp_path: Path) -> None:
    # given an endpoint that accepts connections and never answers
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        # when two users load it with a half-second request timeout
        steps = run_sweep(
            url, MODEL, [2], out_dir=tmp_path, duration_s=2, warmup_s=1, request_timeout_s=0.5,
            max_total_s=MAX_TOTAL_S, quiet=True,
        )  # fmt: skip
    # then the step ends on time and every request is a timeout
    assert set(steps[0].errors) == {"timeout"} and steps[0].errors["timeout"] >= 2


def test_a_request_budget_stops_the_sweep_early(twin: TwinHandle, tmp_path: Path) -> None:
    # given a sweep of two long steps but a budget of 30 requests
    run_sweep(
        twin.url, MODEL, [4, 8], out_dir=tmp_path, input_tokens=50, output_tokens=4, duration_s=20, warmup_s=1,
        max_requests=30, max_total_s=MAX_TOTAL_S, quiet=True,
    )  # fmt: skip
    # then it stops within a shape tick (1 s) of spending it, and says why
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stopped_by"] == "max_requests"
    assert summary["finished_at"] - summary["started_at"] < 10


def test_answers_longer_than_the_window_and_its_tail_are_counted_as_unfinished_not_lost(
    twin: TwinHandle, tmp_path: Path
) -> None:
    # given 4 streams of 200-token answers (15 ms a token: 3 s each), all sent at once in a 1 s window, and a
    # tail capped at 1 s
    steps = run_sweep(
        twin.url, MODEL, [4], out_dir=tmp_path, input_tokens=50, output_tokens=200, duration_s=1, warmup_s=0,
        max_tail_s=1.0, max_total_s=MAX_TOTAL_S, quiet=True, slo=[("e2e_s", "p95", 60.0)],
    )  # fmt: skip
    # when the step ends before any answer sent in its window has finished
    step = steps[0]
    # then those requests are counted as sent and unfinished, not as nothing
    assert step.unfinished >= 4 and step.requests == step.unfinished + step.answered + step.failed
    assert step.answered == 0 and step.errors == {}
    # and the level cannot pass its e2e target on requests it never saw end
    assert step.meets_slo is False
    assert any("still running" in f or "unfinished" in f for f in step.slo_failures)
    # and the CSV says so too
    row = next(csv.DictReader((tmp_path / "steps.csv").open()))
    assert int(row["unfinished"]) == step.unfinished


def test_a_tail_waits_for_answers_longer_than_the_window(twin: TwinHandle, tmp_path: Path) -> None:
    # given answers of ~1.5 s (100 tokens at 15 ms) and a 0.5 s window: a tail of one window would lose them all
    steps = run_sweep(
        twin.url, MODEL, [2], out_dir=tmp_path, input_tokens=50, output_tokens=100, duration_s=0.5,
        warmup_s=0, max_total_s=MAX_TOTAL_S, quiet=True,
    )  # fmt: skip
    # then the step waits for them (the tail's cap is at least a minute) and every one is measured
    step = steps[0]
    assert step.unfinished == 0 and step.answered >= 2
    assert step.e2e_s.p50 is not None and step.e2e_s.p50 > 1.0


def test_a_level_after_an_overloaded_one_starts_on_an_empty_server(tmp_path: Path) -> None:
    # given a server of two slots (20-token answers at 15 ms a token: about 6.7 requests a second), a first level
    # at 30 req/s for 1.5 s that leaves it a backlog of about 35 requests (about 5 s of work), and a tail capped at 1 s
    handle = start_twin(None, step_model=StandInStepModel(max_num_seqs=2), served_model=MODEL)
    try:
        steps = run_sweep(
            handle.url, MODEL, [30, 4], mode="rate", out_dir=tmp_path, input_tokens=50, output_tokens=20,
            duration_s=1.5, warmup_s=0, max_tail_s=1.0, max_total_s=MAX_TOTAL_S, quiet=True,
        )  # fmt: skip
    finally:
        handle.stop()
    # when the second level, at 4 req/s (six arrivals expected: none at all has a chance of 0.25%), is measured
    first, second = steps
    assert first.unfinished > 5
    # then it waited for the backlog to clear (about 5 s, longer than the tail's cap) instead of queueing behind it:
    # its first tokens wait at most for its own arrivals (a Poisson burst on two slots: up to ~0.5 s, more on a busy
    # box), not for the backlog (behind it, 4 s or more), and its answers (0.3 s each, a third of the tail's cap, so
    # twice as slow on a busy box still ends in time) are all measured; behind a backlog of 5 s none would be
    assert second.answered >= 1 and second.unfinished == 0
    assert second.ttft_ms.p95 is not None and second.ttft_ms.p95 < 2000


def test_an_endpoint_that_dies_mid_level_fails_the_level_with_its_error_count(tmp_path: Path) -> None:
    # given a twin answering a 20 req/s level of short answers (4 s window after 1 s of warm-up), stopped once it
    # has answered 45 requests: about a second into the window
    dying = start_twin(None, step_model=StandInStepModel(), served_model=MODEL)
    done = threading.Event()

    def stop_mid_level() -> None:
        engine = dying.server.engine
        while not done.is_set():
            if engine is not None and engine.stats.requests_finished >= 45:
                dying.stop()
                return
            done.wait(0.05)

    watcher = threading.Thread(target=stop_mid_level, daemon=True)
    watcher.start()
    try:
        # when the level runs on
        steps = run_sweep(
            dying.url, MODEL, [20.0], mode="rate", out_dir=tmp_path, input_tokens=50, output_tokens=4,
            duration_s=4, warmup_s=1, request_timeout_s=2, max_total_s=MAX_TOTAL_S, quiet=True,
            slo=[("e2e_s", "p95", 10.0)],
        )  # fmt: skip
    finally:
        done.set()
        watcher.join(5)
        dying.stop()
    # then the level ends on time and counts what it sent: the answers before the stop, and every request after
    # it as an error by kind, which fails the level and says how many
    step = steps[0]
    assert step.answered > 0 and step.failed > 0
    assert sum(step.errors.values()) == step.failed
    assert step.requests == step.answered + step.failed + step.unfinished
    assert step.meets_slo is False
    assert any(f.startswith(f"errors {step.failed}/{step.requests}") for f in step.slo_failures), (
        step.slo_failures
    )
