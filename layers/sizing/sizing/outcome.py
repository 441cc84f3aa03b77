"""What an estimate that ranks nothing means, told apart once for the CLI and the API.

- Every candidate was simulated and each misses an SLO: a genuine outcome, "no architecture meets the SLOs",
  with the binding SLO and the closest candidate (`infeasible`). The CLI exits 3 (neither success nor bad
  input); the API answers 200 with the result, whose `infeasible` says so.
- No candidate could even be simulated (none fits in memory, none is allowed by the constraints, none is
  under the budget, no hardware in the Region): the spec contradicts itself, and it is refused as bad input
  naming the constraint fields it set (CLI exit 2, API 422).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sizing.base.errors import InvalidInput, Problem
from sizing.results import EstimateResult
from sizing.upgrade import upgrade_result

#: The constraint fields that narrow the candidates, in the order a person would relax them.
NARROWING = (
    "instance_types",
    "instance_families",
    "deployments",
    "quantizations",
    "engines",
    "capacity",
    "max_monthly_usd",
    "max_context_tokens",
    "min_replicas",
    "region",
    "data_residency",
)
#: Words for the planner's rejection kinds (as `sizing estimate` prints them).
KIND_WORDS = {
    "memory": "do not fit in memory",
    "slo": "miss an SLO",
    "dominated": "cost more than the ranked ones",
    "unsupported": "are unsupported combinations",
    "quota": "are over a Bedrock quota",
    "budget": "are over constraints.max_monthly_usd",
}
#: Rejected candidates quoted as examples in the message (the whole list is in the result's `rejected`).
EXAMPLES = 2


def impossible_constraints(
    result: EstimateResult | dict[str, Any], spec: Any, prefix: str = ""
) -> InvalidInput | None:
    """The refusal of a spec whose constraints leave nothing to estimate, naming the constraint fields it
    set; None when something was ranked or when SLOs bind (the no-architecture outcome). `result`: typed, or its
    JSON (read by `sizing.upgrade`)."""
    typed = upgrade_result(result, "estimate")
    if typed.architectures:
        return None
    infeasible = typed.infeasible
    if infeasible is not None and infeasible.binding:
        return None
    rejected = typed.rejected
    counts = Counter(str(r.kind) for r in rejected)
    why = ", ".join(f"{n} {KIND_WORDS.get(k, 'are rejected')}" for k, n in counts.most_common())
    examples = "; ".join(f"{r.id}: {r.reason}" for r in rejected[:EXAMPLES] if r.reason)
    region_gap = (
        infeasible.message if infeasible is not None and infeasible.nearest_region is not None else None
    )
    reason = region_gap or (
        f"of {len(rejected)} candidates, {why}" + (f" (e.g. {examples})" if examples else "")
        if rejected
        else "no candidate is left"
    )

    def join(name: str) -> str:
        return f"{prefix}.{name}" if prefix else name

    constraints = spec.constraints
    set_fields = [f for f in NARROWING if f in constraints.model_fields_set]
    if region_gap:
        set_fields = ["region"]
    problems = [
        Problem(join(f"constraints.{f}"), f"{getattr(constraints, f)!r} leaves no architecture: {reason}")
        for f in set_fields
    ] or [Problem(join("model"), f"no architecture can serve {spec.model}: {reason}")]
    fields = ", ".join(p.field for p in problems)
    return InvalidInput(f"the workload cannot be served as constrained (relax {fields}): {reason}", problems)
