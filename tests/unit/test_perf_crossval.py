"""Cross-validation of the calibration: which rows a fold holds out, and that the folds' result does not depend
on how many processes run them."""

from __future__ import annotations

import math
import statistics

import pytest
from test_perf_reference import BASE as REFERENCE_ROW

from sizing.perf.calrows import CalRow
from sizing.perf.crossval import CV_GROUPINGS, cross_validate, cv_key, error_table
from sizing.perf.fit import fit_profiles
from sizing.perf.reference import parse_row
from sizing.perf.tables import format_error_table

#: a reference-CSV row: the perf reference tests' typical row, here an A10G single-user measurement
BASE = {
    **REFERENCE_ROW,
    "hardware": "1x A10G 24GB",
    "tensor_parallel": "1",
    "input_tokens": "256",
    "output_tokens": "64",
    "concurrency_or_request_rate": "concurrency=1",
    "ttft_ms_mean": "90",
    "tpot_ms_mean_or_itl": "32",
    "output_tokens_per_s_total": "",
}


def _row(row_id: str, source: str, ttft: float, tpot: float) -> CalRow:
    row = parse_row(
        {
            **BASE,
            "row_id": row_id,
            "source": source,
            "ttft_ms_mean": str(ttft),
            "tpot_ms_mean_or_itl": str(tpot),
        }
    )
    assert isinstance(row, CalRow)
    return row


@pytest.fixture(scope="module")
def rows() -> list[CalRow]:
    # two sources of one study (org/repo) and one source of another study (other/lab)
    return [
        _row("T1", "org/repo:bench-a.md@abc (table)", 90, 32),
        _row("T2", "org/repo:bench-b.md@abc (table)", 95, 33),
        _row("T3", "other/lab:results.csv@def", 110, 36),
    ]


def test_sources_and_studies_are_different_units(rows):
    # GIVEN two files of one repository and one file of another
    # WHEN the rows are keyed by source and by study
    by_source = {cv_key(r, "source") for r in rows}
    by_study = {cv_key(r, "study") for r in rows}
    # THEN there are three sources but only two studies
    assert len(by_source) == 3 and by_study == {"org/repo", "other/lab"}


def test_an_unknown_grouping_is_refused(rows):
    with pytest.raises(ValueError, match="grouping"):
        cv_key(rows[0], "row")
    assert CV_GROUPINGS == ("source", "study", "harness")


def test_every_row_is_predicted_once_per_metric_and_workers_do_not_change_the_result(rows):
    # GIVEN profiles fitted on all rows
    full = fit_profiles(rows)
    # WHEN each source is held out in turn, in one process and in two
    one = cross_validate(rows, full, grouping="source", workers=1)
    two = cross_validate(rows, full, grouping="source", workers=2)
    # THEN every row's TTFT and TPOT is predicted once, and the two runs agree exactly
    assert sorted((p.row_id, p.metric) for p in one) == [
        (rid, m) for rid in ("T1", "T2", "T3") for m in ("tpot", "ttft")
    ]
    assert [(p.row_id, p.metric, p.predicted) for p in one] == [
        (p.row_id, p.metric, p.predicted) for p in two
    ]
    # AND the error table names its grouping and covers every prediction
    table = {**error_table(one), "grouping": "source"}
    assert table["overall"]["n"] == 6
    assert format_error_table(table).startswith("Leave-one-source-out")


def test_a_family_with_few_rows_takes_its_prior_from_the_other_families_of_its_kind():
    from sizing.perf.fit import ALONE, PRIOR, _theta, kind_prior

    # GIVEN first-stage fits of two GPU families and a Neuron family
    def entry(bw: float, rows: int) -> dict:
        return {**PRIOR, "bandwidth_eff": bw, "rows": rows}

    profiles = {
        f"a10g/{ALONE}": entry(0.9, 30),
        f"hopper/{ALONE}": entry(0.6, 10),
        f"neuron-v2/{ALONE}": entry(0.2, 50),
    }
    # WHEN the L4 prior is formed
    prior = kind_prior("l4", profiles)
    # THEN it is the row-weighted mean (in log space) of the GPU families only
    assert math.exp(prior[1]) == pytest.approx(math.exp((30 * math.log(0.9) + 10 * math.log(0.6)) / 40))
    # AND a family never forms its own prior; with no other family of its kind it gets the literature prior
    assert kind_prior("a10g", profiles)[1] == pytest.approx(math.log(0.6))
    assert kind_prior("neuron-v2", profiles) == pytest.approx(_theta(PRIOR))


def test_without_moe_rows_the_moe_efficiency_stays_at_its_prior(rows):
    from sizing.perf.fit import FAMILY_SIGMA, MOE, PRIOR, _theta, fit_group

    # GIVEN dense-model rows only and a prior that says MoE models run 30% faster than modelled
    prior = _theta({**PRIOR, "moe_eff": 1.3})
    # WHEN the group is fitted
    theta = fit_group(rows, prior, FAMILY_SIGMA, "a10g", "vllm", max_evals=30)
    # THEN the MoE efficiency is the prior's exactly (nothing in the rows speaks to it)
    assert theta[MOE] == prior[MOE]
    assert len(theta) == len(prior)


