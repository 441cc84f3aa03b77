"""Engine steps rebuilt from client timings (`sizing.loadtest.steps`)."""

from __future__ import annotations

import random

import pytest
from support.engine_steps import engine_run

from sizing.loadtest import steps as steps_module
from sizing.loadtest.metrics import RequestRecord
from sizing.loadtest.steps import StepsSample, rebuild, sample


def _poisson(
    n: int, rate: float, prompts: tuple[int, int], answers: tuple[int, int], seed: int
) -> list[tuple[float, int, int]]:
    """`n` Poisson arrivals at `rate` a second: (time, prompt tokens alternating between `prompts`, answer tokens
    drawn within `answers`)."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        out.append((t, prompts[i % 2], rng.randint(*answers)))
    return out


def test_the_steps_of_a_poisson_level_come_back_from_the_chunks_the_client_saw():
    # GIVEN 60 Poisson arrivals of 100- and 400-token prompts on an engine whose every step is known
    records, truth = engine_run(_poisson(60, 8.0, (400, 100), (5, 30), seed=7))
    # WHEN the steps are rebuilt from the client's records alone
    steps = rebuild(records)
    # THEN every step is found, with the sequences it decoded, the prompts it prefilled, and its duration where the
    # engine had work waiting (to the chunks' jitter); after an idle engine none is claimed
    assert len(steps) == len(truth)
    for got, (end, dec, prompt, dur) in zip(steps, truth, strict=True):
        assert got.decode_seqs == dec and got.prefill_tokens == prompt
        assert got.end == pytest.approx(end, abs=0.001)
        if dur is None:
            assert got.duration_s is None
        elif got.duration_s is not None:
            assert got.duration_s == pytest.approx(dur, abs=0.001)
    timed = sum(s.duration_s is not None for s in steps)
    assert timed >= 0.95 * sum(d is not None for *_x, d in truth)


def test_a_step_that_follows_an_idle_engine_gets_no_duration():
    # GIVEN one request at a time, each sent a second after the last finished (an idle engine between them)
    records, truth = engine_run([(i * 2.0, 200, 10) for i in range(3)])
    # WHEN the steps are rebuilt
    steps = rebuild(records)
    # THEN each request's first step has no duration (the engine waited for it), its decode steps have theirs
    assert [s.duration_s is None for s in steps] == [d is None for *_x, d in truth]
    assert sum(s.duration_s is None for s in steps) == 3
    decode = [s.duration_s for s in steps if s.duration_s is not None]
    assert decode == pytest.approx([0.021] * 27, abs=0.001)


def test_two_tokens_of_one_request_never_share_a_step_however_close():
    # GIVEN steps of 2 ms (chunks 0.5 ms apart at most) and a gap threshold far wider than a step
    records, _truth = engine_run([(0.0, 1, 40), (0.0, 1, 40)], jitter_s=0.0)
    for r in records:
        r.itl_s = [0.002] * len(r.itl_s)
    # WHEN rebuilt with a 10 ms gap
    steps = rebuild(records, gap_s=0.010)
    # THEN each step still holds one token of each request
    assert len(steps) == 40
    assert all(s.decode_seqs + s.prefills == 2 for s in steps)


def test_failed_requests_are_left_out():
    # GIVEN a level with a failed request beside a good one
    records, _truth = engine_run([(0.0, 100, 5)])
    records.append(RequestRecord(start=0.0, end=0.1, error="http_5xx"))
    # WHEN rebuilt
    steps = rebuild(records)
    # THEN the steps are the good request's alone
    assert len(steps) == 5 and all(s.decode_seqs + s.prefills == 1 for s in steps)


def test_steps_the_client_read_in_one_burst_are_left_untimed():
    # GIVEN two streams on an engine of 10 ms steps whose client fell behind once: the 6th and 7th steps' chunks
    # reached it together, 0.1 ms apart
    records, _truth = engine_run([(0.0, 1, 12), (0.0, 1, 12)], jitter_s=0.0)
    for r in records:
        r.itl_s = [0.010] * len(r.itl_s)
        r.itl_s[5], r.itl_s[6] = 0.0199, 0.0001
    # WHEN the steps are rebuilt
    steps = rebuild(records)
    # THEN all 12 steps are found, no step reads a duration near 0 or 20 ms, and the others read their 10 ms
    assert len(steps) == 12
    timed = [s.duration_s for s in steps if s.duration_s is not None]
    assert all(d == pytest.approx(0.010, abs=1e-6) for d in timed)
    assert len(timed) == 8


def test_a_level_keeps_a_sample_of_its_timed_steps_inside_its_window_and_its_first_tokens_at_an_idle_engine():
    # GIVEN a level of 120 Poisson arrivals (thousands of steps), and a window that leaves its first second out
    records, _truth = engine_run(_poisson(120, 6.0, (300, 100), (10, 40), seed=11))
    window = (1.0, max(r.end for r in records))
    # WHEN it is sampled to at most 50 steps
    kept = sample(records, window, keep=50)
    # THEN 50 timed steps are kept, spread through the level, each with its make-up; none ended before the window
    every = [s for s in rebuild(records) if s.duration_s is not None and window[0] <= s.end]
    assert kept.timed == len(every) > 50 and len(kept.steps) == 50
    assert {ms for ms, *_ in kept.steps} <= {round(s.duration_s * 1e3, 3) for s in every if s.duration_s}
    steps = kept.engine_steps()
    assert all(s.duration_s and s.duration_s > 0 for s in steps)
    assert sum(s.prefills for s in steps) > 0 and max(s.decode_seqs for s in steps) > 1
    # and the first tokens kept are exactly those of requests sent with nothing in flight, inside the window
    alone = [
        r
        for r in records
        if r.start >= window[0] and not any(o is not r and o.start <= r.start < o.end for o in records)
    ]
    assert len(kept.idle_first_tokens) == len(alone) > 0
    assert sorted(n for _, n in kept.idle_first_tokens) == sorted(r.input_tokens for r in alone)


def test_a_sample_survives_the_record_it_travels_in():
    # GIVEN a level's sample written into its record's JSON, as the load test stores it
    records, _truth = engine_run([(0.0, 200, 20), (0.05, 100, 20)])
    kept = sample(records)
    # WHEN read back
    back = StepsSample.model_validate_json(kept.model_dump_json())
    # THEN it is the same sample, step for step
    assert back == kept and back.engine_steps() == kept.engine_steps()


def test_a_level_with_more_chunks_than_the_bound_is_rebuilt_over_the_middle_of_its_window(monkeypatch):
    # GIVEN a level of 60 Poisson arrivals, and a bound of a quarter of its chunks
    records, _truth = engine_run(_poisson(60, 4.0, (200, 200), (10, 40), seed=5))
    chunks = sum(len(r.itl_s) + 1 for r in records)
    monkeypatch.setattr(steps_module, "MAX_CHUNKS", chunks // 4)
    window = (0.0, max(r.end for r in records))
    # WHEN it is sampled
    kept = sample(records, window, keep=10_000)
    # THEN its steps come from a middle slice of about a quarter of the window, each as the full rebuild has it
    every = {round(s.duration_s * 1e3, 3) for s in rebuild(records) if s.duration_s}
    assert 0 < kept.rebuilt < len(rebuild(records)) / 2
    assert {ms for ms, *_ in kept.steps} <= every
