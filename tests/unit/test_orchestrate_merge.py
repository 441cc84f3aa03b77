"""A run's load-test steps merged into the estimate: what served them (a twin or a real endpoint), the configuration
they belong to, and the prediction re-simulated at the same load level the figures were taken at."""

from __future__ import annotations

from typing import Any

import pytest

from sizing.base.errors import InvalidInput
from sizing.catalog import load_catalog
from sizing.orchestrate.merge import merge_measurements, predicted_at_level
from sizing.plan import estimate
from sizing.workload.derived import build_model
from sizing.workload.parse import parse_spec

#: An 8B model on one L40S with short fixed requests: the estimate takes a fraction of a second.
SPEC = parse_spec(
    {
        "name": "merge-test",
        "model": "llama-3.1-8b",
        "rate": {"peak_rps": 2},
        "traffic": {"profile": "flat"},
        "tokens": {"input": {"fixed": 200}, "output": {"fixed": 20}},
        "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 10}},
        "constraints": {"deployments": ["eks"], "instance_types": ["g6e.xlarge"], "quantizations": ["fp8"]},
    }
)
CAT = load_catalog()


@pytest.fixture(scope="module")
def arch() -> dict[str, Any]:
    return dict(estimate(SPEC, catalog=CAT).document()["architectures"][0])


def _record(users: int, ttft_ms: float = 80.0, **extra: Any) -> dict[str, Any]:
    """One sweep level as the load generator stores it."""
    return {
        "target": {"concurrency": users},
        "requests": 50 * users,
        "errors": {},
        "input_tokens": 200.0,
        "output_tokens": 20.0,
        "ttft_ms": {"p50": ttft_ms / 2, "p95": ttft_ms, "p99": ttft_ms * 1.2, "mean": ttft_ms / 2},
        "tpot_ms": {"p50": 10.0, "p95": 12.0, "p99": 13.0, "mean": 10.0},
        "e2e_s": {"p50": 0.3, "p95": 0.4, "p99": 0.5, "mean": 0.3},
        "requests_per_s": 2.0 * users,
        "output_tokens_per_s": 40.0 * users,
        **extra,
    }


def _merge(arch: dict[str, Any], records: list[dict[str, Any]], origin: str) -> dict[str, Any]:
    steps = [{"candidate_id": "c1", "record": r} for r in records]
    return merge_measurements(
        [arch],
        [{"candidate_id": "c1", "applies_to": [arch["id"]]}],
        steps,
        SPEC,
        CAT,
        run_id="run12345",
        origin=origin,
    )


def test_a_twins_figures_are_marked_as_the_twins_and_its_rows_as_refused_by_calibration(arch) -> None:
    # given three levels load-tested on a local twin
    # when they are merged
    merged = _merge(arch, [_record(2), _record(4), _record(8)], origin="twin")
    measured = merged["architectures"][0]["measured"]
    # then the architecture says a twin produced them, and the calibration rows say so too
    assert measured["origin"] == "twin"
    assert "twin" in measured["how"] and "not a measurement" in measured["how"]
    assert merged["calibration_rows"] and all(r["origin"] == "twin" for r in merged["calibration_rows"])


@pytest.mark.parametrize("origin", ["endpoint", "loadtest"])
def test_a_real_servers_figures_are_measured_and_its_rows_join_calibration(arch, origin: str) -> None:
    # given levels load-tested on a real server (`loadtest` is the name callers used before `endpoint`)
    merged = _merge(arch, [_record(2), _record(4)], origin=origin)
    # then the figures are the endpoint's, and the rows are load-test rows calibration keeps
    assert merged["architectures"][0]["measured"]["origin"] == "endpoint"
    assert all(r["origin"] == "loadtest" for r in merged["calibration_rows"])


def test_an_unknown_origin_is_refused_naming_it(arch) -> None:
    with pytest.raises(InvalidInput) as err:
        _merge(arch, [_record(2)], origin="lab")
    assert err.value.problems[0].field == "origin"


def test_the_measurement_names_the_configuration_and_engine_version_it_belongs_to(arch) -> None:
    # given steps recorded with the serving config measured and the version the server reported
    records = [_record(c, serving=arch["serving"], engine_version="0.11.0") for c in (2, 4)]
    # when merged
    measured = _merge(arch, records, origin="endpoint")["architectures"][0]["measured"]
    # then the measured block carries both
    assert measured["serving"] == arch["serving"] and measured["engine_version"] == "0.11.0"
    # and steps recorded before either was kept fall back to the architecture's config, with no version
    older = _merge(arch, [_record(2)], origin="endpoint")["architectures"][0]["measured"]
    assert older["serving"] == arch["serving"] and older["engine_version"] is None


