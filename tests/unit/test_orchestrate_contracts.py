"""The sizing run's payloads: what each step returns is what the next step (and the state machine's JSONPaths)
reads, typed once in `sizing.orchestrate.contracts`; a bad payload is refused naming the field.

The steps run in-process here against the in-memory store, a provisioner that answers at once and a launcher that
keeps the task it was handed: no AWS, no sockets."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.launchers import KeepsTask

from sizing.base.errors import InvalidInput
from sizing.catalog import load_catalog
from sizing.deploy.base import Endpoint, TeardownReport
from sizing.loadtest.prompts import PromptSource
from sizing.orchestrate import steps
from sizing.orchestrate.contracts import Candidate, LoadTask
from sizing.orchestrate.settings import OrchestrationSettings
from sizing.store.items import Run
from sizing.workload.parse import token_distribution
from tests.fakes.store import InMemoryStore

ASL = Path(__file__).resolve().parents[2] / "statemachines" / "sizing_run.asl.json"
RUN_ID = "0123456789abcdef"
#: A small workload the planner answers quickly: an 8B model on L40S, EKS and SageMaker (two deployments of the
#: same accelerators, measured once).
SPEC: dict[str, Any] = {
    "name": "contracts-test",
    "model": "llama-3.1-8b",
    "rate": {"peak_rps": 2},
    "traffic": {"profile": "flat"},
    "tokens": {"input": {"mean": 800, "p95": 2000}, "output": {"fixed": 120}},
    "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 10}},
    "constraints": {
        "deployments": ["eks", "sagemaker"],
        "instance_types": ["g6e.xlarge"],
        "quantizations": ["fp8"],
    },
}


class AnswersAtOnce:
    """A provisioner whose endpoint is up as soon as it is applied."""

    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []

    def apply(self, architecture: Any, run_id: str, candidate_id: str | None = None) -> Endpoint:
        self.applied.append(architecture)
        return Endpoint(
            url="http://127.0.0.1:9",
            kind="existing",
            run_id=run_id,
            candidate_id=candidate_id or "",
            model="m",
        )

    def ready(self, endpoint: Endpoint) -> bool:
        return False

    def teardown(self, run_id: str, candidate_id: str | None = None) -> TeardownReport:
        return TeardownReport(deleted=[f"deployment/{run_id}" + (f"-{candidate_id}" if candidate_id else "")])


@pytest.fixture(scope="module")
def estimated() -> tuple[steps.Services, dict[str, Any]]:
    """One Estimate step's output for SPEC, with the parts it ran against."""
    settings = OrchestrationSettings.model_validate(
        {"TABLE_NAME": "llm-sizing-memory", "SIZING_BACKEND": "local", "READY_MAX_ATTEMPTS": 2}
    )
    store = InMemoryStore()
    store.create_run(Run(run_id=RUN_ID, model=SPEC["model"], spec=SPEC, top_k=3))
    store.transition(RUN_ID, "RUNNING", expected_from="PENDING")
    prov = AnswersAtOnce()
    svc = steps.Services(settings, store, lambda _d: prov, KeepsTask(), load_catalog)
    out = steps.estimate_step({"run_id": RUN_ID, "spec": SPEC, "top_k": None, "budget_usd": None}, svc)
    return svc, json.loads(json.dumps(out))  # as Step Functions passes it on: plain JSON


def _paths(prefix: str) -> set[str]:
    """The keys under `prefix` (e.g. `$.poll.value.`) that the state machine's definition reads."""
    text = ASL.read_text()
    return {m.group(1).split(".")[0] for m in re.finditer(re.escape(prefix) + r"([A-Za-z_][\w.]*)", text)}


def test_what_the_state_machine_reads_from_the_estimate_and_its_candidates_is_there(estimated) -> None:
    # given the Estimate step's output as the state machine holds it
    _svc, out = estimated
    # then every key the definition reads from it and from each candidate is present
    assert _paths("$.estimate.value.") <= set(out)
    assert out["refused"] is False and out["reason"] is None
    (cand,) = out["candidates"]  # EKS and SageMaker on one L40S are one measurement
    assert _paths("$.candidate.") <= set(cand)
    assert {"ready_poll_s", "ready_max_attempts", "max_concurrency", "heartbeat_s"} <= set(out["settings"])
    # and the candidate stands for both deployments, with its architecture as the ranking gave it
    assert len(cand["applies_to"]) == 2 and cand["architecture"]["id"] in cand["applies_to"]
    stored = {a["id"]: a for a in _svc.store.get_architectures(RUN_ID)}
    assert cand["architecture"]["id"] in stored
    assert Candidate.model_validate(cand).model_dump(mode="json") == cand


