"""Fuzzing the other two front doors with hypothesis: the `/sizing` Slack grammar and the `sizing` command line.
Whatever is typed, the answer is a spec, help or a usage reply (Slack), or exit 0 / exit 2 with a message (CLI):
never an exception, never a traceback, never a hang."""

from __future__ import annotations

import contextlib
import io
import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sizing.base.errors import SizingError
from sizing.cli import EXIT_BAD_INPUT, main
from sizing.commands.output import EXIT_NO_ARCHITECTURE
from sizing.slack.bot import SlackBot
from sizing.slack.client import Message
from sizing.slack.grammar import parse_command
from sizing.workload.parse import parse_spec

#: Examples per fuzzed property: enough to cover every word class of the grammar several times while the whole
#: file stays within a few seconds on this 2-core machine (figures in docs/reliability.md).
SLACK_EXAMPLES = 400
CLI_EXAMPLES = 60
FILE_EXAMPLES = 80
PLAUSIBLE_EXAMPLES = 15
#: A liveness guard, not a speed target: one CLI call that has not answered in a minute is hung.
HANG_S = 60

# --- the Slack grammar -------------------------------------------------------------------------------------------
WORDS = [
    "10k", "users", "user", "llama-3.1-8b", "llama-3.1-70b", "mixtral", "gpt-9", "ttft<1s", "ttft", "<", "<=",
    "≤", "=", ":", "e2e<2.5s", "tpot<50ms", "p99", "p95", "ttft@p99<1s", "in=1500", "out=300", "in", "out",
    "chat", "rag", "batch", "preset=nope", "eks", "sagemaker", "bedrock", "spot", "fp8", "int4", "rps", "req/s",
    "rate=", "max=$20k", "$", "&lt;", "&gt;", "&amp;", "for", "with", "help", "1,000", "1e999", "-5", "0", "nan",
    "inf", "9" * 400, "\u202e", "\u0000", "🦙", "ｌｌａｍａ", "g6e", "region=us-east-1", "p5", "inf2",
]  # fmt: skip
NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e-300", "1e308", "0.0000001", "1k", "1m", "1,000,000", "10k"]),
)
UNITS = st.sampled_from(["", "s", "ms", "sec", "min", "k", "m", "rps", "%"])
TOKEN = st.one_of(
    st.sampled_from(WORDS),
    st.tuples(st.sampled_from(["ttft", "tpot", "e2e", "in", "out", "users", "rps", ""]), st.sampled_from(["<", "=", ":", ""]), NUMBERS, UNITS).map("".join),
    st.text(max_size=12),
)  # fmt: skip
MESSAGES = st.one_of(st.lists(TOKEN, max_size=14).map(" ".join), st.text(max_size=300))


class _NoSecrets:
    def signing_secret(self) -> Any:
        raise AssertionError("understanding a message needs no secret")

    def bot_token(self) -> Any:
        raise AssertionError("understanding a message needs no secret")


@pytest.fixture(scope="module")
def bot() -> SlackBot:
    return SlackBot(secrets=_NoSecrets(), poster=None, replay_guard=None)  # type: ignore[arg-type]


@settings(
    max_examples=SLACK_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=MESSAGES)
def test_any_slack_message_is_understood_or_answered_with_usage(bot, text, figures):
    figures.add("bad_input.slack_messages", messages=1)
    # given any message typed after /sizing
    # when the grammar parses it
    parsed = parse_command(text)
    # then it is help, usage with reasons, or a spec that validates or names its problems
    assert parsed.kind in ("help", "usage", "spec")
    if parsed.kind == "usage":
        assert parsed.problems and all(isinstance(p, str) and p for p in parsed.problems)
    if parsed.kind == "spec":
        with contextlib.suppress(SizingError):
            parse_spec(parsed.raw_spec)
    # and the bot turns it into a reply or a spec without raising
    understood = bot.understand(text)
    assert isinstance(understood, Message) or understood[0].model == understood[1]["model"]


@pytest.mark.parametrize(
    "text",
    [
        "9" * 400 + " users llama-3.1-8b ttft<1s",
        "10 users llama-3.1-8b in=" + "9" * 400,
        "10 users llama-3.1-8b out=" + "9" * 400 + "k",
        "9" * 400 + "k users llama-3.1-8b",
    ],
)
def test_a_number_past_float_range_gets_a_usage_reply_naming_the_field(bot, text):
    # given a number of 400 digits (it parses to float infinity; round() of it raised OverflowError, a 502)
    # when the bot reads it, then the reply names the field whose bound it exceeds
    understood = bot.understand(text)
    assert isinstance(understood, Message)
    assert any(f in understood.text + str(understood.blocks_json()) for f in ("users.total", "tokens."))


