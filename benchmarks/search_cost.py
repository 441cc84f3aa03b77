"""What a candidate's capacity search costs on AWS, in minutes and dollars of its instance's time.

    .venv/bin/python benchmarks/search_cost.py [examples/*.yaml] [--top 3]

For each example's top candidates (the run's choice), with the deployed stack's defaults (60 s windows after 15 s
of warm-up, longer where the predicted e2e asks for it: `sizing.orchestrate.steps.level_seconds`), prints the
closed-loop sweep's and the search's planned minutes (the budget guard's count: `planned_sweep_s`) and what the
search adds in dollars at the instance's on-demand price in the workload's Region. Provisioning (minutes of node
launch and image pull) and teardown come on top, once per candidate, search or not."""

from __future__ import annotations

import argparse
from pathlib import Path

from sizing.catalog import load_catalog
from sizing.orchestrate.settings import OrchestrationSettings
from sizing.orchestrate.steps import choose_candidates, level_seconds, planned_sweep_s
from sizing.plan.search import estimate
from sizing.workload.parse import load_spec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("examples", nargs="*", default=sorted(Path("examples").glob("*.yaml")), type=Path)
    ap.add_argument("--top", type=int, default=3)
    args = ap.parse_args()
    cat = load_catalog()
    aws = OrchestrationSettings.model_validate(
        {"TABLE_NAME": "llm-sizing-bench", "LOADTEST_CAPACITY_SEARCH": True}
    )
    closed_only = aws.model_copy(update={"capacity_search": False})
    print("example  candidate  window/warm-up s  closed-loop min  search min  search $ (instance on demand)")
    for example in args.examples:
        spec = load_spec(example)
        region = spec.constraints.region
        for c in choose_candidates(estimate(spec, catalog=cat).document(), args.top):
            a = c.architecture
            window, warmup = level_seconds(a, aws)
            closed = planned_sweep_s(a, closed_only)
            search = planned_sweep_s(a, aws) - closed
            price = cat.instance(a.instance_type or "").price(region).usd_per_hour or 0.0
            print(f"{example.name}  {a.id}  {window:.0f}/{warmup:.0f}  {closed / 60:.1f}  {search / 60:.1f}"
                  f"  ${price * search / 3600:,.2f} (${price:,.2f}/h)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
