"""The twin's scheduler: vLLM-like continuous batching driven by a step model, in real time."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sizing.base.errors import InvalidInput
from sizing.base.tokens import block_hashes
from sizing.twin.engine import Engine


@dataclass
class StandInStepModel:
    """A step model with known timing: a fixed cost per step, per prefill token and per decoding sequence."""

    max_num_seqs: int = 4
    max_num_batched_tokens: int = 256
    kv_capacity_tokens: int = 4096
    block_size: int = 16
    base_s: float = 0.004
    per_prefill_token_s: float = 0.00001
    per_decode_seq_s: float = 0.0001
    prefix_caching: bool = False
    frontend_request_cpu_s: float = 0.0

    def iteration_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return self.base_s + prefill_tokens * self.per_prefill_token_s + decode_seqs * self.per_decode_seq_s


def _collect(engine: Engine, prompt: int, out: int, log: list[tuple[int, float]]) -> object:
    loop = asyncio.get_running_loop()
    return engine.submit(prompt, out, lambda n, fin: log.append((n, loop.time())))


def test_decodes_go_first_and_prefills_share_what_is_left_of_the_token_budget() -> None:
    async def scenario() -> tuple[list, list, list]:
        # given an engine with one request decoding and a long prompt waiting
        engine = Engine(StandInStepModel(max_num_batched_tokens=100))
        a = engine.submit(50, 10, lambda n, f: None)
        first = engine.schedule()
        engine._finish_step(first[0], first[1], 0.0)  # a is prefilled and has its first token
        b = engine.submit(300, 10, lambda n, f: None)
        # when the next two steps are scheduled
        second = engine.schedule()
        engine._finish_step(second[0], second[1], 0.0)
        third = engine.schedule()
        assert a is not None and b is not None
        return first, second, third

    first, second, third = asyncio.run(scenario())
    # then the first step prefills the short prompt whole
    assert [c for _, c in first[0]] == [50] and first[1] == []
    # and then the decoding request takes 1 token and the long prompt gets the other 99, then 99 more
    assert len(second[1]) == 1 and [c for _, c in second[0]] == [99]
    assert len(third[1]) == 1 and [c for _, c in third[0]] == [99]


def test_a_single_request_is_served_at_the_step_model_pace() -> None:
    sm = StandInStepModel()

    async def scenario() -> tuple[float, list[tuple[int, float]], Any]:
        engine = Engine(sm)
        engine.start()
        log: list[tuple[int, float]] = []
        t0 = asyncio.get_running_loop().time()
        seq = _collect(engine, 200, 5, log)
        await seq.done  # type: ignore[attr-defined]
        await engine.stop()
        return t0, log, seq

    t0, log, seq = asyncio.run(scenario())
    # then the first token comes after one prefill step (in real time, give or take a busy machine's 10 ms)
    assert [n for n, _ in log] == [1, 2, 3, 4, 5]
    assert log[0][1] - t0 == pytest.approx(sm.iteration_time(200, 0, 0), abs=0.010)
    # and on the engine's clock every later token takes exactly one decode step
    assert seq.finished_at - seq.first_token_at == pytest.approx(4 * sm.iteration_time(0, 1, 0), abs=1e-9)


def test_an_api_server_on_the_models_core_slows_the_request_running_while_it_handles_another() -> None:
    def first_request_e2e(cpu_s: float) -> float:
        async def scenario() -> float:
            # given an engine whose API server spends `cpu_s` of the model's core on each request, one request
            # running and a second one arriving while it runs
            engine = Engine(StandInStepModel(frontend_request_cpu_s=cpu_s))
            engine.start()
            a = engine.submit(200, 5, lambda n, f: None)
            b = engine.submit(20, 1, lambda n, f: None)
            await asyncio.gather(a.done, b.done)  # type: ignore[arg-type]
            await engine.stop()
            assert a.finished_at is not None
            return a.finished_at - a.arrival

        return asyncio.run(scenario())

    # when the first request is served with the API server on the model's core, and on a core of its own
    # then it ends the second request's 50 ms of CPU later (on the engine's clock; a busy machine's 10 ms aside)
    assert first_request_e2e(0.05) - first_request_e2e(0.0) == pytest.approx(0.05, abs=0.01)


def test_no_more_than_max_num_seqs_run_at_once_and_all_requests_finish() -> None:
    async def scenario() -> tuple[int, list[int]]:
        engine = Engine(StandInStepModel(max_num_seqs=3))
        engine.start()
        most = 0
        seqs = [engine.submit(20, 4, lambda n, f: None) for _ in range(10)]
        while not all(s.done.done() for s in seqs):  # type: ignore[union-attr]
            most = max(most, len(engine.running))
            await asyncio.sleep(0.001)
        await engine.stop()
        return most, [s.generated for s in seqs]

    most, generated = asyncio.run(scenario())
    assert most == 3
    assert generated == [4] * 10


def test_a_full_kv_cache_preempts_the_newest_request_which_is_recomputed_and_still_finishes() -> None:
    async def scenario() -> tuple[int, list[int], float]:
        # given a KV cache of 16 blocks and two requests that together outgrow it while decoding
        engine = Engine(StandInStepModel(kv_capacity_tokens=256, base_s=0.0005))
        engine.start()
        seqs = [engine.submit(100, 60, lambda n, f: None) for _ in range(2)]
        await asyncio.gather(*(s.done for s in seqs))  # type: ignore[misc]
        await engine.stop()
        return engine.stats.preemptions, [s.generated for s in seqs], engine.kv_usage

    preemptions, generated, usage = asyncio.run(scenario())
    # then one of them was preempted, both produced every token asked for, and the cache is empty again
    assert preemptions >= 1
    assert generated == [60, 60]
    assert usage == 0


def test_a_long_prompt_waits_until_the_kv_cache_holds_all_of_it_not_just_its_first_chunk() -> None:
    async def scenario() -> tuple[list, list]:
        # given a 4,096-token KV cache, 256-token chunks, and one request holding 3,000 tokens of it
        engine = Engine(StandInStepModel(max_num_batched_tokens=256, kv_capacity_tokens=4096))
        engine.submit(2990, 500, lambda n, f: None)
        for _ in range(12):  # its prompt, in chunks, and a few tokens
            step = engine.schedule()
            engine._finish_step(step[0], step[1], 0.0)
        # when a 2,000-token prompt arrives: its first chunk fits, the whole prompt does not
        engine.submit(2000, 10, lambda n, f: None)
        nxt = engine.schedule()
        return nxt[0], nxt[1]

    prefills, decodes = asyncio.run(scenario())
    # then it is not admitted (vLLM's full-input admission): admitted on its first chunk it would be prefilled
    # until the cache filled, preempted, and recomputed from scratch, again and again
    assert prefills == [] and len(decodes) == 1


def test_a_request_larger_than_the_kv_cache_is_refused() -> None:
    async def scenario() -> None:
        engine = Engine(StandInStepModel(kv_capacity_tokens=1024))
        engine.submit(1000, 100, lambda n, f: None)

    with pytest.raises(InvalidInput, match="KV"):
        asyncio.run(scenario())


def _step(engine: Engine) -> list[int]:
    """Schedule and end one step; the prefill chunks it ran."""
    prefills, decodes, _ = engine.schedule()
    engine._finish_step(prefills, decodes, 0.0)
    return [c for _, c in prefills]


#: Two 100-token prompts (16-token blocks) whose first 64 tokens are the same: 4 full blocks in common.
FIRST = block_hashes(list(range(100)), 16)
SECOND = block_hashes([*range(64), *range(1000, 1036)], 16)


@pytest.mark.parametrize("caching", [True, False])
def test_a_prompt_whose_leading_blocks_are_cached_is_prefilled_from_where_the_cache_ends(
    caching: bool,
) -> None:
    async def scenario() -> tuple[list[int], Engine]:
        # given an engine that has prefilled one prompt
        engine = Engine(StandInStepModel(prefix_caching=caching))
        engine.submit(100, 5, lambda n, f: None, FIRST)
        assert _step(engine) == [100]
        # when a prompt sharing its first four blocks arrives
        engine.submit(100, 5, lambda n, f: None, SECOND)
        return _step(engine), engine

    chunks, engine = asyncio.run(scenario())
    if caching:
        # then only the 36 tokens after the cached blocks are prefilled, the four blocks are held once (7 blocks
        # for the first request, 3 of its own for the second), and the cache counts the hits as vLLM does
        assert chunks == [36]
        assert engine.used_blocks == 7 + 3
        assert (engine.stats.prefix_cache_queries, engine.stats.prefix_cache_hits) == (200, 64)
    else:
        # without prefix caching the whole prompt is prefilled and every block is its own
        assert chunks == [100]
        assert engine.used_blocks == 7 + 7
        assert engine.stats.prefix_cache_hits == 0


def test_the_prompts_last_token_is_computed_even_when_the_whole_prompt_is_cached() -> None:
    async def scenario() -> list[int]:
        # given a 64-token prompt prefilled (four full blocks, cached)
        engine = Engine(StandInStepModel(prefix_caching=True))
        engine.submit(64, 5, lambda n, f: None, FIRST[:4])
        _step(engine)
        # when the same prompt comes again
        engine.submit(64, 5, lambda n, f: None, FIRST[:4])
        return _step(engine)

    # then three blocks come from the cache and the last block is prefilled: its last token's logits give the
    # first output token
    assert asyncio.run(scenario()) == [16]


def test_cached_blocks_outlive_their_request_until_the_kv_cache_needs_the_room() -> None:
    async def scenario() -> tuple[list[int], list[int], Engine]:
        # given a small KV cache (20 blocks) and a request that prefilled its prompt and finished
        engine = Engine(StandInStepModel(prefix_caching=True, kv_capacity_tokens=320, max_num_seqs=8))
        engine.submit(100, 1, lambda n, f: None, FIRST)
        _step(engine)
        assert not engine.running and engine.used_blocks == 0
        # when a prompt sharing its first blocks comes: it still finds them
        engine.submit(100, 1, lambda n, f: None, SECOND)
        again = _step(engine)
        # and when other prompts fill the cache, the blocks no one holds make room, and the next sharing prompt
        # prefills from the start
        for i in range(3):
            engine.submit(
                100, 1, lambda n, f: None, block_hashes([*range(5000 * (i + 1), 5000 * (i + 1) + 100)], 16)
            )
            _step(engine)
        engine.submit(100, 1, lambda n, f: None, SECOND)
        evicted = _step(engine)
        return again, evicted, engine

    again, evicted, engine = asyncio.run(scenario())
    assert again == [36]
    assert evicted == [100]
    assert 0 <= engine.used_blocks <= engine.total_blocks


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["submit", "step", "step", "abort"]),
            st.integers(min_value=0, max_value=3),  # which of four prompt families (shared leading blocks)
            st.integers(min_value=17, max_value=150),  # prompt tokens
            st.integers(min_value=1, max_value=40),  # answer tokens
        ),
        max_size=60,
    )
)
def test_the_kv_cache_never_holds_more_blocks_than_it_has_and_counts_a_cached_block_once(ops) -> None:
    async def scenario() -> None:
        # given a small KV cache (24 blocks) that caches prefixes, and requests of four prompt families
        engine = Engine(StandInStepModel(prefix_caching=True, kv_capacity_tokens=384, max_num_seqs=6))
        seqs = []
        for op, family, prompt, answer in ops:
            if op == "submit":
                tokens = [*[(family, i) for i in range(64)], *[(len(seqs), i) for i in range(prompt)]][
                    :prompt
                ]
                try:
                    seqs.append(engine.submit(prompt, answer, lambda n, f: None, block_hashes(tokens, 16)))
                except InvalidInput:
                    continue
            elif op == "abort" and seqs:
                engine.abort(seqs[family % len(seqs)])
            else:
                _step(engine)
            # then the blocks in use are each running request's own plus every cached block any of them holds,
            # counted once, and never more than the cache has
            held = {h for s in engine.running for h in s.shared}
            assert engine.used_blocks == sum(s.blocks for s in engine.running) + len(held)
            assert 0 <= engine.used_blocks <= engine.total_blocks
            assert engine.used_blocks + len(engine._cached_free) <= engine.total_blocks
        # and every request still finishes once the engine runs on
        for _ in range(2000):
            if not engine.running and not engine.waiting:
                break
            _step(engine)
        assert not engine.running and not engine.waiting and engine.used_blocks == 0

    asyncio.run(scenario())
