"""The product's answer: architectures ranked by monthly cost that meet the workload's SLOs.

Search is branch and bound. Every hardware option gets a cheap roofline upper bound on per-replica capacity, hence
a lower bound on the monthly cost it is ranked by (its spot cost where the workload allows only spot); options are
then simulated cheapest-bound first, and the search stops once the next option's *lower* bound exceeds the cost of
the `certify`-th cheapest feasible architecture found -- such options cannot enter the ranking and are reported as
dominated, with their bound.

Each simulated option is a `ServingConfig`: the engine's defaults with a context covering the workload, then a
coordinate search over its runtime parameters (`max_num_batched_tokens`, `max_num_seqs`, an fp8 KV cache) keeps the
configuration with the highest capacity under the SLOs, hence the lowest cost; the architecture says what the
tuning gained over the defaults."""

from __future__ import annotations

import dataclasses
import math
import time
from datetime import UTC, datetime
from typing import Any

from sizing.catalog import Catalog, load_catalog
from sizing.catalog.models import BedrockChoice
from sizing.catalog.modes import Modes, ServiceTiers, load_modes
from sizing.catalog.regions import region_name
from sizing.perf.calibration import load_profiles
from sizing.plan.answer import pricing_of, verified_architectures
from sizing.plan.as_sold import hosted_as_sold
from sizing.plan.candidates import HardwareOption, enumerate_candidates
from sizing.plan.capacity import describe_violation, max_rate_under_slo
from sizing.plan.cost import (
    BATCH_E2E_S,
    BEDROCK_BATCH_WINDOW_H,
    COMMITTED_TPM_HEADROOM,
    DAYS_PER_MONTH,
    HOURS_PER_MONTH,
    SAVINGS_PLAN_1Y_DISCOUNT,
    SCALE_UP_LEAD_S_GPU,
    SCALE_UP_LEAD_S_NEURON,
    batch_deadline_h,
    bedrock_batch_bill,
    bedrock_bill,
    is_batch_workload,
    monthly_usd,
    peak_tokens_per_minute,
    provisioned_throughput_bill,
    provisioned_units,
    reserved_tier_bill,
)
from sizing.plan.measured import measured_capacity
from sizing.plan.serving import CONTEXT_PERCENTILE, context_for, default_serving
from sizing.plan.state import (
    Option,
    Progress,
    Replica,
    SearchState,
    build_replica,
    capacity_type_of,
    config_for,
    early_reject,
    option_label,
)
from sizing.plan.tuning import adopt_tuning, tune_heads, with_tuning
from sizing.results import (
    AlsoFits,
    Architecture,
    Cost,
    EstimateResult,
    NotCheaper,
    QuotaFlag,
    Rejected,
    RejectedKind,
    ranked_usd_per_month,
)
from sizing.workload import SLO, WorkloadModel, WorkloadSpec, resolve

#: Default share of a replica's SLO capacity kept free at peak (bursts within the hour, estimator error).
DEFAULT_HEADROOM = 0.20
#: Rows of the ranking certified by simulation even when the caller asks for fewer (the ranking's top stays
#: exact). A row is one replica configuration: same-performance instance sizes fold into it ("also fits on"), so
#: five rows show as many distinct choices as the eight sizes-apart architectures this certified before folding.
DEFAULT_CERTIFY = 5
#: The summary names the SLO that excluded cheaper hardware when the answer costs at least this many times the
#: cheapest hardware option's cost bound.
MUCH_DEARER = 2.0
#: Cheaper excluded options listed in `why_not_cheaper`.
WHY_NOT_CHEAPER_SHOWN = 3


def _deployments(wm: WorkloadModel) -> list[str]:
    return [d for d in ("eks", "sagemaker") if d in wm.spec.constraints.deployments]


#: The output budget a Bedrock request reserves (`max_tokens`): the p99 of the workload's output lengths, so 99% of
#: answers finish within it. Bedrock reserves input + max_tokens against the tokens-per-minute quota at request start.
BEDROCK_MAX_TOKENS_PERCENTILE = "p99"
#: A quota increase is asked for with room above the peak need, rounded up to this many tokens (or requests) per
#: minute: the need is an hourly mean, and a minute within the hour runs above it.
QUOTA_REQUEST_HEADROOM = 1.2
QUOTA_ROUND_TOKENS = 100_000
QUOTA_ROUND_REQUESTS = 100


def _round_up(x: float, step: int) -> int:
    return int(math.ceil(x / step) * step)


