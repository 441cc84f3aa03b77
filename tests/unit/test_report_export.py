"""CSV and JSON exports: one row per ranked architecture (in rank order, predicted beside measured, every cost
figure), one per rejected candidate, and the result itself -- what a spreadsheet or notebook reads."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from sizing.report import export_csv, rejected_csv, write_exports
from sizing.report.export import ARCHITECTURE_COLUMNS


def _arch(rank: int, usd: float, measured_ttft: float | None = None) -> dict[str, Any]:
    lat = {
        "ttft_ms": {"p50": 100.0, "p95": 250.0, "p99": 400.0},
        "tpot_ms": {"p50": 20.0, "p95": 25.0, "p99": 30.0},
        "e2e_s": {"p50": 2.0, "p95": 3.5, "p99": 4.0},
    }
    measured = None
    if measured_ttft is not None:
        measured = json.loads(json.dumps(lat))
        measured["ttft_ms"]["p95"] = measured_ttft
        measured["when"] = "2026-11-30T10:00:00+00:00"
    return {
        "rank": rank,
        "id": f"eks:g6e.xlarge:tp1:fp8:vllm:on-demand-{rank}",
        "deployment": "eks",
        "instance_type": "g6e.xlarge",
        "accelerator": "l40s",
        "tensor_parallel": 1,
        "quantization": "fp8",
        "engine": "vllm",
        "capacity_type": "on-demand",
        "replicas": {"peak": 4, "min": 2, "mean": 2.9},
        "instances": {"peak": 4, "min": 2, "mean": 2.9},
        "per_replica": {"rps": 0.8, "rps_slo_limit": 1.0, "max_concurrency": 12.5, "kv_cache_tokens": 120000},
        "predicted": lat,
        "measured": measured,
        "meets_slo": True,
        "headroom_pct": 20.0,
        "pareto": rank == 1,
        "cost": {
            "usd_per_hour_peak": 7.4,
            "usd_per_month": usd,
            "usd_per_month_spot": usd * 0.8,
            "usd_per_month_savings_plan_1y": usd * 0.7,
            "usd_per_million_output_tokens": 3.21,
            "usd_per_user_month": 0.5,
            "price": {"as_of": "2026-02-01", "assumed": False},
        },
        "notes": ["first note", "second, with a comma"],
    }


RESULT: dict[str, Any] = {
    "workload": {"name": "w"},
    "architectures": [_arch(1, 5000.0, measured_ttft=310.0), _arch(2, 6500.5)],
    "rejected": [
        {"id": "g4dn.xlarge:fp8", "kind": "unsupported", "reason": "NVIDIA T4 has no fp8 support"},
        {
            "id": "g5.xlarge:bf16",
            "kind": "memory",
            "reason": "weights 16.1 GB > 22.3 GB usable, no room, for KV",
        },
    ],
}


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_architectures_csv_has_one_row_per_architecture_in_rank_order_with_its_costs() -> None:
    # when
    rows = _rows(export_csv(RESULT))
    # then
    assert [r["rank"] for r in rows] == ["1", "2"]
    assert list(rows[0]) == list(ARCHITECTURE_COLUMNS)
    assert float(rows[1]["usd_per_month"]) == 6500.5
    assert float(rows[0]["usd_per_month_spot"]) == 4000.0
    assert rows[0]["price_as_of"] == "2026-02-01"
    assert rows[0]["notes"] == "first note; second, with a comma"


def test_predicted_and_measured_latency_sit_side_by_side() -> None:
    # when
    rows = _rows(export_csv(RESULT))
    # then: measured where there is a measurement, empty where there is none
    assert float(rows[0]["predicted_ttft_ms_p95"]) == 250.0
    assert float(rows[0]["measured_ttft_ms_p95"]) == 310.0
    assert rows[0]["measured_when"] == "2026-11-30T10:00:00+00:00"
    assert rows[1]["measured_ttft_ms_p95"] == ""


def test_rejected_csv_keeps_every_reason() -> None:
    # when
    rows = _rows(rejected_csv(RESULT))
    # then
    assert [(r["id"], r["kind"]) for r in rows] == [
        ("g4dn.xlarge:fp8", "unsupported"),
        ("g5.xlarge:bf16", "memory"),
    ]
    assert rows[1]["reason"] == "weights 16.1 GB > 22.3 GB usable, no room, for KV"


def test_write_exports_writes_the_three_files(tmp_path) -> None:
    # when
    paths = write_exports(RESULT, tmp_path / "exports")
    # then
    assert [p.name for p in paths] == ["architectures.csv", "rejected.csv", "result.json"]
    assert json.loads((tmp_path / "exports" / "result.json").read_text()) == RESULT
    assert len(_rows((tmp_path / "exports" / "architectures.csv").read_text())) == 2


def test_an_empty_result_exports_headers_only() -> None:
    # when
    text = export_csv({"architectures": [], "rejected": []})
    # then
    assert text.strip() == ",".join(ARCHITECTURE_COLUMNS)
    assert rejected_csv({}).strip() == "id,kind,reason"