def test_a_message_past_slacks_limit_is_refused_unparsed():
    parsed = parse_command("10k users llama-3.1-8b " * 1000)
    assert parsed.kind == "usage" and "longer than" in parsed.problems[0]


# --- the command line --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _hang_guard(seconds: int = HANG_S) -> Iterator[None]:
    def hung(*_: Any) -> None:
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _hang_guard():
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's refusals
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


PREDICT_VALUES = st.one_of(
    st.integers(min_value=1, max_value=4096).map(str),
    st.integers(min_value=-(10**12), max_value=10**12).map(str),
    st.sampled_from(["1e-300", "1e-40", "1e308", "inf", "nan", "-0", "0x10", "", "١٢", "10k", "9" * 5000]),
)
PREDICT_ARGS = st.fixed_dictionaries(
    {
        "--model": st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "nope", "", "../../etc/passwd"]),
        "--instance": st.sampled_from(["g6e.xlarge", "p5.48xlarge", "inf2.48xlarge", "m5.large", "g6e"]),
        "--input-tokens": PREDICT_VALUES,
        "--output-tokens": PREDICT_VALUES,
    },
    optional={
        "--tp": PREDICT_VALUES,
        "--quant": st.sampled_from(["bf16", "fp8", "int4", "fp3"]),
        "--concurrency": PREDICT_VALUES,
        "--rate": PREDICT_VALUES,
    },
)


@settings(max_examples=CLI_EXAMPLES, deadline=None)
@given(args=PREDICT_ARGS)
def test_sizing_predict_answers_or_exits_2_for_any_arguments(args, figures):
    # given any arguments (numbers out of range, junk, huge, tiny)
    argv = ["predict", "--json"] + [x for k, v in args.items() for x in (k, v)]
    # when
    code, out, err = run_cli(argv)
    # then a prediction (exit 3 when it does not fit), or exit 2 with a message; never a traceback
    event(f"exit {code}")
    figures.add("bad_input.cli_predict", calls=1, tracebacks=int("Traceback" in err))
    assert code in (0, EXIT_NO_ARCHITECTURE, EXIT_BAD_INPUT), (argv, code, err[-500:])
    assert "Traceback" not in err
    if code == EXIT_BAD_INPUT:
        assert "error" in err
    else:  # a prediction, that fits (0) or not (3, with the memory arithmetic)
        answer = json.loads(out)
        assert answer["model"] and answer["fits"] is (code == 0)


SPEC_KEYS = ["name", "model", "users", "rate", "traffic", "tokens", "slo", "constraints", "preset", "nope"]
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["llama-3.1-8b", "flat", "business-hours", "lognormal", "p95", "eks", "fp8"]),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["total", "mean", "p95", "fixed", "peak_rps", "profile", "ttft_ms",
                                         "input", "output", "deployments", "sigma", "dist", "x"]), inner, max_size=4),
    ),
    max_leaves=12,
)  # fmt: skip
SPECS = st.dictionaries(st.sampled_from(SPEC_KEYS), VALUES, max_size=8)