def test_the_prediction_is_re_simulated_at_the_level_the_figures_were_taken_at(arch) -> None:
    # given a sweep whose highest passing level is 8 users
    measured = _merge(arch, [_record(1), _record(8)], origin="twin")["architectures"][0]["measured"]
    at_level = measured["predicted_at_level"]
    # then the prediction shown beside the figures is at 8 users too
    assert measured["at"] == {"concurrency": 8} and at_level["at"] == {"concurrency": 8}
    assert all(at_level[m]["p95"] > 0 for m in ("ttft_ms", "tpot_ms", "e2e_s"))
    # and it is the load that sets it: 8 users share the replica, so each token comes slower than for one user
    wm = build_model(SPEC, CAT.model(SPEC.model).id)
    alone = predicted_at_level(arch, {"concurrency": 1}, wm, CAT)
    assert alone is not None and alone.tpot_ms.p95 is not None
    assert at_level["tpot_ms"]["p95"] > alone.tpot_ms.p95


def test_a_level_whose_users_fell_into_lock_step_is_re_simulated_in_their_groups(arch) -> None:
    # given a 32-user level whose users all went out together, cycle after cycle (the load generator's
    # lockstep_group)
    merged = _merge(arch, [_record(32, lockstep_group=32.0)], origin="endpoint")
    at_level = merged["architectures"][0]["measured"]["predicted_at_level"]
    # then the prediction beside it is re-simulated with those groups: a group's prompts are prefilled together,
    # so first tokens come later than for the same users at random phases
    wm = build_model(SPEC, CAT.model(SPEC.model).id)
    spread = predicted_at_level(arch, {"concurrency": 32}, wm, CAT)
    assert spread is not None and spread.ttft_ms.p50 is not None
    assert at_level["ttft_ms"]["p50"] > 1.3 * spread.ttft_ms.p50
    # and its calibration row starts the users together; a level at random phases stays spread
    assert merged["calibration_rows"][0]["start"] == "together"
    plain = _merge(arch, [_record(32, lockstep_group=1.2)], origin="endpoint")
    assert plain["calibration_rows"][0]["start"] == "spread"


def test_the_re_simulation_runs_the_architectures_serving_config(arch) -> None:
    # given the same architecture served one sequence at a time instead of the engine's default batch
    wm = build_model(SPEC, CAT.model(SPEC.model).id)
    one_at_a_time = {**arch, "serving": {**arch["serving"], "max_num_seqs": 1}}
    # when both are re-simulated at 8 users
    default = predicted_at_level(arch, {"concurrency": 8}, wm, CAT)
    serial = predicted_at_level(one_at_a_time, {"concurrency": 8}, wm, CAT)
    # then the single-sequence config queues its requests: first tokens come far later, and fewer requests finish
    assert default is not None and serial is not None
    assert serial.ttft_ms.p95 is not None and default.ttft_ms.p95 is not None
    assert serial.ttft_ms.p95 > 3 * default.ttft_ms.p95
    assert serial.requests_per_s is not None and default.requests_per_s is not None
    assert serial.requests_per_s < default.requests_per_s


def test_the_re_simulation_sends_the_prefix_the_levels_prompts_shared(arch) -> None:
    # given a RAG-like workload (3,000-token prompts) on a configuration that caches prefixes, and a level whose
    # prompts all started with the same 2,400 tokens against the same level without a shared prefix
    rag = parse_spec(
        {
            **SPEC.model_dump(mode="json", exclude_none=True),
            "tokens": {"input": {"fixed": 3000}, "output": {"fixed": 20}},
        }
    )
    cached = {**arch, "serving": {**arch["serving"], "enable_prefix_caching": True, "max_model_len": 4096}}

    def shown(record: dict[str, Any]) -> dict[str, Any]:
        steps = [{"candidate_id": "c1", "record": record}]
        merged = merge_measurements(
            [cached], [{"candidate_id": "c1", "applies_to": [arch["id"]]}], steps, rag, CAT
        )
        return merged["architectures"][0]["measured"]["predicted_at_level"]

    shared = shown(_record(8, shared_prefix_tokens=2400))
    unique = shown(_record(8))
    # then the prediction beside the shared level reads the prefix from the cache, as the server did: its first
    # tokens come sooner than when every prompt is prefilled whole
    assert shared["ttft_ms"]["p50"] < 0.6 * unique["ttft_ms"]["p50"]


def test_an_open_loop_level_is_re_simulated_as_poisson_arrivals_and_bedrock_is_not(arch) -> None:
    wm = build_model(SPEC, CAT.model(SPEC.model).id)
    at_rate = predicted_at_level(arch, {"rate_rps": 3.0}, wm, CAT)
    assert at_rate is not None and at_rate.requests_per_s == pytest.approx(3.0, rel=0.15)
    bedrock = {**arch, "deployment": "bedrock", "instance_type": None}
    assert predicted_at_level(bedrock, {"concurrency": 4}, wm, CAT) is None


