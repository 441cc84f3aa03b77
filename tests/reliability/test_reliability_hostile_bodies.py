"""Hostile request bodies against every route that takes one: each is refused with a 4xx in the common error
body, no stack trace in the answer, and nothing written to the table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

BODY_ROUTES = ("/estimates", "/runs", "/watches")
#: Python's json parser recurses once per nesting level and stops at the interpreter's recursion limit (~1000).
DEEP = 100_000
#: CPython refuses to turn more than 4300 digits into an int (sys.int_info.default_max_str_digits).
LONG_INT_DIGITS = 5_000


HOSTILE: dict[str, bytes] = {
    "deeply nested arrays": b"[" * DEEP + b"]" * DEEP,
    "deeply nested objects": b'{"spec":' * DEEP + b"1" + b"}" * DEEP,
    "an integer of 5000 digits": b'{"spec": {"model": "llama-3.1-8b", "rate": {"peak_rps": '
    + b"9" * LONG_INT_DIGITS
    + b"}}}",
    "bytes that are not UTF-8": b"\xff\xfe\x00garbage",
    "UTF-8 of a lone surrogate": b'{"spec": {"name": "\xed\xa0\x80"}}',
    "a lone surrogate escape": b'{"spec": {"model": "llama-3.1-8b", "name": "\\ud800"}}',
    "a float overflowing to infinity": b'{"spec": {"model": "llama-3.1-8b", "rate": {"peak_rps": 1e999}}}',
    "NaN": b'{"spec": {"model": "llama-3.1-8b", "rate": {"peak_rps": NaN}}}',
    "JSON with a NUL": b'{"spec": {"model": "llama\\u0000"}}',
    "a top-level list": b"[1, 2, 3]",
    "a top-level string": b'"spec"',
    "truncated JSON": b'{"spec": {"model": ',
    "an empty object": b"{}",
    "form-encoded": b"model=llama-3.1-8b&users=10",
    "YAML": b"model: llama-3.1-8b\nrate: {peak_rps: 2}\n",
}


def _assert_refused_cleanly(answer: Any) -> None:
    assert 400 <= answer.status < 500, (answer.status, answer.body[:300])
    body = answer.json()
    assert set(body) == {"error", "message", "details"}
    assert b"Traceback" not in answer.body and b'File "' not in answer.body


@pytest.mark.parametrize("route", BODY_ROUTES)
@pytest.mark.parametrize("name", list(HOSTILE))
@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_a_hostile_body_is_refused_without_a_trace_or_a_write(api, route, name, content_type, figures):
    # given an empty table
    before, executions_before = api.table_items(), len(api.executions())
    # when a hostile body arrives
    answer = api.call("POST", route, HOSTILE[name], {"Content-Type": content_type})
    figures.add("bad_input.hostile_bodies", requests=1, server_errors=int(answer.status >= 500),
                written=len(api.table_items()) - len(before))  # fmt: skip
    # then it is a 4xx with the common body, and nothing was stored or started
    _assert_refused_cleanly(answer)
    assert api.table_items() == before
    assert len(api.executions()) == executions_before


@pytest.mark.parametrize(
    "name", ["deeply nested arrays", "an integer of 5000 digits", "bytes that are not UTF-8"]
)
def test_an_unreadable_body_is_a_400_that_says_why(api, name):
    answer = api.call("POST", "/estimates", HOSTILE[name], {"Content-Type": "application/json"})
    assert answer.status == 400
    assert answer.json()["details"]["problems"][0]["field"] == "body"


def test_a_body_one_byte_over_the_limit_is_a_413_and_at_the_limit_is_read(api, small_spec):
    from sizing.service.api import MAX_BODY_BYTES

    # given a valid spec padded with whitespace to exactly the limit, and one byte more
    spec = json.dumps(small_spec())
    at_limit = spec + " " * (MAX_BODY_BYTES - len(spec))
    # when / then
    assert api.call("POST", "/estimates", at_limit, {"Content-Type": "application/json"}).status == 200
    over = api.call("POST", "/estimates", at_limit + " ", {"Content-Type": "application/json"})
    assert over.status == 413 and over.json()["error"] == "payload_too_large"


@pytest.mark.parametrize(
    "path",
    [
        "/runs/" + "a" * 5000,
        "/runs/%00",
        "/runs/..%2F..%2Fetc%2Fpasswd",
        "/runs/\u202e\u0000",
        "/runs?limit=99999999999999999999999999",
        "/runs?limit=-1",
        "/runs?status=NOPE",
        "/runs?token=" + "%FF" * 100,
        "/runs?token=eyJub3QiOiAiYSB0b2tlbiJ9",
        "/catalog/instances?region=" + "x" * 5000,
        "/watches/" + "é" * 100,
    ],
)
def test_odd_paths_and_queries_are_4xx_never_5xx(api, path, figures):
    answer = api.call("GET", path)
    figures.add("bad_input.odd_paths", requests=1, server_errors=int(answer.status >= 500))
    _assert_refused_cleanly(answer)


@pytest.mark.parametrize("key", ["", " " * 300, "k" * 256])
def test_an_odd_idempotency_key_is_refused_and_starts_nothing(api, key, small_spec):
    executions_before = len(api.executions())
    answer = api.post_json("/runs", {"spec": small_spec()}, {"Idempotency-Key": key})
    _assert_refused_cleanly(answer)
    assert len(api.executions()) == executions_before


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "/proc/self/environ", "/dev/zero", "/nonexistent", "tokens.csv"]
)
@pytest.mark.parametrize(("route", "wrap"), [("/estimates", False), ("/runs", True), ("/watches", True)])
def test_a_spec_naming_a_server_file_is_refused_unread(
    api, small_spec, tmp_path, monkeypatch, path, route, wrap, figures
):
    # given a spec whose token samples are "a file on the server" (the CLI's option for one's own machine)
    opened: list[str] = []
    real_open = Path.open

    def spy(self: Path, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", spy)
    spec = small_spec(tokens={"samples_file": path})
    body: dict[str, Any] = {"spec": spec} if wrap else spec
    if route == "/watches":
        body = {"name": "w", "model_pattern": "meta-llama/*", **body}
    before, executions = api.table_items(), len(api.executions())
    # when it is posted
    answer = api.post_json(route, body)
    figures.add("bad_input.server_files", requests=1, server_errors=int(answer.status >= 500),
                written=len(api.table_items()) - len(before))  # fmt: skip
    # then it is refused naming the field, the file is never opened, and nothing is stored or started
    assert answer.status == 422, answer.body[:300]
    assert answer.json()["details"]["problems"][0]["field"].endswith("tokens.samples_file")
    assert path not in " ".join(opened)
    assert api.table_items() == before and len(api.executions()) == executions