@settings(
    max_examples=FILE_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(spec=SPECS, as_json=st.booleans())
def test_sizing_workload_answers_or_exits_2_for_any_spec_file(tmp_path, spec, as_json, figures):
    # given any mapping written as YAML or JSON
    path = tmp_path / ("spec.json" if as_json else "spec.yaml")
    path.write_text(json.dumps(spec) if as_json else yaml.safe_dump(spec, allow_unicode=True))
    # when
    code, _out, err = run_cli(["workload", str(path), "--json"])
    figures.add("bad_input.cli_spec_files", files=1, tracebacks=int("Traceback" in err))
    # then
    assert code in (0, EXIT_BAD_INPUT) and "Traceback" not in err, (spec, err[-500:])


UNREADABLE_FILES = {
    "bytes that are not UTF-8": (b"\xff\xfe\x00garbage", ".yaml"),
    "deeply nested JSON": (b"[" * 100_000 + b"]" * 100_000, ".json"),
    "deeply nested YAML": (b"[" * 100_000 + b"]" * 100_000, ".yaml"),
    "a 5000-digit integer in JSON": (b'{"model": "llama-3.1-8b", "rate": {"peak_rps": ' + b"9" * 5000 + b"}}", ".json"),
    "a 5000-digit integer in YAML": (b"model: llama-3.1-8b\nrate: {peak_rps: " + b"9" * 5000 + b"}\n", ".yaml"),
    "a billion-laughs YAML": (
        b'a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n'
        b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\nmodel: llama-3.1-8b\n",
        ".yaml",
    ),
    "a YAML tag that builds an object": (b"!!python/object/apply:os.system ['true']\n", ".yaml"),
    "an empty file": (b"", ".yaml"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(UNREADABLE_FILES))
@pytest.mark.parametrize("command", ["workload", "estimate"])
def test_an_unreadable_spec_file_is_exit_2_with_a_message(tmp_path, name, command, figures):
    content, suffix = UNREADABLE_FILES[name]
    path = tmp_path / f"spec{suffix}"
    path.write_bytes(content)
    code, _out, err = run_cli([command, str(path)])
    figures.add("bad_input.cli_spec_files", files=1, tracebacks=int("Traceback" in err))
    assert code == EXIT_BAD_INPUT and "Traceback" not in err and err.startswith("error:"), err[-500:]


@pytest.mark.parametrize("rate", ["1.0e-40", "1.0e-100", "1.0e-300"])
def test_an_absurdly_low_rate_is_refused_not_hung(tmp_path, rate):
    # given a spec whose next arrival is 1e40 seconds away (once an endless loop of the simulator)
    spec = {
        "name": "tiny",
        "model": "llama-3.1-8b",
        "rate": {"peak_rps": float(rate)},
        "tokens": {"input": {"fixed": 200}, "output": {"fixed": 20}},
        "slo": {"ttft_ms": {"p95": 2000}},
        "constraints": {"deployments": ["eks"], "instance_types": ["g6e.xlarge"], "quantizations": ["fp8"]},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec))
    # when it is estimated
    code, _out, err = run_cli(["estimate", str(path), "--json"])
    # then it answers at once (within the hang guard): bad input naming the rate, no traceback
    assert code == EXIT_BAD_INPUT, err[-500:]
    assert "rate.peak_rps" in err and "Traceback" not in err


def test_the_fuzzed_vocabulary_reaches_every_answer_kind():
    # a guard on the fuzzer itself: the word list can produce help, usage and valid specs
    kinds = {
        parse_command(t).kind for t in ["help", "10k users llama-3.1-8b ttft<1s", "10k users gpt-9 ttft<"]
    }
    assert kinds == {"help", "spec", "usage"}


PLAUSIBLE_PREDICT = st.fixed_dictionaries(
    {
        "--model": st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b"]),
        "--instance": st.sampled_from(["g6e.xlarge", "g6e.12xlarge", "p5.48xlarge", "inf2.48xlarge", "g5.xlarge"]),
        "--input-tokens": st.integers(min_value=1, max_value=10**6).map(str),
        "--output-tokens": st.integers(min_value=1, max_value=10**5).map(str),
        "--quant": st.sampled_from(["bf16", "fp8", "int4"]),
    }
).flatmap(
    lambda base: st.one_of(
        st.integers(min_value=1, max_value=10**7).map(lambda c: {**base, "--concurrency": str(c)}),
        st.floats(min_value=1e-300, max_value=1e6).map(lambda r: {**base, "--rate": repr(r)}),
    )
)  # fmt: skip


@settings(max_examples=PLAUSIBLE_EXAMPLES, deadline=None)
@given(args=PLAUSIBLE_PREDICT)
def test_sizing_predict_answers_any_plausible_deployment(args, figures):
    # given a real model and instance with any token counts and load, tiny to absurd
    argv = ["predict", "--json"] + [x for k, v in args.items() for x in (k, v)]
    # when
    code, _out, err = run_cli(argv)
    # then a prediction (0: it fits; 3: it does not), or exit 2 naming the problem; never a traceback or a hang
    event(f"exit {code}")
    figures.add("bad_input.cli_predict", calls=1, tracebacks=int("Traceback" in err))
    assert code in (0, EXIT_NO_ARCHITECTURE, EXIT_BAD_INPUT) and "Traceback" not in err, (argv, err[-500:])
