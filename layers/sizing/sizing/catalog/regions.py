"""AWS Regions as a buyer names them: which codes exist, which geography each belongs to (what a Bedrock
cross-Region inference profile may route to), and which Region is nearest another.

The Region list is AWS's commercial Regions (docs.aws.amazon.com/global-infrastructure/latest/regions/
aws-regions.html, read 2025-10); GovCloud and China partitions are separate accounts and left out. Coordinates
are the Region's metro area, used only to order Regions by distance (great-circle) when suggesting the nearest
one that has what a workload needs."""

from __future__ import annotations

import difflib
import math

#: code -> (name, geography of Bedrock cross-Region profiles, latitude, longitude of the metro area)
AWS_REGIONS: dict[str, tuple[str, str, float, float]] = {
    "us-east-1": ("US East (N. Virginia)", "us", 38.9, -77.4),
    "us-east-2": ("US East (Ohio)", "us", 40.0, -83.0),
    "us-west-1": ("US West (N. California)", "us", 37.4, -122.0),
    "us-west-2": ("US West (Oregon)", "us", 45.8, -119.7),
    "ca-central-1": ("Canada (Central)", "ca", 45.5, -73.6),
    "ca-west-1": ("Canada West (Calgary)", "ca", 51.0, -114.1),
    "mx-central-1": ("Mexico (Central)", "mx", 20.6, -100.4),
    "sa-east-1": ("South America (Sao Paulo)", "sa", -23.5, -46.6),
    "eu-west-1": ("Europe (Ireland)", "eu", 53.3, -6.3),
    "eu-west-2": ("Europe (London)", "eu", 51.5, -0.1),
    "eu-west-3": ("Europe (Paris)", "eu", 48.9, 2.4),
    "eu-central-1": ("Europe (Frankfurt)", "eu", 50.1, 8.7),
    "eu-central-2": ("Europe (Zurich)", "eu", 47.4, 8.5),
    "eu-north-1": ("Europe (Stockholm)", "eu", 59.3, 18.1),
    "eu-south-1": ("Europe (Milan)", "eu", 45.5, 9.2),
    "eu-south-2": ("Europe (Spain)", "eu", 41.6, -0.9),
    "il-central-1": ("Israel (Tel Aviv)", "il", 32.1, 34.8),
    "me-central-1": ("Middle East (UAE)", "me", 25.2, 55.3),
    "me-south-1": ("Middle East (Bahrain)", "me", 26.1, 50.6),
    "af-south-1": ("Africa (Cape Town)", "af", -33.9, 18.4),
    "ap-south-1": ("Asia Pacific (Mumbai)", "apac", 19.1, 72.9),
    "ap-south-2": ("Asia Pacific (Hyderabad)", "apac", 17.4, 78.5),
    "ap-southeast-1": ("Asia Pacific (Singapore)", "apac", 1.3, 103.8),
    "ap-southeast-2": ("Asia Pacific (Sydney)", "apac", -33.9, 151.2),
    "ap-southeast-3": ("Asia Pacific (Jakarta)", "apac", -6.2, 106.8),
    "ap-southeast-4": ("Asia Pacific (Melbourne)", "apac", -37.8, 145.0),
    "ap-southeast-5": ("Asia Pacific (Malaysia)", "apac", 3.1, 101.7),
    "ap-southeast-7": ("Asia Pacific (Thailand)", "apac", 13.8, 100.5),
    "ap-northeast-1": ("Asia Pacific (Tokyo)", "apac", 35.7, 139.7),
    "ap-northeast-2": ("Asia Pacific (Seoul)", "apac", 37.6, 127.0),
    "ap-northeast-3": ("Asia Pacific (Osaka)", "apac", 34.7, 135.5),
    "ap-east-1": ("Asia Pacific (Hong Kong)", "apac", 22.3, 114.2),
    "ap-east-2": ("Asia Pacific (Taipei)", "apac", 25.0, 121.5),
}

#: Where a request and its data may go, from strictest to loosest: the Region itself; any Region of its geography
#: (a geographic cross-Region inference profile such as `us.` or `eu.`); anywhere (a `global.` profile).
DATA_RESIDENCY = ("in-region", "geography", "any")


def is_region(code: str) -> bool:
    return code in AWS_REGIONS


def suggest_regions(code: str, n: int = 3) -> list[str]:
    """Region codes close to a mistyped one, else the Regions whose name contains it (`frankfurt`)."""
    close = difflib.get_close_matches(code.strip().lower(), list(AWS_REGIONS), n=n, cutoff=0.5)
    if close:
        return close
    word = code.strip().lower()
    return [c for c, (name, *_rest) in AWS_REGIONS.items() if word and word in name.lower()][:n]


def region_name(code: str) -> str:
    return AWS_REGIONS[code][0] if code in AWS_REGIONS else code


def geography(code: str) -> str | None:
    return AWS_REGIONS[code][1] if code in AWS_REGIONS else None


def distance_km(a: str, b: str) -> float:
    """Great-circle distance between two Regions' metro areas."""
    _, _, lat1, lon1 = AWS_REGIONS[a]
    _, _, lat2, lon2 = AWS_REGIONS[b]
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6371.0 * math.asin(math.sqrt(h))


def nearest(code: str, candidates: list[str] | set[str]) -> list[str]:
    """`candidates` ordered by distance from `code` (Regions of the same geography first)."""
    known = [c for c in candidates if c in AWS_REGIONS and c != code]
    if code not in AWS_REGIONS:
        return sorted(known)
    geo = geography(code)
    return sorted(known, key=lambda c: (geography(c) != geo, distance_km(code, c)))
