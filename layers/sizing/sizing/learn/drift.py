"""Drift: a measured level outside the stated interval of its own prediction.

The prediction is the one the estimate made (the reference profile with the correction adopted when the run
ran); the interval is the 80% band of the estimator's cross-validated predicted/measured ratio for the family,
engine and metric (`sizing.perf.calibration.interval_for`, docs/estimator.md). The band is fitted on mean
figures; it is applied to the p95 of TTFT and TPOT (the percentile SLOs are stated at) and to the mean output
throughput. Each candidate's worst level per metric is flagged, in words a person reads
("TTFT p95 +41% over the estimate on g6e TP1 vLLM 0.11").
"""

from __future__ import annotations

from typing import Any

from sizing.base.errors import NotFound

ENGINE_NAMES = {
    "vllm": "vLLM",
    "sglang": "SGLang",
    "tgi": "TGI",
    "trtllm": "TensorRT-LLM",
    "neuron": "vLLM Neuron",
}
#: (metric in the interval bands, figure key, statistic, words)
CHECKS = (
    ("ttft", "ttft_ms", "p95", "TTFT p95"),
    ("tpot", "tpot_ms", "p95", "TPOT p95"),
    ("throughput", "output_tokens_per_s", None, "output throughput"),
)


def _short_version(v: str | None) -> str:
    if not v:
        return ""
    parts = v.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 and parts[0].isdigit() else v


def where(level: Any) -> str:
    """g6e TP1 vLLM 0.11"""
    inst = (level.instance_type or level.accelerator).split(".")[0]
    engine = ENGINE_NAMES.get(level.engine, level.engine)
    return " ".join(
        x for x in (inst, f"TP{level.tensor_parallel}", engine, _short_version(level.engine_version)) if x
    )


def _mixture_of_experts(catalog: Any, model: str) -> bool:
    """Whether the catalog's `model` is a mixture of experts (a model it does not know counts as dense)."""
    try:
        return catalog.model(model).moe is not None
    except NotFound:
        return False


def flags(levels: list[Any], adopted: dict[str, Any] | None, catalog: Any = None) -> list[dict[str, Any]]:
    """Per candidate and metric, the level furthest outside its prediction's interval (none when all inside); a
    mixture-of-experts model's interval is its class's (`catalog`: the run's, default the shipped one)."""
    # deferred: the slack bot imports this module for its sentences; the calibration and correction modules
    # cost its cold start ~8 ms more (-X importtime), and only a collect step flags drift
    from sizing.catalog import load_catalog
    from sizing.learn.correction import corrected, lookup
    from sizing.perf.calibration import interval_for

    known = catalog or load_catalog()
    corrections = (adopted or {}).get("corrections") or {}
    worst: dict[tuple[str, str], dict[str, Any]] = {}
    for lv in levels:
        bands = interval_for(lv.family, lv.engine, moe=_mixture_of_experts(known, lv.model))
        hit = lookup(corrections, lv.family, lv.engine, lv.model)
        predicted, measured = lv.predicted_figures, lv.measured_figures
        for metric, key, stat, words in CHECKS:
            band = bands.get(metric)
            pred = predicted.value(key, stat)
            meas = measured.value(key, stat)
            if not band or pred is None or meas is None:
                continue
            pred = corrected(metric, pred, hit[1] if hit else None)
            lo, hi = band["ratio"]
            ratio = pred / meas
            if lo <= ratio <= hi:
                continue
            change = meas / pred - 1
            k = (lv.candidate_id, metric)
            if k in worst and abs(worst[k]["change"]) >= abs(change):
                continue
            side = "over" if change > 0 else "under"
            worst[k] = {
                "candidate_id": lv.candidate_id,
                "architecture_id": lv.architecture_id,
                "level": lv.level,
                "metric": metric,
                "statistic": stat or "mean",
                "predicted": round(pred, 4),
                "measured": round(meas, 4),
                "change": round(change, 4),
                "interval_ratio_p10_p90": [round(lo, 3), round(hi, 3)],
                "where": where(lv),
                "text": f"{words} {change:+.0%} {side} the estimate on {where(lv)}",
            }
    return sorted(worst.values(), key=lambda f: -abs(f["change"]))


def lines(drift: list[dict[str, Any]], refit: str) -> list[str]:
    """The sentences for the report, the completion event and Slack: each flag, then what happens next
    ("calibration refit queued")."""
    return [f"{f['text']}; {refit}" for f in drift]


def slack_text(ranking: dict[str, Any]) -> str | None:
    """The drift line(s) of a run's completion event for the Slack completion message (None when no drift):
    `ranking` is the event's `detail.ranking`."""
    learning = (ranking or {}).get("learning") or {}
    got = learning.get("drift_lines") or []
    return "\n".join(f":warning: {line}" for line in got) or None