def test_the_workload_a_candidate_carries_names_only_what_the_spec_gave(estimated) -> None:
    # given the candidate's workload
    _svc, out = estimated
    plan = out["candidates"][0]["workload"]
    # then the token shapes are the spec's own, each SLO target is (metric, percentile, limit), and no prompt
    # prefix is shared (the spec declares none)
    assert plan == {
        "input_tokens": {"mean": 800.0, "p95": 2000.0},
        "output_tokens": {"fixed": 120},
        "slo": [["ttft_ms", "p95", 2000.0], ["e2e_s", "p95", 10.0]],
        "shared_prefix_tokens": 0,
    }


def test_a_candidate_goes_from_provision_to_a_load_task_with_the_runs_workload(estimated) -> None:
    # given the first candidate and the settings, as the Map's item selector hands them on
    svc, out = estimated
    cand, settings = out["candidates"][0], out["settings"]
    # when it is provisioned, checked until the check gives up, load-tested and torn down
    endpoint = steps.provision_step({"run_id": RUN_ID, "candidate": cand, "settings": settings}, svc)
    poll = {"attempts": 0}
    checks = []
    while True:
        poll = steps.check_ready_step(
            {"run_id": RUN_ID, "candidate": cand, "endpoint": endpoint, "attempts": poll["attempts"],
             "settings": settings},
            svc,
        )  # fmt: skip
        checks.append(poll)
        if poll["give_up"]:
            break
    launched = steps.start_loadtest_step(
        {
            "task_token": "tok",
            "run_id": RUN_ID,
            "candidate": cand,
            "endpoint": endpoint,
            "settings": settings,
        },
        svc,
    )
    down = steps.teardown_step({"run_id": RUN_ID, "candidate": cand, "outcome": "MEASURED"}, svc)

    # then the readiness check counts up to the limit and says why it gave up, in the keys the Choice reads
    assert [c["attempts"] for c in checks] == [1, 2] and _paths("$.poll.value.") <= set(checks[-1])
    assert checks[-1]["reason"] == f"{endpoint['url']} was not ready after 2 checks 30 s apart"
    # and the load generator's task is the candidate's sweep with the run's workload and serving config
    assert launched == {"launched": "kept"}
    (task,) = svc.launcher.tasks
    assert task["levels"] == cand["levels"] and task["model"] == "m" and task["endpoint"] == endpoint["url"]
    assert task["input_tokens"] == {"mean": 800.0, "p95": 2000.0} and task["output_tokens"] == {"fixed": 120}
    assert task["serving"] == cand["architecture"]["serving"]
    assert task["out_dir"].endswith(f"/{RUN_ID}/{cand['candidate_id']}")
    # and each level's window holds five predicted e2e p95s (the settings' step is the floor), its warm-up two
    # medians, so every stream answers several times in the window
    e2e = cand["architecture"]["predicted"]["e2e_s"]
    assert task["step_s"] == pytest.approx(max(steps.WINDOW_ANSWERS * e2e["p95"], svc.settings.step_s))
    assert task["warmup_s"] >= steps.WARMUP_ANSWERS * e2e["p50"]
    # and the sweep the load-test process runs is built from it in one place
    cfg = LoadTask.model_validate(task).config(engine_version="0.11.0")
    assert cfg.levels == [float(x) for x in cand["levels"]] and cfg.mode == "concurrency"
    assert [(t.metric, t.percentile, t.limit) for t in cfg.slo] == [
        ("ttft_ms", "p95", 2000),
        ("e2e_s", "p95", 10),
    ]
    assert cfg.serving == task["serving"] and cfg.engine_version == "0.11.0"
    assert down == {
        "candidate_id": cand["candidate_id"],
        "outcome": "MEASURED",
        "deleted": [f"deployment/{RUN_ID}-{cand['candidate_id']}"],
        "remaining": [],
    }


