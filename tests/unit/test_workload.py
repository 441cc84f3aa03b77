"""The workload model: business terms in, arrival rates, concurrency, token distributions and SLOs out."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from sizing.base.distributions import TokenDistribution
from sizing.base.errors import InvalidInput, NotFound
from sizing.cli import main
from sizing.workload.derived import build_model, resolve
from sizing.workload.parse import PRESETS, load_spec, parse_spec

BASE: dict[str, Any] = {
    "name": "support-chat",
    "model": "meta-llama/Llama-3.1-70B-Instruct",
    "users": {"total": 10000, "peak_active_fraction": 0.10, "requests_per_active_hour": 30},
    "traffic": {"profile": "business-hours"},
    "tokens": {"input": {"mean": 1200, "p95": 3500}, "output": {"mean": 250, "p95": 700}},
    "slo": {"ttft_ms": {"p95": 800}, "tpot_ms": {"p95": 60}, "e2e_s": {"p95": 2.5}},
}


def spec_with(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    raw.update(changes)
    return raw


def problems_of(raw: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(InvalidInput) as exc:
        parse_spec(raw)
    return [(p.field, p.message) for p in exc.value.problems]


def test_littles_law_arithmetic_for_the_design_example():
    # given 10,000 users, 10% active in the busiest hour, 30 requests per active hour
    wm = build_model(parse_spec(BASE))
    # then the peak arrival rate is 10,000 x 0.1 x 30 / 3600 = 8.333 requests/s
    assert wm.peak_rps == pytest.approx(8.3333333, rel=1e-6)
    assert wm.peak_active_users == 1000
    # and concurrency is rate x time in system, bounded here by the e2e SLO of 2.5 s
    assert wm.request_seconds_estimate == pytest.approx(2.5)
    assert wm.peak_concurrency == pytest.approx(8.3333333 * 2.5, rel=1e-6)
    # and input/output tokens per second at peak follow from the means
    d = wm.derived()
    assert d["input_tokens_per_s_peak"] == pytest.approx(10000.0, rel=1e-3)
    assert d["output_tokens_per_s_peak"] == pytest.approx(2083.3, rel=1e-3)


def test_rate_given_directly_and_flat_profile_average_equals_peak():
    # given a rate instead of users and a flat profile
    wm = build_model(parse_spec(spec_with(users=None, rate={"peak_rps": 12}, traffic={"profile": "flat"})))
    # then every hour carries the peak
    assert wm.peak_rps == 12
    assert wm.avg_rps == pytest.approx(12)
    assert wm.peak_active_users is None


def test_business_hours_profile_peaks_at_the_given_rate_and_averages_below_it():
    wm = build_model(parse_spec(BASE))
    assert max(wm.hourly_rps) == pytest.approx(wm.peak_rps)
    assert 0 < wm.avg_rps < wm.peak_rps
    assert len(wm.hourly_rps) == 24


def test_custom_profile_is_normalised_to_its_busiest_hour():
    weights = [1] * 12 + [4] * 12
    wm = build_model(parse_spec(spec_with(traffic={"profile": weights, "timezone": "Europe/Berlin"})))
    assert wm.hourly_rps[0] == pytest.approx(wm.peak_rps / 4)
    assert wm.hourly_rps[23] == pytest.approx(wm.peak_rps)


@pytest.mark.parametrize(("mean", "p95"), [(1200, 3500), (250, 700), (100, 101), (4000, 8000), (50, 180)])
def test_lognormal_fit_reproduces_mean_and_p95_within_one_percent(mean: float, p95: float):
    # given a mean and a p95
    dist = TokenDistribution.from_mean_p95(mean, p95)
    # then the fitted lognormal has that mean and that p95 analytically
    assert math.exp(dist.mu + dist.sigma**2 / 2) == pytest.approx(mean, rel=0.01)
    assert dist.percentile("p95") == pytest.approx(p95, rel=0.01)
    # and large samples agree too
    x = dist.sample(np.random.default_rng(7), 400_000)
    assert x.mean() == pytest.approx(mean, rel=0.01)
    assert np.percentile(x, 95) == pytest.approx(p95, rel=0.015)


@given(st.floats(10, 50_000), st.floats(1.01, 3.8))
def test_lognormal_fit_holds_for_any_feasible_shape(mean: float, ratio: float):
    dist = TokenDistribution.from_mean_p95(mean, mean * ratio)
    assert dist.percentile("p95") == pytest.approx(mean * ratio, rel=1e-6)
    assert math.exp(dist.mu + dist.sigma**2 / 2) == pytest.approx(mean, rel=1e-6)


def test_same_seed_same_draws():
    dist = TokenDistribution.from_mean_p95(1200, 3500)
    a = dist.sample(np.random.default_rng(1), 100)
    b = dist.sample(np.random.default_rng(1), 100)
    assert (a == b).all() and a.min() >= 1


def test_samples_file_gives_an_empirical_distribution(tmp_path):
    f = tmp_path / "tokens.csv"
    f.write_text("input_tokens,output_tokens\n100,10\n200,20\n300,30\n")
    wm = build_model(parse_spec(spec_with(tokens={"samples_file": str(f)})))
    assert wm.input_tokens.kind == "empirical"
    assert wm.input_tokens.mean == 200 and wm.output_tokens.mean == 20


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_yields_a_valid_spec_with_a_reason(preset: str):
    raw: dict[str, Any] = {"model": "llama-3.1-8b", "preset": preset}
    if "users" not in PRESETS[preset]["spec"]:
        raw["rate"] = {"peak_rps": 5}
    else:
        raw["users"] = {"total": 500}
    spec = parse_spec(raw)
    assert spec.slo.targets()
    assert PRESETS[preset]["reason"]


def test_preset_values_give_way_to_the_specs_own():
    spec = parse_spec(
        {"model": "llama-3.1-8b", "preset": "chat", "users": {"total": 100}, "slo": {"e2e_s": {"p95": 9}}}
    )
    assert spec.users is not None and spec.users.requests_per_active_hour == 30  # from the preset
    assert spec.slo.e2e_s is not None and spec.slo.e2e_s.p95 == 9  # the spec's own SLO replaces the preset's
    assert spec.slo.ttft_ms is None


# --- bad input: one clear message per problem, naming the field -------------------------------------------
def test_negative_users_names_the_field():
    probs = problems_of(spec_with(users={"total": -5}))
    assert probs[0][0] == "users.total" and "greater than 0" in probs[0][1]


def test_fraction_above_one_names_the_field():
    probs = problems_of(spec_with(users={"total": 10, "peak_active_fraction": 1.5}))
    assert probs == [("users.peak_active_fraction", "must be at most 1 (got 1.5)")]


def test_p95_below_mean_is_refused():
    probs = problems_of(spec_with(tokens={"input": {"mean": 1200, "p95": 800}, "output": {"fixed": 10}}))
    assert probs[0][0] == "tokens.input" and "below the mean" in probs[0][1]


def test_unknown_field_is_refused_by_name():
    probs = problems_of(spec_with(userz={"total": 5}))
    assert ("userz", "unknown field; did you mean 'users'?") in probs


def test_slo_percentiles_out_of_order_are_refused():
    probs = problems_of(spec_with(slo={"ttft_ms": {"p50": 900, "p95": 500}}))
    assert probs[0][0] == "slo.ttft_ms" and "p95 (500) is below p50 (900)" in probs[0][1]


def test_several_problems_are_all_reported():
    probs = problems_of(spec_with(users={"total": 0, "peak_active_fraction": 2}, slo={}))
    fields = {f for f, _ in probs}
    assert {"users.total", "users.peak_active_fraction", "slo"} <= fields


def test_users_and_rate_together_are_refused():
    probs = problems_of(spec_with(rate={"peak_rps": 3}))
    assert "either users" in probs[0][1]


def test_unknown_model_names_the_closest_catalog_ids_and_how_to_add_one():
    with pytest.raises(NotFound) as exc:
        resolve(parse_spec(spec_with(model="meta-llama/Llama-3.1-7B")))
    err = exc.value
    assert "meta-llama/Llama-3.1-70B" in err.details["suggestions"]
    assert "sizing catalog add-model" in err.message


def test_model_aliases_resolve_to_the_catalog_id():
    wm = resolve(parse_spec(BASE))
    assert wm.model_id == "meta-llama/Llama-3.1-70B"


def test_every_example_workload_is_valid(examples_dir):
    files = sorted(examples_dir.glob("*.yaml"))
    assert files, "examples/ must hold example workloads"
    for f in files:
        wm = resolve(load_spec(f))
        assert wm.peak_rps > 0


# --- a shared prompt prefix ---------------------------------------------------------------------------------------
def test_a_shared_prefix_is_carried_into_the_model_and_shown():
    # given prompts of 2,000 tokens on average whose first 1,500 are a shared system prompt
    raw = spec_with(
        tokens={"input": {"mean": 2000, "p95": 4000}, "output": {"fixed": 200}, "shared_prefix": 1500}
    )
    # when the workload is derived
    wm = build_model(parse_spec(raw))
    # then the model and its derived figures carry the prefix
    assert wm.shared_prefix_tokens == 1500
    assert wm.derived()["shared_prefix_tokens"] == 1500
    # and a spec without one shares nothing
    plain = build_model(parse_spec(BASE))
    assert plain.shared_prefix_tokens == 0 and plain.derived()["shared_prefix_tokens"] == 0


@pytest.mark.parametrize(
    "tokens",
    [
        {"input": {"mean": 2000, "p95": 4000}, "output": {"fixed": 200}, "shared_prefix": 2500},
        {"input": {"mean": 2000, "p95": 4000}, "output": {"fixed": 200}, "shared_prefix": 2000},
        {"input": {"fixed": 800}, "output": {"fixed": 200}, "shared_prefix": 1000},
    ],
)
def test_a_shared_prefix_not_below_the_inputs_mean_is_refused_by_name(tokens: dict[str, Any]):
    # when a spec declares a prefix as long as (or longer than) a typical prompt
    probs = problems_of(spec_with(tokens=tokens))
    # then the problem names tokens.shared_prefix and says why
    assert [f for f, _ in probs] == ["tokens.shared_prefix"]
    assert "not below the input's mean" in probs[0][1]


def test_a_negative_shared_prefix_is_refused_by_name():
    probs = problems_of(spec_with(tokens={**BASE["tokens"], "shared_prefix": -1}))
    assert probs[0][0] == "tokens.shared_prefix" and probs[0][1] == "must be at least 0 (got -1)"


def test_a_shared_prefix_is_checked_against_a_samples_files_mean(tmp_path):
    # given samples whose prompts average 200 tokens, and a 300-token shared prefix
    f = tmp_path / "tokens.csv"
    f.write_text("input_tokens,output_tokens\n100,10\n200,20\n300,30\n")
    spec = parse_spec(spec_with(tokens={"samples_file": str(f), "shared_prefix": 300}))
    # when the workload is derived, then the prefix is refused by name
    with pytest.raises(InvalidInput) as exc:
        build_model(spec)
    assert [p.field for p in exc.value.problems] == ["tokens.shared_prefix"]
    # and a prefix below the samples' mean is kept
    ok = build_model(parse_spec(spec_with(tokens={"samples_file": str(f), "shared_prefix": 150})))
    assert ok.shared_prefix_tokens == 150


# --- contradictory SLOs ---------------------------------------------------------------------------------------
def test_an_e2e_bound_below_the_ttft_bound_of_the_same_percentile_is_refused_naming_both():
    # given a TTFT p95 of 3 s and an e2e p95 of 2 s: the answer would end before its first token
    probs = problems_of(spec_with(slo={"ttft_ms": {"p95": 3000}, "e2e_s": {"p95": 2}}))
    # then both fields are named, in words
    fields = dict(probs)
    assert set(fields) == {"slo.e2e_s.p95", "slo.ttft_ms.p95"}
    assert fields["slo.e2e_s.p95"].startswith("e2e p95 2 s is below TTFT p95 3 s: ")
    assert "cannot end before its first token" in fields["slo.ttft_ms.p95"]


def test_every_contradicting_percentile_is_reported_and_sub_second_ttft_reads_in_ms():
    probs = problems_of(
        spec_with(slo={"ttft_ms": {"p50": 900, "p99": 5000}, "e2e_s": {"p50": 0.5, "p99": 4}})
    )
    fields = dict(probs)
    assert set(fields) == {"slo.e2e_s.p50", "slo.ttft_ms.p50", "slo.e2e_s.p99", "slo.ttft_ms.p99"}
    assert fields["slo.e2e_s.p50"].startswith("e2e p50 0.5 s is below TTFT p50 900 ms")


@pytest.mark.parametrize(
    "slo",
    [
        {
            "ttft_ms": {"p95": 2000},
            "e2e_s": {"p95": 2},
        },  # equal: a one-token answer ends with its first token
        {"ttft_ms": {"p99": 3000}, "e2e_s": {"p50": 2}},  # different percentiles do not contradict
        {"ttft_ms": {"p95": 3000}, "tpot_ms": {"p95": 50}, "e2e_s": {"p95": 3.1}},  # tight, not contradictory
    ],
)
def test_slos_that_do_not_contradict_are_accepted(slo: dict[str, Any]):
    assert parse_spec(spec_with(slo=slo)).slo.targets()


def test_contradictory_slos_exit_2_on_the_command_line(tmp_path, capsys):
    # given a workload file whose e2e p95 is below its TTFT p95
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(spec_with(slo={"ttft_ms": {"p95": 3000}, "e2e_s": {"p95": 2}})))
    # when `sizing workload` reads it, then it exits 2 naming both fields
    assert main(["workload", str(f)]) == 2
    err = capsys.readouterr().err
    assert "slo.e2e_s.p95" in err and "slo.ttft_ms.p95" in err and "Traceback" not in err
