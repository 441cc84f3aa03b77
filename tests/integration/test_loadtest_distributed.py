"""The distributed mode is exact: 256 concurrent streams over a Locust master and 2 worker processes against a
loopback server that names every answer it serves. The master's step figures must be those of the union of
every worker's records (each worker logs what it ships, with `save_requests`): none lost, none counted twice,
nothing the server did not serve. One step of a few seconds, only 127.0.0.1, a bounded number of requests."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sizing.loadtest import run_sweep
from sizing.loadtest.metrics import RequestRecord, read_worker_log, summarize

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(name="timing")]

STREAMS = 256
WORKERS = 2
#: Known timing of every answer: the first token after 0.5 s, then 5 more 0.1 s apart (1 s an answer), so the
#: 256 closed-loop streams send ~256 requests a second.
FIRST_TOKEN_S = 0.5
GAP_S = 0.1
TOKENS = 6
ANSWER_S = FIRST_TOKEN_S + (TOKENS - 1) * GAP_S
WARMUP_S = 1.0
DURATION_S = 3.0
#: Bound on the whole run (warm-up, window, tail, worker start and shutdown).
MAX_TOTAL_S = 30


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@dataclass
class CountingServer:
    """Streams every answer on the fixed schedule above, under an id of its own (`srv-N`), and remembers when
    each id's request arrived (epoch seconds, the clock the load generator's records use). It serves no other
    route: the load test's GETs of /v1/models and /metrics are answered 404, as by a server without them."""

    arrived: dict[str, float] = field(default_factory=dict)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(x.split(b":", 1)[1])
                        for x in head.split(b"\r\n")
                        if x.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                if not head.startswith(b"POST"):  # the load test's probes (/v1/models, /metrics): not answers
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                    await writer.drain()
                    continue
                rid = f"srv-{len(self.arrived) + 1}"
                self.arrived[rid] = time.time()
                token = _chunk(
                    b'data: {"id":"%s","choices":[{"index":0,"delta":{"content":" w"}}]}\n\n' % rid.encode()
                )
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                await asyncio.sleep(FIRST_TOKEN_S)
                for i in range(TOKENS):
                    if i:
                        await asyncio.sleep(GAP_S)
                    if writer.is_closing():  # the client stopped reading (its user was stopped at the end)
                        return
                    writer.write(token)
                usage = {"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": TOKENS}}
                writer.write(
                    _chunk(b"data: " + json.dumps(usage).encode() + b"\n\n")
                    + _chunk(b"data: [DONE]\n\n")
                    + b"0\r\n\r\n"
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


@pytest.fixture
def counting_server() -> Iterator[tuple[str, CountingServer]]:
    srv = CountingServer()
    loop = asyncio.new_event_loop()
    ready: dict[str, Any] = {}
    started = threading.Event()

    async def serve() -> None:
        server = await asyncio.start_server(srv.handle, "127.0.0.1", 0, backlog=1024)
        ready["server"], ready["port"] = server, server.sockets[0].getsockname()[1]
        started.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(serve())
        loop.run_forever()

    thread = threading.Thread(target=run, name="counting-server", daemon=True)
    thread.start()
    assert started.wait(10)
    yield f"http://127.0.0.1:{ready['port']}", srv
    loop.call_soon_threadsafe(ready["server"].close)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def _records(path: Path) -> list[RequestRecord]:
    out = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        if d.pop("warmup", False):
            continue  # the warm-up's requests: kept beside the window's, counted in no figure
        d.pop("step", None)
        out.append(RequestRecord(**d))
    return out


def test_the_masters_figures_are_those_of_the_union_of_every_workers_records(
    counting_server: tuple[str, CountingServer], tmp_path: Path
) -> None:
    url, server = counting_server
    # given 256 streams over a master and 2 workers, each worker logging every record it ships
    (step,) = run_sweep(
        url, "m", [STREAMS], out_dir=tmp_path, input_tokens=20, output_tokens=TOKENS, duration_s=DURATION_S,
        warmup_s=WARMUP_S, workers=WORKERS, save_requests=True, max_total_s=MAX_TOTAL_S, quiet=True,
    )  # fmt: skip
    served = dict(server.arrived)
    per_worker = {
        i: read_worker_log(tmp_path / f"requests.worker-{i}.msgpack") for i in range(1, WORKERS + 1)
    }
    union = [r for recs in per_worker.values() for r in recs]
    ids = Counter(r.response_id for r in union)
    lo = step.started_at + step.warmup_s
    hi = lo + step.duration_s

    # then the load stayed bounded and both workers carried it
    assert 0 < len(served) <= STREAMS * (MAX_TOTAL_S / ANSWER_S)
    assert all(len(recs) > len(union) / 4 for recs in per_worker.values())
    assert step.errors == {} and all(r.error is None for r in union)

    # and no record is counted twice, and none names an answer the server did not serve
    assert None not in ids and max(ids.values()) == 1
    assert set(ids) <= set(served)

    # and none was lost: every answer served before the window closed has its record; the only answers without
    # one are those still streaming when the run stopped (at most one per stream, long after the window)
    unrecorded = set(served) - set(ids)
    assert len(unrecorded) <= STREAMS
    assert all(served[rid] > hi for rid in unrecorded)
    assert len(union) == len(served) - len(unrecorded)

    # and the master's window holds exactly the union's records sent in the window (starts are compared
    # with the step's window, which the step states to the millisecond)
    saved = _records(tmp_path / "requests.jsonl")
    saved_ids = Counter(r.response_id for r in saved)
    assert max(saved_ids.values()) == 1
    surely_in = {r.response_id for r in union if lo + 0.001 <= r.start < hi - 0.001}
    maybe_in = {r.response_id for r in union if lo - 0.001 <= r.start < hi + 0.001}
    assert surely_in <= set(saved_ids) <= maybe_in
    by_id = {r.response_id: r for r in union}
    assert all(by_id[r.response_id] == r for r in saved)  # the records came through unchanged

    # and the reported count and percentiles are those recomputed from the union's window
    again = summarize(saved, step=step.step, target=step.target, window=(-1.0, float("inf")), warmup_s=0.0)
    assert step.requests == len(saved) == again.requests
    assert len(saved) >= STREAMS  # the window held hundreds of answers (about 256 a second)
    assert (step.ttft_ms, step.itl_ms, step.tpot_ms, step.e2e_s) == (
        again.ttft_ms, again.itl_ms, again.tpot_ms, again.e2e_s
    )  # fmt: skip
    assert (step.input_tokens, step.output_tokens) == (again.input_tokens, again.output_tokens)
