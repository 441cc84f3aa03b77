"""The learning loop on moto: measured levels stored as items, the refit adopted (or not) into S3, the next
estimate answered from the measurement, drift flagged, rollbacks, corrupt objects and concurrent refits.

The "endpoint" is one of known timing (`support.learning.known_timing`): the estimator's own step model with
every step `SLOWDOWN` times slower, which is what a server 30% slower than the estimate measures at every
closed-loop level."""

from __future__ import annotations

import json
import logging
from typing import Any

import boto3
import pytest
from support.learning import BUCKET, SLOWDOWN, SPEC, TABLE, dist, known_timing, learning_stack, slowed

from sizing.catalog import load_catalog
from sizing.learn import profiles as profiles_mod
from sizing.learn.levels import LevelStore
from sizing.learn.loop import after_collect
from sizing.learn.profiles import use_store
from sizing.learn.refit import commit, overview, prepare, rollback
from sizing.orchestrate.steps import choose_candidates
from sizing.perf.calibration import PROFILE_PATH, load_profiles, profile_for
from sizing.perf.predict import predict
from sizing.perf.replica import replica_of
from sizing.perf.step import StepModel
from sizing.plan import estimate
from sizing.store import SizingStore
from sizing.workload.derived import build_model
from sizing.workload.parse import parse_spec


@pytest.fixture
def aws():
    with learning_stack() as stack:
        yield stack


def measured_run(k: float = SLOWDOWN, served_model: str | None = None, run_id: str = "0123456789abcdef"):
    """A run's architectures, `measured` and stored steps as CollectAndRank sees them, against an endpoint of
    known timing (`k` times slower than the reference profile) serving `served_model`."""
    cat = load_catalog()
    spec = parse_spec(SPEC)
    result = estimate(spec, catalog=cat).document()
    cand = choose_candidates(result, 1)[0]
    arch = cand.architecture.as_json()
    wm = build_model(spec, cat.model(spec.model).id)
    steps = []
    for i, c in enumerate(cand.levels):
        sim = known_timing(arch, wm, cat, c, k)
        steps.append(
            {
                "candidate_id": "c1",
                "record": {
                    "step": i,
                    "target": {"concurrency": c},
                    "requests": 1000,
                    "errors": {},
                    "ttft_ms": dist(sim.ttft_ms),
                    "tpot_ms": dist(sim.tpot_ms),
                    "e2e_s": dist(sim.e2e_s),
                    "input_tokens": wm.input_tokens.mean,
                    "output_tokens": wm.output_tokens.mean,
                    "requests_per_s": sim.requests_per_s,
                    "output_tokens_per_s": sim.output_tokens_per_s,
                    "serving": arch["serving"],
                    "engine_version": "0.11.0",
                    "served_model": served_model or arch["model"],
                },
            }
        )
    measured = [{"candidate_id": "c1", "status": "MEASURED", "applies_to": cand.applies_to}]
    return result["architectures"], measured, steps, run_id, wm, cat, cand


def collect(
    store: SizingStore, run: tuple, origin: str = "endpoint", backend: str = "local"
) -> dict[str, Any]:
    """CollectAndRank's learning part; `backend="aws"` stores and queues the refit for the calibration function."""
    archs, measured, steps, run_id, wm, cat, _cand = run
    return after_collect(
        store=store,
        backend=backend,
        architectures=archs,
        measured=measured,
        steps=steps,
        run_id=run_id,
        origin=origin,
        wm=wm,
        catalog=cat,
    )


def predict_like(arch: dict[str, Any], **kw: Any) -> dict[str, Any]:
    s = arch["serving"]
    args = {
        "tp": arch["tensor_parallel"],
        "quant": arch["quantization"],
        "engine": arch["engine"],
        "input_tokens": 800,
        "output_tokens": 150,
        "max_num_seqs": s["max_num_seqs"],
        "max_num_batched_tokens": s["max_num_batched_tokens"],
        "kv_cache_dtype": s["kv_cache_dtype"],
        "gpu_memory_utilization": s["gpu_memory_utilization"],
        "max_model_len": s["max_model_len"],
        **kw,
    }
    return predict(arch["model"], arch["instance_type"], **args)