def _bedrock_quota(wm: WorkloadModel, choice: BedrockChoice) -> tuple[QuotaFlag | None, str | None]:
    """The quota caveat of a Bedrock offer at the workload's peak, or the hard limit that rejects it."""
    q = choice.offer.quota
    max_tokens = wm.output_tokens.percentile(BEDROCK_MAX_TOKENS_PERCENTILE)
    tpm = wm.peak_rps * 60 * (wm.input_tokens.mean + max_tokens)
    rpm = wm.peak_rps * 60
    over_t = bool(q.tokens_per_minute) and tpm > (q.tokens_per_minute or 0)
    over_r = bool(q.requests_per_minute) and rpm > (q.requests_per_minute or 0)
    if (over_t or over_r) and not q.adjustable:
        return None, (
            f"over a hard Bedrock limit: {tpm:,.0f} tokens/minute and {rpm:,.0f} requests/minute at peak exceed"
            f" {q.tokens_per_minute or '-'} / {q.requests_per_minute or '-'}, which AWS does not raise"
        )
    if not q.tokens_per_minute and not q.requests_per_minute:
        return (
            QuotaFlag(
                needs_increase=False,
                tokens_per_minute_needed=round(tpm),
                requests_per_minute_needed=round(rpm),
                message=f"needs {tpm:,.0f} tokens/min at peak; default quota not published (check Service Quotas)",
                source=q.source,
            ),
            None,
        )
    parts: list[str] = []
    need_t = _round_up(tpm * QUOTA_REQUEST_HEADROOM, QUOTA_ROUND_TOKENS) if over_t else None
    need_r = _round_up(rpm * QUOTA_REQUEST_HEADROOM, QUOTA_ROUND_REQUESTS) if over_r else None
    if need_t:
        parts.append(f"{need_t:,} tokens/min (default {q.tokens_per_minute:,})")
    if need_r:
        parts.append(f"{need_r:,} requests/min (default {q.requests_per_minute:,})")
    name = q.quota_name or f"tokens per minute for {choice.offer.name}"
    if not parts:
        return (
            QuotaFlag(
                needs_increase=False,
                tokens_per_minute_needed=round(tpm),
                tokens_per_minute_default=q.tokens_per_minute,
                requests_per_minute_needed=round(rpm),
                requests_per_minute_default=q.requests_per_minute,
                message=f"within the default quota: {tpm:,.0f} of {q.tokens_per_minute or 0:,} tokens/min at peak",
                source=q.source,
            ),
            None,
        )
    return (
        QuotaFlag(
            needs_increase=True,
            tokens_per_minute_needed=need_t or round(tpm),
            tokens_per_minute_default=q.tokens_per_minute,
            requests_per_minute_needed=need_r or round(rpm),
            requests_per_minute_default=q.requests_per_minute,
            message="needs a quota increase to " + " and ".join(parts),
            request=f"Service Quotas > Amazon Bedrock > '{name}' in {choice.region}: request"
            f" {need_t or need_r:,} (peak need {tpm:,.0f} tokens/min = {rpm:,.0f} requests/min x"
            f" ({wm.input_tokens.mean:,.0f} input + {max_tokens:,.0f} max_tokens))",
            source=q.source,
        ),
        None,
    )


def _bedrock_predicted(wm: WorkloadModel, lat: Any) -> dict[str, dict[str, float]]:
    tpot_ms = 1000 / lat.output_tokens_per_s
    out = wm.output_tokens
    ttft = {"p50": lat.ttft_ms_p50, "p95": lat.ttft_ms_p95, "p99": lat.ttft_ms_p95 * 1.3}
    tpot = {"p50": tpot_ms, "p95": tpot_ms * 1.2, "p99": tpot_ms * 1.4}
    e2e = {
        k: round((ttft[k] + tpot[k] * max(out.percentile(k) - 1, 0)) / 1000, 3) for k in ("p50", "p95", "p99")
    }
    return {
        "ttft_ms": {k: round(v, 1) for k, v in ttft.items()},
        "tpot_ms": {k: round(v, 1) for k, v in tpot.items()},
        "e2e_s": e2e,
    }


def _price_note(choice: BedrockChoice) -> str:
    p = choice.prices
    where = (
        choice.region
        if not p.assumed
        else f"us-east-1 (assumed for {choice.region}: no {choice.region} price found)"
    )
    return (
        f"prices from {where}: ${p.input_usd_per_1m_tokens:g} in / ${p.output_usd_per_1m_tokens:g} out per 1M"
        f" tokens, as of {p.as_of}: {p.source}"
    )


def _scope_note(choice: BedrockChoice) -> str:
    if choice.scope == "in-region":
        return f"in-Region: requests are served in {choice.region}"
    if choice.scope == "geography":
        return (
            f"cross-Region inference profile {choice.invoke_id}: requests from {choice.region} may be served in"
            " another Region of its geography, at the source Region's price"
        )
    return f"global inference profile {choice.invoke_id}: requests may be served in any Region"


#: Bedrock service tiers sold per request (`service_tier`): Priority and Flex are priced as multiples of Standard.
TIERS = ("standard", "priority", "flex")


def _tier_multiple(tiers: ServiceTiers, tier: str) -> float:
    return {"standard": 1.0, "priority": tiers.priority_multiple, "flex": tiers.flex_multiple}[tier]


