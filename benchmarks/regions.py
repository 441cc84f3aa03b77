"""For each example workload, the best answer per deployment kind (EKS, SageMaker, Bedrock) in three Regions.

    python benchmarks/regions.py [us-east-1 eu-central-1 ap-northeast-1]

Bedrock is allowed cross-Region (data_residency: geography) so its US/EU/APAC profiles show; a Region with no
answer for a kind prints why (first rejection reason of that kind). The mode follows the price: Bedrock batch or a
service tier (flex, priority, provisioned), SageMaker async (asynchronous inference job). Figures are estimates (no
load test)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from sizing.plan import estimate
from sizing.workload.parse import parse_spec

ROOT = Path(__file__).resolve().parents[1]
REGIONS = sys.argv[1:] or ["us-east-1", "eu-central-1", "ap-northeast-1"]


def best_per_kind(raw: dict, region: str) -> dict[str, str]:
    raw = {
        **raw,
        "constraints": {**(raw.get("constraints") or {}), "region": region, "data_residency": "geography"},
    }
    r = estimate(parse_spec(raw), tune=False).document()
    out: dict[str, str] = {}
    for kind in ("eks", "sagemaker", "bedrock"):
        archs = [a for a in r["architectures"] if a["deployment"] == kind]
        if archs:
            a = min(archs, key=lambda a: a["cost"]["usd_per_month"])
            where = a["instance_type"] or a["bedrock"]["model_id"]
            flag = " (quota increase)" if (a.get("quota") or {}).get("needs_increase") else ""
            tier = a.get("service_tier")
            mode = (
                " batch"
                if (a.get("bedrock") or {}).get("mode") == "batch"
                else " async"
                if a["id"].endswith(":async")
                else f" {tier}"
                if tier and tier != "standard"
                else ""
            )
            out[kind] = f"${a['cost']['usd_per_month']:>10,.0f}  {where}{mode}{flag}"
        else:
            why = next((x["reason"] for x in r["rejected"] if x["id"].startswith(kind)), None)
            if kind != "bedrock":
                why = (r.get("infeasible") or {}).get("message") or why
            out[kind] = f"{'-':>11}  {(why or 'no answer')[:90]}"
    return out


def main() -> None:
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        print(f"\n{path.name}: {raw['model']}")
        for region in REGIONS:
            for kind, text in best_per_kind(raw, region).items():
                print(f"  {region:<15} {kind:<10} {text}")


if __name__ == "__main__":
    main()