# --- targets ----------------------------------------------------------------------------------------------
def test_one_measured_run_of_a_slower_server_moves_the_next_estimates(aws):
    # given an endpoint 30% slower than the estimate, measured at three levels by one run
    store, profiles = aws
    run = measured_run()
    arch = next(a for a in run[0] if a["id"] in run[6].applies_to)
    levels = run[6].levels
    before_other = predict_like(arch, concurrency=levels[-1] * 2)
    before_short = predict_like(arch, concurrency=10, input_tokens=300, output_tokens=300)

    # when CollectAndRank stores the run's levels and the embedded default refits in-process
    learning = collect(store, run)

    # then the refit is adopted, with the reference rows' error worse by at most one point per metric
    assert learning["measured_levels"] == 3
    assert learning["refit"]["status"] == "adopted", learning["refit"].get("reasons")
    adopted = profiles.adopted()
    ref = adopted["cross_validation"]["reference"]
    for m in ("ttft", "tpot", "throughput"):
        assert ref["after"][m]["mdape"] - ref["before"][m]["mdape"] <= 0.01
    team = adopted["cross_validation"]["team"]
    assert team["after"]["overall"]["mdape"] < team["before"]["overall"]["mdape"]

    # and the next estimate of the exact configuration is answered from the measurement, within 5%
    mid = levels[1]
    truth = known_timing(arch, run[4], run[5], mid, SLOWDOWN)
    got = predict_like(arch, concurrency=mid)
    assert got["basis"] == "measured"
    assert adopted["version"] in got["profile_version"]
    assert abs(got["tpot_ms"]["mean"] / truth.tpot_ms.mean - 1) <= 0.05
    assert abs(got["ttft_ms"]["mean"] / truth.ttft_ms.mean - 1) <= 0.05
    assert abs(got["output_tokens_per_s"] / truth.output_tokens_per_s - 1) <= 0.05

    # and other loads and token lengths on the same hardware move towards what the server does
    for before, kw in (
        (before_other, {"concurrency": levels[-1] * 2}),
        (before_short, {"concurrency": 10, "input_tokens": 300, "output_tokens": 300}),
    ):
        after = predict_like(arch, **kw)
        assert after["basis"] == "calibrated"
        t = known_timing(
            arch,
            run[4],
            run[5],
            kw["concurrency"],
            SLOWDOWN,
            *(
                (_fixed(kw["input_tokens"]), _fixed(kw["output_tokens"]))
                if "input_tokens" in kw
                else (_fixed(800), _fixed(150))
            ),
        )
        assert abs(after["tpot_ms"]["mean"] - t.tpot_ms.mean) < abs(
            before["tpot_ms"]["mean"] - t.tpot_ms.mean
        )
        assert abs(after["ttft_ms"]["mean"] - t.ttft_ms.mean) < abs(
            before["ttft_ms"]["mean"] - t.ttft_ms.mean
        )


def _fixed(n: int) -> Any:
    from sizing.base.distributions import TokenDistribution

    return TokenDistribution.fixed(n)


def test_the_planner_names_the_team_profile_it_used(aws):
    # given a measured run of a slower server, refitted and adopted
    store, profiles = aws
    collect(store, measured_run())
    version = profiles.adopted()["version"]

    # when the same workload is estimated again
    result = estimate(parse_spec(SPEC), catalog=load_catalog()).document()

    # then each architecture on that hardware names the team profile; the configuration measured rests on its
    # measurement ("measured": tests/integration/test_learning_loop_planner.py)
    arch = result["architectures"][0]
    assert version in arch["calibration"]["profile_version"]
    assert arch["basis"] == "measured"
    assert arch["profile_version"] == arch["calibration"]["profile_version"]


