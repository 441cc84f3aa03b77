"""The catalog's managed offerings: Bedrock as sold (quotas, token prices, inference profiles, latency,
offers by Region, provisioned throughput) and SageMaker's prices."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Literal

from pydantic import Field

from sizing.catalog.records import CatalogRecord, Sourced


class BedrockQuota(CatalogRecord):
    """Default on-demand quotas of one offer (per account, per Region). `adjustable`: AWS raises it on request
    (Service Quotas); a non-adjustable limit is a hard limit and rejects what exceeds it."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    adjustable: bool = True
    #: the Service Quotas name to file an increase under
    quota_name: str | None = None
    source: str
    as_of: date


class TokenPrices(CatalogRecord):
    input_usd_per_1m_tokens: float = Field(ge=0)
    output_usd_per_1m_tokens: float = Field(ge=0)
    source: str
    as_of: date
    assumed: bool = False
    notes: str | None = None


class BedrockProfile(CatalogRecord):
    """A cross-Region inference profile: requests from `source_regions` may be served in any Region of its scope,
    at the source Region's on-demand price (aws.amazon.com/bedrock/pricing: "the price is calculated basis the
    region you made the request in")."""

    id: str
    scope: Literal["geography", "global"]
    source_regions: list[str]
    source: str
    as_of: date


class BedrockLatency(CatalogRecord):
    """Latency profile of a Bedrock model; `assumed` until this product has measured it."""

    ttft_ms_p50: float = Field(gt=0)
    ttft_ms_p95: float = Field(gt=0)
    output_tokens_per_s: float = Field(gt=0)
    source: str
    assumed: bool = True


class BedrockOffer(Sourced):
    """One Bedrock model as sold. `input/output_usd_per_1m_tokens` are the reference (US East) on-demand prices;
    `region_prices` overrides them where a Region's price is known. `in_region`: Regions that serve the model id
    directly; `profiles`: cross-Region inference profiles. An offer listing neither is taken as in-Region in
    us-east-1 only (older entries)."""

    name: str
    bedrock_model_id: str
    model: str | None = None
    input_usd_per_1m_tokens: float = Field(ge=0)
    output_usd_per_1m_tokens: float = Field(ge=0)
    quota: BedrockQuota
    latency: BedrockLatency | None = None
    in_region: list[str] = Field(default_factory=list)
    profiles: list[BedrockProfile] = Field(default_factory=list)
    regions_source: str | None = None
    region_prices: dict[str, TokenPrices] = Field(default_factory=dict)
    #: batch inference prices (input and output per 1M tokens); None where Bedrock offers no batch for the model
    batch: TokenPrices | None = None
    #: the model's context window on Bedrock (input + output): a hard limit
    context_tokens: int | None = Field(default=None, gt=0)

    def price_in(self, region: str) -> TokenPrices:
        """On-demand prices in `region`: its own when known, else the reference price marked assumed."""
        if region in self.region_prices:
            return self.region_prices[region]
        ref = TokenPrices(
            input_usd_per_1m_tokens=self.input_usd_per_1m_tokens,
            output_usd_per_1m_tokens=self.output_usd_per_1m_tokens,
            source=self.source,
            as_of=self.as_of,
        )
        if region in REFERENCE_PRICE_REGIONS:
            return ref
        return ref.model_copy(
            update={"assumed": True, "notes": f"no {region} price found: the US East price is used"}
        )


#: Regions whose Bedrock on-demand price is the reference (US East) price: AWS's pricing page shows one price for
#: the US Regions of the open-weight models (aws.amazon.com/bedrock/pricing, transcriptions of 2025-07 and 2026-02).
REFERENCE_PRICE_REGIONS = frozenset({"us-east-1", "us-east-2", "us-west-2"})


@dataclass(frozen=True)
class BedrockChoice:
    """An offer as callable from one Region: the id to invoke, how far requests may travel, and its prices."""

    offer: BedrockOffer
    invoke_id: str
    scope: Literal["in-region", "geography", "global"]
    region: str
    prices: TokenPrices

    @property
    def batch_prices(self) -> TokenPrices | None:
        """Batch prices in the Region: the offer's batch list price, scaled like the Region's on-demand price."""
        b = self.offer.batch
        if b is None:
            return None
        ref_in = self.offer.input_usd_per_1m_tokens or 1.0
        ref_out = self.offer.output_usd_per_1m_tokens or 1.0
        if self.prices.input_usd_per_1m_tokens == self.offer.input_usd_per_1m_tokens and (
            self.prices.output_usd_per_1m_tokens == self.offer.output_usd_per_1m_tokens
        ):
            return b if not self.prices.assumed else b.model_copy(update={"assumed": True})
        return b.model_copy(
            update={
                "input_usd_per_1m_tokens": round(
                    b.input_usd_per_1m_tokens * self.prices.input_usd_per_1m_tokens / ref_in, 6
                ),
                "output_usd_per_1m_tokens": round(
                    b.output_usd_per_1m_tokens * self.prices.output_usd_per_1m_tokens / ref_out, 6
                ),
                "assumed": True,
                "notes": f"batch price scaled from US East by the {self.region} on-demand price",
            }
        )


class BedrockProvisioned(Sourced):
    name: str
    bedrock_model_id: str
    model: str | None = None
    usd_per_hour_per_model_unit: float = Field(gt=0)


class SageMakerPrice(Sourced):
    instance_type: str
    region: str
    usd_per_hour: float = Field(gt=0)


class _ManagedFile(CatalogRecord):
    bedrock_on_demand: list[BedrockOffer] = Field(default_factory=list)
    bedrock_provisioned: list[BedrockProvisioned] = Field(default_factory=list)
    sagemaker: list[SageMakerPrice] = Field(default_factory=list)
    #: SageMaker premium over EC2 when a ml.* price is missing: +25% on multi-GPU and +40% on 1-GPU sizes in
    #: third-party tables (docs/serving-facts.md s5); applied as a derived, flagged value.
    sagemaker_premium_small: float = 0.40
    sagemaker_premium_large: float = 0.25
