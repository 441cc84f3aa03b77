"""Refresh on-demand EC2 prices from the AWS Pricing API (`pricing:GetProducts`).

The Pricing API lives in us-east-1 (also ap-south-1, eu-central-1); it filters by the region's *location name*.
Adapters take an optional client so tests use botocore's Stubber, never the network."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import date
from typing import Any

from sizing.base.errors import InvalidInput, Problem

#: Pricing API `location` values for the regions we price (AWS Price List attribute `location`).
REGION_LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
    "ap-south-1": "Asia Pacific (Mumbai)",
}
PRICING_API_REGION = "us-east-1"
SOURCE = "AWS Pricing API (pricing:GetProducts, Linux, shared tenancy, no pre-installed software)"


def _filters(instance_type: str, location: str) -> list[dict[str, str]]:
    pairs = {
        "instanceType": instance_type,
        "location": location,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in pairs.items()]


def _on_demand_usd(price_item: dict[str, Any]) -> float | None:
    for term in price_item.get("terms", {}).get("OnDemand", {}).values():
        for dim in term.get("priceDimensions", {}).values():
            usd = dim.get("pricePerUnit", {}).get("USD")
            if usd is not None and float(usd) > 0:
                return float(usd)
    return None


def fetch_prices(
    instance_types: Iterable[str], region: str, client: Any | None = None
) -> dict[str, float | None]:
    """On-demand USD/hour per instance type in `region` (None where the API lists no price)."""
    if region not in REGION_LOCATIONS:
        raise InvalidInput(
            f"no Pricing API location known for region {region}",
            [Problem("region", f"use one of {', '.join(REGION_LOCATIONS)}")],
        )
    if client is None:
        import boto3

        client = boto3.client("pricing", region_name=PRICING_API_REGION)
    out: dict[str, float | None] = {}
    for itype in instance_types:
        resp = client.get_products(
            ServiceCode="AmazonEC2", Filters=_filters(itype, REGION_LOCATIONS[region]), MaxResults=10
        )
        price = None
        for raw in resp.get("PriceList", []):
            item = json.loads(raw) if isinstance(raw, str) else raw
            price = _on_demand_usd(item)
            if price is not None:
                break
        out[itype] = price
    return out


def apply_prices(instances_doc: dict[str, Any], region: str, prices: dict[str, float | None]) -> list[str]:
    """Write fetched prices into an instances.yaml document; returns the instance types that changed."""
    changed: list[str] = []
    today = date.today().isoformat()
    for entry in instances_doc["instances"]:
        new = prices.get(entry["instance_type"])
        if new is None:
            continue
        old = entry["prices"].get(region, {}).get("usd_per_hour")
        entry["prices"][region] = {"usd_per_hour": round(new, 5), "source": SOURCE, "as_of": today}
        if old != round(new, 5):
            changed.append(entry["instance_type"])
    return changed