def test_a_task_written_by_an_older_launcher_still_reads_and_one_with_a_bad_endpoint_is_refused() -> None:
    # given a task without a serving config, and one whose endpoint is not a URL
    task = {
        "task_token": "t", "run_id": "r", "candidate_id": "c1", "endpoint": "http://127.0.0.1:8000/",
        "model": "m", "levels": [1, 2], "input_tokens": {"fixed": 64}, "output_tokens": {"fixed": 8},
        "slo": [], "step_s": 1.0, "warmup_s": 0.0, "workers": 0, "table_name": "t", "heartbeat_s": 60,
        "out_dir": "/tmp/x",
    }  # fmt: skip
    # then the first reads (and writes back the same keys), the second names the endpoint
    read = LoadTask.model_validate(task)
    assert read.serving is None and read.config().endpoint == "http://127.0.0.1:8000"
    assert set(read.model_dump(mode="json")) == set(task) | {
        "serving",
        "shared_prefix_tokens",
        "seed",
        "capacity_from",
        "capacity_max_level_s",
        "time_scale",
        "trace",
        "rates",
    }
    with pytest.raises(InvalidInput) as refused:
        LoadTask.model_validate({**task, "endpoint": "localhost"}).config()
    assert [p.field for p in refused.value.problems] == ["endpoint"]


def test_two_runs_of_one_spec_send_different_prompts_and_a_given_seed_sends_the_same() -> None:
    # GIVEN the same candidate's load task in two runs
    task = {
        "task_token": "t", "candidate_id": "c1", "endpoint": "http://127.0.0.1:8000", "model": "m", "levels": [1],
        "step_s": 1.0, "warmup_s": 0.0, "workers": 0, "table_name": "t", "heartbeat_s": 60, "out_dir": "/tmp/x",
    }  # fmt: skip
    first = LoadTask.model_validate({**task, "run_id": "run-a"}).config()
    second = LoadTask.model_validate({**task, "run_id": "run-b"}).config()

    # WHEN each draws its first prompts as the load generator does
    def prompts(seed: int) -> list[str]:
        src = PromptSource(
            token_distribution(first.input_tokens),
            token_distribution(first.output_tokens),
            chat=True,
            seed=seed,
        )
        return [src.next().text for _ in range(3)]

    # THEN the runs' seeds differ and so do their prompts: a server's prefix cache cannot serve one from the other
    assert first.seed != second.seed
    assert not set(prompts(first.seed)) & set(prompts(second.seed))
    # AND a seed the caller gives is used as it is (the same prompts again, on purpose)
    again = LoadTask.model_validate({**task, "run_id": "run-c", "seed": first.seed}).config()
    assert prompts(again.seed) == prompts(first.seed)


def test_a_failed_run_states_its_cause_and_what_was_swept(estimated) -> None:
    # given a run that fails in a candidate's loop
    svc, _out = estimated
    failing = "fedcba9876543210"
    svc.store.create_run(Run(run_id=failing, model=SPEC["model"], spec=SPEC, top_k=3))
    error = {"Error": "EndpointNeverReady", "Cause": "http://127.0.0.1:9 was not ready after 2 checks"}
    # when RunFailed runs
    out = steps.fail_run_step({"run_id": failing, "error": error}, svc)
    # then the run is FAILED with the cause, and every deployment kind was swept
    assert out == {
        "status": "FAILED",
        "error": "EndpointNeverReady: http://127.0.0.1:9 was not ready after 2 checks",
        "torn_down": [f"deployment/{failing}"] * 2,
    }
    assert svc.store.get_run(failing).status == "FAILED"


@pytest.mark.parametrize(
    ("event", "message", "fields"),
    [
        ("not an object", "the step's input must be an object", ["event"]),
        ({"run_id": RUN_ID}, "the step's input is incomplete", ["candidate", "endpoint", "settings"]),
        (
            {"run_id": RUN_ID, "candidate": {"candidate_id": "c1"}, "endpoint": {}, "settings": {}},
            "the step's input is not valid",
            ["candidate.architecture", "candidate.levels", "endpoint.url"],
        ),
        (
            {"run_id": RUN_ID, "candidate": "c1", "endpoint": [], "settings": {"ready_max_attempts": "soon"}},
            "the step's input is not valid",
            ["candidate", "endpoint", "settings.ready_max_attempts"],
        ),
    ],
)
def test_a_bad_state_input_is_refused_naming_the_fields(
    estimated, event: Any, message: str, fields: list[str]
) -> None:
    # given a CheckReady input that is not an object, lacks keys, or holds values of the wrong shape
    svc, _out = estimated
    # when the step reads it
    with pytest.raises(InvalidInput) as refused:
        steps.check_ready_step(event, svc)
    # then the refusal says so in the step's words and names each field, without pydantic's type names
    assert refused.value.message == message
    named = [p.field for p in refused.value.problems]
    assert all(any(n.startswith(f) for n in named) for f in fields), named
    assert not any("pydantic" in p.message.lower() for p in refused.value.problems)
    assert not any("Candidate" in p.message or "Endpoint" in p.message for p in refused.value.problems)
