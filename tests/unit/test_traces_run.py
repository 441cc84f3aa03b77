"""A sizing run of a workload with a trace: the Estimate step hands each candidate the trace to replay (where it is
and the digest of what the estimate read), the load task's levels are rates around the candidate's predicted
capacity, and the load generator reads the same trace again -- or refuses one that changed since."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.launchers import KeepsTask

from sizing.base.errors import InvalidInput
from sizing.catalog import load_catalog
from sizing.orchestrate import steps
from sizing.orchestrate.contracts import LoadTask, LoadTestInput
from sizing.orchestrate.loadtask import replayed_window
from sizing.orchestrate.settings import OrchestrationSettings
from sizing.store.items import Run
from sizing.traces import read_trace, samples
from tests.fakes.store import InMemoryStore

RUN_ID = "feedfacefeedface"


def traced_spec(path: Path) -> dict[str, Any]:
    return {
        "name": "traced-run",
        "model": "llama-3.1-8b",
        "trace": {"path": str(path)},
        "traffic": {"profile": "flat"},
        "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 10}},
        "constraints": {"deployments": ["eks"], "instance_types": ["g6e.xlarge"], "quantizations": ["fp8"]},
    }


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], LoadTask]:
    """A trace, the Estimate step's output for a spec that replays it, and the load task of its first candidate."""
    path = samples.write(
        tmp_path_factory.mktemp("trace") / "tuesday.jsonl",
        "mooncake",
        samples.synthetic(600, seed=2, rate=3.0, gaps="bursty", groups=2, prefix_tokens=512, input_mean=900,
                          output_mean=60),
    )  # fmt: skip
    spec = traced_spec(path)
    settings = OrchestrationSettings.model_validate(
        {"TABLE_NAME": "llm-sizing-memory", "SIZING_BACKEND": "local"}
    )
    store = InMemoryStore()
    store.create_run(Run(run_id=RUN_ID, model=spec["model"], spec=spec, top_k=1))
    store.transition(RUN_ID, "RUNNING", expected_from="PENDING")
    launcher = KeepsTask()
    svc = steps.Services(settings, store, lambda _d: None, launcher, load_catalog)
    out = json.loads(json.dumps(steps.estimate_step({"run_id": RUN_ID, "spec": spec, "top_k": 1}, svc)))
    cand = out["candidates"][0]
    endpoint = {"url": "http://127.0.0.1:9", "kind": "existing", "run_id": RUN_ID, "candidate_id": "c1",
                "model": "m"}  # fmt: skip
    inp = LoadTestInput.model_validate(
        {
            "run_id": RUN_ID,
            "candidate": cand,
            "task_token": "tok",
            "endpoint": endpoint,
            "settings": out["settings"],
        }
    )
    return path, out, steps.load_task(inp, settings)


def test_each_candidate_carries_the_trace_and_the_digest_the_estimate_read(traced) -> None:
    # GIVEN the Estimate step's output for a spec with a trace
    path, out, _task = traced
    plan = out["candidates"][0]["workload"]
    # THEN the candidate's workload names the trace to replay and what the estimate read of it
    assert plan["trace"] == {
        "path": str(path),
        "format": None,
        "model": None,
        "digest": read_trace(str(path)).digest,
    }


def test_the_load_task_replays_the_trace_at_rates_around_the_predicted_capacity(traced) -> None:
    # GIVEN the load task of the candidate
    path, out, task = traced
    edge = out["candidates"][0]["architecture"]["per_replica"]["rps_slo_limit"]
    # WHEN the load generator reads the trace again and builds the sweep
    replay = replayed_window(task)
    cfg = task.config(replay=replay)
    search = task.capacity_config(replay=replay)
    # THEN its levels are open-loop rates below, at and above the predicted capacity, each the trace time-scaled
    assert cfg.mode == "rate" and cfg.levels == pytest.approx([edge * 0.5, edge, edge * 1.5], rel=1e-3)
    assert cfg.replay is not None and cfg.replay.digest == read_trace(str(path)).digest
    assert len(cfg.replay.t) == 600 and cfg.replay.prefix_keys.count(cfg.replay.prefix_keys[0]) > 1
    # AND the capacity search starts from that capacity and replays the same trace
    assert search is not None and search.capacity_search is not None
    assert search.capacity_search.start == pytest.approx(edge) and search.replay == cfg.replay


def test_a_task_that_replays_a_trace_is_not_run_without_it(traced) -> None:
    # GIVEN the load task of a traced candidate
    _path, _out, task = traced
    # WHEN its sweep is asked for without the trace's window
    with pytest.raises(InvalidInput) as refused:
        task.config()
    # THEN it is refused naming the trace
    assert [p.field for p in refused.value.problems] == ["trace"]


def test_a_trace_that_changed_since_the_estimate_is_refused_naming_it(traced, tmp_path: Path) -> None:
    # GIVEN the load task, and the trace rewritten after the estimate read it
    path, _out, task = traced
    changed = tmp_path / "tuesday.jsonl"
    changed.write_bytes(
        path.read_bytes() + b'{"timestamp": 999999, "input_length": 10, "output_length": 5}\n'
    )
    moved = task.model_copy(update={"trace": task.trace.model_copy(update={"path": str(changed)})})
    # WHEN the load generator reads it
    with pytest.raises(InvalidInput) as refused:
        replayed_window(moved)
    # THEN it refuses, naming the trace and saying the run must start again
    assert str(changed) in refused.value.message and "changed since the estimate" in refused.value.message
