"""A measured configuration answered from its measurement (`basis: measured`).

The adopted profile carries a table of measured configurations: per run and candidate, the model, accelerator,
performance-deciding ServingConfig (`levels.serving_key`), the token shape drawn (mean prompt and output tokens)
and the measured closed-loop levels. An estimate of the same model, accelerator and ServingConfig whose token
shape is within `MAX_TOKEN_DISTANCE` of a measured one, at a concurrency within the measured levels, is the
measured figures interpolated between the two levels around it (linear in log concurrency). The newest such
measurement answers. Anything else is the (calibrated or modelled) prediction.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

#: Token shapes closer than this (|log ratio| of the mean prompt and of the mean output length, the larger of the
#: two) count as the same shape: 20% (assumed: a fifth more tokens moves prefill time and KV use by about as much
#: as a level of the measured sweep is noisy, ~5-10% between repeated Locust runs of one level).
MAX_TOKEN_DISTANCE = math.log(1.2)
#: Measured configurations kept in a profile (newest first): bounds the object estimators load.
MAX_CONFIGURATIONS = 500
LATENCIES = ("ttft_ms", "tpot_ms", "e2e_s")
RATES = ("output_tokens_per_s", "requests_per_s")


def table(levels: list[Any]) -> list[dict[str, Any]]:
    """The measured-configuration table of a profile from measured level items (`levels.MeasuredLevel`)."""
    groups: dict[tuple[str, ...], list[Any]] = defaultdict(list)
    for lv in levels:
        groups[(lv.run_id, lv.candidate_id)].append(lv)
    out = []
    for (run_id, cid), lvs in groups.items():
        first = lvs[0]
        out.append(
            {
                "run_id": run_id,
                "candidate_id": cid,
                "recorded_at": max(lv.recorded_at for lv in lvs),
                "model": first.model,
                "accelerator": first.accelerator,
                "family": first.family,
                "instance_type": first.instance_type,
                "engine": first.engine,
                "engine_version": first.engine_version,
                "tensor_parallel": first.tensor_parallel,
                "quantization": first.quantization,
                "serving_key": first.serving_key,
                "input_tokens": round(sum(lv.input_tokens for lv in lvs) / len(lvs), 2),
                "output_tokens": round(sum(lv.output_tokens for lv in lvs) / len(lvs), 2),
                "levels": [
                    {"concurrency": lv.level, **{k: lv.measured.get(k) for k in (*LATENCIES, *RATES)}}
                    for lv in sorted(lvs, key=lambda x: x.level)
                ],
            }
        )
    out.sort(key=lambda c: c["recorded_at"], reverse=True)
    return out[:MAX_CONFIGURATIONS]


def token_distance(a_in: float, a_out: float, b_in: float, b_out: float) -> float:
    return max(abs(math.log(a_in / b_in)), abs(math.log(a_out / b_out)))


def _mix(a: Any, b: Any, w: float) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _mix(a.get(k), b.get(k), w) for k in a}
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a + (b - a) * w
    return a if w < 0.5 else b


def interpolate(levels: list[dict[str, Any]], concurrency: float) -> tuple[dict[str, Any], list[int]] | None:
    """The figures at `concurrency` from the measured levels around it (None outside the measured range)."""
    pts = sorted(levels, key=lambda lv: lv["concurrency"])
    if not pts or not pts[0]["concurrency"] <= concurrency <= pts[-1]["concurrency"]:
        return None
    for lo, hi in zip(pts, pts[1:] + pts[-1:], strict=True):
        if lo["concurrency"] == concurrency:
            return {k: lo.get(k) for k in (*LATENCIES, *RATES)}, [lo["concurrency"]]
        if lo["concurrency"] < concurrency < hi["concurrency"]:
            w = math.log(concurrency / lo["concurrency"]) / math.log(hi["concurrency"] / lo["concurrency"])
            return (
                {k: _mix(lo.get(k), hi.get(k), w) for k in (*LATENCIES, *RATES)},
                [lo["concurrency"], hi["concurrency"]],
            )
    return None


def answer(
    data: dict[str, Any] | None,
    *,
    model: str,
    accelerator: str,
    serving: dict[str, Any],
    input_tokens: float,
    output_tokens: float,
    concurrency: float,
) -> dict[str, Any] | None:
    """The measured figures of this configuration at this load, or None (see the module docstring)."""
    from sizing.learn.levels import serving_key

    if not data:
        return None
    key = serving_key(serving)
    for conf in data.get("measured") or []:
        if (conf.get("model"), conf.get("accelerator"), conf.get("serving_key")) != (model, accelerator, key):
            continue
        dist = token_distance(input_tokens, output_tokens, conf["input_tokens"], conf["output_tokens"])
        if dist > MAX_TOKEN_DISTANCE:
            continue
        got = interpolate(conf["levels"], concurrency)
        if got is None:
            continue
        figures, used = got
        return {
            "figures": figures,
            "run_id": conf["run_id"],
            "candidate_id": conf["candidate_id"],
            "recorded_at": conf["recorded_at"],
            "engine_version": conf.get("engine_version"),
            "levels": used,
            "token_shape": {"input_tokens": conf["input_tokens"], "output_tokens": conf["output_tokens"]},
            "token_distance": round(dist, 4),
        }
    return None
