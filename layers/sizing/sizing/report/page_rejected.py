"""The report's learning, rejected and assumptions sections: what the run learned, what was left out and why,
and what the estimate assumed."""

from __future__ import annotations

import json
from typing import Any

from sizing.base.vocabulary import TWIN  # what served a load test's figures (`measured.origin`)
from sizing.report.page_base import (
    KIND_LABELS,
    METRIC_NAMES,
    METRIC_UNITS,
    UNIT_FMT,
    Page,
    Section,
    _section,
    measured_origin,
    plain,
    slo_limit,
)
from sizing.results import Rejected
from sizing.results.blocks import Assumptions, Infeasible, ProfileRef


def _learning(pg: Page) -> Section | None:
    """What the run taught the estimator (`sizing.learn`): drift beyond the stated interval first, then the
    levels stored and refused, and the refit's outcome. None for a result without a learning block."""
    learn = pg.run.learning
    if learn is None:
        return None
    refit = learn.refit
    items = [
        ("Measured levels stored", str(learn.measured_levels)),
        ("Twin levels (never calibrate)", str(learn.twin_levels)),
    ]
    if refit is not None and refit.model_fields_set:
        what = refit.detail or refit.line or refit.error or refit.status
        items.append(("Calibration refit", f"{refit.where or ''}: {what}"))
    if learn.error:
        items.append(("Not learned", learn.error))
    refused = [[x.candidate_id or "", str(x.level or ""), str(x.reason)] for x in learn.refused]
    return _section(
        "learning.html",
        drift=len(learn.drift),
        drift_lines=list(learn.drift_lines),
        entries=items,
        refused=refused,
    )


def _binding(pg: Page, inf: Infeasible) -> dict[str, Any]:
    """The SLO target that makes a workload infeasible, its limit, and how close the closest candidate came."""
    binding = inf.binding
    if not (binding is not None and "." in binding):
        return {"json": json.dumps(binding, default=str) if binding else ""}
    metric, q = binding.split(".", 1)
    f = UNIT_FMT.get(METRIC_UNITS.get(metric, ""), plain)
    limit = slo_limit(pg.typed, metric, q)
    on = inf.closest.on if inf.closest is not None else ""
    return {
        "name": f"{METRIC_NAMES.get(metric, metric)} {q}",
        "limit": f(limit) if limit is not None else "",
        "closest": on,
        "value": pg.n("infeasible.closest.value", f) if on else None,
    }


def _rejected(pg: Page) -> Section:
    rej = pg.typed.rejected
    inf = pg.typed.infeasible
    by_kind: dict[str, list[Rejected]] = {}
    for x in rej:
        by_kind.setdefault(str(x.kind), []).append(x)
    failed = pg.run.failed
    groups = [
        {
            "kind": kind,
            "label": KIND_LABELS.get(kind, kind),
            "rows": [(x.id, x.reason) for x in xs],
        }
        for kind, xs in sorted(by_kind.items(), key=lambda kv: -len(kv[1]))
    ]
    return _section(
        "rejected.html",
        count=len(rej),
        infeasible=({"message": inf.message or "", **_binding(pg, inf)} if inf is not None else None),
        failed=[[f.candidate_id or "", f.status or "", f.error or ""] for f in failed] if failed else None,
        groups=groups,
    )


def _assumed(pg: Page, prices: dict[tuple[str, str, bool], list[str]]) -> list[str]:
    """What the result's figures assume, in a sentence each."""
    asm = pg.typed.assumptions
    archs = pg.typed.architectures
    version = _calibration_version(asm)
    assumed: list[str] = []
    if "calibration" not in asm.model_fields_set:
        assumed.append("This result does not say which calibration its predictions used.")
    elif version in (None, "none", ""):
        assumed.append(
            "The estimator is uncalibrated: latencies come from the roofline model with default efficiencies."
        )
    if any(k[2] for k in prices):
        assumed.append("Some instance prices are assumed (not from the AWS price list): see the price table.")
    if any(a.cost.price is not None and a.cost.price.spot_discount_assumed for a in archs):
        assumed.append("Spot discounts are assumed per family, not quoted; spot capacity may be interrupted.")
    if any(a.deployment == "bedrock" for a in archs):
        assumed.append("Bedrock latency follows an assumed profile until measured.")
    origins = {measured_origin(a, pg.twin_run) for a in archs} - {None}
    if not origins:
        assumed.append("Nothing here is measured yet: every latency is a prediction.")
    if TWIN in origins:
        assumed.append(
            "Figures labelled simulated (twin) come from local twins serving at the estimator's own predicted"
            " pace: they test the pipeline, not the prediction, and are never calibration data."
        )
    if origins == {TWIN}:
        assumed.append("No figure here comes from a load test of a real endpoint yet.")
    return assumed


def _calibration_version(asm: Assumptions) -> str | None:
    """The calibration profile's version the assumptions state (an older result states the version alone)."""
    cal = asm.calibration
    return cal.version if isinstance(cal, ProfileRef) else cal


def plain_value(v: Any) -> str:
    """An assumption's value in words: `gpu 600, neuron 900` for `{"gpu": 600, "neuron": 900}`, a list joined,
    `none` for a missing value, a number as written."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return f"{v:g}"
    if isinstance(v, dict):
        return ", ".join(f"{str(k).replace('_', ' ')} {plain_value(x)}" for k, x in v.items()) or "none"
    if isinstance(v, list | tuple):
        return ", ".join(plain_value(x) for x in v) or "none"
    return str(v)


def _assumptions(pg: Page) -> Section:
    asm = pg.typed.assumptions
    prices: dict[tuple[str, str, bool], list[str]] = {}
    for a in pg.typed.architectures:
        pr = a.cost.price
        if pr is not None and pr.model_fields_set:
            key = (pr.source or "", pr.as_of or "", bool(pr.assumed))
            prices.setdefault(key, []).append(a.id)
    version = _calibration_version(asm)
    date = asm.calibration.date if isinstance(asm.calibration, ProfileRef) else None
    # (name, text, shown as code: a value that is not a text, as its JSON)
    items = [
        ("Calibration version", str(version if version is not None else "none"), False),
        ("Calibration date", date or "—", False),
        ("Generated", pg.typed.generated_at or "—", False),
    ]
    stated = asm.model_dump(mode="json")
    items += [(k.replace("_", " "), plain_value(v), False) for k, v in stated.items() if k != "calibration"]
    price_rows = [
        [src, as_of, "assumed" if flag else "quoted", str(len(ids))]
        for (src, as_of, flag), ids in sorted(prices.items())
    ]
    return _section("assumptions.html", assumed=_assumed(pg, prices), entries=items, prices=price_rows)