def test_a_row_that_stands_on_another_deployments_load_test_says_so(arch) -> None:
    # GIVEN the EKS architecture measured, and a SageMaker row on the same hardware that the measurement applies to
    sagemaker = {**arch, "id": arch["id"].replace("eks:", "sagemaker:", 1), "deployment": "sagemaker"}
    steps = [{"candidate_id": "c1", "record": r} for r in (_record(2), _record(4))]
    # WHEN the steps are merged
    merged = merge_measurements(
        [arch, sagemaker], [{"candidate_id": "c1", "applies_to": [arch["id"], sagemaker["id"]]}], steps, SPEC, CAT,
        run_id="run12345", origin="endpoint",
    )  # fmt: skip
    by_id = {a["id"]: a["measured"] for a in merged["architectures"]}
    # THEN the deployed row's figures are its own, and the SageMaker row names the deployment they were taken on
    assert by_id[arch["id"]].get("measured_on") is None
    assert by_id[sagemaker["id"]]["measured_on"] == arch["id"]
    assert "measured on the EKS deployment of the same hardware" in by_id[sagemaker["id"]]["note"]


def _search_level(rate: float, verdict: str, meets: bool) -> dict[str, Any]:
    """One stored level of a run's capacity search (as the load task stores it, with what the run records)."""
    limit = 10.0
    value = 8.0 if meets else 12.0
    return {
        **_record(1),
        "target": {"rate_rps": rate},
        "requests": round(rate * 1000),
        "duration_s": 1000.0,
        "warmup_s": 2.0,
        "started_at": 0.0,
        "itl_ms": {},
        "step": 0,
        "meets_slo": meets,
        "capacity_verdict": verdict,
        "checks": [
            {
                "target": "e2e_s.p95",
                "limit": limit,
                "value": value,
                "ci_low": value - 1,
                "ci_high": value + 1,
                "samples": round(rate * 1000),
                "verdict": verdict,
            }
        ],
        "phase": "capacity",
        "serving": None,
    }


@pytest.mark.parametrize("edge_share", [1.0, 0.005])
def test_a_searched_capacity_reprices_only_when_its_interval_excludes_the_prediction(
    arch, edge_share
) -> None:
    # GIVEN a run whose search bracketed the edge around the prediction (1.0), or far below it (0.005: below the
    # workload's peak of 2 req/s, so one replica no longer carries it)
    predicted = arch["per_replica"]["rps_slo_limit"]
    edge = predicted * edge_share
    levels = [_search_level(edge * 0.9, "pass", True), _search_level(edge * 1.1, "fail", False)]
    steps = [{"candidate_id": "c1", "record": r} for r in (_record(2), _record(4), *levels)]
    # WHEN the run's steps are merged
    (row,) = merge_measurements(
        [arch], [{"candidate_id": "c1", "applies_to": [arch["id"]]}], steps, SPEC, CAT, run_id="run12345",
        origin="endpoint",
    )["architectures"]  # fmt: skip
    capacity = row["measured"]["capacity"]
    # THEN the capacity is where the line through the two levels' readings reaches the limit (limit / e2e p95 of
    # 10/8 at 0.9x and 10/12 at 1.1x: 1.02x), with its interval and the requests behind each level
    assert capacity["capacity_rps"] == pytest.approx(edge * 1.02, rel=0.001)
    assert capacity["low_rps"] == pytest.approx(edge * 0.9, rel=0.01)  # the rate the level achieved
    assert [lv["requests"] for lv in capacity["levels"]] == [
        round(edge * 0.9 * 1000),
        round(edge * 1.1 * 1000),
    ]
    if edge_share == 1.0:
        # AND inside the interval the estimate stands: "measured, consistent with the estimate", its cost kept
        assert (
            capacity["consistent_with_estimate"]
            and capacity["verdict"] == "measured, consistent with the estimate"
        )
        assert row["cost"] == arch["cost"] and "cost_estimated" not in row
    else:
        # AND outside it the row is re-priced at the measured capacity: more replicas, a higher cost
        assert not capacity["consistent_with_estimate"] and "re-priced" in capacity["verdict"]
        assert row["cost"]["usd_per_month"] > arch["cost"]["usd_per_month"]


def test_a_replayed_traces_levels_keep_its_digest_and_say_how_they_were_sent(arch) -> None:
    # GIVEN two levels of a recorded trace replayed at two rates, each stamped with the trace's digest
    records = [_record(2, target={"rate_rps": r}, trace_digest="sha256:abc123") for r in (1.0, 2.0)]
    # WHEN they are merged
    measured = _merge(arch, records, origin="endpoint")["architectures"][0]["measured"]
    # THEN the measured block names the trace and says the trace was replayed, not swept by concurrency
    assert measured["trace_digest"] == "sha256:abc123"
    assert "the recorded trace replayed at each rate" in measured["how"]


def test_a_stored_architecture_without_its_cost_is_refused_naming_the_field(arch) -> None:
    # GIVEN a stored architecture that lost its cost
    broken = {k: v for k, v in arch.items() if k != "cost"}
    # WHEN it is merged with its load test
    with pytest.raises(InvalidInput) as err:
        _merge(broken, [_record(2)], origin="endpoint")
    # THEN the error names the missing field, not a stack trace from deep inside the merge
    assert any(p.field.endswith("architectures.0.cost") for p in err.value.problems)