# --- measurements are data --------------------------------------------------------------------------------
def test_levels_are_items_queryable_by_family_and_model(aws):
    # given a measured run
    store, _ = aws
    run = measured_run()
    collect(store, run)

    # when the levels are queried by hardware family and model
    got = LevelStore(store).query("l40s", "meta-llama/Llama-3.1-8B-Instruct")

    # then each level is its own item with what decides its figures
    assert sorted(lv.level for lv in got) == sorted(run[6].levels)
    lv = got[0]
    assert lv.engine_version == "0.11.0" and lv.instance_type == "g6e.xlarge"
    assert lv.serving and lv.serving["max_num_seqs"] == 256
    assert lv.measured["ttft_ms"]["p95"] > 0 and lv.predicted["ttft_ms"]["p95"] > 0
    assert LevelStore(store).query("hopper") == []


def test_twin_levels_are_stored_as_twins_and_never_calibrate(aws):
    # given a run measured on a local twin
    store, profiles = aws

    # when CollectAndRank stores it
    learning = collect(store, measured_run(), origin="twin")

    # then its levels are twin levels, the refit never ran, and nothing is adopted
    assert learning["twin_levels"] == 3 and learning["measured_levels"] == 0
    assert learning["refit"] is None
    assert LevelStore(store).query() == []
    assert len(LevelStore(store).query(twin=True)) == 3
    assert profiles.adopted() is None


def test_a_server_reporting_another_model_is_refused_with_the_reason(aws):
    # given a run whose server reports it serves another model
    store, profiles = aws

    # when CollectAndRank stores it
    learning = collect(store, measured_run(served_model="Qwen/Qwen2.5-7B-Instruct"))

    # then no level is stored, and each refusal says why
    assert learning["measured_levels"] == 0
    assert len(learning["refused"]) == 3
    assert "reports model 'Qwen/Qwen2.5-7B-Instruct'" in learning["refused"][0]["reason"]
    assert "asked for 'meta-llama/Llama-3.1-8B-Instruct'" in learning["refused"][0]["reason"]
    assert profiles.adopted() is None


def test_a_level_recorded_without_a_request_count_is_refused_and_the_others_are_stored(aws):
    # given a run whose first stored level states its request count as null (a hand-written or truncated record)
    store, _profiles = aws
    run = measured_run()
    steps = run[2]
    steps[0]["record"]["requests"] = None

    # when CollectAndRank stores it
    learning = collect(store, run)

    # then that level is refused as having no successful request, and the others are stored
    assert learning.get("error") is None
    assert [r["reason"] for r in learning["refused"]] == ["no successful request"]
    assert learning["measured_levels"] == len(steps) - 1


# --- adoption, versions, faults ---------------------------------------------------------------------------
def test_a_refit_that_does_not_improve_is_kept_as_a_candidate(aws):
    # given a server exactly as fast as the estimate (nothing to correct)
    store, profiles = aws

    # when its run is refitted
    learning = collect(store, measured_run(k=1.0))

    # then the version is stored as a candidate with its figures, and nothing is adopted
    assert learning["refit"]["status"] == "candidate"
    assert profiles.adopted() is None
    listed = overview(profiles)
    assert listed["adopted"] == "reference"
    assert listed["versions"][0]["status"] == "candidate"
    assert "does not improve" in " ".join(listed["versions"][0]["decision"]["reasons"])


def test_two_refits_at_once_adopt_at_most_one(aws):
    # given a stored run, and two refits of it that read the adopted pointer at the same moment
    store, profiles = aws
    queued = collect(store, measured_run(run_id="a" * 16), backend="aws")
    assert queued["refit"] == {"where": "calibration function", "status": "queued"}
    levels = LevelStore(store).query()
    first, second = prepare(levels, profiles, "a"), prepare(levels, profiles, "b")

    # when both try to adopt
    won = commit(first, profiles)
    lost = commit(second, profiles)

    # then the first adopts and the second stays a candidate saying why
    assert won["status"] == "adopted" and lost["status"] == "candidate"
    assert "another refit adopted first" in lost["decision"]["reasons"][-1]
    assert profiles.adopted()["version"] == won["version"]


