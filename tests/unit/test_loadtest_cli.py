"""`sizing loadtest` arguments: SLO targets and what a workload spec turns into."""

from __future__ import annotations

from pathlib import Path

import pytest

from sizing.base.errors import InvalidInput
from sizing.commands.loadtest import _from_workload, parse_slo
from sizing.loadtest.launch import parse_tokens


def test_slo_targets_are_metric_percentile_and_limit() -> None:
    assert parse_slo("ttft_ms.p95=800, e2e_s.p99=2.5") == [("ttft_ms", "p95", 800.0), ("e2e_s", "p99", 2.5)]
    with pytest.raises(InvalidInput, match=r"METRIC\.PERCENTILE=LIMIT"):
        parse_slo("ttft_ms<800")


def test_token_lengths_are_fixed_or_mean_and_p95() -> None:
    assert parse_tokens("512", "input_tokens").fixed == 512
    spec = parse_tokens("1200:3500", "input_tokens")
    assert (spec.mean, spec.p95) == (1200, 3500)
    with pytest.raises(InvalidInput, match="input_tokens"):
        parse_tokens("lots", "input_tokens")


def test_a_workload_becomes_steps_of_its_users_with_their_think_time_tokens_and_slo(tmp_path: Path) -> None:
    # given 10,000 users, 10% active at peak, 30 requests an hour each
    spec = tmp_path / "chat.yaml"
    spec.write_text(
        "model: meta-llama/Llama-3.1-8B-Instruct\nusers: {total: 10000, peak_active_fraction: 0.1,"
        " requests_per_active_hour: 30}\ntokens: {input: {mean: 1200, p95: 3500}, output: {mean: 250, p95: 700}}\n"
        "slo: {ttft_ms: {p95: 800}, e2e_s: {p95: 20}}\n"
    )
    fields = _from_workload(str(spec), None)
    # then the steps are a quarter, half and all of the 1,000 peak users, thinking between requests
    assert fields["mode"] == "users" and fields["levels"] == [250, 500, 1000]
    assert fields["think_time_s"] == pytest.approx(120 - 20)  # a 2-minute cycle minus the e2e bound
    assert fields["input_tokens"].mean == 1200 and fields["output_tokens"].p95 == 700
    assert fields["slo"] == [("ttft_ms", "p95", 800.0), ("e2e_s", "p95", 20.0)]
    # and no prompt prefix is shared: the spec declares none
    assert fields["shared_prefix_tokens"] == 0


def test_a_workloads_shared_prefix_is_what_every_prompt_of_the_sweep_starts_with() -> None:
    # given the chatbot example (a 600-token system prompt every conversation starts with)
    fields = _from_workload("examples/chatbot.yaml", None)
    # then the sweep sends it at the start of every prompt
    assert fields["shared_prefix_tokens"] == 600


def test_a_window_shorter_than_the_users_think_time_is_refused_naming_the_duration(
    tmp_path: Path, capsys
) -> None:
    from sizing.cli import main

    # GIVEN users who think about three minutes between requests (400 users, 20 requests an hour each)
    spec = tmp_path / "slow.yaml"
    spec.write_text(
        "model: meta-llama/Llama-3.1-8B-Instruct\nusers: {total: 4000, peak_active_fraction: 0.1,"
        " requests_per_active_hour: 20}\ntokens: {input: {fixed: 200}, output: {fixed: 50}}\nslo: {e2e_s: {p95: 3}}\n"
    )
    # WHEN they are load-tested with the default 20 s window
    rc = main(
        [
            "loadtest",
            "--endpoint",
            "http://127.0.0.1:9",
            "--workload",
            str(spec),
            "--out",
            str(tmp_path / "o"),
        ]
    )
    # THEN the test is refused before anything is sent, naming --duration and the think time
    err = capsys.readouterr().err
    assert rc == 2 and "--duration" in err and "think time (177 s" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--concurrency", "4"], "--capacity-from: not with --concurrency"),
        (["--trace", "TRACE", "--trace-rates", "1,2"], "--trace-rates: not with --capacity-from"),
        (["--trace", "TRACE"], "--capacity-from: give the SLO targets"),
    ],
)
def test_a_capacity_search_with_levels_of_its_own_or_without_slo_is_refused_in_one_line(
    tmp_path: Path, capsys, extra: list[str], said: str
) -> None:
    from sizing.cli import main
    from sizing.traces import samples

    # GIVEN a recorded trace
    trace = samples.write(tmp_path / "t.jsonl", "mooncake", samples.synthetic(50, seed=1, rate=2.0))
    args = [a.replace("TRACE", str(trace)) for a in extra]
    slo = [] if "SLO" in said else ["--slo", "ttft_ms.p95=800"]
    # WHEN a capacity search is asked for with levels of its own (or, with a trace, without SLO targets)
    rc = main(["loadtest", "--endpoint", "http://127.0.0.1:9", "--capacity-from", "2", *args, *slo, "--out",
               str(tmp_path / "o")])  # fmt: skip
    # THEN it is refused before anything is sent, in one line that says why
    err = capsys.readouterr().err
    assert rc == 2 and said in err
    assert not (tmp_path / "o").exists()


def test_a_load_test_with_no_levels_is_refused_naming_the_options(tmp_path: Path, capsys) -> None:
    from sizing.cli import main

    # WHEN no level option is given
    rc = main(["loadtest", "--endpoint", "http://127.0.0.1:9", "--out", str(tmp_path / "o")])
    # THEN the refusal names the options that give levels
    err = capsys.readouterr().err
    assert rc == 2 and "--concurrency, --rates, --workload, --trace or --capacity-from" in err
