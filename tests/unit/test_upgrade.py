"""Stored, older and hand-written results are read once into the typed result: what an older release did not
write reads as unknown, and what an architecture must state is refused by its field, never with a stack trace."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
from support.examples import ROOT

from sizing.answer import answer_rows
from sizing.base.errors import InvalidInput
from sizing.plan import estimate
from sizing.upgrade import twin_run, upgrade_result
from sizing.workload.parse import load_spec


@functools.cache
def _planned() -> dict[str, Any]:
    return estimate(load_spec(ROOT / "examples" / "chatbot.yaml")).document()


def test_an_older_result_reads_with_its_missing_parts_unknown_and_the_same_rows() -> None:
    # given the planner's answer as an older release stored it: a few engine settings instead of the serving
    # configuration, nulls where later releases state defaults, no model per architecture, no tpot figures
    result = copy.deepcopy(_planned())
    first = result["architectures"][0]
    first["serving"] = {"max_num_seqs": 256, "max_num_batched_tokens": 2048}
    first["capacity_type"] = None
    first["notes"] = None
    del first["model"]
    del first["predicted"]["tpot_ms"]
    # when it is read
    typed = upgrade_result(result)
    # then the missing parts are unknown or the declared defaults, and its rows are those of the planner's answer
    a = typed.architectures[0]
    assert a.serving is None and a.capacity_type == "on-demand" and a.notes == []
    assert a.model == result["workload"]["model"]
    assert a.predicted.tpot_ms.p95 is None and a.predicted.ttft_ms.p95 == first["predicted"]["ttft_ms"]["p95"]
    assert answer_rows(typed)[0].qualifiers == answer_rows(upgrade_result(_planned()))[0].qualifiers


def test_a_result_missing_what_an_architecture_must_state_names_each_field() -> None:
    # given a stored answer whose best architecture lost its cost and whose second lost its id
    result = copy.deepcopy(_planned())
    del result["architectures"][0]["cost"]
    del result["architectures"][1]["id"]
    # when it is read, then it is refused with one problem per field, in the result's own paths
    with pytest.raises(InvalidInput) as err:
        upgrade_result(result)
    assert [p.field for p in err.value.problems] == [
        "result.architectures.0.cost",
        "result.architectures.1.id",
    ]


def test_a_runs_envelope_is_left_out_and_says_whether_twins_served_it() -> None:
    # given a run's result: the estimate inside the run's own keys, its calibration rows from a local twin
    run = {**_planned(), "run_id": "r1", "calibration_rows": [{"origin": "twin"}]}
    # when it is read, then the estimate is typed and the envelope tells the rows the figures are a twin's
    assert upgrade_result(run).architectures[0].id == _planned()["architectures"][0]["id"]
    assert twin_run(run) and not twin_run(_planned())
