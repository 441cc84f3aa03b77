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
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=200)
    parser.add_argument("--estimates", type=int, default=3)
    parser.add_argument("--cold", type=int, default=3)
    args = parser.parse_args()

    from sizing.service.observability import logger
    from sizing.slack.bot import EstimateJob, SlackBot, SlackRequest, answer
    from sizing.slack.client import SlackPoster
    from sizing.slack.grammar import parse_command
    from sizing.slack.secrets import StaticSecrets
    from sizing.slack.verify import MemoryReplayGuard

    logger.setLevel("WARNING")  # one INFO line per hand-off would drown the figures
    secrets = StaticSecrets(SECRET, "xoxb-benchmark")
    with fake_slack() as base:
        jobs: list[EstimateJob] = []
        bot = SlackBot(
            secrets=secrets,
            poster=SlackPoster(base + "/api/", secrets.bot_token),
            replay_guard=MemoryReplayGuard(),
            invoker=jobs.append,
        )
        verifier = SignatureVerifier(SECRET)

        def signed(text: str, i: int) -> SlackRequest:
            body = urlencode(
                {"command": "/sizing", "text": text, "response_url": f"{base}/hooks/{i}", "channel_id": "C1"}
            )
            ts = str(int(time.time()))
            return SlackRequest(
                body=body,
                headers={
                    "X-Slack-Request-Timestamp": ts,
                    "X-Slack-Signature": str(verifier.generate_signature(timestamp=ts, body=body)),
                },
            )

        print("== ack (verify, parse, validate, hand off) ==")
        t0 = time.perf_counter()
        first = answer(bot.command, signed(MESSAGES[0], -1))
        cold = time.perf_counter() - t0
        assert first.status == 200
        print(f"  first request (loads the catalog)            {cold * 1000:8.1f} ms")
        per_kind: dict[str, list[float]] = {"estimate hand-off": [], "help": [], "usage reply": []}
        for i in range(args.commands):
            text = MESSAGES[i % len(MESSAGES)]
            request = signed(text, i)
            t0 = time.perf_counter()
            out = answer(bot.command, request)
            took = time.perf_counter() - t0
            kind = (
                "help" if text == "help" else ("usage reply" if text == "10k users" else "estimate hand-off")
            )
            assert out.status == 200, out.body
            per_kind[kind].append(took)
        for kind, xs in per_kind.items():
            _line(kind, xs)
        worst = max(max(xs) for xs in per_kind.values())
        print(
            f"  worst warm ack {worst * 1000:.1f} ms = {worst / SLACK_ACK_DEADLINE_S:.1%} of Slack's 3 s deadline"
        )

        print("== grammar ==")
        parse: list[float] = []
        for _ in range(max(1, args.commands // len(MESSAGES))):
            for text in MESSAGES:
                t0 = time.perf_counter()
                parse_command(text)
                parse.append(time.perf_counter() - t0)
        _line("parse_command", parse, unit=1e6, label="µs")

        print("== worker (estimate, Block Kit, post to loopback) ==")
        seen: dict[str, EstimateJob] = {}
        for job in jobs:
            seen.setdefault(job.raw_spec["model"], job)
        for model, job in seen.items():
            times = []
            for _ in range(args.estimates):
                t0 = time.perf_counter()
                bot.estimate(job)
                times.append(time.perf_counter() - t0)
            _line(model, times, unit=1.0, label="s ")
        print(f"  messages posted to the fake Slack: {_Sink.posted}")

    print("== cold start of the commands function (fresh process: import the handler, load the catalog) ==")
    cold_import, cold_catalog = [], []
    for _ in range(args.cold):
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


if __name__ == "__main__":
    main()