def test_a_failing_refit_leaves_the_adopted_profile_untouched(aws, monkeypatch):
    # given an adopted profile
    store, profiles = aws
    collect(store, measured_run())
    pointer, etag = profiles.read_pointer()

    # when the next refit fails half-way
    from sizing.learn import correction

    def broken(_rows: Any) -> Any:
        raise RuntimeError("disk full")

    monkeypatch.setattr(correction, "fit", broken)
    learning = collect(store, measured_run(run_id="f" * 16))

    # then the run says so, and the adopted pointer is byte for byte what it was
    assert learning["refit"]["status"] == "failed"
    assert "disk full" in learning["refit"]["error"]
    assert profiles.read_pointer() == (pointer, etag)


def test_a_corrupt_profile_falls_back_to_the_newest_valid_version(aws, caplog):
    # given two adopted versions, the newer one corrupted in S3
    store, profiles = aws
    collect(store, measured_run(run_id="1" * 16))
    older = profiles.adopted()["version"]
    collect(store, measured_run(k=1.45, run_id="2" * 16))
    newer = profiles.adopted()["version"]
    assert newer != older
    profiles.client.put_object(Bucket=BUCKET, Key=profiles.version_key(newer), Body=b"{not json")
    profiles_mod.invalidate()

    # when an estimator loads the adopted profile
    with caplog.at_level(logging.ERROR, logger="sizing.learn"):
        got = profiles_mod.active()

    # then it uses the older version and the error log names the corrupt object
    assert got["version"] == older
    assert f"s3://{BUCKET}/calibration/versions/{newer}.json" in caplog.text


def test_rollback_adopts_an_earlier_version_and_the_reference(aws):
    # given two adopted versions
    store, profiles = aws
    collect(store, measured_run(run_id="1" * 16))
    older = profiles.adopted()["version"]
    collect(store, measured_run(k=1.6, run_id="2" * 16))

    # when the team rolls back to the older one, then to the reference profile
    rollback(profiles, older)
    back = profiles_mod.active()
    rollback(profiles, "reference")

    # then estimators use each in turn
    assert back["version"] == older
    assert profiles_mod.active() is None
    assert overview(profiles)["adopted"] == "reference"


def test_rollback_to_an_unknown_version_is_refused_naming_it(aws):
    # given no such version
    _store, profiles = aws
    from sizing.base.errors import InvalidInput

    # when / then the rollback is refused in the user's words
    with pytest.raises(InvalidInput) as err:
        rollback(profiles, "20990101T000000000000Z-abcdef")
    assert err.value.problems[0].field == "rollback"


# --- drift ------------------------------------------------------------------------------------------------
def test_a_measurement_outside_its_interval_is_flagged(aws):
    # given a server 1.8x slower than the estimate (outside the stated TPOT interval of l40s x vllm)
    store, _ = aws

    # when CollectAndRank stores its run
    learning = collect(store, measured_run(k=1.8))

    # then the drift is flagged in words, with what happens next
    lines = learning["drift_lines"]
    assert any(
        line.startswith("TPOT p95 +") and "over the estimate on g6e TP1 vLLM 0.11" in line for line in lines
    )
    assert all("calibration refit" in line for line in lines)


# --- the deployed parts: the calibration function, its rule, GET /calibration --------------------------------
def _context(name: str) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(
        function_name=name,
        function_version="$LATEST",
        memory_limit_in_mb=1024,
        invoked_function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:{name}",
        aws_request_id="52fdfc07-2182-154f-163f-5f0f9a621d72",
        get_remaining_time_in_millis=lambda: 120_000,
    )


