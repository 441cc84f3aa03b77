"""Compare a released model's best architecture with a watch's current best, at the watch's SLOs, and say it in
one line: "Llama-4-Scout-17B-16E on g6e.12xlarge: 31% cheaper than your current best at the same SLOs"."""

from __future__ import annotations

import re
from typing import Any, Literal

from sizing.base.strict import Strict
from sizing.results import rank_cost

#: Cost differences under half a percent are below the estimator's price resolution (prices carry 4 decimals,
#: replica counts round): say "about the same cost" rather than a misleading "0% cheaper".
SAME_COST_PCT = 0.5
#: Name suffixes that mark a variant, not a different model (dropped from the short name in headlines).
_VARIANT_SUFFIX = re.compile(r"(-(Instruct|Chat|it|hf|Base))+$", re.IGNORECASE)

Verdict = Literal["cheaper", "costlier", "same", "new_only", "infeasible"]


class Best(Strict):
    """The rank-1 architecture of an estimate, in the few figures a comparison needs."""

    model: str
    architecture_id: str
    deployment: str
    where: str
    usd_per_month: float
    capacity_type: str


class Comparison(Strict):
    """A released model against a watch's current model, both at the watch's workload and SLOs."""

    released_model: str
    current_model: str
    verdict: Verdict
    headline: str
    change_pct: float | None = None
    new_best: Best | None = None
    current_best: Best | None = None
    reason: str | None = None


def short_name(model_id: str) -> str:
    """`meta-llama/Llama-4-Scout-17B-16E-Instruct` → `Llama-4-Scout-17B-16E`."""
    return _VARIANT_SUFFIX.sub("", model_id.split("/")[-1]) or model_id


def best_of(result: dict[str, Any] | None) -> Best | None:
    """The cheapest architecture meeting the SLOs in an estimate result, or None when none does."""
    if not result:
        return None
    archs = [a for a in result.get("architectures", []) if a.get("meets_slo", True)]
    if not archs:
        return None
    a = min(archs, key=rank_cost)
    where = a.get("instance_type") or (
        "Bedrock" if a.get("deployment") == "bedrock" else str(a.get("deployment"))
    )
    if a.get("deployment") == "sagemaker" and a.get("instance_type"):
        where = f"SageMaker ml.{a['instance_type']}"
    return Best(
        model=str(a.get("model") or ""),
        architecture_id=str(a["id"]),
        deployment=str(a.get("deployment")),
        where=where,
        usd_per_month=round(rank_cost(a), 2),
        capacity_type=str(a.get("capacity_type", "on-demand")),
    )


def _why_infeasible(result: dict[str, Any] | None) -> str:
    info = (result or {}).get("infeasible") or {}
    return str(info.get("message") or "no candidate architecture meets the SLOs")


def compare(
    released_model: str,
    new_result: dict[str, Any],
    current_model: str,
    current_result: dict[str, Any] | None,
) -> Comparison:
    """The verdict and headline for one watch. `current_result` is the estimate of the watch's saved workload on
    its current model (None when it could not be estimated)."""
    name = short_name(released_model)
    new = best_of(new_result)
    cur = best_of(current_result)
    base = {
        "released_model": released_model,
        "current_model": current_model,
        "new_best": new,
        "current_best": cur,
    }
    if new is None:
        reason = _why_infeasible(new_result)
        return Comparison(
            **base,
            verdict="infeasible",
            headline=f"{name}: no architecture meets your SLOs ({reason})",
            reason=reason,
        )
    money = f"${new.usd_per_month:,.0f}/month"
    if cur is None:
        return Comparison(
            **base,
            verdict="new_only",
            headline=f"{name} on {new.where}: {money} at your SLOs (your current model has no architecture"
            " meeting them)",
        )
    change = (new.usd_per_month - cur.usd_per_month) / cur.usd_per_month * 100 if cur.usd_per_month else 0.0
    current = f"{short_name(current_model)} on {cur.where}, ${cur.usd_per_month:,.0f}/month"
    if abs(change) < SAME_COST_PCT:
        verdict: Verdict = "same"
        phrase = "about the same cost as your current best"
    elif change < 0:
        verdict = "cheaper"
        phrase = f"{-change:.0f}% cheaper than your current best"
    else:
        verdict = "costlier"
        phrase = f"{change:.0f}% more expensive than your current best"
    return Comparison(
        **base,
        verdict=verdict,
        change_pct=round(change, 1),
        headline=f"{name} on {new.where}: {phrase} at the same SLOs ({money}; current best: {current})",
    )
