"""The run report and the Slack line say what a run taught the estimator: drift first, then the refit."""

from __future__ import annotations

from sizing.learn.drift import slack_text
from sizing.report import render_run_report

LEARNING = {
    "measured_levels": 3,
    "twin_levels": 0,
    "refused": [
        {"candidate_id": "c2", "level": 8, "reason": "the server reports model 'x', the run asked for 'y'"}
    ],
    "drift": [{"metric": "ttft", "change": 0.41}],
    "drift_lines": ["TTFT p95 +41% over the estimate on g6e TP1 vLLM 0.11; calibration refit queued"],
    "refit": {"where": "calibration function", "status": "queued"},
}


def test_the_run_report_flags_drift_and_refused_levels():
    # given a run whose measurement drifted from its estimate and whose one level was refused
    payload = {
        "run": {"run_id": "r1"},
        "architectures": [],
        "ranking": {"status": "SUCCEEDED", "learning": LEARNING},
    }

    # when its report is rendered
    page = render_run_report(payload)

    # then the drift sentence and the refusal's reason are on the page
    assert "TTFT p95 +41% over the estimate on g6e TP1 vLLM 0.11; calibration refit queued" in page
    assert "the server reports model" in page
    assert "What this run taught the estimator" in page


def test_the_slack_completion_line_carries_the_drift():
    # given the completion event's ranking of a drifted run, and of one without drift
    drifted = {"learning": LEARNING}

    # when the Slack completion message asks for its drift line
    line = slack_text(drifted)

    # then it is the drift sentence (nothing for a run without drift)
    assert line == ":warning: TTFT p95 +41% over the estimate on g6e TP1 vLLM 0.11; calibration refit queued"
    assert slack_text({"learning": {"drift_lines": []}}) is None
