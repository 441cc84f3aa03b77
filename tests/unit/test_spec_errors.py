"""Errors a person can act on: every problem of a spec at once, each naming its field in the user's words (no
pydantic type names), unknown fields with a did-you-mean, a bad model reported with the rest; constraints that
leave nothing to estimate refused naming the fields; no architecture meeting the SLOs is its own outcome."""

from __future__ import annotations

from typing import Any

import pytest

from sizing.base.errors import InvalidInput
from sizing.outcome import impossible_constraints
from sizing.workload.parse import parse_spec

BASE: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "rate": {"peak_rps": 2},
    "tokens": {"input": {"fixed": 200}, "output": {"fixed": 20}},
    "slo": {"ttft_ms": {"p95": 2000}},
}
USERS_OR_RATE = "give either users (business terms) or rate (peak_rps), not both and not neither"


def spec(**changes: Any) -> dict[str, Any]:
    out = {**BASE, **changes}
    return {k: v for k, v in out.items() if v is not None}


#: (what a person wrote, every (field, message) they are told, in order)
CASES: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = [
    (
        "misspelt users.total",
        spec(rate=None, users={"totl": 100}),
        [("users.total", "required, and missing"), ("users.totl", "unknown field; did you mean 'total'?")],
    ),
    (
        "misspelt tokens.output",
        spec(tokens={"input": {"fixed": 200}, "ouput": {"fixed": 20}}),
        [("tokens.ouput", "unknown field; did you mean 'output'?")],
    ),
    (
        "misspelt constraints",
        spec(contraints={"deployments": ["eks"]}),
        [("contraints", "unknown field; did you mean 'constraints'?")],
    ),
    (
        "a field that is nothing like any",
        spec(colour="blue"),
        [
            (
                "colour",
                "unknown field; the fields here are name, model, preset, users, rate, traffic, tokens, trace, slo,"
                " constraints",
            )
        ],
    ),
    (
        "misspelt traffic profile",
        spec(traffic={"profile": "flatt"}),
        [
            (
                "traffic.profile",
                "must be one of 'flat', 'business-hours', or a list (got 'flatt'); did you mean 'flat'?",
            )
        ],
    ),
    (
        "a custom profile with a word in it",
        spec(traffic={"profile": [1] * 23 + ["x"]}),
        [("traffic.profile.23", "must be a number (got 'x')")],
    ),
    (
        "misspelt deployment",
        spec(constraints={"deployments": ["ekss"]}),
        [
            (
                "constraints.deployments.0",
                "must be one of 'eks', 'sagemaker', 'bedrock' (got 'ekss'); did you mean 'eks'?",
            )
        ],
    ),
    (
        "a word for a number",
        spec(rate={"peak_rps": "fast"}),
        [("rate.peak_rps", "must be a number (got 'fast')")],
    ),
    (
        "a fraction of a token",
        spec(tokens={"input": {"fixed": 2.5}, "output": {"fixed": 20}}),
        [("tokens.input.fixed", "must be a whole number (got 2.5)")],
    ),
    (
        "one deployment given as text, not a list",
        spec(constraints={"deployments": "eks"}),
        [("constraints.deployments", "must be a list (got 'eks')")],
    ),
    (
        "users and rate both given, and a negative SLO: both reported",
        spec(users={"total": 5}, slo={"ttft_ms": {"p95": -1}}),
        [("slo.ttft_ms.p95", "must be greater than 0 (got -1)"), ("users", USERS_OR_RATE)],
    ),
    (
        "neither users nor rate, and an SLO that is not a number: both reported",
        spec(rate=None, slo={"ttft_ms": {"p95": "abc"}}),
        [("slo.ttft_ms.p95", "must be a number (got 'abc')"), ("users", USERS_OR_RATE)],
    ),
    (
        "an unknown model while tokens and slo are missing: all three reported",
        {"model": "nope-model", "rate": {"peak_rps": 1}},
        [
            (
                "model",
                "unknown model 'nope-model'. To add it: `sizing catalog add-model config.json --id org/name`"
                " with the model's Hugging Face config.json.",
            ),
            ("tokens", "required, and missing"),
            ("slo", "required, and missing"),
        ],
    ),
    (
        "a p95 below the mean",
        spec(tokens={"input": {"mean": 1200, "p95": 800}, "output": {"fixed": 20}}),
        [("tokens.input", "p95 (800) is below the mean (1200)")],
    ),
    (
        "an answer due before its first token",
        spec(slo={"ttft_ms": {"p95": 3000}, "e2e_s": {"p95": 2}}),
        [
            (
                "slo.e2e_s.p95",
                "e2e p95 2 s is below TTFT p95 3 s: a request cannot end before its first token; raise"
                " slo.e2e_s.p95 or lower slo.ttft_ms.p95",
            ),
            (
                "slo.ttft_ms.p95",
                "TTFT p95 3 s is above e2e p95 2 s: a request cannot end before its first token; lower"
                " slo.ttft_ms.p95 or raise slo.e2e_s.p95",
            ),
        ],
    ),
]


