"""One rendering of every answer: the table, the HTML report, Slack and the JSON read the same rows
(`sizing.answer`), so each output carries every row's qualifiers (kind, tier, basis, quotas, availability) for every
example workload and for the answers a buyer trips on (a batch job, Bedrock alone, asynchronous jobs, spot, a quota
to raise, another Region); and none of them raises."""

from __future__ import annotations

import contextlib
import copy
import functools
import html
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.examples import EXAMPLES, ROOT

from sizing.answer import answer_row, answer_rows, with_rows
from sizing.commands.estimate import print_answer
from sizing.plan import estimate
from sizing.report import render_report
from sizing.results import EstimateResult
from sizing.slack import blocks
from sizing.workload.parse import load_spec

CASES = sorted((ROOT / "tests" / "fixtures" / "answers").glob("*.yaml"))
#: Rows the table shows by default (the CLI's `--top` default).
TABLE_ROWS = 10


@functools.cache
def _estimated(path: Path) -> dict[str, Any]:
    return estimate(load_spec(path), slo_cost=True).document()


def _table(result: dict[str, Any]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_answer(EstimateResult.model_validate(result), TABLE_ROWS)
    return out.getvalue()


def _slack(result: dict[str, Any], path: Path) -> str:
    spec = load_spec(path)
    message = blocks.estimate_message(result, spec, {"model": spec.model})
    return html.unescape(json.dumps(message.blocks_json(), ensure_ascii=False))


def _report(result: dict[str, Any]) -> str:
    page = render_report(result, curves=False).split('<script type="application/json"')[0]
    # inline figures (`<span class="n" ...>$8,252</span>`) read as their text; other tags as a space
    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"</?span[^>]*>", "", page)))


@pytest.mark.parametrize("path", [*EXAMPLES, *CASES], ids=lambda p: p.stem)
def test_every_output_carries_each_rows_qualifiers(path: Path) -> None:
    # given the planner's answer for a workload
    result = copy.deepcopy(_estimated(path))
    typed = EstimateResult.model_validate(result)
    rows = answer_rows(typed)
    # when it is rendered as the table, the report, Slack and the JSON
    outputs = {
        "table": (_table(result), TABLE_ROWS),
        "report": (_report(result), len(rows)),
        "slack": (_slack(result, path), blocks.TOP_SHOWN),
        "json": (json.dumps(with_rows(typed)["rows"], ensure_ascii=False), len(rows)),
    }
    # then each output names every qualifier of every row it shows and what each stated SLO costs, and the
    # JSON's rows are the typed rows
    costs = [c["line"] for c in result.get("slo_costs") or []]
    assert len(costs) == len(load_spec(path).slo.stated_targets())
    outputs["json"] = (outputs["json"][0] + json.dumps(result["slo_costs"], ensure_ascii=False), len(rows))
    for name, (text, shown) in outputs.items():
        assert "Traceback" not in text, name
        for row in rows[:shown]:
            for phrase in row.qualifiers:
                assert phrase in text, f"{path.stem}: the {name} lacks '{phrase}' of #{row.rank}"
        for line in costs:
            assert line in text, f"{path.stem}: the {name} lacks '{line}'"
    assert EstimateResult.model_validate(with_rows(typed)).rows == rows


def _case(stem: str) -> dict[str, Any]:
    return copy.deepcopy(_estimated(ROOT / "tests" / "fixtures" / "answers" / f"{stem}.yaml"))


def test_a_bedrock_batch_job_reads_as_a_job_with_no_requests_in_flight() -> None:
    # given a nightly job that Bedrock batch inference can run
    result = _case("bedrock-batch")
    # when its rows are built
    rows = {r.id: r for r in answer_rows(EstimateResult.model_validate(result))}
    bedrock = next(r for r in rows.values() if r.deployment == "Bedrock")
    # then the Bedrock row is a batch job, and no job shows Little's-law requests in flight
    assert bedrock.kind == "batch job" and bedrock.tier == "batch"
    assert bedrock.figures.e2e_s == 24 * 3600 and bedrock.figures.ttft_ms is None
    assert all(r.figures.in_flight is None for r in rows.values())
    assert any(r.kind == "async job" for r in rows.values())


def test_ten_million_users_flag_the_ec2_vcpu_quota_with_the_vcpus_needed() -> None:
    # given an answer of hundreds of GPU nodes
    result = _case("quota-flagged")
    # when its first row is built
    typed = EstimateResult.model_validate(result)
    a = result["architectures"][0]
    row = answer_row(typed.architectures[0], typed)
    # then it names the EC2 On-Demand quota of the family and the vCPUs its peak needs
    ec2 = next(q for q in row.quotas if q.service == "ec2")
    assert "Running On-Demand G and VT instances" in ec2.message
    vcpus = int(re.search(r"of ([\d,]+) vCPUs", ec2.message).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert vcpus == a["instances"]["peak"] * 4  # g6e.xlarge has 4 vCPUs
    assert ec2.source and "Service Quotas" in (ec2.request or "")


def test_another_regions_unknown_hardware_says_so_and_the_report_names_the_region() -> None:
    # given a chat in eu-west-2, where the price snapshot does not cover every family
    result = _case("another-region")
    # when its rows and report are built
    rows = answer_rows(EstimateResult.model_validate(result))
    page = _report(result)
    # then a row priced from us-east-1 says its availability is unknown, and the header names Region and residency
    unknown = [r for r in rows if r.availability == "unknown"]
    assert unknown and all(r.price_region == "us-east-1" for r in unknown)
    assert "availability in eu-west-2 unknown; price from us-east-1" in page
    assert "Region eu-west-2" in page and "data residency" in page