def _bedrock(
    wm: WorkloadModel,
    choice: BedrockChoice,
    tier: str = "standard",
    modes: Modes | None = None,
    batch: bool = False,
) -> tuple[Architecture | None, str | None]:
    """A Bedrock on-demand architecture in a service tier (Standard, Priority or Flex), or the reason it is
    rejected. A default quota below the peak is a caveat (`quota`), not a rejection: AWS raises it on request; the
    three tiers share the on-demand quota. Hard limits (a non-adjustable quota, the context window) and SLO misses
    reject. Priority's latency is Standard's with AWS's "up to 25%" faster output (assumed); Flex has no published
    latency bound, so it is ranked only for batch workloads."""
    offer = choice.offer
    tiers = (modes or load_modes()).bedrock_service_tiers
    rid = f"bedrock:{choice.invoke_id}" + ("" if tier == "standard" else f":{tier}")
    flag, hard = _bedrock_quota(wm, choice)
    if hard:
        return None, hard
    max_tokens = wm.output_tokens.percentile(BEDROCK_MAX_TOKENS_PERCENTILE)
    if offer.context_tokens and wm.input_tokens.percentile("p95") + max_tokens > offer.context_tokens:
        return None, (
            f"over a hard Bedrock limit: p95 input {wm.input_tokens.percentile('p95'):,.0f} + max_tokens"
            f" {max_tokens:,.0f} exceeds {offer.name}'s {offer.context_tokens:,}-token context window"
        )
    lat = offer.latency
    if lat is None:
        return None, f"no latency profile for {offer.name} on Bedrock (not measured, none assumed)"
    if tier == "priority":
        lat = lat.model_copy(
            update={
                "output_tokens_per_s": lat.output_tokens_per_s * tiers.priority_output_speedup,
                "source": f"{lat.source}; Priority: {tiers.priority_latency_source}",
            }
        )
    predicted = _bedrock_predicted(wm, lat)
    bad = [
        describe_violation(m, p, predicted[m][p if p in predicted[m] else "p95"], limit)
        for m, p, limit in wm.slo.targets()
        if predicted[m][p if p in predicted[m] else "p95"] > limit
    ]
    users = wm.spec.users.total if wm.spec.users else None
    prices = choice.prices
    multiple = _tier_multiple(tiers, tier)
    usd_in = round(prices.input_usd_per_1m_tokens * multiple, 6)
    usd_out = round(prices.output_usd_per_1m_tokens * multiple, 6)
    cost = bedrock_bill(wm, usd_in, usd_out, users)
    cost["price"] = {
        "source": prices.source,
        "as_of": str(prices.as_of),
        "assumed": prices.assumed,
        "region": choice.region,
        "tier": tier,
        "tier_multiple": multiple,
        **({"tier_source": tiers.source, "tier_as_of": str(tiers.as_of)} if tier != "standard" else {}),
    }
    notes = [
        "latency profile assumed until measured: " + lat.source,
        _price_note(choice),
        _scope_note(choice),
    ]
    if tier != "standard":
        notes.insert(
            1,
            f"{tier.capitalize()} tier: {multiple:g} x the Standard price = ${usd_in:g} in / ${usd_out:g} out per 1M"
            f" tokens in {choice.region} (as of {tiers.as_of}: {tiers.source})",
        )
    if tier == "flex":
        notes.insert(1, "Flex tier: " + tiers.flex_latency_source)
    if flag is not None and flag.needs_increase:
        notes.insert(0, f"{flag.message}: {flag.request}")
    arch = Architecture.model_validate(
        {
            "id": rid,
            "model": wm.spec.model,
            "catalog_model": wm.model_id,
            "deployment": "bedrock",
            "engine": "bedrock",
            "capacity_type": "on-demand",
            "predicted": predicted,
            "measured": None,
            "meets_slo": not bad and (tier != "flex" or batch),
            "cost": cost,
            "bedrock": {
                "model_id": choice.invoke_id,
                "base_model_id": offer.bedrock_model_id,
                "mode": "on-demand",
                "tier": tier,
                "scope": choice.scope,
                "region": choice.region,
                "quota": offer.quota.model_dump(mode="json"),
                "max_tokens": round(max_tokens),
                "latency_assumed": lat.assumed,
                "latency_source": lat.source,
            },
            "quota": flag,
            "service_tier": tier,
            "region": choice.region,
            "notes": notes,
        }
    )
    if bad:
        return arch, "; ".join(bad) + " (assumed Bedrock latency profile)"
    if tier == "flex" and not batch:
        return arch, (
            "Flex tier: lower priority than Standard under high demand and no published latency bound; ranked only"
            f" for batch workloads (preset batch or an e2e SLO of {BATCH_E2E_S / 3600:g} h or more)"
        )
    return arch, None


def _committed_quota(units: int, what: str, region: str, name: str) -> QuotaFlag:
    return QuotaFlag(
        needs_increase=True,
        message=f"needs {units} {what} (the default quota for a commitment is 0)",
        request=f"AWS Support case: Amazon Bedrock {what} for {name} in {region}",
        source="docs.aws.amazon.com/bedrock/latest/userguide/prov-throughput.html",
    )


def _bedrock_provisioned(
    wm: WorkloadModel, choice: BedrockChoice, modes: Modes, on_demand: Architecture | None
) -> tuple[Architecture | None, str | None]:
    """Bedrock Provisioned Throughput for the offer when a model-unit price and throughput are known: units sized
    from the busiest hour's tokens per minute, billed every hour of the month. Ranked only when cheaper than the
    on-demand Standard tier for the workload (the question a buyer asks of a commitment)."""
    offer = choice.offer
    pt = modes.bedrock_provisioned.offers.get(offer.bedrock_model_id)
    if pt is None:
        return None, None
    in_tpm, out_tpm = peak_tokens_per_minute(wm)
    units = provisioned_units(in_tpm, out_tpm, pt.input_tpm_per_unit, pt.output_tpm_per_unit)
    monthly = provisioned_throughput_bill(pt.usd_per_hour_per_model_unit, units)
    users = wm.spec.users.total if wm.spec.users else None
    out_month = wm.avg_rps * 86400 * DAYS_PER_MONTH * wm.output_tokens.mean
    cost = {
        "usd_per_hour_peak": round(units * pt.usd_per_hour_per_model_unit, 2),
        "usd_per_month": round(monthly, 2),
        "usd_per_million_output_tokens": round(monthly / (out_month / 1e6), 4) if out_month else None,
        "usd_per_user_month": round(monthly / users, 4) if users else None,
        "breakdown": {
            "model_units": units,
            "usd_per_hour_per_model_unit": pt.usd_per_hour_per_model_unit,
            "hours_per_month": HOURS_PER_MONTH,
            "term": pt.term,
            "peak_input_tokens_per_minute": round(in_tpm),
            "peak_output_tokens_per_minute": round(out_tpm),
            "input_tokens_per_minute_per_unit": pt.input_tpm_per_unit,
            "output_tokens_per_minute_per_unit": pt.output_tpm_per_unit,
            "sizing_headroom": COMMITTED_TPM_HEADROOM,
        },
        "price": {
            "source": pt.source,
            "as_of": str(pt.as_of),
            "assumed": pt.assumed,
            "region": choice.region,
            "tier": "provisioned",
        },
    }
    base = on_demand.predicted.model_dump(mode="json") if on_demand is not None else None
    meets = on_demand is not None and on_demand.meets_slo
    arch = Architecture.model_validate(
        {
            "id": f"bedrock:{offer.bedrock_model_id}:provisioned",
            "model": wm.spec.model,
            "catalog_model": wm.model_id,
            "deployment": "bedrock",
            "engine": "bedrock",
            "capacity_type": "on-demand",
            "predicted": base or {"ttft_ms": {}, "tpot_ms": {}, "e2e_s": {}},
            "measured": None,
            "meets_slo": meets,
            "cost": cost,
            "bedrock": {
                "model_id": offer.bedrock_model_id,
                "base_model_id": offer.bedrock_model_id,
                "mode": "provisioned",
                "tier": "provisioned",
                "scope": "in-region",
                "region": choice.region,
                "model_units": units,
                "term": pt.term,
                "latency_assumed": True,
            },
            "quota": _committed_quota(units, "Provisioned Throughput model units", choice.region, offer.name),
            "service_tier": "provisioned",
            "region": choice.region,
            "notes": [
                f"Provisioned Throughput: {units} model unit(s) x ${pt.usd_per_hour_per_model_unit:g}/h x"
                f" {HOURS_PER_MONTH:g} h = ${monthly:,.0f}/month ({pt.term} commitment), sized for the busiest"
                f" hour's {in_tpm:,.0f} input / {out_tpm:,.0f} output tokens/min x {COMMITTED_TPM_HEADROOM:g}"
                f" against {pt.input_tpm_per_unit:,} / {pt.output_tpm_per_unit:,} per unit ({pt.source})",
                "billed every hour provisioned, used or not; served in-Region (cross-Region profiles do not use"
                " Provisioned Throughput); latency taken as the Standard tier's (assumed)",
            ],
        }
    )
    if not meets:
        return (
            arch,
            "misses an SLO with the Standard tier's latency profile (assumed for Provisioned Throughput)",
        )
    if on_demand is not None and monthly >= on_demand.cost.usd_per_month:
        return arch, (
            f"Provisioned Throughput ${monthly:,.0f}/month is not cheaper than on-demand"
            f" ${on_demand.cost.usd_per_month:,.0f}/month for this workload"
        )
    return arch, None


