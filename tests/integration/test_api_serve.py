"""`sizing serve` as a newcomer uses it: a real process on loopback, answered by the deployed resolver on the
embedded AWS. Runs execute on the real state machine (twins, real Locust): created, followed, queued,
cancelled, reported. Slack's routes answer with the signing secret the server prints, into its local sink. 64
clients at once see no connection error. And schemathesis against its own document with every check: no server
error, no answer outside the document, 405 for an undeclared method, schema-valid requests accepted and
schema-violating ones refused."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import psutil
import pytest
import yaml
from support.endpoints import refusing_endpoint

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
SIZING = Path(sys.executable).with_name("sizing")
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
#: Seconds to wait for the server's banner (moto, the stack and the resolver start in ~5-10 s on this machine).
START_TIMEOUT_S = 90
#: Seconds schemathesis waits for one answer (estimates run the planner: seconds each under load).
REQUEST_TIMEOUT_S = 120
#: Every check schemathesis has: no server error, answers as documented, 405 for undeclared methods, schema-valid
#: requests accepted and schema-violating ones refused (figures in docs/reliability.md).
CHECKS = "all"
#: The one exception to schemathesis' defaults (a reused Idempotency-Key with another body is 422), with its reason.
SCHEMATHESIS_CONFIG = Path(__file__).with_name("schemathesis.toml")
#: The API's own check (no stack trace in any answer), registered with schemathesis by this file; `--checks all`
#: then runs it beside the built-in ones.
SCHEMATHESIS_HOOKS = ROOT / "tests" / "support" / "api_checks.py"
#: Seconds a short run (one candidate, three 1.5 s load levels) may take on a busy 2-core machine: it takes
#: ~25-35 s alone; the bound only keeps a broken server from hanging the suite.
RUN_DEADLINE_S = 300
#: Load level seconds of the lifecycle server: short sweeps (a run in well under a minute).
STEP_S = "1.5"
#: Warm-up seconds of each of those levels (a twin on loopback is at steady state within a fraction of a second).
WARMUP_S = "0.5"
#: Concurrent clients the server must hold without a connection error (the issue's target).
CLIENTS = 64

#: A small, fast workload: an 8B model on one L40S, so the estimate and the twin are quick.
SPEC: dict[str, Any] = {
    "name": "serve-test",
    "model": "llama-3.1-8b",
    "rate": {"peak_rps": 2},
    "traffic": {"profile": "flat"},
    "tokens": {"input": {"fixed": 200}, "output": {"fixed": 20}},
    "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 10}},
    "constraints": {"deployments": ["eks"], "instance_types": ["g6e.xlarge"], "quantizations": ["fp8"]},
}


@dataclass
class Served:
    url: str
    pid: int
    banner: str
    out: Path

    @property
    def signing_secret(self) -> str:
        match = re.search(r"signing secret ([0-9a-f]+)", self.banner)
        assert match, self.banner
        return match.group(1)


def _serve(out: Path, *args: str) -> Iterator[Served]:
    proc = subprocess.Popen(
        [str(SIZING), "serve", "--port", "0", "--quiet", "--out", str(out), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        banner = ""
        while "signing secret" not in banner:
            line = proc.stdout.readline()
            if not line:
                break
            banner += line
        match = re.search(r"http://127\.0\.0\.1:\d+", banner)
        assert match, f"sizing serve did not start: {banner}"
        yield Served(match.group(0), proc.pid, banner, out)
    finally:
        proc.terminate()
        proc.wait(timeout=START_TIMEOUT_S)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from _serve(
        tmp_path_factory.mktemp("serve"),
        "--step-seconds",
        STEP_S,
        "--warmup-seconds",
        WARMUP_S,
        "--max-runs",
        "1",
    )


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # its own server: the runs schemathesis starts queue there, not in front of the lifecycle tests' runs. They
    # measure an endpoint that refuses every connection: schemathesis checks the API's answers, and runs that
    # launched twins and load generators for its generated workloads would only spend the cores the other tests'
    # timings need
    with refusing_endpoint() as refused:
        yield from _serve(
            tmp_path_factory.mktemp("fuzzed"),
            "--step-seconds",
            STEP_S,
            "--endpoint",
            refused,
            "--max-runs",
            "1",
        )


def request(
    url: str, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=START_TIMEOUT_S) as resp:
            raw = resp.read()
            if resp.headers.get_content_type() == "text/html":
                return resp.status, raw.decode()
            return resp.status, json.loads(raw or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def wait_for(check: Callable[[], Any], deadline_s: float = RUN_DEADLINE_S, pause_s: float = 0.3) -> Any:
    """The first truthy value of `check()`, polled until the deadline (None when it never came)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(pause_s)
    return None


