"""Per-step summaries: the measured window, exact percentiles, errors by kind and the SLO check."""

from __future__ import annotations

import numpy as np
import pytest

from sizing.loadtest.metrics import RequestRecord, check_slo, summarize

T0 = 1_700_000_000.0


def _ok(end: float, ttft: float, n_out: int = 11, e2e: float = 1.0) -> RequestRecord:
    return RequestRecord(start=end - e2e, end=end, ttft_s=ttft, itl_s=[0.09] * (n_out - 1), input_tokens=100,
                         output_tokens=n_out)  # fmt: skip


def test_only_requests_sent_inside_the_window_count_so_warm_up_is_excluded() -> None:
    # given requests sent during warm-up (first 5 s), during the window, and after it
    records = [_ok(T0 + 1, 9.0), _ok(T0 + 6, 0.1), _ok(T0 + 7, 0.2), _ok(T0 + 40, 9.0)]
    # when the step with a 5 s warm-up and a 10 s window is summarized
    r = summarize(records, step=0, target={"concurrency": 4}, window=(T0 + 5, T0 + 15), warmup_s=5)
    # then only the two inside count for latency and requests
    assert r.requests == 2
    assert r.ttft_ms.max == pytest.approx(200)
    assert r.requests_per_s == pytest.approx(0.2)
    # and throughput counts the tokens delivered in the window: the warm-up request's answer arrived at 9-9.9 s
    assert r.output_tokens_per_s == pytest.approx(3.3)


@pytest.mark.parametrize("phase", [0.0, 0.3, 0.65, 1.0])
def test_throughput_does_not_depend_on_where_the_window_cuts_a_loops_answers(phase: float) -> None:
    # given one stream of 128-token answers, each 1.3 s (50 ms to the first token, then a token every ~9.8 ms), the
    # next sent as the last ends, starting `phase` s before a 12 s window: 9.2 answers fit in it
    ttft, n = 0.05, 128
    itl = (1.3 - ttft) / (n - 1)
    start, records = T0 - phase, []
    while start < T0 + 14:
        records.append(RequestRecord(start=start, end=start + 1.3, ttft_s=ttft, itl_s=[itl] * (n - 1),
                                     input_tokens=512, output_tokens=n))  # fmt: skip
        start += 1.3
    # when the step is summarized
    r = summarize(records, step=0, target={"concurrency": 1}, window=(T0, T0 + 12), warmup_s=3)
    # then it reads the stream's rate (98.5 tokens/s) within 1.5%, however the window cuts the answers (counting
    # whole answers by when they were sent reads 9 or 10 of them: 96 or 107 tokens/s)
    assert r.output_tokens_per_s == pytest.approx(n / 1.3, rel=0.015)


def test_percentiles_are_exact_over_every_sample() -> None:
    ttfts = np.random.default_rng(3).lognormal(-2, 0.5, 1000)
    records = [_ok(T0 + 1 + i * 0.001, float(t)) for i, t in enumerate(ttfts)]
    r = summarize(records, step=0, target={"concurrency": 1}, window=(T0, T0 + 10), warmup_s=0)
    assert r.ttft_ms.p99 == pytest.approx(float(np.percentile(ttfts, 99)) * 1000, abs=1e-3)
    assert r.ttft_ms.p50 == pytest.approx(float(np.median(ttfts)) * 1000, abs=1e-3)


def test_tpot_is_time_after_the_first_token_per_further_token() -> None:
    r = summarize([_ok(T0 + 1.5, 0.1, n_out=11, e2e=1.1)], step=0, target={"concurrency": 1},
                  window=(T0, T0 + 2), warmup_s=0)  # fmt: skip
    assert r.tpot_ms.p50 == pytest.approx(100)  # (1.1 - 0.1) s / 10 tokens
    assert r.itl_ms.p50 == pytest.approx(90)


def test_errors_are_counted_by_kind_and_left_out_of_latencies() -> None:
    records = [
        _ok(T0 + 1, 0.1),
        RequestRecord(T0, T0 + 1, error="http_429"),
        RequestRecord(T0, T0 + 1, error="timeout"),
    ]
    r = summarize(records, step=0, target={"rate_rps": 2}, window=(T0, T0 + 2), warmup_s=0)
    assert r.errors == {"http_429": 1, "timeout": 1}
    assert r.requests == 3 and r.ttft_ms.count == 1


