"""Privacy of traces: Bedrock logs and Data Capture hold prompts and answers, and a CSV's session and prefix-group
ids may name users. The product keeps only counts, times and hashes it computes: a canary string put in every
prompt, answer and id appears nowhere in what it prints, logs or keeps."""

from __future__ import annotations

import csv
import json
import logging
import pickle
from pathlib import Path

import pytest

from sizing.cli import main
from sizing.traces import read_trace, samples
from sizing.traces.recorded import recorded
from sizing.traces.replay import window

CANARY = "CANARY-7f3a-do-not-keep"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def traces(tmp_path: Path) -> list[Path]:
    reqs = list(samples.synthetic(150, seed=4, sessions=5, canary=CANARY))
    out = [
        samples.write(tmp_path / "bedrock.jsonl", "bedrock", iter(reqs)),
        samples.write(tmp_path / "capture.jsonl", "datacapture", iter(reqs)),
    ]
    uncounted = tmp_path / "capture-no-usage.jsonl"
    uncounted.write_text("".join(samples.datacapture_line(r, usage=False) + "\n" for r in reqs))
    out.append(uncounted)
    path = tmp_path / "sessions.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["timestamp", "input_tokens", "output_tokens", "session_id", "prefix_group"])
        for r in reqs:
            w.writerow([r.t, r.inp, r.out, f"{CANARY}-{r.session}", f"{CANARY}-{r.group}"])
    out.append(path)
    return out


def test_no_prompt_answer_or_id_text_is_printed_logged_or_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
):
    # given traces in every format that carries text, the canary in every prompt, answer and id
    paths = traces(tmp_path)
    assert all(CANARY in p.read_text() for p in paths)
    spec = tmp_path / "spec.yaml"
    caplog.set_level(logging.DEBUG)
    kept: list[bytes] = []
    for path in paths:
        spec.write_text(f"model: {MODEL}\ntrace: {{path: {path.name}}}\nslo: {{ttft_ms: {{p95: 2000}}}}\n")
        # when each is summarised, turned into a workload, estimated (text and JSON), and what is kept is pickled
        assert main(["workload", "--trace", str(path), "--json"]) == 0
        assert main(["workload", "--trace", str(path)]) == 0
        assert main(["workload", str(spec), "--json"]) == 0
        assert main(["estimate", str(spec), "--json", "--top", "2"]) in (0, 3)
        assert main(["estimate", str(spec), "--top", "2"]) in (0, 3)
        kept.append(pickle.dumps(read_trace(str(path))))
        kept.append(pickle.dumps(recorded(str(path))))
        # and the window a load test replays (what `sizing loadtest --trace` and a run's load generator send on)
        kept.append(json.dumps(window(read_trace(str(path))).as_load()).encode())
    printed = capsys.readouterr()
    # then the canary is in none of them
    assert CANARY not in printed.out
    assert CANARY not in printed.err
    assert CANARY not in caplog.text
    assert all(CANARY.encode() not in blob for blob in kept)
    # and the figures were there to read (the test looked at real output)
    assert '"requests": 150' in printed.out
