"""`sizing loadtest --trace`: a recorded trace replayed against a twin on loopback, time-scaled to the level's rate,
its prefixes reproduced from hash_ids (requests that share blocks in the trace share text, so the server's prefix
cache hits), and each measured level records the trace's digest. Every run is bounded in time (max_total_s)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sizing.loadtest import run_sweep
from sizing.traces import read_trace, samples
from sizing.traces.replay import window
from sizing.twin import TwinHandle, start_twin

pytestmark = pytest.mark.integration

MODEL = "twin-trace-model"
MAX_TOTAL_S = 30


@dataclass
class CachingStepModel:
    """Known timing (10 ms a step plus 20 µs a prefill token), a prefix cache of 16-token blocks."""

    max_num_seqs: int = 64
    max_num_batched_tokens: int = 8192
    kv_capacity_tokens: int = 2_000_000
    block_size: int = 16
    prefix_caching: bool = True

    def iteration_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return 0.010 + prefill_tokens * 0.00002


@pytest.fixture
def twin() -> Iterator[TwinHandle]:
    handle = start_twin(None, step_model=CachingStepModel(), served_model=MODEL)
    yield handle
    handle.stop()


def test_a_replayed_trace_reuses_its_prefixes_at_the_scaled_rate_and_records_its_digest(
    twin: TwinHandle, tmp_path: Path
) -> None:
    # given a trace whose prompts start with one of two shared 1,024-token prefixes (its hash_ids say so)
    path = samples.write(
        tmp_path / "trace.jsonl",
        "mooncake",
        samples.synthetic(400, seed=9, rate=1.0, gaps="constant", groups=2, prefix_tokens=1024, input_mean=1400,
                          output_mean=8),
    )  # fmt: skip
    trace = read_trace(str(path))
    win = window(trace)
    # when it is replayed time-scaled to 8 requests/s for a 3 s window
    steps = run_sweep(
        twin.url, MODEL, [8.0], out_dir=tmp_path / "out", mode="rate", duration_s=3, warmup_s=1,
        max_total_s=MAX_TOTAL_S, quiet=True, replay=win.as_load(),
    )  # fmt: skip
    step = steps[0]
    # then the level runs at the scaled rate (constant gaps: 8 a second), not at the trace's 1 a second
    assert step.errors == {}
    assert step.requests == pytest.approx(24, abs=3)
    # and the prompts have the trace's lengths and share its prefixes: the server's cache serves most of them
    assert step.input_tokens == pytest.approx(float(win.inp[: step.requests + 16].mean()), rel=0.25)
    assert step.server is not None and step.server.prefix_cache_hit_share is not None
    assert step.server.prefix_cache_hit_share > 0.4
    # and the level records the trace it replayed
    assert step.trace_digest == trace.digest
    lines = [json.loads(x) for x in (tmp_path / "out" / "steps.jsonl").read_text().splitlines()]
    assert lines[0]["trace_digest"] == trace.digest


def test_a_capacity_search_replays_the_trace_at_every_rate_it_probes(
    twin: TwinHandle, tmp_path: Path
) -> None:
    import subprocess
    import sys

    # given a trace recorded at 1 request/s with shared prefixes
    path = samples.write(
        tmp_path / "trace.jsonl",
        "mooncake",
        samples.synthetic(300, seed=4, rate=1.0, gaps="bursty", groups=2, prefix_tokens=512, input_mean=700,
                          output_mean=6),
    )  # fmt: skip
    digest = read_trace(str(path)).digest
    out = tmp_path / "cap"
    # when `sizing loadtest --trace --capacity-from` searches the rate at the SLO edge from 4 requests/s
    proc = subprocess.run(
        [sys.executable, "-m", "sizing.cli", "loadtest", "--endpoint", twin.url, "--model", MODEL, "--trace",
         str(path), "--capacity-from", "4", "--slo", "ttft_ms.p95=2000", "--duration", "2", "--warmup", "1",
         "--max-total", "20", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    # then it runs, every level it probed replayed the trace time-scaled to that level's rate
    assert proc.returncode == 0, proc.stderr
    assert "time-scaled to each rate the capacity search probes from 4 req/s" in proc.stderr
    steps = [json.loads(x) for x in (out / "steps.jsonl").read_text().splitlines()]
    assert len(steps) >= 2
    assert steps[0]["target"] == {"rate_rps": 4.0}
    assert steps[1]["target"]["rate_rps"] != 4.0  # the search moved on to a rate of its choosing
    assert all(s["trace_digest"] == digest for s in steps)
    # and the search's answer is in the summary and printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["capacity"] is not None and summary["config"]["replay"]["digest"] == digest
    assert "capacity:" in proc.stdout
