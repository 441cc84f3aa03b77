"""Compare a released model's best architecture with a watch's current best, at the watch's SLOs, and say it in
one line: "Llama-4-Scout-17B-16E on g6e.12xlarge: 31% cheaper than your current best at the same SLOs"."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from sizing.results import EstimateResult, rank_cost

#: Cost differences under half a percent are below the estimator's price resolution (prices carry 4 decimals,
#: replica counts round): say "about the same cost" rather than a misleading "0% cheaper".
SAME_COST_PCT = 0.5
#: Name suffixes that mark a variant, not a different model (dropped from the short name in headlines).
_VARIANT_SUFFIX = re.compile(r"(-(Instruct|Chat|it|hf|Base))+$", re.IGNORECASE)

Verdict = Literal["cheaper", "costlier", "same", "new_only", "infeasible"]


class Best(BaseModel):
    """The rank-1 architecture of an estimate, in the few figures a comparison needs."""

    model_config = ConfigDict(extra="forbid")
    model: str
    architecture_id: str
    deployment: str
    where: str
    usd_per_month: float
    capacity_type: str


class Comparison(BaseModel):
    """A released model against a watch's current model, both at the watch's workload and SLOs."""

    model_config = ConfigDict(extra="forbid")
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


def best_of(result: EstimateResult | None) -> Best | None:
    """The cheapest architecture meeting the SLOs in an estimate result, or None when none does."""
    if result is None:
        return None
    archs = [a for a in result.architectures if a.meets_slo]
    if not archs:
        return None
    a = min(archs, key=rank_cost)
    where = a.instance_type or ("Bedrock" if a.deployment == "bedrock" else a.deployment)
    if a.deployment == "sagemaker" and a.instance_type:
        where = f"SageMaker ml.{a.instance_type}"
    return Best(
        model=a.model,
        architecture_id=a.id,
        deployment=a.deployment,
        where=where,
        usd_per_month=round(a.ranked_usd_per_month, 2),
        capacity_type=a.capacity_type,
    )


def _why_infeasible(result: EstimateResult | None) -> str:
    info = result.infeasible if result is not None else None
    return info.message if info is not None and info.message else "no candidate architecture meets the SLOs"


def compare(
    released_model: str,
    new_result: EstimateResult,
    current_model: str,
    current_result: EstimateResult | None,
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