def run_of(server: Served, run_id: str) -> dict[str, Any]:
    status, run = request(f"{server.url}/runs/{run_id}")
    assert status == 200, run
    return dict(run)


def finished(server: Served, run_id: str) -> dict[str, Any] | None:
    run = run_of(server, run_id)
    return run if run["status"] not in ("PENDING", "QUEUED", "RUNNING", "CANCELLING") else None


def running_children(pid: int) -> list[str]:
    """The server's descendant processes still running (twins, load generators), by command line."""
    out = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                out.append(" ".join(child.cmdline()))
        except psutil.NoSuchProcess:
            continue
    return out


def twin_urls(out: Path, run_id: str) -> list[str]:
    return [json.loads(p.read_text())["endpoint"] for p in (out / run_id).rglob("task.json")]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=1):
            return True
    except (urllib.error.URLError, OSError):
        return False


def test_a_newcomer_can_curl_the_catalog(server: Served) -> None:
    status, body = request(f"{server.url}/catalog/models")
    assert status == 200
    assert any(m["id"] == "meta-llama/Llama-3.1-70B" for m in body["models"])


def test_a_run_executes_is_followed_to_its_result_while_the_next_waits_queued(server: Served) -> None:
    # given two runs posted at once on a server that executes one at a time
    status, first = request(
        f"{server.url}/runs", "POST", {"spec": SPEC, "top_k": 1}, {"Idempotency-Key": "a1"}
    )
    _, second = request(f"{server.url}/runs", "POST", {"spec": SPEC, "top_k": 1}, {"Idempotency-Key": "a2"})
    # when the second is looked at and cancelled while it waits, and the first is followed to its end
    waiting = run_of(server, second["run_id"])
    c_status, cancelled = request(f"{server.url}/runs/{second['run_id']}/cancel", "POST")
    measuring = wait_for(
        lambda: (p := run_of(server, first["run_id"]).get("progress")) and p["candidates"] and p
    )
    done = wait_for(lambda: finished(server, first["run_id"]))
    _, archs = request(f"{server.url}/runs/{first['run_id']}/architectures")
    r_status, report = request(f"{server.url}/runs/{first['run_id']}/report")
    # then the first ran to SUCCEEDED with its candidate's progress shown and a real result
    assert status == 202 and first["status"] == "RUNNING"
    assert measuring["candidates"][0]["candidate_id"] == "c1" and measuring["candidates"][0]["levels"]
    assert done is not None and done["status"] == "SUCCEEDED", done
    measured = [a for a in archs["architectures"] if a.get("measured")]
    assert measured and measured[0]["measured"]["origin"] == "twin"
    assert r_status == 200 and "<html" in report.lower() and "No architecture meets" not in report
    # and the second waited its turn (QUEUED, next in line), and cancelling it while queued ended it at once
    assert second["status"] == "QUEUED"
    assert waiting["status"] == "QUEUED" and waiting["progress"]["queue_position"] == 1
    assert c_status == 202 and cancelled["status"] == "CANCELLED"
    assert run_of(server, second["run_id"])["status"] == "CANCELLED"  # and it never started after the first


def test_cancelling_a_run_mid_load_test_ends_it_cancelled_with_nothing_left_running(server: Served) -> None:
    # given a run whose candidate is being load-tested
    _, created = request(f"{server.url}/runs", "POST", {"spec": SPEC, "top_k": 1}, {"Idempotency-Key": "c1"})
    run_id = created["run_id"]
    assert wait_for(
        lambda: any(c.get("state") == "LoadTest" for c in run_of(server, run_id)["progress"]["candidates"])
    ), run_of(server, run_id)
    # (the state turns LoadTest before the launcher writes the task and starts the load generator)
    urls = wait_for(lambda: twin_urls(server.out, run_id))
    # when it is cancelled
    status, cancelling = request(f"{server.url}/runs/{run_id}/cancel", "POST")
    final = wait_for(lambda: finished(server, run_id))
    # then it ends CANCELLED, its twin no longer answers, and no twin or load generator is left running
    assert status == 202 and cancelling["status"] == "CANCELLING"
    assert final is not None and final["status"] == "CANCELLED", final
    # and its candidate shows where it ended, not the load test it was in
    assert [c["state"] for c in final["progress"]["candidates"]] == ["Cancelled"], final["progress"]
    assert urls and not any(answers(u) for u in urls)
    assert wait_for(lambda: not running_children(server.pid), deadline_s=30), running_children(server.pid)


