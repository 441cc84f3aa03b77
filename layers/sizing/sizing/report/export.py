"""CSV and JSON exports of an estimate (or run) result: what a spreadsheet or a notebook wants.

`architectures.csv` has one row per ranked architecture with predicted and measured latency side by side and
every cost figure; `rejected.csv` one row per rejected candidate; `result.json` the result itself."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

LATENCY_METRICS = ("ttft_ms", "tpot_ms", "e2e_s")
LATENCY_PERCENTILES = ("p50", "p95", "p99")
COST_FIELDS = (
    "usd_per_hour_peak",
    "usd_per_month",
    "usd_per_month_spot",
    "usd_per_month_savings_plan_1y",
    "usd_per_million_output_tokens",
    "usd_per_user_month",
)
ARCHITECTURE_COLUMNS = (
    "rank",
    "id",
    "deployment",
    "instance_type",
    "accelerator",
    "tensor_parallel",
    "quantization",
    "engine",
    "capacity_type",
    "replicas_min",
    "replicas_peak",
    "replicas_mean",
    "instances_min",
    "instances_peak",
    "per_replica_rps",
    "per_replica_rps_slo_limit",
    "per_replica_max_concurrency",
    "kv_cache_tokens",
    *(f"predicted_{m}_{p}" for m in LATENCY_METRICS for p in LATENCY_PERCENTILES),
    *(f"measured_{m}_{p}" for m in LATENCY_METRICS for p in LATENCY_PERCENTILES),
    "measured_when",
    "meets_slo",
    "headroom_pct",
    "pareto",
    *COST_FIELDS,
    "price_as_of",
    "price_assumed",
    "notes",
)
REJECTED_COLUMNS = ("id", "kind", "reason")


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def architecture_row(a: dict[str, Any]) -> dict[str, Any]:
    """One architecture flattened to the CSV columns (None where the architecture has no such figure)."""
    row: dict[str, Any] = {k: a.get(k) for k in ARCHITECTURE_COLUMNS if k in a}
    for part in ("min", "peak", "mean"):
        row[f"replicas_{part}"] = _get(a, "replicas", part)
    for part in ("min", "peak"):
        row[f"instances_{part}"] = _get(a, "instances", part)
    row["per_replica_rps"] = _get(a, "per_replica", "rps")
    row["per_replica_rps_slo_limit"] = _get(a, "per_replica", "rps_slo_limit")
    row["per_replica_max_concurrency"] = _get(a, "per_replica", "max_concurrency")
    row["kv_cache_tokens"] = _get(a, "per_replica", "kv_cache_tokens")
    for source in ("predicted", "measured"):
        for m in LATENCY_METRICS:
            for p in LATENCY_PERCENTILES:
                row[f"{source}_{m}_{p}"] = _get(a, source, m, p)
    row["measured_when"] = _get(a, "measured", "when")
    for c in COST_FIELDS:
        row[c] = _get(a, "cost", c)
    row["price_as_of"] = _get(a, "cost", "price", "as_of")
    row["price_assumed"] = _get(a, "cost", "price", "assumed")
    row["notes"] = "; ".join(str(n) for n in a.get("notes") or [])
    return row


def _csv(columns: tuple[str, ...], rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})
    return buf.getvalue()


def export_csv(result: dict[str, Any]) -> str:
    """The ranked architectures as CSV (header + one row per architecture, in rank order)."""
    return _csv(ARCHITECTURE_COLUMNS, [architecture_row(a) for a in result.get("architectures") or []])


def rejected_csv(result: dict[str, Any]) -> str:
    """The rejected candidates as CSV: id, kind (memory, slo, dominated, ...) and the reason."""
    return _csv(REJECTED_COLUMNS, list(result.get("rejected") or []))


def write_exports(result: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write architectures.csv, rejected.csv and result.json into `out_dir` (created if missing)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "architectures.csv": export_csv(result),
        "rejected.csv": rejected_csv(result),
        "result.json": json.dumps(result, indent=2, default=str) + "\n",
    }
    paths = []
    for name, text in files.items():
        p = out / name
        p.write_text(text, encoding="utf-8")
        paths.append(p)
    return paths
