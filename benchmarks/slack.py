"""Slack bot figures. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/slack.py [--commands 200] [--estimates 3]

- ack: a signed `/sizing ...` through verify → parse → validate → catalog lookup → hand-off, the path that must
  answer within Slack's 3 s (target: well under 1 s warm, so a cold start fits too). The first request includes
  loading the catalog (what a cold Lambda pays on top of its init).
- grammar: parsing alone, per message, over the phrasings of the grammar tests.
- worker: estimate + Block Kit + post to a fake Slack on loopback (127.0.0.1), per workload.
- cold: a fresh process importing the commands function and loading the catalog (what a cold Lambda adds).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

if TYPE_CHECKING:
    from sizing.slack.bot import EstimateJob, SlackBot, SlackRequest

ROOT = Path(__file__).resolve().parents[1]
SECRET = "benchmark-signing-secret"
COLD = """
import importlib.util, time
t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location("cmd", "functions/slack/slack_commands.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
t1 = time.perf_counter()
from sizing.catalog import load_catalog
load_catalog()
print(t1 - t0, time.perf_counter() - t1)
"""
#: Slack's acknowledgement deadline for slash commands and interactions.
SLACK_ACK_DEADLINE_S = 3.0
MESSAGES = [
    "10k users llama-3.1-70b ttft<1s e2e<2.5s in=1500 out=300 chat",
    "500 users llama-3.1-8b code ttft<300ms",
    "12 rps mistralai/Mixtral-8x7B-v0.1 rag",
    "2,000 people meta-llama/Llama-3.1-70B-Instruct in 4000/8000 out=300 ttft≤2s eks spot fp8",
    "40 rps llama-3.1-8b batch e2e<5min@p99",
    "help",
    "10k users",
]


class _Sink(BaseHTTPRequestHandler):
    posted = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).posted += 1
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def fake_slack() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def _line(name: str, xs: list[float], unit: float = 1000.0, label: str = "ms") -> None:
    print(
        f"  {name:<44} n={len(xs):<4} p50={statistics.median(xs) * unit:8.2f} {label}"
        f"  p95={_pct(xs, 0.95) * unit:8.2f} {label}  max={max(xs) * unit:8.2f} {label}"
    )


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=200)
    parser.add_argument("--estimates", type=int, default=3)
    parser.add_argument("--cold", type=int, default=3)
    return parser.parse_args()


class _Signer:
    """Slash commands as Slack sends them: form-encoded, timestamped and signed with the benchmark's secret."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.verifier = SignatureVerifier(SECRET)

    def __call__(self, text: str, i: int) -> SlackRequest:
        from sizing.slack.bot import SlackRequest

        body = urlencode(
            {"command": "/sizing", "text": text, "response_url": f"{self.base}/hooks/{i}", "channel_id": "C1"}
        )
        ts = str(int(time.time()))
        return SlackRequest(
            body=body,
            headers={
                "X-Slack-Request-Timestamp": ts,
                "X-Slack-Signature": str(self.verifier.generate_signature(timestamp=ts, body=body)),
            },
        )


def _bot(base: str, jobs: list[EstimateJob]) -> SlackBot:
    """The bot posting to the fake Slack at `base`, its estimate jobs handed off into `jobs`."""
    from sizing.slack.bot import SlackBot
    from sizing.slack.client import SlackPoster
    from sizing.slack.secrets import StaticSecrets
    from sizing.slack.verify import MemoryReplayGuard

    secrets = StaticSecrets(SECRET, "xoxb-benchmark")
    return SlackBot(
        secrets=secrets,
        poster=SlackPoster(base + "/api/", secrets.bot_token),
        replay_guard=MemoryReplayGuard(),
        invoker=jobs.append,
    )


def _ack_kind(text: str) -> str:
    return "help" if text == "help" else ("usage reply" if text == "10k users" else "estimate hand-off")


def measure_ack(bot: SlackBot, signed: _Signer, commands: int) -> None:
    """The first signed command (it loads the catalog), then `commands` warm ones, per kind of answer."""
    from sizing.slack.bot import answer

    print("== ack (verify, parse, validate, hand off) ==")
    t0 = time.perf_counter()
    first = answer(bot.command, signed(MESSAGES[0], -1))
    cold = time.perf_counter() - t0
    assert first.status == 200
    print(f"  first request (loads the catalog)            {cold * 1000:8.1f} ms")
    per_kind: dict[str, list[float]] = {"estimate hand-off": [], "help": [], "usage reply": []}
    for i in range(commands):
        text = MESSAGES[i % len(MESSAGES)]
        request = signed(text, i)
        t0 = time.perf_counter()
        out = answer(bot.command, request)
        took = time.perf_counter() - t0
        assert out.status == 200, out.body
        per_kind[_ack_kind(text)].append(took)
    for kind, xs in per_kind.items():
        _line(kind, xs)
    worst = max(max(xs) for xs in per_kind.values())
    print(
        f"  worst warm ack {worst * 1000:.1f} ms = {worst / SLACK_ACK_DEADLINE_S:.1%} of Slack's 3 s deadline"
    )


def measure_grammar(commands: int) -> None:
    """Parsing alone, about `commands` messages over the benchmark's phrasings."""
    from sizing.slack.grammar import parse_command

    print("== grammar ==")
    parse: list[float] = []
    for _ in range(max(1, commands // len(MESSAGES))):
        for text in MESSAGES:
            t0 = time.perf_counter()
            parse_command(text)
            parse.append(time.perf_counter() - t0)
    _line("parse_command", parse, unit=1e6, label="µs")


def measure_worker(bot: SlackBot, jobs: list[EstimateJob], estimates: int) -> None:
    """One handed-off job per model estimated, rendered and posted `estimates` times."""
    print("== worker (estimate, Block Kit, post to loopback) ==")
    seen: dict[str, EstimateJob] = {}
    for job in jobs:
        seen.setdefault(job.raw_spec["model"], job)
    for model, job in seen.items():
        times = []
        for _ in range(estimates):
            t0 = time.perf_counter()
            bot.estimate(job)
            times.append(time.perf_counter() - t0)
        _line(model, times, unit=1.0, label="s ")
    print(f"  messages posted to the fake Slack: {_Sink.posted}")


def measure_cold(runs: int) -> None:
    """`runs` fresh processes importing the commands function and loading the catalog."""
    print("== cold start of the commands function (fresh process: import the handler, load the catalog) ==")
    cold_import, cold_catalog = [], []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", COLD], capture_output=True, text=True, check=True, cwd=ROOT
        )
        a, b = (float(x) for x in out.stdout.split())
        cold_import.append(a)
        cold_catalog.append(b)
    _line("import functions/slack/slack_commands.py", cold_import)
    _line("load_catalog() on first request", cold_catalog)
    both = statistics.median(cold_import) + statistics.median(cold_catalog)
    print(
        f"  median cold path {both * 1000:.0f} ms = {both / SLACK_ACK_DEADLINE_S:.0%} of Slack's 3 s deadline"
        " (plus, in AWS, one GetSecretValue and the async invoke)"
    )


def main() -> None:
    args = _args()
    from sizing.base.observability import logger

    logger.setLevel("WARNING")  # one INFO line per hand-off would drown the figures
    with fake_slack() as base:
        jobs: list[EstimateJob] = []
        bot = _bot(base, jobs)
        measure_ack(bot, _Signer(base), args.commands)
        measure_grammar(args.commands)
        measure_worker(bot, jobs, args.estimates)
    measure_cold(args.cold)


if __name__ == "__main__":
    main()