def test_a_row_that_measured_the_median_inter_token_latency_is_compared_with_it():
    from sizing.perf.fit import predict_row
    from sizing.perf.step import Profile

    # GIVEN a loaded replica whose decode steps share time with long prompts' prefill chunks
    loaded = _row("T9", "org/repo:itl.md@abc", 300, 40).model_copy(
        update={"input_tokens": 3000.0, "output_tokens": 200.0, "load_value": 16.0}
    )
    profile = Profile(0.5, 0.8, 0.003)
    # WHEN the same row is read as a mean TPOT and as a median inter-token latency
    mean_tpot = predict_row(loaded, profile)["tpot"]
    itl_p50 = predict_row(loaded.model_copy(update={"tpot_stat": "itl_p50"}), profile)["tpot"]
    # THEN the median gap between tokens is below the mean time per token (prefill stalls lengthen the mean)
    assert 0 < itl_p50 < mean_tpot


def test_a_row_counted_in_the_clients_tokens_is_compared_in_them():
    from sizing.perf.fit import predict_row
    from sizing.perf.step import Profile

    # GIVEN one deployment and load measured twice: once in the model's tokens, once by a client (llmperf) that
    # counts 1.2x as many tokens and reports the whole request time per counted token
    model_units = _row("T10", "org/repo:a.md@abc", 300, 40).model_copy(
        update={"output_tokens": 150.0, "output_tokens_per_s": 30.0, "e2e_s": 5.0, "load_value": 4.0}
    )
    client_units = model_units.model_copy(
        update={"client_output_tokens": 180.0, "tpot_stat": "e2e_per_token"}
    )
    profile = Profile(0.5, 0.8, 0.003)
    # WHEN both are predicted
    plain = predict_row(model_units, profile)
    counted = predict_row(client_units, profile)
    # THEN the client's figures are in its units: throughput 1.2x, TPOT the request time over 180 tokens
    assert counted["throughput"] == pytest.approx(plain["throughput"] * 1.2)
    assert counted["tpot"] == pytest.approx(plain["e2e"] * 1e3 / 180.0)


def test_users_that_start_together_wait_for_each_others_prompts():
    from sizing.perf.fit import predict_row
    from sizing.perf.step import Profile

    # GIVEN 16 users sending identical requests (fixed prompt and output lengths) to a replica whose KV cache holds
    # them all, started by a client that issues them all at once, and the same users started spread out
    spread = _row("T11", "org/repo:b.md@abc", 300, 40).model_copy(
        update={"input_tokens": 200.0, "output_tokens": 300.0, "load_value": 16.0}
    )
    together = spread.model_copy(update={"start": "together"})
    single = spread.model_copy(update={"load_value": 1.0})
    profile = Profile(0.5, 0.8, 0.003)
    # WHEN their time to first token is predicted
    alone = predict_row(single, profile)["ttft"]
    waves = predict_row(together, profile)["ttft"]
    staggered = predict_row(spread, profile)["ttft"]
    # THEN users in lock-step waves wait for the whole wave's prompts: several single prefills on average
    assert waves > 5 * alone
    # AND users that arrive spread out mostly find the engine decoding, and wait far less
    assert staggered < waves / 3


def test_the_ttft_floor_shows_what_sources_disagreeing_on_fixed_costs_leave_to_the_model():
    from sizing.perf.crossval import ttft_floor
    from sizing.perf.fit import PRIOR, predict_row
    from sizing.perf.step import Profile

    # GIVEN one setup measured by two sources at two prompt lengths, as a known engine would run it, the second
    # source 80 ms slower on every request (its client and network add a fixed cost the first does not have)
    quick, slow = "org/repo:local.md@abc", "other/lab:remote.csv@def"

    def at(row_id: str, source: str, prompt: int, overhead_s: float) -> CalRow:
        row = _row(row_id, source, 100, 32).model_copy(update={"input_tokens": float(prompt)})
        truth = Profile(0.5, 0.8, 0.003, request_overhead_s=overhead_s)
        return row.model_copy(update={"ttft_ms": predict_row(row, truth)["ttft"]})

    rows = [
        at("F1", quick, 256, 0.01),
        at("F2", quick, 2048, 0.01),
        at("F3", slow, 256, 0.09),
        at("F4", slow, 2048, 0.09),
    ]
    data = {"version": "t", "profiles": fit_profiles(rows), "global": dict(PRIOR)}
    # WHEN the floor is computed with profiles fitted on all four rows
    floor = ttft_floor(rows, data)
    # THEN every row is predicted in sample and with its source's own overhead
    assert sorted(p.row_id for p in floor.in_sample) == ["F1", "F2", "F3", "F4"]
    assert sorted(p.row_id for p in floor.own_overhead) == ["F1", "F2", "F3", "F4"]
    # AND the slower source chose the larger overhead, at least 50 ms more
    assert floor.overheads[slow] - floor.overheads[quick] >= 0.05
    # AND knowing each source's overhead leaves less error than one shared fit can
    med = statistics.median
    assert med(p.ape for p in floor.own_overhead) < med(p.ape for p in floor.in_sample) / 2