def test_a_step_meets_its_slo_only_if_every_percentile_holds_and_errors_stay_rare() -> None:
    records = [_ok(T0 + 1 + i * 0.01, 0.1 + i * 0.001) for i in range(100)]
    r = summarize(records, step=0, target={"concurrency": 8}, window=(T0, T0 + 10), warmup_s=0)
    assert check_slo(r, [("ttft_ms", "p95", 250)]).meets_slo is True
    failed = check_slo(r, [("ttft_ms", "p95", 250), ("ttft_ms", "p99", 150)])
    assert failed.meets_slo is False and failed.slo_failures == ["ttft_ms.p99 198.01 > 150"]
    errors = records + [RequestRecord(T0, T0 + 1, error="http_500")] * 5
    r2 = summarize(errors, step=0, target={"concurrency": 8}, window=(T0, T0 + 10), warmup_s=0)
    assert check_slo(r2, [("ttft_ms", "p95", 250)]).meets_slo is False


def test_a_record_survives_the_trip_from_a_worker_to_the_master() -> None:
    rec = RequestRecord(T0, T0 + 1.5, 0.2, [0.05, 0.06], 100, 3, None, "chatcmpl-1")
    assert RequestRecord.from_wire(rec.to_wire()) == rec


def test_a_request_sent_at_the_previous_level_does_not_count_for_this_one() -> None:
    # given a step that began at T0 with a 1 s warm-up, and a long request sent 2 s before it
    late = _ok(T0 + 3, 0.5, e2e=5.0)
    fresh = _ok(T0 + 3, 0.1, e2e=1.0)
    r = summarize([late, fresh], step=1, target={"concurrency": 8}, window=(T0 + 1, T0 + 10), warmup_s=1)
    assert r.requests == 1 and r.ttft_ms.max == pytest.approx(100)


def _starts(times: list[float], itl: float = 0.03) -> list[RequestRecord]:
    return [RequestRecord(start=t, end=t + 1.0, ttft_s=0.1, itl_s=[itl] * 9, input_tokens=100, output_tokens=10)
            for t in times]  # fmt: skip


def test_users_in_lock_step_groups_are_stated_and_flagged() -> None:
    # given a closed loop whose 64 users went out in groups of 8, a group's starts within a millisecond, a group
    # every 1.2 s (as a real engine's fixed-length loops settle; engine steps of 30 ms)
    times = [T0 + 6 + g * 1.2 + u * 0.0001 for g in range(8) for u in range(8)]
    # when the step is summarized
    r = summarize(_starts(times), step=0, target={"concurrency": 64}, window=(T0 + 5, T0 + 15), warmup_s=5)
    # then the level states groups of 8 and is flagged: its TTFT reads a group's prefill, not a population's
    assert r.lockstep_group == pytest.approx(8.0, abs=0.1)
    assert any("lock-step" in f and f"groups of {r.lockstep_group:.1f}" in f for f in r.flags)


def test_users_at_random_phases_are_not_flagged_and_open_loops_state_no_groups() -> None:
    # given 200 requests sent at random instants over 10 s (20 req/s; steps of 30 ms)
    times = sorted(T0 + 5 + np.random.default_rng(3).uniform(0, 10, 200))
    # when summarized as a closed loop and as an open loop
    closed = summarize(_starts(list(times)), step=0, target={"concurrency": 16}, window=(T0 + 5, T0 + 15),
                       warmup_s=5)  # fmt: skip
    opened = summarize(
        _starts(list(times)), step=0, target={"rate_rps": 20}, window=(T0 + 5, T0 + 15), warmup_s=5
    )
    # then the closed loop's requests went out one at a time (beyond chance), and nothing is flagged
    assert closed.lockstep_group is not None and closed.lockstep_group < 1.5
    assert not closed.flags
    # and an open loop's arrivals are the generator's own: no groups are stated
    assert opened.lockstep_group is None