def test_a_run_is_cancelled_then_deleted_and_delete_refuses_a_run_that_has_not_finished(
    server: Served,
) -> None:
    # given a run the server has taken on (executing, or waiting its turn)
    _, created = request(f"{server.url}/runs", "POST", {"spec": SPEC, "top_k": 1}, {"Idempotency-Key": "d1"})
    run_id = created["run_id"]
    # when it is deleted before it has finished
    early_status, early = request(f"{server.url}/runs/{run_id}", "DELETE")
    # then that is refused, naming the route that cancels it, and the run goes on
    assert early_status == 409 and early["details"]["cancel"] == f"/runs/{run_id}/cancel", early
    assert run_of(server, run_id)["status"] in ("QUEUED", "RUNNING")
    # when it is cancelled, it stays readable and ends CANCELLED
    c_status, _ = request(f"{server.url}/runs/{run_id}/cancel", "POST")
    final = wait_for(lambda: finished(server, run_id))
    assert c_status == 202 and final is not None and final["status"] == "CANCELLED", final
    # and when it is deleted then, it is gone: the run, its results, its report, its folder
    d_status, nothing = request(f"{server.url}/runs/{run_id}", "DELETE")
    assert d_status == 204 and nothing is None
    assert request(f"{server.url}/runs/{run_id}")[0] == 404
    assert request(f"{server.url}/runs/{run_id}/architectures")[0] == 404
    assert request(f"{server.url}/runs/{run_id}/report")[0] == 404
    assert not (server.out / run_id).exists()
    assert run_id not in [r["run_id"] for r in request(f"{server.url}/runs?limit=100")[1]["runs"]]


def test_a_signed_slack_command_is_acknowledged_and_its_estimate_reaches_the_local_sink(
    server: Served,
) -> None:
    # given the sample slash command, signed with the secret the server printed
    event = json.loads((EVENTS / "slack_command.json").read_text())
    fields = {k: v[0] for k, v in parse_qs(event["body"], keep_blank_values=True).items()}
    fields["response_url"] = "https://hooks.slack.com/commands/T000/1/local"
    body = urlencode(fields)
    ts = str(int(time.time()))
    digest = hmac.new(server.signing_secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest.hexdigest()}",
    }
    # when it is posted to /slack/commands (and the same one unsigned)
    req = urllib.request.Request(f"{server.url}/slack/commands", data=body.encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=START_TIMEOUT_S) as resp:
        ack_status, ack = resp.status, json.loads(resp.read())
    unsigned = urllib.request.Request(f"{server.url}/slack/commands", data=body.encode())
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(unsigned, timeout=START_TIMEOUT_S)
    sink = server.out / "slack.jsonl"
    posted = wait_for(lambda: sink.exists() and [json.loads(x) for x in sink.read_text().splitlines()])
    # then it is acknowledged at once, the unsigned one refused, and the estimate is in the sink
    assert ack_status == 200 and ack.get("response_type") == "ephemeral"
    assert refused.value.code == 401
    assert posted and posted[0]["response_type"] == "in_channel" and posted[0]["blocks"]


def _signed(server: Served, body: str) -> dict[str, str]:
    ts = str(int(time.time()))
    digest = hmac.new(server.signing_secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256)
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest.hexdigest()}",
    }