@pytest.mark.parametrize(("raw", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_each_problem_is_named_in_the_users_words(
    raw: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    # given a spec a person wrote with mistakes; when it is parsed
    with pytest.raises(InvalidInput) as refused:
        parse_spec(raw)
    # then they are told every problem at once, by field, in words without pydantic's type names
    told = [(p.field, p.message) for p in refused.value.problems]
    assert told == expected
    assert not any(
        word in str(refused.value) for word in ("literal[", "constrained-", "Input should", "Field required")
    )


def test_a_prefixed_spec_names_its_fields_under_the_prefix() -> None:
    # given a run request's spec with a misspelt field and no users or rate
    with pytest.raises(InvalidInput) as refused:
        parse_spec(spec(rate=None, contraints={}), prefix="spec")
    # then each field is named where the request holds it
    assert [p.field for p in refused.value.problems] == ["spec.contraints", "spec.users"]


def test_constraints_that_leave_nothing_to_estimate_are_refused_naming_them() -> None:
    # given a 405B model constrained to one small GPU, where the planner rejected every candidate for memory
    workload = parse_spec(
        spec(model="llama-3.1-405b", constraints={"instance_types": ["g6e.xlarge"], "deployments": ["eks"]})
    )
    result = {
        "architectures": [],
        "infeasible": {"binding": None, "message": "no candidate fits the constraints (see rejected)"},
        "rejected": [
            {"id": "eks:g6e.xlarge:tp1:bf16", "kind": "memory", "reason": "needs 810 GB, has 48 GB"},
            {"id": "eks:g6e.xlarge:tp1:fp8", "kind": "memory", "reason": "needs 405 GB, has 48 GB"},
        ],
    }
    # when the outcome is read
    refusal = impossible_constraints(result, workload)
    # then it is bad input naming the constraints the person set, with why
    assert refusal is not None
    assert [p.field for p in refusal.problems] == ["constraints.instance_types", "constraints.deployments"]
    assert refusal.problems[0].message == (
        "['g6e.xlarge'] leaves no architecture: of 2 candidates, 2 do not fit in memory (e.g."
        " eks:g6e.xlarge:tp1:bf16: needs 810 GB, has 48 GB; eks:g6e.xlarge:tp1:fp8: needs 405 GB, has 48 GB)"
    )


def test_slos_that_no_candidate_meets_are_an_outcome_not_bad_input() -> None:
    # given a result where every candidate was simulated and the TTFT SLO binds
    workload = parse_spec(BASE)
    result = {
        "architectures": [],
        "infeasible": {"binding": "ttft_ms.p95", "closest": {"value": 2400, "on": "g6e.xlarge TP1 fp8"}},
        "rejected": [{"id": "eks:g6e.xlarge:tp1:fp8", "kind": "slo", "reason": "TTFT p95 2400 ms > 2000 ms"}],
    }
    # then it is not refused: the caller reports it as "no architecture meets the SLOs"
    assert impossible_constraints(result, workload) is None


def test_sizing_estimate_exits_3_with_the_binding_slo_when_none_meets_it(tmp_path, capsys) -> None:
    # given an 8B chatbot on one L40S asked for a first token within a millisecond
    import yaml

    from sizing.cli import main

    path = tmp_path / "tight.yaml"
    tight = spec(
        slo={"ttft_ms": {"p95": 1}},
        constraints={"deployments": ["eks"], "instance_types": ["g6e.xlarge"], "quantizations": ["fp8"]},
    )
    path.write_text(yaml.safe_dump(tight))
    # when it is estimated
    code = main(["estimate", str(path)])
    # then the outcome is its own exit code, naming the binding SLO and the closest candidate
    out = capsys.readouterr().out
    assert code == 3
    assert "no architecture meets the SLOs (exit 3): binding SLO ttft_ms.p95" in out
    assert "on g6e.xlarge" in out


def test_sizing_estimate_exits_2_naming_the_constraints_that_leave_nothing(tmp_path, capsys) -> None:
    # given a 405B model constrained to one 48 GB GPU
    import yaml

    from sizing.cli import main

    path = tmp_path / "impossible.yaml"
    path.write_text(
        yaml.safe_dump(spec(model="llama-3.1-405b", constraints={"instance_types": ["g6e.xlarge"]}))
    )
    # when it is estimated
    code = main(["estimate", str(path)])
    # then it is bad input naming the constraint
    err = capsys.readouterr().err
    assert code == 2
    assert "constraints.instance_types: ['g6e.xlarge'] leaves no architecture" in err