def _bedrock_reserved(
    wm: WorkloadModel, choice: BedrockChoice, modes: Modes, on_demand: Architecture | None
) -> tuple[Architecture | None, str | None]:
    """The Reserved tier when a price per 1K tokens-per-minute is known (AWS quotes it; none is published)."""
    res = modes.bedrock_service_tiers.reserved
    if res.usd_per_1k_tpm_month is None or on_demand is None:
        return None, None
    in_tpm, out_tpm = peak_tokens_per_minute(wm)
    monthly, r_in, r_out = reserved_tier_bill(
        in_tpm, out_tpm, res.usd_per_1k_tpm_month, res.min_input_tpm, res.min_output_tpm
    )
    cost = on_demand.cost.model_dump(mode="json")
    cost.update(
        usd_per_month=round(monthly, 2),
        usd_per_hour_peak=round(monthly / HOURS_PER_MONTH, 2),
        breakdown={
            "reserved_input_tokens_per_minute": r_in,
            "reserved_output_tokens_per_minute": r_out,
            "usd_per_1k_tpm_month": res.usd_per_1k_tpm_month,
            "terms_months": res.terms_months,
        },
        price={"source": res.source, "as_of": str(res.as_of), "region": choice.region, "tier": "reserved"},
    )
    users = wm.spec.users.total if wm.spec.users else None
    cost["usd_per_user_month"] = round(monthly / users, 4) if users else None
    out_month = wm.avg_rps * 86400 * DAYS_PER_MONTH * wm.output_tokens.mean
    cost["usd_per_million_output_tokens"] = round(monthly / (out_month / 1e6), 4) if out_month else None
    arch = on_demand.model_copy(
        update={
            "id": f"bedrock:{choice.invoke_id}:reserved",
            "cost": Cost.model_validate(cost),
            "service_tier": "reserved",
            "bedrock": {**(on_demand.bedrock or {}), "tier": "reserved", "mode": "reserved"},
            "quota": None,
            "notes": [
                f"Reserved tier: ({r_in:,} input + {r_out:,} output tokens/min) / 1,000 x"
                f" ${res.usd_per_1k_tpm_month:g} = ${monthly:,.0f}/month, {' or '.join(map(str, res.terms_months))}"
                f"-month term; traffic above the reservation is served at Standard ({res.source})",
                *on_demand.notes[1:],
            ],
        }
    )
    if monthly >= on_demand.cost.usd_per_month:
        return arch, f"Reserved tier ${monthly:,.0f}/month is not cheaper than on-demand for this workload"
    return arch, None


def _unpriced_note(choice: BedrockChoice, modes: Modes) -> str:
    """What a buyer cannot be quoted here: Provisioned Throughput and (for tiered models) the Reserved tier."""
    pt = modes.bedrock_provisioned
    text = (
        f"Provisioned Throughput not priced: AWS shows model-unit prices and throughput only in the Bedrock console"
        f" ({' or '.join(pt.terms)} commitment for a base model; {pt.source}); a quote in"
        " $SIZING_CATALOG_DIR/modes.yaml ranks it"
    )
    tiers = modes.bedrock_service_tiers
    if tiers.offers_tiers(choice.offer.bedrock_model_id) and tiers.reserved.usd_per_1k_tpm_month is None:
        text += (
            "; Reserved tier not priced: a fixed price per 1K tokens-per-minute quoted by the AWS account team"
            f" (min {tiers.reserved.min_input_tpm:,} input / {tiers.reserved.min_output_tpm:,} output TPM)"
        )
    return text


