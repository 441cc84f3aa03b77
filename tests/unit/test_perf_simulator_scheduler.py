"""The simulator's parts: the scheduler (admission, prefill, preemption), the arrival sources, and the event loop
that drives them, which reproduces the figures recorded before the simulator was split into them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.replicas import CHAT_IN, CHAT_OUT, PROFILE, replica

from sizing.perf.arrivals import ClosedArrivals, OpenArrivals, Waiting
from sizing.perf.config import HardwareConfig
from sizing.perf.scheduler import Scheduler
from sizing.perf.simulator import simulate
from sizing.perf.step import StepModel

RECORDED = Path(__file__).parents[1] / "fixtures" / "simulator" / "recorded_runs.json"


def _step_model(**overrides: object) -> StepModel:
    cfg = HardwareConfig.create("meta-llama/Llama-3.1-8B-Instruct", "g6e.xlarge", 1, max_num_seqs=2)
    sm = StepModel.for_config(cfg, PROFILE)
    sm.schedule_as(dict(overrides))
    return sm


def test_admission_is_first_come_first_served_up_to_the_batch_limit():
    # given a replica that batches at most 2 sequences, three queued 100-token prompts of 10 output tokens each
    sched = Scheduler(_step_model(), [100, 100, 100], [10, 10, 10], [], 0)
    arrivals = OpenArrivals([0.0, 0.0, 0.0], 0.0, sched.waiting)
    # when the engine runs until nothing is left
    t, completed = sched.advance(0.0, arrivals, closed=False)
    # then the first two prompts were prefilled together and got their first token at once; the third waited
    # for a free slot, and every request generated its 10 tokens
    assert completed == 3 and sched.emitted == 30
    assert sched.first[0] == sched.first[1] < sched.first[2]
    assert sched.first[2] >= sched.finish[0] and sched.finish[2] == t
    assert sched.D == 0 and sched.waiting.size() == 0


def test_a_full_kv_cache_preempts_the_newest_sequence_with_what_it_generated():
    # given two 100-token prompts of 1,000 output tokens each in a 260-token KV cache
    sched = Scheduler(_step_model(kv_capacity_tokens=260), [100, 100], [1000, 1000], [], 0)
    arrivals = OpenArrivals([0.0, 0.0], 0.0, sched.waiting)
    # when the engine runs
    _t, completed = sched.advance(0.0, arrivals, closed=False)
    # then the newest sequence was preempted once, at the cache's edge with 23 tokens (1 from prefill, 22
    # decoded: each sequence holds its tokens and, on average, half of a 16-token block more, 2 x (100 + 23 + 8)
    # > 260), and recomputed with them once the other had finished: its recomputed prompt emitted its 24th
    # token; nothing was lost, and its first token kept its time
    assert completed == 2 and sched.preemptions == 1
    assert sched.gen_before == [1, 23]
    assert sched.emitted == 2000
    assert sched.first[0] == sched.first[1] and sched.finish[1] > sched.finish[0]


def test_a_long_prompt_is_prefilled_in_budget_sized_chunks_before_its_first_token():
    # given a chunking replica with a 256-token step budget and one 1,000-token prompt
    sm = _step_model(max_num_batched_tokens=256, chunked_prefill=True)
    sched = Scheduler(sm, [1000], [5], [], 0)
    arrivals = OpenArrivals([0.0], 0.0, sched.waiting)
    # when the engine runs it
    sched.advance(0.0, arrivals, closed=False)
    # then its first token came after four steps of 256, 256, 256 and 232 tokens, each attending to the chunks
    # before it, one after the other
    expected = 0.0
    for done, take in ((0, 256), (256, 256), (512, 256), (768, 232)):
        expected += sm.iteration_time(take, 0, 0, take * (done + take * 0.5), 1)
    assert sched.first[0] == expected
    assert sched.emitted == 5


def test_an_open_loop_queues_each_request_once_the_api_server_passed_it_on():
    # given requests arriving at 0, 1 and 2 s and an API server taking 0.5 s of each
    waiting = Waiting()
    arrivals = OpenArrivals([0.0, 1.0, 2.0], 0.5, waiting)
    # when the engine looks at 1.4 s, then much later
    arrivals.due(1.4)
    seen_early = waiting.as_list()
    next_early = arrivals.next_seen
    arrivals.due(10.0)
    # then it first sees only the first request, the next at 1.5 s, and at last all of them
    assert seen_early == [0] and next_early == 1.5
    assert waiting.as_list() == [0, 1, 2]
    assert not arrivals.pending() and arrivals.next_seen == float("inf")


def test_an_api_server_on_the_models_core_takes_its_time_from_the_engine_only_while_the_engine_runs():
    # given an API server that spends 5 ms of the model's core on each request, and an engine busy since 1.0 s
    waiting = Waiting()
    arrivals = OpenArrivals([0.995, 1.0, 1.5], 0.005, waiting, cpu=0.005)
    arrivals.busy_since = 1.0
    # when the engine queues the requests it has seen by 2 s
    arrivals.due(2.0)
    # then the one handled before the engine started costs it nothing, the one that arrived 1 ms before the engine
    # was busy costs what fell inside the busy spell (4 ms), and the one handled while it ran all 5 ms
    assert waiting.as_list() == [0, 1, 2]
    assert arrivals.debt == pytest.approx(0.0 + 0.005 + 0.005)


def test_a_request_handled_while_the_engine_runs_delays_the_engines_next_step_by_its_cpu_time():
    # given a one-sequence replica, two one-token requests 10 ms apart, an API server that takes 5 ms of each,
    # run once with that time on the model's core and once on a core of its own
    def first_tokens(cpu: float) -> list[float]:
        sched = Scheduler(_step_model(max_num_seqs=1), [100, 100], [1, 1], [], 0)
        sched.run(OpenArrivals([0.0, 0.01], 0.005, sched.waiting, cpu=cpu), 2)
        return sched.first

    shared, own = first_tokens(0.005), first_tokens(0.0)
    # then the first request, handled while the engine idled, is served as before; the second, handled while the
    # engine prefilled the first, delayed the engine by its 5 ms
    assert shared[0] == own[0]
    assert shared[1] == pytest.approx(own[1] + 0.005)


def test_a_closed_loop_user_sends_the_next_request_after_thinking():
    # given 2 users spread over 1 s, 4 requests, think time 0.25 s
    waiting = Waiting()
    arrival = [0.0] * 4
    arrivals = ClosedArrivals(arrival, 0.0, waiting, 2, 1.0, [0.25] * 4, None)
    # when the first request ends at 3 s
    arrivals.ended(3.0)
    # then the users started at 0 s (queued at once, without an API-server delay) and 0.5 s, and request 2
    # arrives 0.25 s after the end
    assert arrival[:3] == [0.0, 0.5, 3.25]
    assert waiting.as_list() == [0]
    assert arrivals.next_seen == 0.5


def test_a_wave_starts_when_the_last_request_of_the_previous_one_ends():
    # given waves of 2 requests sent 0.1 s apart
    waiting = Waiting()
    arrival = [0.0] * 4
    arrivals = ClosedArrivals(arrival, 0.0, waiting, 2, 0.2, [0.0] * 4, 0.1)
    # when one request of the first wave ends, nothing is sent; when the second ends, the next wave starts
    arrivals.ended(5.0)
    after_one = arrival[2:]
    arrivals.ended(6.0)
    # then
    assert after_one == [0.0, 0.0]
    assert arrival[2:] == [6.0, 6.1]


@pytest.mark.parametrize("name", sorted(json.loads(RECORDED.read_text())["runs"]))
def test_the_split_simulator_reproduces_the_recorded_runs(name: str):
    # given a replica and load whose figures were recorded before the split (preemption, reserved KV, TGI's
    # deferral, Neuron buckets and waves, prefix caching, whole-prompt prefill)
    expected = json.loads(RECORDED.read_text())["runs"][name]
    sm, load, prefix_tokens = replica(name)
    # when it is simulated again
    res = simulate(sm, load, CHAT_IN, CHAT_OUT, n_requests=400, seed=11, prefix_tokens=prefix_tokens)
    # then every figure is the recorded one, and every drawn token was generated
    got = {
        **res.as_dict(),
        "output_tokens_generated": res.output_tokens_generated,
        "truncated": res.truncated,
    }
    assert got == expected
    assert res.output_tokens_generated == res.output_tokens_drawn