def test_a_run_started_from_slack_reports_its_end_in_the_thread_when_it_is_cancelled(server: Served) -> None:
    # given the sample "Measure these 3" button, signed, posted to /slack/interactions
    event = json.loads((EVENTS / "slack_interaction.json").read_text())
    body = event["body"]
    req = urllib.request.Request(
        f"{server.url}/slack/interactions", data=body.encode(), headers=_signed(server, body)
    )
    with urllib.request.urlopen(req, timeout=START_TIMEOUT_S) as resp:
        assert resp.status == 200
    payload = json.loads(parse_qs(body)["payload"][0])
    thread = payload["container"]["message_ts"]
    sink = server.out / "slack.jsonl"

    def started() -> str | None:  # the run the button started, as the bot announced it in the thread
        for m in (json.loads(x) for x in sink.read_text().splitlines()) if sink.exists() else []:
            found = re.search(r"\b([0-9a-f]{16,})\b", json.dumps(m)) if m.get("thread_ts") == thread else None
            if found and request(f"{server.url}/runs/{found.group(1)}")[0] == 200:
                return found.group(1)
        return None

    run_id = wait_for(started)
    assert run_id, sink.read_text() if sink.exists() else "nothing posted"
    # when the run is cancelled
    request(f"{server.url}/runs/{run_id}/cancel", "POST")
    assert wait_for(lambda: finished(server, run_id))["status"] == "CANCELLED"

    # then its end is posted in the thread it came from, naming the run
    def ended() -> list[dict[str, Any]]:
        lines = [json.loads(x) for x in sink.read_text().splitlines()]
        return [
            m
            for m in lines
            if m.get("thread_ts") == thread and f"Run {run_id} cancelled" in (m.get("text") or "")
        ]

    assert wait_for(ended), sink.read_text()


def test_the_swagger_page_and_the_document_say_the_same_about_authentication(server: Served) -> None:
    # given the local server, which checks no signature
    status, doc = request(f"{server.url}/openapi.json")
    page_status, page = request(f"{server.url}/swagger")
    # then neither its document nor its Swagger page declares a security scheme (the deployed API's: SigV4)
    assert status == 200 and "security" not in doc and "securitySchemes" not in doc.get("components", {})
    assert page_status == 200 and '"sigv4"' not in page  # the deployed document's scheme, by its name


def test_64_clients_at_once_see_no_connection_error(server: Served) -> None:
    # given 64 clients connecting at the same moment
    def one(i: int) -> int:
        status, _ = request(f"{server.url}/catalog/models" if i % 2 else f"{server.url}/runs?limit=5")
        return status

    # when each sends its request
    with ThreadPoolExecutor(CLIENTS) as pool:
        statuses = list(pool.map(one, range(CLIENTS)))
    # then every one is answered (a reset connection would raise here)
    assert statuses == [200] * CLIENTS


def test_bad_input_is_a_4xx_with_the_common_body(server: Served) -> None:
    status, body = request(f"{server.url}/estimates", "POST", {"model": "nope"})
    assert status == 422
    assert set(body) == {"error", "message", "details"}


def test_the_example_chatbot_is_accepted_as_a_run(server: Served) -> None:
    # given the README's example, as the README's curl sends it
    spec = yaml.safe_load((ROOT / "examples" / "chatbot.yaml").read_text())
    # when it is posted, then cancelled (measuring a 70B example takes minutes)
    status, created = request(f"{server.url}/runs", "POST", {"spec": spec}, {"Idempotency-Key": "chat"})
    c_status, _ = request(f"{server.url}/runs/{created['run_id']}/cancel", "POST")
    # then it was accepted and ends cancelled
    assert status == 202 and c_status == 202
    assert wait_for(lambda: finished(server, created["run_id"]))["status"] == "CANCELLED"


def _schemathesis(server: Served, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(SCHEMATHESIS_CONFIG),
            "run",
            f"{server.url}/openapi.json",
            "--checks",
            CHECKS,
            "--seed",
            "1",
            "--generation-database",
            "none",
            "--workers",
            "1",
            "--no-color",
            # an estimate takes seconds on a busy 2-core machine: a slow answer is not the failure looked for
            "--request-timeout",
            str(REQUEST_TIMEOUT_S),
            # the Slack bot's routes are in the document but Slack-signed: their own tests send signed requests
            "--exclude-path-regex",
            "^/slack/",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "SCHEMATHESIS_HOOKS": str(SCHEMATHESIS_HOOKS)},
        timeout=900,
    )


def test_schemathesis_smoke_passes_every_check(fuzzed: Served) -> None:
    # a bounded pass for every CI run: the documented examples and the schema's boundary values
    result = _schemathesis(fuzzed, "--phases", "examples,coverage", "--max-examples", "5", "--max-time", "60")
    assert result.returncode == 0, result.stdout[-6000:]


@pytest.mark.slow
def test_schemathesis_fuzzing_passes_every_check(fuzzed: Served) -> None:
    result = _schemathesis(
        fuzzed, "--phases", "examples,coverage,fuzzing", "--max-examples", "30", "--max-time", "240"
    )
    assert result.returncode == 0, result.stdout[-6000:]