def _bedrock_options(
    wm: WorkloadModel, choice: BedrockChoice, batch: bool, modes: Modes
) -> list[tuple[str, Architecture | None, str | None]]:
    """Every way the offer is sold for the workload: the Standard tier, Priority and Flex where the model has them,
    Provisioned Throughput and Reserved when priced, and batch inference for a batch workload."""
    out: list[tuple[str, Architecture | None, str | None]] = []
    rid = f"bedrock:{choice.invoke_id}"
    standard, reason = _bedrock(wm, choice, "standard", modes, batch)
    if standard is not None and modes.bedrock_provisioned.offers.get(choice.offer.bedrock_model_id) is None:
        standard = standard.model_copy(update={"notes": [*standard.notes, _unpriced_note(choice, modes)]})
    out.append((rid, standard, reason))
    if modes.bedrock_service_tiers.offers_tiers(choice.offer.bedrock_model_id):
        for tier in TIERS[1:]:
            a, r = _bedrock(wm, choice, tier, modes, batch)
            out.append((f"{rid}:{tier}", a, r))
        a, r = _bedrock_reserved(wm, choice, modes, standard)
        if a is not None:
            out.append((f"{rid}:reserved", a, r))
    a, r = _bedrock_provisioned(wm, choice, modes, standard)
    if a is not None:
        out.append((a.id, a, r))
    if batch:
        a, r = _bedrock_batch(wm, choice)
        out.append((f"{rid}:batch", a, r))
    return out


def _bedrock_batch(wm: WorkloadModel, choice: BedrockChoice) -> tuple[Architecture | None, str | None]:
    """Bedrock batch inference for a batch workload: a day's requests as one job at batch prices."""
    offer = choice.offer
    rid = f"bedrock:{choice.invoke_id}:batch"
    prices = choice.batch_prices
    if prices is None:
        return None, f"{offer.name} has no batch inference on Bedrock"
    deadline = batch_deadline_h(wm)
    if deadline < BEDROCK_BATCH_WINDOW_H:
        return None, (
            f"Bedrock batch jobs complete within {BEDROCK_BATCH_WINDOW_H:g} h, not guaranteed within the e2e SLO"
            f" of {deadline:g} h"
        )
    users = wm.spec.users.total if wm.spec.users else None
    cost, job = bedrock_batch_bill(wm, prices.input_usd_per_1m_tokens, prices.output_usd_per_1m_tokens, users)
    cost["price"] = {
        "source": prices.source,
        "as_of": str(prices.as_of),
        "assumed": prices.assumed,
        "region": choice.region,
    }
    window = {
        "p50": BEDROCK_BATCH_WINDOW_H * 3600,
        "p95": BEDROCK_BATCH_WINDOW_H * 3600,
        "p99": BEDROCK_BATCH_WINDOW_H * 3600,
    }
    arch = Architecture.model_validate(
        {
            "id": rid,
            "model": wm.spec.model,
            "catalog_model": wm.model_id,
            "deployment": "bedrock",
            "engine": "bedrock",
            "capacity_type": "on-demand",
            # a batch request's latency is its job's: the completion window bounds every percentile
            "predicted": {"ttft_ms": {}, "tpot_ms": {}, "e2e_s": window},
            "measured": None,
            "meets_slo": True,
            "cost": cost,
            "bedrock": {
                "model_id": choice.invoke_id,
                "base_model_id": offer.bedrock_model_id,
                "mode": "batch",
                "scope": choice.scope,
                "region": choice.region,
                "quota": offer.quota.model_dump(mode="json"),
            },
            "batch": job,
            "region": choice.region,
            "notes": [
                f"Bedrock batch inference: {job['requests']:,} requests a day as one job, ${job['usd_per_job']:,.2f}"
                f" per job (${job['usd_per_million_tokens']:.4f} per 1M tokens), done within"
                f" {BEDROCK_BATCH_WINDOW_H:g} h (AWS's completion window; deadline {deadline:g} h)",
                f"batch prices from {choice.region}: ${prices.input_usd_per_1m_tokens:g} in /"
                f" ${prices.output_usd_per_1m_tokens:g} out per 1M tokens, as of {prices.as_of}"
                + (" (assumed)" if prices.assumed else "")
                + f": {prices.source}",
                _scope_note(choice),
                "batch jobs have their own quotas (records per job, jobs in progress), not the on-demand"
                " tokens-per-minute quota",
            ],
        }
    )
    return arch, None


def _kind_of(reason: str | None) -> RejectedKind:
    if reason and reason.startswith("over a hard Bedrock limit"):
        return RejectedKind.quota
    if reason and (reason.startswith("no latency profile") or "no batch inference" in reason):
        return RejectedKind.unsupported
    return RejectedKind.slo


def _pareto(archs: list[Architecture]) -> list[Architecture]:
    """Mark the architectures no other beats on both monthly cost and p95 e2e latency."""
    order = sorted(
        range(len(archs)), key=lambda i: (archs[i].ranked_usd_per_month, archs[i].predicted.e2e_s.p95 or 0.0)
    )
    flags = [False] * len(archs)
    best = math.inf
    for i in order:
        lat = archs[i].predicted.e2e_s.p95 or 0.0
        flags[i] = lat < best
        best = min(best, lat)
    return [a.model_copy(update={"pareto": f}) for a, f in zip(archs, flags, strict=True)]


def _diagnose(wm: WorkloadModel, near: list[tuple[Any, dict[str, float]]]) -> dict[str, Any]:
    """When nothing is feasible: which SLO binds, and what the closest candidate achieves."""
    if not near:
        return {"binding": None, "message": "no candidate fits the constraints (see rejected)"}
    counts: dict[str, int] = {}
    best: dict[str, tuple[float, str]] = {}
    for cand, closest in near:
        hw = cand.hw if isinstance(cand, Option) else cand
        label = f"{hw.instance_type} TP{hw.tensor_parallel} {hw.quantization}"
        for key, value in closest.items():
            counts[key] = counts.get(key, 0) + 1
            if key not in best or value < best[key][0]:
                best[key] = (value, label)
    binding = max(counts, key=lambda k: counts[k])
    value, where = best[binding]
    metric, pct = binding.split(".", 1)
    name, unit, _ = {"ttft_ms": ("TTFT", "ms", 1), "tpot_ms": ("TPOT", "ms", 1), "e2e_s": ("e2e", "s", 1)}[
        metric
    ]
    shown = f"{value:.2f} s" if unit == "s" else f"{value:.0f} ms"
    msg = f"best {name} {pct} is {shown} on {where}; relax {name} {pct} to {shown}"
    if metric in ("e2e_s",) and wm.output_tokens.mean > 1:
        limit = dict((p, v) for m, p, v in wm.slo.targets() if m == metric)[pct]
        ratio = limit / value
        cap = int(wm.output_tokens.percentile(pct if pct in ("p50", "p95", "p99") else "p95") * ratio)
        msg += f" or cap output at about {max(cap, 1)} tokens"
    return {"binding": binding, "closest": {"value": value, "on": where}, "message": msg}