def _deliver(pattern: dict[str, Any], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events a rule with `pattern` delivers (moto's EventBridge, an SQS queue as the target)."""
    bus, sqs = boto3.client("events", region_name="us-east-1"), boto3.client("sqs", region_name="us-east-1")
    bus.create_event_bus(Name="learn")
    url = sqs.create_queue(QueueName="learn")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    bus.put_rule(Name="refit", EventBusName="learn", EventPattern=json.dumps(pattern))
    bus.put_targets(Rule="refit", EventBusName="learn", Targets=[{"Id": "q", "Arn": arn}])
    bus.put_events(
        Entries=[
            {
                "EventBusName": "learn",
                "Source": e["source"],
                "DetailType": e["detail-type"],
                "Detail": json.dumps(e["detail"]),
            }
            for e in events
        ]
    )
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in got]


def test_the_completion_event_of_a_measured_run_triggers_the_refit_function(aws, monkeypatch):
    # given a measured run stored by CollectAndRank on AWS (refit queued), and its completion event
    from sizing.lambdas import load_function
    from sizing.store.schema import load_template
    from tests.conftest import load_event

    store, profiles = aws
    collect(store, measured_run(), backend="aws")
    event = load_event("calibration_run_measured")
    rule = load_template()["Resources"]["CalibrationFunction"]["Properties"]["Events"]["RunMeasured"]
    pattern = rule["Properties"]["Pattern"]
    unmeasured = {**event, "detail": {**event["detail"], "ranking": {"status": "SUCCEEDED", "learning": {}}}}

    # when both are put on a bus whose rule is the calibration function's (delivering to a queue here)
    delivered = _deliver(pattern, [event, unmeasured])
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("CALIBRATION_BUCKET", BUCKET)
    fn = load_function("functions/calibration/")
    fn.services.cache_clear()
    out = fn.lambda_handler(event, _context("llm-sizing-calibration-test"))

    # then the rule fires only for runs that measured a real endpoint, and the refit is adopted
    assert [d["detail"]["ranking"].get("learning", {}).get("measured_levels") for d in delivered] == [3]
    assert out["status"] == "adopted"
    assert profiles.adopted()["version"] == out["version"]


def test_get_calibration_lists_versions_figures_and_what_changed(aws, monkeypatch):
    # given an adopted refit and a candidate after it
    from sizing.lambdas import load_function
    from tests.conftest import load_event

    store, _profiles = aws
    collect(store, measured_run(run_id="1" * 16))
    collect(store, measured_run(k=1.0, run_id="2" * 16))
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("STATE_MACHINE_ARN", "arn:aws:states:us-east-1:123456789012:stateMachine:x")

    # when GET /calibration is asked
    out = load_function("functions/api/").lambda_handler(load_event("api_get_calibration"), _context("api"))

    # then it names the adopted version and, per version, its figures and what changed
    assert out["statusCode"] == 200
    body = json.loads(out["body"])
    assert body["configured"] is True
    assert body["adopted"] == body["history"][0] != "reference"
    statuses = [v["status"] for v in body["versions"]]
    assert sorted(statuses) == ["adopted", "candidate"]
    first = next(v for v in body["versions"] if v["status"] == "adopted")
    assert any("new correction" in c for c in first["what_changed"])
    assert first["team_error"]["after"]["mdape"] < first["team_error"]["before"]["mdape"]
    assert set(first["reference_error"]) == {"ttft", "tpot", "throughput"}


# --- sizing calibrate --rollback / --versions ---------------------------------------------------------------
def test_sizing_calibrate_rolls_back_and_lists_versions(aws, monkeypatch, capsys):
    # given two adopted versions in the team's bucket
    from sizing.cli import main

    store, profiles = aws
    collect(store, measured_run(run_id="1" * 16))
    older = profiles.adopted()["version"]
    collect(store, measured_run(k=1.6, run_id="2" * 16))
    monkeypatch.setenv("CALIBRATION_BUCKET", BUCKET)

    # when the team rolls back from the command line, then lists the versions
    code = main(["calibrate", "--rollback", older])
    said = capsys.readouterr().out
    listed = main(["calibrate", "--versions", "--json"])
    data = json.loads(capsys.readouterr().out)

    # then the older version is adopted again, and the listing says so
    assert code == 0 and listed == 0
    assert f"adopted {older}" in said
    assert data["adopted"] == older and len(data["versions"]) == 2


def test_sizing_calibrate_rollback_without_a_bucket_names_the_option(monkeypatch, capsys):
    # given no calibration bucket configured
    from sizing.cli import main

    monkeypatch.delenv("CALIBRATION_BUCKET", raising=False)

    # when a rollback is asked
    code = main(["calibrate", "--rollback", "reference"])

    # then it exits 2 naming what is missing, without a traceback
    err = capsys.readouterr().err
    assert code == 2
    assert "--bucket" in err and "Traceback" not in err


# --- a loopback endpoint of known timing, measured by the real load task ------------------------------------
LOOPBACK_SPEC = {
    **SPEC,
    "tokens": {"input": {"mean": 400, "p95": 800}, "output": {"mean": 40, "p95": 60}},
}
LOOPBACK_LEVELS = [4, 8, 16]


class _TaskToken:
    """Step Functions' side of the load task's token (what the state machine would receive)."""

    def __init__(self) -> None:
        self.outcome: dict[str, Any] = {}

    def send_task_heartbeat(self, **_: Any) -> None:
        return None

    def send_task_success(self, taskToken: str, output: str) -> None:
        self.outcome = {"success": json.loads(output)}

    def send_task_failure(self, taskToken: str, error: str, cause: str) -> None:
        self.outcome = {"failure": f"{error}: {cause}"}


# its endpoint's timing is measured: it shares the timing tests' worker, never two at once (tests/conftest.py)
@pytest.mark.xdist_group(name="timing")
def test_a_loopback_server_30_percent_slower_is_learned_from_one_run(aws, tmp_path):
    # given a twin on 127.0.0.1 whose every step is 30% slower than the estimate (an endpoint of known timing)
    from sizing.base.serving_config import ServingConfig
    from sizing.orchestrate.loadtask import LoadTask, execute
    from sizing.twin import start_twin

    store, profiles = aws
    cat = load_catalog()
    spec = parse_spec(LOOPBACK_SPEC)
    result = estimate(spec, catalog=cat).document()
    cand = choose_candidates(result, 1)[0]
    arch = cand.architecture.as_json()
    wm = build_model(spec, cat.model(spec.model).id)
    cfg = replica_of(arch, cat)
    ref = profile_for(cfg.parts(cat).accelerator.id, cfg.engine, load_profiles(str(PROFILE_PATH)))
    slow = StepModel.for_config(cfg, profile=slowed(ref, SLOWDOWN), catalog=cat)
    serving = ServingConfig.model_validate(arch["serving"])
    with start_twin(cfg, step_model=slow, served_model=arch["model"], serving=serving) as twin:
        # when the load task measures it at three levels and CollectAndRank stores the run (refit in-process)
        token = _TaskToken()
        task = LoadTask(
            task_token="t",
            run_id="100000000000000a",
            candidate_id="c1",
            endpoint=twin.url,
            model=arch["model"],
            levels=LOOPBACK_LEVELS,
            input_tokens=spec.tokens.input.model_dump(mode="json", exclude_none=True),
            output_tokens=spec.tokens.output.model_dump(mode="json", exclude_none=True),
            step_s=3.0,
            warmup_s=0.5,
            workers=0,
            table_name=TABLE,
            heartbeat_s=60,
            out_dir=str(tmp_path),
            serving=arch["serving"],
        )
        execute(task, token, store)
    assert "success" in token.outcome, token.outcome
    steps = [m.model_dump(mode="json") for m in store.list_measurements("100000000000000a")]
    measured = [{"candidate_id": "c1", "status": "MEASURED", "applies_to": cand.applies_to}]
    learning = after_collect(
        store=store,
        backend="local",
        architectures=result["architectures"],
        measured=measured,
        steps=steps,
        run_id="100000000000000a",
        origin="endpoint",
        wm=wm,
        catalog=cat,
    )

    # then the server's own model name was checked, the refit adopted, and the reference rows barely moved
    assert learning["measured_levels"] == 3, learning
    assert learning["refit"]["status"] == "adopted", learning["refit"].get("reasons")
    level = LevelStore(store).query()[0]
    assert level.served_model == arch["model"] and level.engine_version.startswith("twin-")
    adopted = profiles.adopted()
    ref_cv = adopted["cross_validation"]["reference"]
    assert all(ref_cv["after"][m]["mdape"] - ref_cv["before"][m]["mdape"] <= 0.01 for m in ("ttft", "tpot"))
    scales = adopted["corrections"][f"l40s/vllm/{cat.model(spec.model).id}"]
    # the server's own steps said more than its levels' averages: the step fit was kept, not the stretch
    assert scales.get("steps") and scales["steps"]["timed_steps"] >= 50, scales
    assert any("the step fit kept" in r for r in adopted["decision"]["reasons"]), adopted["decision"]

    # and the next estimate of the middle level is its measurement (within 5%), other loads move towards it
    mid = next(lv for lv in LevelStore(store).query() if lv.level == LOOPBACK_LEVELS[1])
    kw = {"input_tokens": round(mid.input_tokens), "output_tokens": round(mid.output_tokens)}
    got = predict_like(arch, concurrency=LOOPBACK_LEVELS[1], **kw)
    assert got["basis"] == "measured"
    assert abs(got["tpot_ms"]["mean"] / mid.measured["tpot_ms"]["mean"] - 1) <= 0.05
    far = predict_like(arch, concurrency=64, **kw)
    use_store(None)
    modelled = predict_like(arch, concurrency=64, **kw)
    use_store(profiles)
    truth = known_timing(arch, wm, cat, 64, SLOWDOWN, _fixed(kw["input_tokens"]), _fixed(kw["output_tokens"]))
    assert far["basis"] == "calibrated" and modelled["basis"] == "modelled"
    assert abs(far["tpot_ms"]["mean"] - truth.tpot_ms.mean) < abs(
        modelled["tpot_ms"]["mean"] - truth.tpot_ms.mean
    )
    # at a load the run never measured (64 streams), the steps' factors carry: the server's own figures within 5%
    # (by hand: TPOT 80.7 ms and TTFT 360 ms against 79.8 and 356, where the reference reads 62.1 and 273)
    for metric in ("tpot_ms", "ttft_ms"):
        assert abs(far[metric]["mean"] / getattr(truth, metric).mean - 1) <= 0.05, (metric, far[metric])


# --- the embedded default end to end: sizing run's state machine on moto, the refit in-process --------------
# its endpoint's timing is measured: it shares the timing tests' worker, never two at once (tests/conftest.py)
@pytest.mark.xdist_group(name="timing")
def test_the_embedded_default_learns_from_a_run_against_a_real_endpoint(tmp_path):
    # given a server on 127.0.0.1 30% slower than the estimate, on the instance type the spec is restricted to
    from sizing.base.serving_config import ServingConfig
    from sizing.twin import start_twin
    from sizing_local.stack import run_local

    cat = load_catalog()
    # (a TTFT objective of 150 ms puts the replica's knee at 18 streams, so the levels are 6, 12 and 18: at the
    # 89 streams of a 2 s objective the twin and the load generator share two cores at ~6,000 tokens a second, and
    # what is measured there is the host's lateness, not the server's timing)
    spec_raw = {**LOOPBACK_SPEC, "model": "llama-3.1-8b", "slo": {"ttft_ms": {"p95": 150}}}
    arch = choose_candidates(estimate(parse_spec(spec_raw), catalog=cat).document(), 1)[
        0
    ].architecture.as_json()
    cfg = replica_of(arch, cat)
    ref = profile_for(cfg.parts(cat).accelerator.id, cfg.engine, load_profiles(str(PROFILE_PATH)))
    slow = StepModel.for_config(cfg, profile=slowed(ref, SLOWDOWN), catalog=cat)
    serving = ServingConfig.model_validate(arch["serving"])
    with start_twin(cfg, step_model=slow, served_model=arch["model"], serving=serving) as server:
        # when `sizing run --endpoint URL` measures it through the real state machine on the embedded AWS
        result = run_local(
            spec_raw, top_k=1, out_dir=tmp_path, endpoint_url=server.url, step_s=3.0, warmup_s=0.5
        )

    # then its levels were stored as real measurements and refitted in-process into an adopted profile
    assert result.run["status"] == "SUCCEEDED", result.run
    learning = result.ranking["learning"]
    # (a level of 3 s in which no request finished is refused as such: nothing was measured there)
    assert learning["measured_levels"] >= 2
    assert learning["measured_levels"] + len(learning["refused"]) == len(result.measurements)
    assert all(r["reason"] == "no successful request" for r in learning["refused"])
    assert learning["refit"]["where"] == "in-process"
    assert learning["refit"]["status"] == "adopted", learning["refit"].get("reasons")
