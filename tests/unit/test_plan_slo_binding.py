"""SLOs bind as written: a ranked row never misses a target the spec states; a batch job's deadline is its own field
(`slo.deadline_s`, a day by the batch preset), and a stated per-request e2e still binds a job's requests."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.examples import EXAMPLES, ROOT, example_estimate

from sizing.plan import estimate
from sizing.workload.parse import load_spec, parse_spec
from sizing.workload.spec import BATCH_DEADLINE_S

CASES = sorted((ROOT / "tests" / "fixtures" / "answers").glob("*.yaml"))
SHOWN = ("p50", "p95", "p99")


def _value(a: dict, metric: str, pct: str) -> float | None:
    block = a["predicted"][metric]
    later = SHOWN[SHOWN.index(pct) + 1 :] if pct in SHOWN else ("p95", "p99")
    for q in (pct, *later):
        if block.get(q) is not None:
            return float(block[q])
    return None


@pytest.mark.slow
@pytest.mark.parametrize("path", [*EXAMPLES, *CASES], ids=lambda p: p.stem)
def test_a_ranked_row_never_misses_a_stated_slo(path: Path) -> None:
    # given a workload and the targets it states
    spec = load_spec(path)
    stated = spec.slo.stated_targets()
    # when it is estimated
    result = estimate(spec).document()
    # then every ranked row meets each stated target, and a job finishes within its deadline
    for a in result["architectures"]:
        for metric, pct, limit in stated:
            value = _value(a, metric, pct)
            assert value is not None and value <= limit * (1 + 1e-6), (a["id"], metric, pct, value, limit)
        if a.get("batch") and a.get("invocation") in ("batch", "async") and spec.slo.deadline_s:
            assert a["batch"]["wall_time_h"] * 3600 <= spec.slo.deadline_s


def test_the_batch_example_ranks_no_job_past_its_stated_300_s_e2e() -> None:
    # given the shipped batch example: preset batch with e2e p99 300 s stated
    spec = load_spec(ROOT / "examples" / "batch-summarization.yaml")
    # when it is estimated
    result = example_estimate("batch-summarization")
    # then the preset kept the stated e2e and added the day as the job's deadline
    assert spec.slo.e2e_s is not None and spec.slo.e2e_s.p99 == 300
    assert spec.slo.deadline_s == BATCH_DEADLINE_S
    # and no asynchronous job (its requests end when its hours-long job does) is ranked; each is rejected as such
    assert all(a.get("invocation") == "real-time" for a in result["architectures"])
    assert max(a["predicted"]["e2e_s"]["p99"] for a in result["architectures"]) <= 300
    reasons = [r["reason"] for r in result["rejected"] if r["id"].endswith(":async")]
    assert reasons and all("the job's wall time" in r and "as stated" in r for r in reasons)


@pytest.mark.slow
def test_the_batch_preset_alone_sets_a_day_deadline_and_judges_jobs_by_it() -> None:
    # given the batch preset with no SLO stated
    spec = parse_spec({"name": "b", "model": "llama-3.1-8b", "preset": "batch", "rate": {"peak_rps": 1}})
    # when it is estimated
    result = estimate(spec).document()
    # then the deadline is the day, no per-request target is stated, and jobs within the day are ranked
    assert spec.slo.deadline_s == BATCH_DEADLINE_S and spec.slo.stated_targets() == []
    jobs = [a for a in result["architectures"] if a.get("invocation") in ("batch", "async")]
    assert jobs and all(a["batch"]["wall_time_h"] <= 24 for a in jobs)


def test_a_deadline_shorter_than_a_job_rejects_it_and_a_deadline_alone_is_an_slo() -> None:
    # given a deadline of two hours, stated alone
    spec = parse_spec(
        {"name": "b", "model": "llama-3.1-8b", "rate": {"peak_rps": 1}, "tokens": {"input": {"fixed": 500},
         "output": {"fixed": 100}}, "slo": {"deadline_s": 7200}, "constraints": {"deployments": ["bedrock"]}}
    )  # fmt: skip
    # when it is estimated
    result = estimate(spec).document()
    # then Bedrock's 24-hour batch window cannot meet it: no batch job is ranked
    assert spec.slo.targets() == [("e2e_s", "p99", 300.0)]
    assert not [a for a in result["architectures"] if a.get("invocation") == "batch"]