def _fold_key(a: Architecture) -> tuple[Any, ...]:
    """What makes two architectures one row: deployment, capacity, accelerator, serving configuration, packing."""
    if a.deployment == "bedrock" or a.serving is None:
        return (a.id,)
    # an asynchronous-inference job is its own row, beside the real-time endpoint of the same hardware
    mode = "async" if a.id.endswith(":async") else "real-time"
    return (a.deployment, a.capacity_type, a.accelerator, a.serving, a.replicas_per_instance, mode)


def _fold(archs: list[Architecture]) -> list[Architecture]:
    """Instance sizes with identical performance (one replica of the same accelerators and serving configuration,
    packed alike) fold into the cheapest: one row with "also fits on"."""
    kept: dict[tuple[Any, ...], int] = {}
    out: list[Architecture] = []
    extra: dict[int, list[AlsoFits]] = {}
    for a in archs:
        if a.deployment == "bedrock" or a.serving is None:
            out.append(a)
            continue
        key = _fold_key(a)
        if key in kept:
            extra.setdefault(kept[key], []).append(
                AlsoFits(instance_type=a.instance_type or "", usd_per_month=round(a.ranked_usd_per_month, 2))
            )
            continue
        kept[key] = len(out)
        out.append(a)
    return [
        a.model_copy(update={"also_fits_on": [*a.also_fits_on, *extra[i]]}) if i in extra else a
        for i, a in enumerate(out)
    ]


def _start(spec: WorkloadSpec, catalog: Catalog | None, headroom: float, seed: int) -> SearchState:
    """The workload resolved against the catalog, and its candidates enumerated."""
    cat = catalog or load_catalog()
    wm = resolve(spec, cat)
    ctx = context_for(wm, cat.model(wm.model_id).max_position_embeddings)
    enum = enumerate_candidates(wm, cat)
    return SearchState(
        wm=wm,
        cat=cat,
        enum=enum,
        ctx=ctx,
        deployments=_deployments(wm),
        headroom=headroom,
        seed=seed,
        rejected=[Rejected.model_validate(r) for r in enum.rejected],
    )


def _cost_bound(s: SearchState, hw: HardwareOption, rep: Replica) -> float:
    """The cost the ranking reads (spot where the workload allows only spot), at the roofline's capacity: no
    replica serves more, and fewer requests per replica never cost less."""
    pricings = [pricing_of(s.cat, s.wm, hw, d) for d in s.deployments]
    monthly = monthly_usd(s.wm, rep.bound_rps, hw.replicas_per_instance, pricings)
    return min(
        (
            ranked_usd_per_month(on_demand, spot, capacity_type_of(s.wm, d))
            for d, (on_demand, spot) in zip(s.deployments, monthly, strict=True)
        ),
        default=math.inf,  # Bedrock alone: no instance to bound
    )


def _bound_option(s: SearchState, hw: HardwareOption) -> None:
    """Memory fit and roofline bounds of one hardware option (cheap): an option to simulate, or a rejection."""
    wm, cat = s.wm, s.cat
    acc = cat.accelerator_of(cat.instance(hw.instance_type))
    serving = default_serving(
        wm.spec.model,
        hw.engine,
        hw.tensor_parallel,
        hw.quantization,
        acc,
        s.ctx.max_model_len,
        prefix_caching=wm.shared_prefix_tokens > 0,
    )
    rep = build_replica(config_for(hw.instance_type), serving, wm, cat, s.profiles)
    if isinstance(rep, str):
        s.rejected.append(Rejected(id=hw.key, kind=RejectedKind.memory, reason=f"does not fit: {rep}"))
        return
    lb = _cost_bound(s, hw, rep)
    early = early_reject(wm.slo, rep, wm)
    if early:
        s.rejected.append(Rejected(id=hw.key, kind=RejectedKind.slo, reason=early[0]))
        s.near.append((hw, early[1]))
        s.excluded.append((lb, option_label(hw), early[0]))
        return
    s.options.append(Option(hw, rep, lb, cat.instance(hw.instance_type).accelerator))


def _row_costs(placed: list[tuple[Option, list[Architecture]]]) -> list[float]:
    """The costs of the ranking's rows found so far, cheapest first (same-performance instance sizes fold into one
    row)."""
    rows: dict[tuple[Any, ...], float] = {}
    for _, archs in placed:
        for a in archs:
            rows[_fold_key(a)] = min(rows.get(_fold_key(a), math.inf), a.ranked_usd_per_month)
    return sorted(rows.values())


def _reject_dominated(s: SearchState, rest: list[Option], certify: int) -> None:
    for opt in rest:
        s.rejected.append(
            Rejected(
                id=opt.hw.key,
                kind=RejectedKind.dominated,
                reason=f"dominated: costs at least ${opt.lb_cost:,.0f}/month (roofline bound), more than"
                f" the {certify} cheapest feasible architectures",
            )
        )


def _search_capacity(s: SearchState, opt: Option) -> None:
    """The option's SLO capacity: searched, or shared from an option of the same performance already searched."""
    known = s.by_performance.get(opt.perf_key)
    if known is not None and known.default.capacity is not None:
        # same accelerators and serving configuration as an option already searched: same replica
        opt.default.capacity = dataclasses.replace(known.default.capacity)
        opt.default.predictions = known.default.predictions
        return
    opt.default.capacity = measured_capacity(
        opt.default,
        s.wm,
        s.cat,
        s.seed,
        max_rate_under_slo(opt.default.step, s.wm, opt.default.bound_rps, s.seed),
    )
    s.searches += 1
    s.by_performance[opt.perf_key] = opt


def _place(s: SearchState, opt: Option) -> None:
    """A searched option enters the ranking when it meets the SLOs, verified at its operating point."""
    capacity = opt.capacity
    assert capacity is not None
    if not capacity.feasible:
        s.rejected.append(Rejected(id=opt.hw.key, kind=RejectedKind.slo, reason=capacity.reason))
        s.excluded.append((opt.lb_cost, option_label(opt.hw), capacity.reason))
        if capacity.closest:
            s.near.append((opt, capacity.closest))
        return
    verified = verified_architectures(s.wm, s.cat, opt, s.deployments, s.headroom, s.seed, s.ctx)
    if verified is None:
        s.rejected.append(
            Rejected(
                id=opt.hw.key,
                kind=RejectedKind.slo,
                reason="SLO holds only at the edge: the full simulation at the operating point misses it",
            )
        )
        return
    s.placed.append((opt, verified))


def _simulate(s: SearchState, certify: int, progress: Progress | None) -> None:
    """Simulate cheapest-bound first; stop when no remaining option can enter the certified ranking."""
    for i, opt in enumerate(s.options):
        costs = _row_costs(s.placed)
        if len(costs) >= certify and opt.lb_cost > costs[certify - 1]:
            _reject_dominated(s, s.options[i:], certify)
            break
        if progress:
            progress(i + 1, len(s.options), opt.hw.key)
        _search_capacity(s, opt)
        _place(s, opt)


def _hosted(s: SearchState) -> list[Architecture]:
    """Every placed architecture with its tuning block, within the budget (those over it are rejected)."""
    budget = s.wm.spec.constraints.max_monthly_usd
    feasible: list[Architecture] = []
    for opt, placed in s.placed:
        archs = adopt_tuning(s, opt, placed)
        for arch in with_tuning(s.wm, s.cat, opt, archs, s.deployments, s.headroom, s.seed, s.ctx):
            s.option_of[arch.id] = opt
            if s.over_budget(arch.ranked_usd_per_month):
                s.rejected.append(
                    Rejected(
                        id=arch.id,
                        kind=RejectedKind.budget,
                        reason=f"over budget: ${arch.ranked_usd_per_month:,.0f}/month > max_monthly_usd"
                        f" ${budget:,.0f}",
                    )
                )
                continue
            feasible.append(arch)
    return feasible


def _bedrock_all(
    s: SearchState, batch: bool, modes_cfg: Modes
) -> tuple[list[Architecture], list[Architecture]]:
    """Bedrock in every mode it is sold: (the feasible ones within budget, every one priced -- managed options)."""
    feasible: list[Architecture] = []
    managed: list[Architecture] = []
    for choice in s.enum.bedrock:
        for rid, bedrock_arch, reason in _bedrock_options(s.wm, choice, batch, modes_cfg):
            if bedrock_arch is not None:
                managed.append(bedrock_arch)
            if reason is not None or bedrock_arch is None:
                s.rejected.append(Rejected(id=rid, kind=_kind_of(reason), reason=reason or "rejected"))
            elif s.over_budget(bedrock_arch.ranked_usd_per_month):
                s.rejected.append(
                    Rejected(
                        id=bedrock_arch.id,
                        kind=RejectedKind.budget,
                        reason=f"over budget: ${bedrock_arch.ranked_usd_per_month:,.0f}/month",
                    )
                )
            else:
                feasible.append(bedrock_arch)
    return feasible, managed


def _ranked(feasible: list[Architecture]) -> list[Architecture]:
    """Cheapest first, same-performance sizes folded into one row, numbered, and marked on the Pareto front."""
    feasible = _fold(sorted(feasible, key=Architecture.rank_key))
    return _pareto([a.model_copy(update={"rank": r}) for r, a in enumerate(feasible, start=1)])


def _infeasible(s: SearchState, feasible: list[Architecture]) -> dict[str, Any] | None:
    """Why nothing is feasible: no hardware in the Region, or the SLO that binds nearest."""
    if feasible:
        return None
    if s.enum.region_gap and not s.enum.hardware:
        return {
            "binding": None,
            "region": s.wm.spec.constraints.region,
            "nearest_region": s.enum.nearest_region,
            "message": s.enum.region_gap,
        }
    return _diagnose(s.wm, s.near)


def _region_block(s: SearchState) -> dict[str, Any]:
    c = s.wm.spec.constraints
    return {
        "code": c.region,
        "name": region_name(c.region),
        "data_residency": c.data_residency,
        "prices": "EC2 prices per Region from the price snapshot (catalog data/regions.yaml) where it covers the"
        " family, else the us-east-1 price marked assumed; SageMaker ml.* prices outside us-east-1 are derived"
        " from EC2 (assumed); Bedrock prices per offer (cost.price.region)",
        "unavailable_here": sorted(
            {r["id"].split("@")[0] for r in s.enum.rejected if r["id"].endswith(f"@{c.region}")}
        ),
        "nearest_region_with_hardware": s.enum.nearest_region,
    }


def estimate_result(
    spec: WorkloadSpec,
    top: int | None = None,
    *,
    catalog: Catalog | None = None,
    headroom: float = DEFAULT_HEADROOM,
    seed: int = 0,
    progress: Progress | None = None,
    tune: bool = True,
) -> EstimateResult:
    """Estimate every candidate architecture for a workload, typed. `tune=False` keeps every option at its
    engine's defaults (the benchmark's baseline)."""
    t0 = time.perf_counter()
    s = _start(spec, catalog, headroom, seed)
    # 1. memory fit and roofline bounds for every hardware option (cheap)
    for hw in s.enum.hardware:
        _bound_option(s, hw)
    s.options.sort(key=lambda o: o.lb_cost)
    # 2. simulate cheapest-bound first, down to the certified rows of the ranking
    _simulate(s, max(top or 0, DEFAULT_CERTIFY), progress)
    # 3. tune the replicas at the ranking's head, then give every architecture its tuning block
    if tune:
        tune_heads(s)
    feasible = _hosted(s)
    # 4. as sold, and Bedrock in every mode it is sold
    batch = is_batch_workload(s.wm) and s.wm.spec.constraints.batch_inference
    modes_cfg = load_modes()
    feasible = hosted_as_sold(s, feasible, batch, modes_cfg)
    bedrock, managed = _bedrock_all(s, batch, modes_cfg)
    # 5. rank
    feasible = _ranked([*feasible, *bedrock])
    why, summary_text = _why_not_cheaper(feasible, s.excluded, s.wm)
    elapsed = time.perf_counter() - t0
    return EstimateResult(
        workload=s.wm.derived(),
        architectures=feasible[:top] if top else feasible,
        rejected=s.rejected,
        assumptions=_assumptions(s.cat, headroom, s.wm.slo),
        search={
            "hardware_options": len(s.enum.hardware),
            "simulated": sum(1 for o in s.options if o.capacity is not None),
            "capacity_searches": s.searches,
            "tuned_replicas": len(s.tuned_keys),
            "seed": seed,
            "feasible": len(feasible),
            "seconds": round(elapsed, 3),
        },
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        infeasible=_infeasible(s, feasible),
        region=_region_block(s),
        why_not_cheaper=why,
        summary=summary_text,
        managed_options=sorted(managed, key=Architecture.rank_key),
    )


def estimate(spec: WorkloadSpec, top: int | None = None, **options: Any) -> dict[str, Any]:
    """Estimate every candidate architecture for a workload: the estimate result's JSON (`estimate_result`'s
    keyword options: catalog, headroom, seed, progress, tune)."""
    result = estimate_result(spec, top, **options)
    out = result.as_json()
    if out.get("infeasible") is None:
        out.pop("infeasible", None)
    return out


def _why_not_cheaper(
    feasible: list[Architecture], excluded: list[tuple[float, str, str]], wm: WorkloadModel
) -> tuple[list[NotCheaper], str | None]:
    """The cheaper hardware an SLO excluded, and a sentence when the answer is much dearer than it."""
    hosted = [a for a in feasible if a.deployment != "bedrock"]
    if not hosted or not excluded:
        return [], None
    best = hosted[0]
    cheaper = sorted(e for e in excluded if e[0] < best.ranked_usd_per_month)
    shown = [
        NotCheaper(option=o, usd_per_month=round(b, 2), reason=r)
        for b, o, r in cheaper[:WHY_NOT_CHEAPER_SHOWN]
    ]
    if not cheaper or best.ranked_usd_per_month < MUCH_DEARER * cheaper[0][0]:
        return shown, None
    bound, option, reason = cheaper[0]
    text = (
        f"The answer costs {best.ranked_usd_per_month / bound:.1f}x the cheapest hardware that fits in memory:"
        f" {option} (at least ${bound:,.0f}/month) misses {reason.split(' (')[0].split(' even')[0]}"
    )
    e2e = [(p, v) for m, p, v in wm.slo.targets() if m == "e2e_s"]
    if e2e and "e2e" in reason:
        pct, limit = e2e[0]
        out_tokens = wm.output_tokens.percentile(pct if pct in ("p50", "p95", "p99") else "p95")
        ttft_s = (best.predicted.ttft_ms.p50 or 0.0) / 1000
        if out_tokens > 1:
            need = max(limit - ttft_s, 0.0) / (out_tokens - 1) * 1000
            text += f"; TPOT ≤ {need:.0f} ms is needed for {out_tokens:,.0f} output tokens within {limit:g} s"
    return shown, text + "."


def _assumptions(cat: Catalog, headroom: float, slo: SLO) -> dict[str, Any]:

    prof = load_profiles()
    return {
        "headroom": headroom if slo.confidence is None else None,
        "confidence": slo.confidence,
        "headroom_reasoning": f"fixed {headroom:.0%} load headroom"
        if slo.confidence is None
        else f"confidence {slo.confidence:g}: every SLO target holds at the {100 * slo.confidence:g}th percentile of"
        " the estimator's own cross-validated error for each architecture's family and engine (predicted"
        " latencies scaled up, capacity down; each architecture's headroom.reasoning states its factors) instead"
        " of a fixed load headroom",
        "calibration": {k: prof.get(k) for k in ("version", "date") if k in prof},
        "prices": "on-demand EC2/SageMaker prices per catalog entry (source and as-of in each architecture's cost.price)",
        "spot": "spot discounts per family, most assumed (see cost.price.spot_discount_assumed); the min_replicas base stays on-demand",
        "savings_plan_1y_discount": SAVINGS_PLAN_1Y_DISCOUNT,
        "scale_up_lead_s": {"gpu": SCALE_UP_LEAD_S_GPU, "neuron": SCALE_UP_LEAD_S_NEURON},
        "bedrock_latency": "assumed until measured (catalog latency profiles)",
        "arrivals": "Poisson within each hour; hourly rates from the traffic profile",
        "serving": f"each architecture's serving block is the deployment as estimated; max_model_len covers the"
        f" {CONTEXT_PERCENTILE} of input + output; runtime parameters searched per hardware option (tuning)",
    }
